"""The inverse-problem study (``benchmarks/inverse/inverse.py``): its rule and
summaries (``inverse_page.py``), its prototype of the weights on the
network's gradient only, and its quick run.

The rule's tests are built so that a plausible wrong implementation gives
another verdict: the median seed instead of the worst, the 5 % floor
dropped or made a ceiling, ratios taken the other way round or paired by
order instead of by seed, the plain sum chosen as a weighting.
"""

import math
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import harness  # noqa: E402
from benchmarks.inverse import inverse  # noqa: E402
from benchmarks.inverse import inverse_cost  # noqa: E402
from benchmarks.inverse import inverse_logs  # noqa: E402
from benchmarks.inverse import inverse_page  # noqa: E402

from test_benchmark_smoke import run_main  # noqa: E402


def run(setting, row, seed, parameter, solution, status="ok"):
    """A run whose recorded solution errors all equal ``solution``."""
    history = dict(steps=[0, 1, 2], seconds=[0, 1, 2], errors=[solution] * 3)
    return dict(
        problem=setting,
        weighting=row,
        seed=seed,
        status=status,
        parameter_error=parameter,
        history=history,
    )


def document(runs, settings=("a",)):
    recipe = dict(settings=list(settings), identified=0.05, seeds=2, steps=2)
    return dict(recipe=recipe, runs=runs, parts=[])


def test_the_rule_reads_the_worst_seed_against_nones_and_the_floor():
    runs = [
        run("a", "none", 0, 0.01, 1.0),
        run("a", "none", 1, 0.02, 1.0),
        # worst seed 0.04: under the 5 % floor though above none's worst
        run("a", "default", 0, 0.01, 0.5),
        run("a", "default", 1, 0.04, 0.5),
        # median 0.01, worst 0.9: the worst seed decides
        run("a", "sketch_unknowns_excluded", 0, 0.01, 0.1),
        run("a", "sketch_unknowns_excluded", 1, 0.01, 0.1),
        run("a", "sketch_unknowns_excluded", 2, 0.9, 0.1),
    ]
    found = document(runs)
    assert inverse_page.identifies(found, "a", "default")
    assert not inverse_page.identifies(found, "a", "sketch_unknowns_excluded")
    # none's own worst seed above the floor raises the bar
    found["runs"][1] = run("a", "none", 1, 0.95, 1.0)
    assert inverse_page.identifies(found, "a", "sketch_unknowns_excluded")


def test_a_failed_run_fails_the_rule():
    runs = [
        run("a", "none", 0, 0.01, 1.0),
        run("a", "default", 0, 0.01, 0.5, status="failed"),
    ]
    assert not inverse_page.identifies(document(runs), "a", "default")


def test_solution_ratios_are_paired_by_seed():
    runs = [
        run("a", "none", 0, 0.01, 2.0),
        run("a", "none", 1, 0.01, 8.0),
        run("a", "default", 1, 0.01, 4.0),
        run("a", "default", 0, 0.01, 1.0),
    ]
    ratios = inverse_page.solution_ratios(document(runs), "a", "default")
    assert ratios == {0: pytest.approx(0.5), 1: pytest.approx(0.5)}


def test_the_decision_takes_the_lowest_ratio_among_the_passing_weightings():
    runs = []
    for setting in ("a", "b"):
        runs += [run(setting, "none", s, 0.01, 1.0) for s in (0, 1)]
        runs += [run(setting, "default", s, 0.02, 0.8) for s in (0, 1)]
        # lower errors but loses the unknowns on one setting
        error = 0.5 if setting == "b" else 0.01
        runs += [
            run(setting, "sketch_unknowns_kernel", s, error, 0.1)
            for s in (0, 1)
        ]
        runs += [
            run(setting, "sketch_unknowns_excluded", s, 0.01, 0.6)
            for s in (0, 1)
        ]
    found = document(runs, settings=("a", "b"))
    passing, chosen = inverse_page.decision(found)
    assert "none" not in passing
    assert set(passing) == {"default", "sketch_unknowns_excluded"}
    assert chosen == "sketch_unknowns_excluded"
    # on a tie the default stays
    for record in found["runs"]:
        if record["weighting"] == "sketch_unknowns_excluded":
            record["history"]["errors"] = [0.8] * 3
    assert inverse_page.decision(found)[1] == "default"


