"""Cost and accuracy of the NTK loss weightings inside PINA training.

Runs the three wave-problem studies, ``step_time.py``, ``peak_memory.py``
and ``sketch_accuracy.py``, and their targets into one report; the last
round's workers also measure memory and accuracy after their timing runs,
which saves process starts and changes no number. Method:
``docs/benchmark-method.md``; each study also runs alone with the same
flags.

    python benchmarks/overhead.py --quick --output /tmp/benchmarks.md
    python benchmarks/overhead.py  # docs/benchmarks.md and .json
    python benchmarks/overhead.py --from-json docs/benchmarks.json
"""

import configurations


def main(argv=None):
    """Run the three studies (or render ``--from-json``) and write the
    page."""
    return configurations.study_main(
        argv,
        "overhead.py",
        configurations.SETTING_NAMES,
        ("time", "memory", "accuracy"),
        default_output="docs/benchmarks.md",
    )


if __name__ == "__main__":
    raise SystemExit(main())
