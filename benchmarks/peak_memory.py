"""Peak extra memory of PINA training with each NTK loss weighting.

On PINA's ``AcousticWaveProblem`` with tanh networks of several widths,
measures the peak extra tensor memory of a short training run of every
configuration of :data:`configurations.CONFIGS` (reference rows included),
relative to unweighted training, in one fresh single-threaded worker process
per network, and checks the memory target (every sketch at most 1.3x).
``docs/benchmark-method.md`` describes the method; ``overhead.py`` runs
this study with the step-time and accuracy studies.

:Example:
    Smoke run::

        python benchmarks/peak_memory.py --quick

    Full run (prints the report; ``--output`` writes it)::

        python benchmarks/peak_memory.py --output /tmp/memory.md
"""

import gc
import math

import harness
import configurations

#: The settings this study takes as flags.
SETTINGS = (
    "threads",
    "widths",
    "depth",
    "points",
    "period",
    "memory_steps",
    "seed",
)
#: The worker job measuring one network.
JOB = "peak_memory:run_memory"
#: The largest allowed peak-memory ratio to unweighted training.
MEMORY_TARGET = 1.3
#: The configurations the memory target applies to.
MEMORY_TARGET_KEYS = configurations.SKETCH_KEYS
#: Column titles of the memory columns.
HEADER = ["peak extra memory (MiB)", "× unweighted"]


def run_memory(task):
    """
    Peak extra memory of every configuration for one network width (a
    worker job).

    ``exact_every_step`` trains one step (already an exact step); the others
    ``memory_steps`` steps, the first of which holds the exact update or the
    sketch's warm start. An unmeasured unweighted step runs first.

    :param dict task: The worker task (``width`` and the settings).
    :return: ``{"peaks": {key: peak bytes}, "parameters": int}``.
    :rtype: dict
    """
    # One unmeasured step first, so that one-time allocations of the
    # process (CUDA context and cuBLAS workspace, lazily built buffers) are
    # not charged to the first measured run: in overhead.py the timing runs
    # come first, and this study run on its own must measure the same.
    solver, callbacks = configurations.build_solver(task, "unweighted")
    configurations.train(task, solver, 1, callbacks)
    del solver, callbacks
    gc.collect()
    peaks = {}
    parameters = None
    for key in configurations.CONFIG_KEYS:
        solver, callbacks = configurations.build_solver(task, key)
        parameters = configurations.parameter_count(solver)
        probe = harness.MemoryProbe(cuda=task["accelerator"] == "cuda")
        steps = 1 if key == "exact_every_step" else task["memory_steps"]
        configurations.train(task, solver, steps, [probe] + callbacks)
        peaks[key] = probe.peak_bytes
        del solver, callbacks, probe
        gc.collect()
    return {"peaks": peaks, "parameters": parameters}


def memory_ratio(peaks, key):
    """
    :param dict peaks: ``{key: peak bytes}`` of one network.
    :param str key: The configuration.
    :return: Peak extra memory of ``key`` over the unweighted one.
    :rtype: float
    """
    if peaks["unweighted"] <= 0:
        return math.inf
    return peaks[key] / peaks["unweighted"]


def cells(peaks, key):
    """
    The memory cells of a table row.

    :param dict peaks: ``{key: peak bytes}`` of the row's network.
    :param str key: The configuration.
    :return: MiB and ratio.
    :rtype: list[str]
    """
    return [
        harness.fmt(peaks[key] / 2**20, 2),
        harness.fmt(memory_ratio(peaks, key)),
    ]


def target_checks(width, peaks, settings):
    """
    The memory targets of one network, checked on the ratios rounded to the
    three decimals the report shows.

    :param int width: The network width.
    :param dict peaks: ``{key: peak bytes}`` of that network.
    :param dict settings: The resolved settings (for the labels).
    :return: ``[(width, description, measured, limit, passed, None)]``.
    :rtype: list[tuple]
    """
    checks = []
    for key in MEMORY_TARGET_KEYS:
        value = round(memory_ratio(peaks, key), 3)
        label = f"memory, {configurations.config_label(key, settings)}"
        checks.append(
            (width, label, value, MEMORY_TARGET, value <= MEMORY_TARGET, None)
        )
    return checks


def settings_line(settings):
    """
    The report's line on this study's settings.

    :param dict settings: The resolved settings.
    :return: The line (markdown, no bullet).
    :rtype: str
    """
    return (
        f"Peak extra memory: one run per configuration, "
        f"{settings['memory_steps']} steps (exact every step: 1); "
        f"{harness.memory_method(settings['accelerator'])}"
    )


def measure(settings, workdir, log):
    """
    Every network's memory runs, one fresh worker per network.

    :param dict settings: The resolved settings.
    :param str workdir: A directory for the workers' result files.
    :param log: ``log(message)`` reports progress.
    :return: ``{"memory": {width: {key: peak bytes}}, "parameters":
        {width: count}, "threads": int}``.
    :rtype: dict
    """
    memory, parameters, envelope = {}, {}, None
    for width in settings["widths"]:
        task = dict(settings, jobs=[JOB], width=width, round=0)
        envelope = harness.run_worker(task, workdir)
        memory[width] = envelope["results"][JOB]["peaks"]
        parameters[width] = envelope["results"][JOB]["parameters"]
        log(f"width {width}: memory done")
    return {
        "memory": memory,
        "parameters": parameters,
        "threads": envelope["threads"],
    }


def render(results, settings, run):
    """
    The study's report.

    :param dict results: From :func:`measure`.
    :param dict settings: The resolved settings.
    :param dict run: See :func:`harness.report_header`.
    :return: The markdown document.
    :rtype: str
    """
    memory = results["memory"]
    checks = []
    for width in settings["widths"]:
        checks += target_checks(width, memory[width], settings)
    link = harness.method_link(run["output"], "peak-extra-memory")
    lines = harness.report_header(
        "Benchmark: peak extra memory of NTK loss weights in PINA",
        run,
        settings,
        [configurations.problem_line(settings), settings_line(settings)],
    )
    lines += [
        "",
        "## Peak extra memory",
        "",
        f"Ratios to the unweighted run of the same network; [method]({link}).",
        "",
        *configurations.weighting_table(
            settings,
            results["parameters"],
            [(HEADER, lambda w, key: cells(memory[w], key))],
        ),
        "",
        "## Targets",
        "",
        *configurations.target_table(settings, checks),
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    """
    Run the study and print (and with ``--output`` write) the report.

    :param list argv: Command-line arguments (default ``sys.argv[1:]``).
    :return: The process exit code.
    :rtype: int
    """
    return harness.study_main(
        argv,
        "peak_memory.py",
        __doc__.split("\n\n")[0],
        SETTINGS,
        measure,
        render,
    )


if __name__ == "__main__":
    raise SystemExit(main())
