"""The introductory half (issue #76): its problems' exact solutions, the
split's entries, the summary's paired ratios and criterion (d), and a
short run of every set-up."""

import json
import math
import os
import random
import sys

import pytest
import torch
from pina import LabelTensor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.suite import introductory  # noqa: E402
from benchmarks.suite import introductory_setups  # noqa: E402
from benchmarks.suite import suite_intro_problems as intro  # noqa: E402
from benchmarks.suite import suite_protocol  # noqa: E402

#: See tests/test_suite_problems.py: rounding leaves below this in float64.
TOL = 1e-9
#: A wrong solution leaves at least this.
WRONG = 1e-2


def max_residual(problem, condition, solution, seed=0):
    """Largest |residual| of ``condition`` with ``solution`` as the network,
    at fresh points in float64."""
    torch.manual_seed(seed)
    random.seed(seed)
    domain = problem.conditions[condition].domain
    problem.discretise_domain(problem.POINTS[condition], "random", [domain])
    pts = problem.discretised_domains[domain]
    pts = LabelTensor(pts.as_subclass(torch.Tensor).double(), pts.labels)
    pts.requires_grad_(True)
    equation = problem.conditions[condition].equation
    found = equation.residual(pts, solution(pts), None)
    return float(found.as_subclass(torch.Tensor).detach().abs().max())


CONDITIONS = [
    (name, condition)
    for name, cls in intro.INTRO_PROBLEMS.items()
    for condition in cls.conditions
]


@pytest.mark.parametrize("name, condition", CONDITIONS)
def test_the_exact_solution_satisfies_every_condition(name, condition):
    problem = intro.INTRO_PROBLEMS[name]()
    assert max_residual(problem, condition, problem.solution) < TOL


def _scaled(problem, factor, shift=0.0):
    def solution(pts):
        exact = problem.solution(pts)
        values = exact.as_subclass(torch.Tensor) * factor + shift
        return LabelTensor(values, exact.labels)

    return solution


@pytest.mark.parametrize("name", list(intro.INTRO_PROBLEMS))
def test_a_wrong_solution_violates_some_condition(name):
    """A solution scaled by 1.1 (or shifted, for the Laplace equation and
    the heat equation's interior, which are linear and homogeneous) leaves
    a residual: the checks above can fail."""
    problem = intro.INTRO_PROBLEMS[name]()
    for wrong in (_scaled(problem, 1.1), _scaled(problem, 1.0, 0.1)):
        worst = max(max_residual(problem, c, wrong) for c in problem.conditions)
        assert worst > WRONG


def test_the_variable_coefficient_residual_has_the_product_rule():
    """Dropping the ``u'`` term of ``((1 + x) u')'`` leaves ``pi cos pi x``
    on the exact solution: the test above would catch the mistake."""
    problem = intro.VariableCoefficientProblem()
    x = torch.linspace(0.1, 0.9, 5, dtype=torch.float64)[:, None]
    pts = LabelTensor(x, ["x"]).requires_grad_(True)
    u = problem.solution(pts)
    residual = intro._variable_residual(pts, u)
    expected = torch.zeros_like(x)
    assert torch.allclose(
        residual.as_subclass(torch.Tensor), expected, atol=TOL
    )
    flux = intro._d(u, pts, "x")
    gap = (flux.detach() - math.pi * torch.cos(math.pi * x)).abs().max()
    assert float(gap) < TOL


@pytest.mark.parametrize("name", list(intro.INTRO_PROBLEMS))
def test_instances_own_their_conditions(name):
    cls = intro.INTRO_PROBLEMS[name]
    first, second = cls(), cls()
    assert first.conditions is not second.conditions
    assert first.conditions is not cls.conditions


def test_the_half_is_committed_and_new():
    half = introductory.read_half()
    names = [e["setting"] for e in half]
    new = [n for n in names if not n.startswith("tutorial_")]
    assert len(new) >= 6 and set(new) == set(intro.INTRO_PROBLEMS)
    assert set(names) == set(introductory.SETUPS)
    split = suite_protocol.read_split()
    others = {e["setting"] for entries in split.values() for e in entries}
    assert others.isdisjoint(names)
    kinds = " ".join(e["kind"] for e in half)
    for kind in ("ODE", "1-D elliptic", "2-D", "time-dependent", "Fourier"):
        assert kind in kinds


def test_read_half_refuses_a_setting_without_set_up(tmp_path):
    text = open(suite_protocol.SPLIT, encoding="utf-8").read()
    path = tmp_path / "split.toml"
    path.write_text(text.replace('"riccati"', '"no_such"'))
    with pytest.raises(ValueError, match="no_such"):
        introductory.read_half(path)


def _run(setting, weighting, seed, errors):
    return {
        "setting": setting,
        "weighting": weighting,
        "seed": seed,
        "status": "ok",
        "history": {"steps": list(range(len(errors))), "errors": errors},
    }


