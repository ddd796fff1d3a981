"""Cost and accuracy of the NTK loss weightings inside PINA training.

Runs the three wave-problem studies together and writes one report
(``docs/benchmarks.md`` by default):

* ``step_time.py``: the wall time of a training step of each weighting
  relative to an unweighted step, in interleaved rounds, with two reference
  rows doing only a sketch's unavoidable work;
* ``peak_memory.py``: the peak extra memory of training relative to
  unweighted training;
* ``sketch_accuracy.py``: the relative error of the sketched weights
  against the exact weights at the same parameters, along short runs;

plus the targets (a sample at most 0.15x of an unweighted step above its
reference row; with a sample every 10 steps, an amortised step at most
1.15x (predictor) and 1.10x (parameter-space) an unweighted one; peak
memory at most 1.3x). Each
round runs one fresh worker process per network; the last round's workers
also measure memory (and, for the accuracy width, accuracy) after their
timing runs, which saves process starts and does not change the numbers.
``docs/benchmark-method.md`` describes the method; each study also runs on
its own with the same flags.

:Example:
    Smoke run (about a minute on 2 cores)::

        python benchmarks/overhead.py --quick --output /tmp/benchmarks.md

    Full run with the defaults (writes ``docs/benchmarks.md`` and its
    results, ``docs/benchmarks.json``)::

        python benchmarks/overhead.py

    The page again from the committed results::

        python benchmarks/overhead.py --from-json docs/benchmarks.json
"""

import configurations


def main(argv=None):
    """
    Run the three studies (or render ``--from-json``) and write the page.

    :param list argv: Command-line arguments (default ``sys.argv[1:]``).
    :return: The process exit code.
    :rtype: int
    """
    return configurations.study_main(
        argv,
        "overhead.py",
        configurations.SETTING_NAMES,
        ("time", "memory", "accuracy"),
        default_output="docs/benchmarks.md",
    )


if __name__ == "__main__":
    raise SystemExit(main())
