"""Cost of the NTK loss weightings in PINA: the studies of ``step_time.py``
and ``peak_memory.py`` in one report. Method: ``docs/benchmark-method.md``."""

import sys
from pathlib import Path

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks.cost.configurations import SETTING_NAMES, study_main

SCRIPT = "cost/overhead.py"
STUDIES = ("time", "memory")
main = study_main(SCRIPT, SETTING_NAMES, STUDIES, "docs/benchmarks.md")

if __name__ == "__main__":
    raise SystemExit(main())