def test_the_summary_pairs_seeds_and_judges_criterion_d():
    """Ratios by hand: seed 0 (2.0 / 1.0), seed 1 (0.5 / 1.0) give a
    geometric mean of 1 and one worse seed; the run error is the median of
    the last five records (here the records' last value)."""
    runs = [
        _run("a", "none", 0, [9.0] + [1.0] * 5),
        _run("a", "none", 1, [9.0] + [1.0] * 5),
        _run("a", "w", 0, [9.0] + [2.0] * 5),
        _run("a", "w", 1, [9.0] + [0.5] * 5),
        _run("b", "none", 0, [1.0] * 5),
        _run("b", "w", 0, [1.2] * 5),
    ]
    document = {
        "settings": ["a", "b"],
        "weightings": ["none", "w"],
        "runs": runs,
        "parts": [],
    }
    summary = introductory.summarise(document)["w"]
    a, b = summary["settings"]["a"], summary["settings"]["b"]
    assert a["geo"] == pytest.approx(1.0) and a["worse"] == 1
    assert (a["low"], a["high"], a["seeds"]) == (0.5, 2.0, 2)
    assert b["geo"] == pytest.approx(1.2)
    # 1.2 > 1.10 on b: criterion (d) misses; within it, it passes
    assert summary["no_harm"] is False
    runs[-1]["history"]["errors"] = [1.05] * 5
    assert introductory.summarise(document)["w"]["no_harm"] is True
    # a setting without runs of the weighting is no pass
    document["settings"].append("c")
    assert introductory.summarise(document)["w"]["no_harm"] is False


def test_the_readme_block_sorts_settings_by_the_band_and_shows_each_ratio():
    """Ratios by hand against one seed of no weighting at 1.0: 0.5 helps
    (at most 1 / 1.10), 1.05 is within the band, 1.14 hurts (above 1.10);
    each is shown as it was sorted, not rounded across the band's edge."""
    w = "sketch_predictor"
    runs = [_run(s, "none", 0, [1.0] * 5) for s in ("a", "b", "c")]
    runs += [_run("a", w, 0, [0.5] * 5), _run("b", w, 0, [1.05] * 5)]
    runs += [_run("c", w, 0, [1.14] * 5)]
    document = {
        "settings": ["a", "b", "c"],
        "weightings": ["none", w],
        "runs": runs,
        "parts": [],
    }
    block = introductory.readme_block(document, rows=(w,))
    assert block == (
        f"- {introductory.WEIGHTINGS[w][0]} helps on `a` (0.5×); is about "
        "level with no weighting on `b` (1.05×); hurts on `c` (1.14×) (its "
        "error over no weighting's, geometric mean over 1 seeds).\n"
    )


@pytest.mark.parametrize("setting", list(introductory.SETUPS))
def test_every_set_up_trains(setting):
    """Five epochs of each set-up with no weighting and the default: a
    finite error recorded at the last step."""
    for weighting in ("none", "sketch_predictor"):
        job = {
            "setting": setting,
            "weighting": weighting,
            "seed": 0,
            "epochs": 5,
        }
        record = introductory.run_job(job)
        assert record["status"] == "ok", record["failure"]
        assert record["history"]["steps"][-1] == 5
        assert math.isfinite(record["final_error"])


def test_the_tutorial_poisson_points_are_the_tutorials():
    """30 per axis inside, 100 on the boundary, on a problem of its own:
    the zoo class's conditions stay untouched."""
    from pina.problem.zoo import Poisson2DSquareProblem

    problem = introductory_setups._tutorial_poisson()
    sizes = {k: len(v) for k, v in problem.discretised_domains.items()}
    assert sizes["D"] == 900 and sizes["boundary"] >= 100
    assert problem.conditions is not Poisson2DSquareProblem.conditions


def test_a_quick_run_leaves_the_committed_results(tmp_path, monkeypatch):
    """``introductory.py --quick``: a smoke run writes its results and page
    in a new temporary folder, never over the committed ones."""
    import tempfile

    committed = os.path.join(ROOT, "docs", introductory.RESULTS)
    before = open(committed, "rb").read() if os.path.exists(committed) else None
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    arguments = ["--quick", "--settings", "tutorial_ode", "--workers", "1"]
    assert (
        introductory.main([*arguments, "--weightings", "sketch_ramp_1000"]) == 0
    )
    after = open(committed, "rb").read() if os.path.exists(committed) else None
    assert after == before
    (folder,) = tmp_path.glob("pina-ntk-quick-*")
    document = json.loads((folder / introductory.RESULTS).read_text())
    assert {r["weighting"] for r in document["runs"]} == {
        "none",
        "sketch_ramp_1000",
    }
    page = (folder / introductory.PAGE).read_text()
    assert introductory.render(document) in page