def test_the_prototype_divides_the_unknowns_gradient_by_their_weight():
    mu = torch.nn.Parameter(torch.tensor([2.0]))
    mu.grad = torch.tensor([6.0])
    theta = torch.nn.Parameter(torch.tensor([1.0]))
    theta.grad = torch.tensor([6.0])
    driver = SimpleNamespace(weights={"D": 3.0, "data": 0.5})
    solver = SimpleNamespace(
        weighting=SimpleNamespace(driver=driver),
        problem=SimpleNamespace(unknown_parameters={"mu": mu}),
    )
    inverse.UnweightedUnknowns("D").on_after_backward(None, solver)
    assert float(mu.grad) == 2.0  # the plain sum's d L_D / d mu
    assert float(theta.grad) == 6.0  # the network keeps its weighted one


def test_inverse_quick(tmp_path):
    """``inverse.py --quick``: every row trains one inverse setting to its
    last step and records its parameter error; the page is its block,
    rendered again the same from the results alone; the committed results
    are left as they are."""
    committed = Path(ROOT, "docs", "inverse.json")
    before = committed.read_bytes() if committed.is_file() else None
    code, _ = run_main(
        inverse, "--quick", "--workers", "1", "--output-dir", tmp_path
    )
    assert code == 0
    found = harness.read_json(tmp_path / "inverse.json")
    assert {r["weighting"] for r in found["runs"]} == set(inverse.ROWS)
    for record in found["runs"]:
        assert record["status"] == "ok", record["failure"]
        assert record["history"]["steps"][-1] == found["recipe"]["steps"]
        assert math.isfinite(record["parameter_error"])
    page = tmp_path / "inverse-problems.md"
    text = page.read_text(encoding="utf-8")
    assert harness.page_block(
        str(page), "inverse/inverse.py"
    ) == inverse_page.render(found)
    assert "python benchmarks/inverse/inverse.py --quick" in text
    again = tmp_path / "again"
    run_main(
        inverse, "--from-json", tmp_path / "inverse.json", "--output-dir", again
    )
    assert (again / "inverse-problems.md").read_text(encoding="utf-8") == text
    after = committed.read_bytes() if committed.is_file() else None
    assert after == before


def test_the_figure_draws_the_recorded_unknowns(tmp_path):
    runs = []
    for row in ("none", "default"):
        record = run("poisson_source", row, 0, 0.01, 1.0)
        record["history"]["parameters"] = [
            {"mu1": 0.1 * step, "mu2": 0.2} for step in (0, 1, 2)
        ]
        runs.append(record)
    found = document(runs, settings=("poisson_source",))
    found["true_parameters"] = {"poisson_source": {"mu1": 0.5, "mu2": 0.5}}
    found["parts"] = []
    inverse_page.write_outputs(found, str(tmp_path))
    assert (tmp_path / inverse_page.FIGURE).stat().st_size > 0
    page = (tmp_path / "inverse-problems.md").read_text(encoding="utf-8")
    assert f"]({inverse_page.FIGURE})" in page
    # a run without the record: no figure named
    for record in runs:
        del record["history"]["parameters"]
    assert inverse_page.FIGURE not in inverse_page.render(found)


def test_parameter_ratios_are_paired_by_seed_and_skip_a_failed_reference():
    runs = [
        run("a", "none", 0, 0.02, 1.0),
        run("a", "none", 1, 0.01, 1.0, status="failed"),
        run("a", "default", 1, 0.5, 1.0),
        run("a", "default", 0, 0.01, 1.0),
    ]
    ratios = inverse_page.parameter_ratios(document(runs), "a", "default")
    assert ratios == {0: pytest.approx(0.5)}


def test_the_lightning_log_is_read_by_epoch(tmp_path):
    # Lightning's CSVLogger: one row per logged epoch, other metrics' rows
    # without the unknowns
    log = tmp_path / "metrics.csv"
    log.write_text(
        "epoch,mu1,mu2,step,train_loss\n"
        "0,0.8,0.9,0,\n"
        "0,,,0,1.5\n"
        "1,0.7,0.85,1,\n",
        encoding="utf-8",
    )
    rows = inverse_logs.read_log(log)
    assert rows == [
        (0, {"mu1": 0.8, "mu2": 0.9}),
        (1, {"mu1": 0.7, "mu2": 0.85}),
    ]
    kept = tmp_path / "kept" / "none.csv"
    inverse_logs.write_log(kept, rows)
    assert inverse_logs.read_log(kept) == rows


