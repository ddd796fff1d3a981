"""What the short ramp costs (issue #76): the candidate
``SketchNTKWeighting(ramp_steps=300)``, the weights coming in over the steps
in which the kernel leaves its initial state, against the published sketch
on the tuning half's settings, in interleaved rounds.

The measure is ``ramp_cost.py``'s, fixed before the run that judges it:
per round and setting, each weighting's time per step over the plain
sum's, timed over the second half of :data:`~ramp_cost.STEPS` steps from
seed 0 (inside the ramp, where it does its work); per round, the geometric
mean over the settings of the candidate's ratio over the published
sketch's. Target: at most :data:`~ramp_cost.MOST`, the cost bound issue #76
sets on a new default (the verdict by the interval over rounds,
``harness.judged``).

    python benchmarks/no_harm/ramp_300_cost.py
    python benchmarks/no_harm/ramp_300_cost.py --quick  # temp folder
    python benchmarks/no_harm/ramp_300_cost.py --from-json docs/ramp-300-cost.json
"""

import sys
from pathlib import Path

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks.no_harm import ramp_cost

SCRIPT = "no_harm/ramp_300_cost.py"
JSON = "ramp-300-cost.json"
PAGE = ramp_cost.PAGE
CANDIDATE = "sketch_ramp_300"


def main(argv=None):
    """Time the rounds, or re-render; the exit code."""
    return ramp_cost.study_main(SCRIPT, JSON, CANDIDATE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
