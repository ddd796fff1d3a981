"""What exact weights refreshed every ten steps cost (issue #76):
``NTKWeighting(update_every_n_steps=10)``, the weights that follow the
kernel within ten steps, against the published sketch on the tuning half's
settings, in interleaved rounds.

The measure is ``ramp_cost.py``'s, fixed before the run that judges it:
per round and setting, each weighting's time per step over the plain
sum's, timed over the second half of :data:`~ramp_cost.STEPS` steps from
seed 0 (ten exact refreshes); per round, the geometric mean over the
settings of the exact weights' ratio over the published sketch's. Target:
at most :data:`~ramp_cost.MOST`, the cost bound issue #76 sets on a new
default (the verdict by the interval over rounds, ``harness.judged``).

    python benchmarks/no_harm/exact_refresh_cost.py
    python benchmarks/no_harm/exact_refresh_cost.py --quick  # temp folder
    python benchmarks/no_harm/exact_refresh_cost.py \
        --from-json docs/exact-refresh-cost.json
"""

import sys
from pathlib import Path

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks.no_harm import ramp_cost

SCRIPT = "no_harm/exact_refresh_cost.py"
JSON = "exact-refresh-cost.json"
PAGE = ramp_cost.PAGE
CANDIDATE = "exact_10"


def main(argv=None):
    """Time the rounds, or re-render; the exit code."""
    return ramp_cost.study_main(SCRIPT, JSON, CANDIDATE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