def test_inverse_logs_quick(tmp_path):
    """``inverse_logs.py --quick``: each row trains PINA's tutorial through
    a Lightning ``CSVLogger``; the kept logs have every epoch, the page's
    block is rendered from them alone, again the same from the kept run."""
    code, _ = run_main(inverse_logs, "--quick", "--output-dir", tmp_path)
    assert code == 0
    document = harness.read_json(tmp_path / "inverse-logs" / "run.json")
    for row in inverse_logs.ROWS:
        rows = inverse_logs.read_log(tmp_path / "inverse-logs" / f"{row}.csv")
        assert [epoch for epoch, _ in rows] == [0, 1, 2]
    page = (tmp_path / "inverse-problems.md").read_text(encoding="utf-8")
    assert "python benchmarks/inverse/inverse_logs.py --quick" in page
    assert (tmp_path / inverse_logs.FIGURE).stat().st_size > 0
    again = tmp_path / "again"
    run_main(
        inverse_logs,
        "--from-json",
        tmp_path / "inverse-logs" / "run.json",
        "--output-dir",
        again,
    )
    assert (again / "inverse-problems.md").read_text(encoding="utf-8") == page
    assert document["epochs"] == 3


# ------------------------------------------------- the cost of exact weights
def rows_of(inverse_exact, forward_exact, none=1.0):
    """A round's step durations: 2 warm-up steps of 100 s, then 3 steps."""
    slow = [100.0, 100.0]
    durations = {}
    for twin, exact in (("inverse", inverse_exact), ("forward", forward_exact)):
        durations[f"{twin}/none"] = slow + [none] * 3
        durations[f"{twin}/exact"] = slow + [exact] * 3
        durations[f"{twin}/default"] = slow + [none * 1.1] * 3
    return durations


def test_the_cost_measure_is_the_inverse_ratio_over_the_forward_ones():
    # exact 6x none on the inverse problem, 4x on its twin: 1.5, whatever
    # the warm-up steps (dropped) and the unweighted step's own length
    medians, excess = inverse_cost.round_measures(rows_of(6.0, 4.0), 2)
    assert excess == pytest.approx(1.5)
    assert medians["inverse/exact"] == 6.0
    _, excess = inverse_cost.round_measures(rows_of(12.0, 8.0, none=2.0), 2)
    assert excess == pytest.approx(1.5)


def test_the_cost_verdict_reads_the_interval_over_rounds():
    def verdict(pairs):
        found = dict(
            settings=dict(warmup=2), rounds=[rows_of(*p) for p in pairs]
        )
        return inverse_cost.summary(found)[2]

    assert verdict([(4.0, 4.0), (4.2, 4.0), (3.9, 4.0)]) == "pass"
    assert verdict([(8.0, 4.0), (8.4, 4.0), (7.9, 4.0)]) == "**miss**"
    assert verdict([(4.0, 4.0), (4.0, 4.0)]) == "not resolved"  # 2 rounds


def test_inverse_cost_quick(tmp_path):
    """``inverse_cost.py --quick``: every row of both twins timed, the page
    block rendered again the same from the results alone; the committed
    results are left as they are."""
    committed = Path(ROOT, "docs", "inverse-cost.json")
    before = committed.read_bytes()
    code, _ = run_main(inverse_cost, "--quick", "--output-dir", tmp_path)
    assert code == 0
    found = harness.read_json(tmp_path / "inverse-cost.json")
    (timed,) = found["rounds"]
    assert set(timed) == {f"{t}/{n}" for t, n in inverse_cost.ROWS}
    steps = found["settings"]["warmup"] + found["settings"]["steps"]
    assert all(len(d) == steps and min(d) > 0 for d in timed.values())
    page = tmp_path / "inverse-problems.md"
    block = harness.page_block(str(page), "inverse/inverse_cost.py")
    assert block == inverse_cost.render(found)
    assert committed.read_bytes() == before


def test_the_forward_twin_is_the_tutorial_at_the_true_source():
    # same conditions but no unknowns; its equation's residual is the
    # inverse problem's at the true centre
    twin = inverse_cost.ForwardPoissonSource()
    tutorial = inverse_cost.PoissonSourceProblem()
    assert set(twin.conditions) == set(tutorial.conditions)
    assert not hasattr(twin, "unknown_parameters")
    points = tutorial.spatial_domain.sample(20, "random").requires_grad_(True)
    output = points.extract(["x"]) ** 2 * points.extract(["y"])
    output.labels = ["u"]
    at_truth = {"mu1": torch.tensor(0.5), "mu2": torch.tensor(0.5)}
    expected = tutorial.conditions["D"].equation.residual(
        points, output, at_truth
    )
    found = twin.conditions["D"].equation.residual(points, output)
    assert torch.allclose(found, expected)
