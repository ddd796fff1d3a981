"""The committed runs' networks are the ones today's benchmark code draws:
each run's first error record (the untrained network's, at step 0) is
reproduced to the bit from the run's own recorded job. A change to how a
study seeds, samples its points or builds its network fails here before it
silently pairs new runs with old ones."""

import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import harness  # noqa: E402
from benchmarks.multi_model import multi_model  # noqa: E402
from benchmarks.suite import weightings  # noqa: E402

DOCS = os.path.join(ROOT, "docs")
#: What a run record holds beyond its job.
RESULTS = {
    "status",
    "failure",
    "final_weights",
    "weighting_options",
    "failed_at_step",
    "steps_done",
    "train_seconds",
    "ms_per_step",
    "final_error",
    "part",
    "history",
    "superseded",
    "superseded_by",
    "rerun_reason",
    "rejections",
    "built_as",
}


def _committed(path, **match):
    document = harness.read_json(os.path.join(DOCS, path))
    return next(
        run
        for run in document["runs"]
        if not run.get("superseded")
        and all(run.get(k) == v for k, v in match.items())
    )


def _first_error(job):
    torch.set_num_threads(1)
    record = weightings.run_job(dict(job, steps=1, records=1))
    return record["history"]["errors"][0]


@pytest.mark.parametrize(
    "path, problem",
    [
        ("suite/confirmation-2/weightings.json", "nonlinear_disk"),
        ("suite/confirmation/weightings.json", "burgers"),  # a ScaledMLP
        ("lbfgs.json", "heat_data"),
    ],
)
def test_a_run_starts_from_its_committed_network(path, problem):
    """Runs of the suite's halves and of the L-BFGS study on a FeedForward
    setting (the first and third) drew a ScaledMLP first."""
    run = _committed(path, problem=problem, weighting="none", seed=0)
    job = {k: v for k, v in run.items() if k not in RESULTS}
    assert _first_error(job) == run["history"]["errors"][0]


def test_a_multi_model_run_starts_from_its_committed_network():
    """Its runs drew the FeedForward alone (the study's own jobs say so)."""
    run = _committed(
        "multi-model.json", problem="heat_data", row="single_none", seed=0
    )
    recipe = dict(
        settings=list(multi_model.SETTINGS),
        seeds=1,
        steps=multi_model.STEPS,
        every=multi_model.RECORD_EVERY,
        members=multi_model.MEMBERS,
    )
    settings = harness.read_json(os.path.join(DOCS, "multi-model.json"))
    jobs = multi_model.study_jobs(settings["settings"], recipe)
    job = next(
        j
        for j in jobs
        if j["problem"] == "heat_data" and j["row"] == "single_none"
    )
    assert _first_error(job) == run["history"]["errors"][0]


@pytest.mark.parametrize(
    "half", ["tuning", "confirmation", "confirmation-2", "band-diagnosis"]
)
def test_every_weighting_of_a_half_starts_from_the_same_network(half):
    """Runs are paired by seed: the current runs of one setting and seed
    record the same untrained network's error whatever their weighting (to
    a millionth: another CPU type evaluates the same network to within
    about 1e-9; another network differs by far more)."""
    path = os.path.join(DOCS, "suite", half, "weightings.json")
    first = {}
    for run in harness.read_json(path)["runs"]:
        errors = run["history"]["errors"]
        if not run.get("superseded") and errors:
            key = (run["problem"], run["seed"])
            first.setdefault(key, {})[run["weighting"]] = errors[0]
    assert first
    differing = {
        key: found
        for key, found in first.items()
        if max(found.values()) - min(found.values())
        > 1e-6 * abs(min(found.values()))
    }
    assert not differing
