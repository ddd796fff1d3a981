"""Cost of the NTK loss weightings in PINA: the studies of ``step_time.py``
and ``peak_memory.py`` in one report. Method: ``docs/benchmark-method.md``."""

from configurations import SETTING_NAMES, study_main

STUDIES = ("time", "memory")
main = study_main("overhead.py", SETTING_NAMES, STUDIES, "docs/benchmarks.md")

if __name__ == "__main__":
    raise SystemExit(main())
