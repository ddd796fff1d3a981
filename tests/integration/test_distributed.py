"""A real two-process DDP run (gloo on CPU): identical weights on all ranks."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).parent / "ddp_worker.py"


#: The weightings trained under DDP; the exact ones also in one process.
WEIGHTINGS = (
    "exact",
    "exact-band",
    "exact-rayleigh",
    "sketch",
    "sketch-boundary",
    "sketch-band",
    "sketch-every-2",
    # PINA's multi-model solvers (manual optimisation)
    "exact@ensemble",
    "sketch@ensemble",
    "exact@self-adaptive",
    "sketch@competitive",
)
SINGLE = ("exact", "exact-band", "exact@ensemble", "exact@self-adaptive")


def run_worker(out_dir, devices, weightings):
    """Train each weighting in turn in one launch of ``devices`` processes
    (a start of torch, PINA and Lightning per rank, not per weighting).

    :return: ``{weighting: [record per rank]}``."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("LOCAL_RANK", None)
    command = [sys.executable, str(WORKER), str(out_dir), str(devices)]
    proc = subprocess.run(
        [*command, ",".join(weightings)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {
        name: [
            json.loads((out_dir / name / f"weights_rank{r}.json").read_text())
            for r in range(devices)
        ]
        for name in weightings
    }


@pytest.fixture(scope="module")
def ddp_runs(tmp_path_factory):
    return run_worker(tmp_path_factory.mktemp("ddp"), 2, WEIGHTINGS)


@pytest.fixture(scope="module")
def single_runs(tmp_path_factory):
    return run_worker(tmp_path_factory.mktemp("single"), 1, SINGLE)


@pytest.mark.parametrize("weighting", WEIGHTINGS)
@pytest.mark.slow
def test_ranks_agree_and_exact_matches_single_process(
    ddp_runs, single_runs, weighting
):
    ranks = ddp_runs[weighting]
    assert [r["world_size"] for r in ranks] == [2, 2]
    # each rank trained on its own half (10 of 20) of every condition's points
    for name, count in ranks[0]["points"].items():
        assert count == ranks[1]["points"][name] == 10
    assert len(ranks[0]["weights"]) == 5
    assert ranks[0]["weights"] == ranks[1]["weights"]  # bitwise, every step
    assert ranks[0]["safeguard_sum"] == ranks[1]["safeguard_sum"]
    if weighting == "sketch-every-2":
        # samples at steps 0, 2, 4 enter the weights of steps 1, 3: between
        # them (steps 2, 4) the weights stay
        steps = ranks[0]["weights"]
        assert steps[2] == steps[1] and steps[4] == steps[3]
        assert steps[1] != steps[0] and steps[3] != steps[2]
    if weighting in SINGLE:
        single = single_runs[weighting][0]
        assert all(count == 20 for count in single["points"].values())
        # all-reduced traces of the two halves = traces of the union; with
        # the band, the ranks' averaged loss gradients = the union's (the
        # mean of the ranks' squared norms would not be)
        for step_ddp, step_single in zip(
            ranks[0]["weights"], single["weights"]
        ):
            for name, value in step_single.items():
                assert step_ddp[name] == pytest.approx(value, rel=2e-4)
