"""The multi-model study (``benchmarks/multi_model/multi_model.py``): its
summaries, the ensemble's score (the members' mean), and its quick run; the
cost study (``benchmarks/multi_model/multi_model_cost.py``): its measure,
verdicts and quick run.

The summary's tests fail on ratios taken the other way round, paired by
order instead of by seed, or with a failed reference left in; the score's
on one member's output or the members stacked instead of averaged.
"""

import math
import os
import sys
from pathlib import Path

import pytest
import torch
from pina import LabelTensor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from helpers import multi_model_solver  # noqa: E402
from benchmarks import harness  # noqa: E402
from benchmarks.multi_model import multi_model  # noqa: E402
from benchmarks.multi_model import multi_model_cost  # noqa: E402
from benchmarks.suite import weightings_solvers  # noqa: E402

from test_benchmark_smoke import run_main  # noqa: E402


def run(row, seed, error, status="ok", losses=None):
    """A run whose recorded errors all equal ``error``."""
    history = dict(steps=[0, 1, 2], seconds=[0, 1, 2], errors=[error] * 3)
    history["conditions"] = {"losses": [losses or {"D": 1.0}]}
    return dict(
        problem="a",
        weighting=row,
        seed=seed,
        status=status,
        ms_per_step=2.0,
        history=history,
    )


def test_the_defaults_ratio_is_paired_by_seed():
    runs = [
        run("ensemble_none", 1, 0.2),
        run("ensemble_none", 0, 0.1),
        run("ensemble_default", 0, 0.05),
        run("ensemble_default", 1, 0.4),
        run("ensemble_none", 2, 0.3, status="failed"),
        run("ensemble_default", 2, 0.3),
    ]
    found = multi_model.summary(dict(runs=runs), "a", "ensemble")
    errors, ratios, _, ms = found["default"]
    assert ratios == {0: pytest.approx(0.5), 1: pytest.approx(2.0)}
    assert errors[2] == 0.3 and ms == 2.0
    assert math.isinf(found["none"][0][2])  # the failed run's error


def test_the_losses_are_the_median_over_seeds_of_the_last_logged():
    runs = [
        run("self_adaptive_none", s, 0.1, losses={"D": v, "b": 2 * v})
        for s, v in enumerate((1.0, 3.0, 2.0))
    ]
    losses = multi_model.summary(dict(runs=runs), "a", "self_adaptive")
    assert losses["none"][2] == {"D": 2.0, "b": 4.0}


def test_the_ensemble_is_scored_on_its_members_mean():
    solver = multi_model_solver("physics-informed ensemble", None, members=3)
    points = LabelTensor(torch.rand(7, 2), ["x", "y"])
    found = weightings_solvers.MembersMean(solver)(points)
    members = [
        torch.Tensor.as_subclass(model(points), torch.Tensor)
        for model in solver.models
    ]
    assert found.shape == (7, 1)
    assert torch.allclose(found, sum(members) / 3)
    assert not torch.allclose(found, members[0])


def test_multi_model_quick(tmp_path):
    """``multi_model.py --quick``: every row trains to its last step with a
    finite error; the page is its block, rendered again the same from the
    results alone; the committed results are left as they are."""
    committed = Path(ROOT, "docs", "multi-model.json")
    before = committed.read_bytes() if committed.is_file() else None
    code, _ = run_main(
        multi_model, "--quick", "--workers", "1", "--output-dir", tmp_path
    )
    assert code == 0
    found = harness.read_json(tmp_path / "multi-model.json")
    assert {r["weighting"] for r in found["runs"]} == set(multi_model.ROWS)
    for record in found["runs"]:
        assert record["status"] == "ok", record["failure"]
        assert record["history"]["steps"][-1] == found["recipe"]["steps"]
        assert math.isfinite(record["final_error"])
        if record["weighting"].endswith("default"):
            assert record["final_weights"]
    page = tmp_path / "multi-model.md"
    text = page.read_text(encoding="utf-8")
    block = harness.page_block(str(page), "multi_model/multi_model.py")
    assert block == multi_model.render(found)
    again = tmp_path / "again"
    run_main(
        multi_model,
        "--from-json",
        tmp_path / "multi-model.json",
        "--output-dir",
        again,
    )
    assert (again / "multi-model.md").read_text(encoding="utf-8") == text
    after = committed.read_bytes() if committed.is_file() else None
    assert after == before


# ------------------------------------------------------------------ the cost
def round_of(ratios, none=1.0):
    """A round's durations: a slow warm-up step, then two steps per row;
    the default ``ratios[solver]`` times its solver's unweighted step."""
    durations = {}
    for solver, ratio in ratios.items():
        durations[f"{solver}/none"] = [50.0, none, none]
        durations[f"{solver}/default"] = [50.0, ratio * none, ratio * none]
    return durations


def test_the_cost_measure_is_each_solvers_ratio_over_one_networks():
    ratios = dict(single=1.2, ensemble=1.5, self_adaptive=0.6)
    _, excess = multi_model_cost.round_measures(round_of(ratios, 3.0), 1)
    assert excess == {
        "ensemble": pytest.approx(1.25),
        "self_adaptive": pytest.approx(0.5),
    }


def test_the_cost_verdicts_read_the_interval_over_rounds():
    rounds = [
        round_of(dict(single=1.2, ensemble=1.2 * f, self_adaptive=2.0))
        for f in (1.0, 1.05, 0.95)
    ]
    document = dict(settings=dict(warmup=1), rounds=rounds)
    verdicts = multi_model_cost.summary(document)[2]
    assert verdicts == {"ensemble": "pass", "self_adaptive": "**miss**"}


def test_multi_model_cost_quick(tmp_path):
    """``multi_model_cost.py --quick``: every row timed, the block rendered
    again the same from the results; the committed results untouched."""
    committed = Path(ROOT, "docs", "multi-model-cost.json")
    before = committed.read_bytes() if committed.is_file() else None
    code, _ = run_main(multi_model_cost, "--quick", "--output-dir", tmp_path)
    assert code == 0
    found = harness.read_json(tmp_path / "multi-model-cost.json")
    (timed,) = found["rounds"]
    assert set(timed) == set(multi_model_cost.ROWS)
    steps = found["settings"]["warmup"] + found["settings"]["steps"]
    assert all(len(d) == steps and min(d) > 0 for d in timed.values())
    block = harness.page_block(
        str(tmp_path / "multi-model.md"), "multi_model/multi_model_cost.py"
    )
    assert block == multi_model_cost.render(found)
    after = committed.read_bytes() if committed.is_file() else None
    assert after == before
