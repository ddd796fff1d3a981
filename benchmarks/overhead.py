"""Cost and accuracy of the NTK loss weightings in PINA: the studies of
``step_time.py``, ``peak_memory.py`` and ``sketch_accuracy.py`` in one
report. Method: ``docs/benchmark-method.md``."""

from configurations import SETTING_NAMES, study_main

STUDIES = ("time", "memory", "accuracy")
main = study_main("overhead.py", SETTING_NAMES, STUDIES, "docs/benchmarks.md")

if __name__ == "__main__":
    raise SystemExit(main())
