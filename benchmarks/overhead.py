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

    Full run with the defaults (writes ``docs/benchmarks.md``)::

        python benchmarks/overhead.py
"""

import harness
import peak_memory
import sketch_accuracy
import step_time
import configurations


def measure(settings, workdir, log):
    """
    Every study, in fresh workers: one per round and network, the last
    round's also running the memory (and accuracy) jobs.

    :param dict settings: The resolved settings.
    :param str workdir: A directory for the workers' result files.
    :param log: ``log(message)`` reports progress.
    :return: The results of :func:`step_time.measure`,
        :func:`peak_memory.measure` and :func:`sketch_accuracy.measure`
        together.
    :rtype: dict
    """
    timing = {w: [] for w in settings["widths"]}
    memory, parameters, accuracy, envelope = {}, {}, None, None
    last_round = settings["rounds"] - 1
    for round_index in range(settings["rounds"]):
        for width in settings["widths"]:
            # The last round's worker also measures memory (and accuracy),
            # after its timing runs: one process start less.
            jobs = [step_time.JOB]
            if round_index == last_round:
                jobs.append(peak_memory.JOB)
                if width == settings["accuracy_width"]:
                    jobs.append(sketch_accuracy.JOB)
            task = dict(settings, jobs=jobs, width=width, round=round_index)
            envelope = harness.run_worker(task, workdir)
            results = envelope["results"]
            timing[width].append(results[step_time.JOB])
            parameters[width] = results[step_time.JOB]["parameters"]
            if peak_memory.JOB in results:
                memory[width] = results[peak_memory.JOB]["peaks"]
            accuracy = results.get(sketch_accuracy.JOB, accuracy)
            names = ", ".join(job.partition(":")[0] for job in jobs)
            log(
                f"round {round_index + 1}/{settings['rounds']}, width "
                f"{width}: {names} done"
            )
    if accuracy is None:
        task = dict(
            settings,
            jobs=[sketch_accuracy.JOB],
            width=settings["accuracy_width"],
            round=0,
        )
        accuracy = harness.run_worker(task, workdir)["results"][
            sketch_accuracy.JOB
        ]
        log("accuracy done")
    return {
        "timing": timing,
        "memory": memory,
        "parameters": parameters,
        "accuracy": accuracy,
        "threads": envelope["threads"],
    }


def render(results, settings, run):
    """
    The full report: one table of time and memory per network and
    weighting, the targets, and the accuracy study.

    :param dict results: From :func:`measure`.
    :param dict settings: The resolved settings.
    :param dict run: See :func:`harness.report_header`.
    :return: The markdown document.
    :rtype: str
    """
    widths = settings["widths"]
    timing = {
        w: step_time.summarise_timing(results["timing"][w], settings)
        for w in widths
    }
    memory = results["memory"]
    checks = []
    for width in widths:
        checks += step_time.target_checks(width, timing[width], settings)
        checks += peak_memory.target_checks(width, memory[width], settings)
    columns = [
        (step_time.HEADER, lambda w, key: step_time.cells(timing[w], key)),
        (peak_memory.HEADER, lambda w, key: peak_memory.cells(memory[w], key)),
    ]
    time_link = harness.method_link(run["output"], "time-per-step")
    memory_link = harness.method_link(run["output"], "peak-extra-memory")
    reference_link = harness.method_link(run["output"], "reference-rows")
    targets_link = harness.method_link(run["output"], "targets")
    lines = harness.report_header(
        "Benchmark: cost and accuracy of NTK loss weights in PINA",
        run,
        settings,
        [
            configurations.problem_line(settings),
            step_time.settings_line(settings),
            peak_memory.settings_line(settings),
            sketch_accuracy.settings_line(settings),
        ],
    )
    lines += [
        "",
        "## Time and memory",
        "",
        "Time: median over rounds of the per-round ratio to the same "
        f"round's unweighted runs, and its range ([method]({time_link})); "
        f"memory: one run per configuration ([method]({memory_link})). "
        "Rows in italics are the "
        f"[reference rows]({reference_link}).",
        "",
        *configurations.weighting_table(
            settings, results["parameters"], columns
        ),
        "",
        "## Targets",
        "",
        "The last column is the ratio of the matching reference row: the "
        f"unavoidable part of the measured ratio ([targets]({targets_link})).",
        "",
        *configurations.target_table(settings, checks),
        "",
        *sketch_accuracy.section(results["accuracy"], settings, run["output"]),
    ]
    return "\n".join(lines)


def main(argv=None):
    """
    Run the three studies and write the markdown report.

    :param list argv: Command-line arguments (default ``sys.argv[1:]``).
    :return: The process exit code.
    :rtype: int
    """
    return harness.study_main(
        argv,
        "overhead.py",
        __doc__.split("\n\n")[0],
        harness.SETTING_NAMES,
        measure,
        render,
        default_output="docs/benchmarks.md",
    )


if __name__ == "__main__":
    raise SystemExit(main())
