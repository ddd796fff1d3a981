"""Wall time of a PINA training step with each NTK loss weighting.

On PINA's ``AcousticWaveProblem`` with tanh networks of several widths,
measures the time of a training step of every configuration of
:data:`configurations.CONFIGS` (unweighted, exact, the sketches, PINA's own NTK
weighting and the two reference rows doing only a sketch's unavoidable
work) relative to an unweighted step, in interleaved rounds of fresh
single-threaded worker processes, and checks the time targets: a sample
(k = 1) at most 0.15x above its reference row, and with a sample every
k = 10 steps an amortised step at most 1.15x (predictor) and 1.10x
(parameter-space) an unweighted one. ``docs/benchmark-method.md`` describes the method;
``overhead.py`` runs this study with the memory and accuracy studies.

:Example:
    Smoke run::

        python benchmarks/step_time.py --quick

    Full run (prints the report; ``--output`` writes it)::

        python benchmarks/step_time.py --output /tmp/step_time.md
"""

import gc
import statistics

import harness
import configurations

#: The settings this study takes as flags.
SETTINGS = (
    "steps",
    "warmup",
    "rounds",
    "threads",
    "widths",
    "depth",
    "points",
    "period",
    "exact_steps",
    "seed",
)
#: The worker job of one timing round for one network.
JOB = "step_time:run_timing"
#: Configurations that are timed step by step (median over steps).
PER_STEP_KEYS = (
    "predictor_forward",
    "predictor_central",
    "predictor_plain",
    "parameter",
    "predictor_same_step",
    "parameter_same_step",
    "pina_ntk",
    "reference_evaluation",
    "reference_predictor",
)
#: Whole periods a periodic row measures at the least (their median
#: resists a stray slow step).
MIN_PERIODS = 3
#: Configurations timed over a window of whole periods (mean per step, so
#: their periodic refreshes are amortised): their period in steps, the
#: exact one's from the settings.
PERIODIC_KEYS = ("exact_every_period", *configurations.SAMPLE_PERIODS)
#: Per-sample targets: a sample every step (k = 1) may cost at most this
#: much above its reference row, the extra work its estimator cannot avoid
#: (PINA's own residual evaluation, and for the predictor the backward pass
#: for J^T g) done without any NTK bookkeeping. The same-step rows show the
#: cost of following Algorithm 3 to the letter (sample_after_backward).
SAMPLE_MARGIN = 0.15
TIME_REFERENCES = {
    "predictor_forward": "reference_predictor",
    "parameter": "reference_evaluation",
}
#: Amortised targets: the largest allowed ratio to an unweighted step with
#: a sample every 10 steps.
AMORTISED_TARGETS = {"predictor_every_10": 1.15, "parameter_every_10": 1.10}
#: Column titles of the time columns.
HEADER = ["ms / step", "× unweighted", "range over rounds"]


# ---------------------------------------------------------------- worker side
def timing_order(round_index):
    """
    Configuration order of one timing round: the unweighted run, the cheap
    configurations rotated by the round index, the unweighted run again,
    then the exact ones (long, and far above the noise).

    :param int round_index: The round, from 0.
    :return: Configuration keys in run order.
    :rtype: list[str]
    """
    cheap = PER_STEP_KEYS + tuple(configurations.SAMPLE_PERIODS)
    shift = round_index % len(cheap)
    rotated = list(cheap[shift:] + cheap[:shift])
    return (
        ["unweighted"]
        + rotated
        + ["unweighted", "exact_every_period", "exact_every_step"]
    )


def period_of(settings, key):
    """
    :param dict settings: With ``period``.
    :param str key: One of :data:`PERIODIC_KEYS`.
    :return: The steps between the row's refreshes.
    :rtype: int
    """
    if key == "exact_every_period":
        return settings["period"]
    return configurations.SAMPLE_PERIODS[key]


def period_window(settings, key="exact_every_period"):
    """
    Measured steps of a periodic row: a whole number of its periods (at
    least :data:`MIN_PERIODS`), so exactly that many refreshes fall in the
    window.

    :param dict settings: With ``steps`` and ``period``.
    :param str key: One of :data:`PERIODIC_KEYS`.
    :return: The window length.
    :rtype: int
    """
    period = period_of(settings, key)
    periods = max(MIN_PERIODS, round(settings["steps"] / period))
    return periods * period


def steps_of(task, key):
    """
    Optimisation steps a timing run of ``key`` trains.

    :param dict task: The worker task.
    :param str key: The configuration.
    :return: Warm-up plus measured steps.
    :rtype: int
    """
    if key == "exact_every_step":
        return 1 + task["exact_steps"]
    if key in PERIODIC_KEYS:
        return task["warmup"] + period_window(task, key)
    return task["warmup"] + task["steps"]


def run_timing(task):
    """
    One timing round for one network width (a worker job).

    :param dict task: The worker task (``width``, ``round`` and the
        settings).
    :return: ``{"runs": [{"key", "durations"}], "parameters": int}``.
    :rtype: dict
    """
    runs = []
    parameters = None
    for key in timing_order(task["round"]):
        solver, callbacks = configurations.build_solver(task, key)
        parameters = configurations.parameter_count(solver)
        timer = harness.StepTimer(synchronize=task["accelerator"] == "cuda")
        configurations.train(
            task, solver, steps_of(task, key), [timer] + callbacks
        )
        runs.append({"key": key, "durations": timer.durations})
        del solver, callbacks, timer
        gc.collect()
    return {"runs": runs, "parameters": parameters}


# ---------------------------------------------------------------- parent side
def round_ratios(runs, settings):
    """
    Per-step statistics of one round and their ratios to its unweighted runs.

    Per-step rows: median over the measured steps (warm-up discarded).
    Periodic rows (:data:`PERIODIC_KEYS`): the mean step of each period in
    a window of whole periods (each period holds one refresh, so it is
    amortised), then the median over the periods, against the same
    statistic of the unweighted steps cut into periods of that length. The
    unweighted reference pools the measured steps of both unweighted runs
    of the round.

    :param list runs: ``{"key", "durations"}`` dicts of one round.
    :param dict settings: The resolved settings.
    :return: ``{key: (seconds per step, ratio)}``.
    :rtype: dict
    """
    warmup = settings["warmup"]
    baseline = [
        d
        for run in runs
        if run["key"] == "unweighted"
        for d in run["durations"][warmup:]
    ]
    base_median = statistics.median(baseline)
    result = {"unweighted": (base_median, 1.0)}
    for run in runs:
        key, durations = run["key"], run["durations"]
        if key == "unweighted":
            continue
        if key in PERIODIC_KEYS:
            period = period_of(settings, key)
            window = durations[warmup : warmup + period_window(settings, key)]
            value = median_period_mean(window, period)
            result[key] = (value, value / median_period_mean(baseline, period))
            continue
        skip = 1 if key == "exact_every_step" else warmup
        value = statistics.median(durations[skip:])
        result[key] = (value, value / base_median)
    return result


def median_period_mean(durations, period):
    """
    The median over consecutive whole periods of their mean step.

    :param list durations: Step times.
    :param int period: Steps per period.
    :return: The statistic; the plain mean when not even one period fits.
    :rtype: float
    """
    means = [
        statistics.fmean(durations[i : i + period])
        for i in range(0, len(durations) - period + 1, period)
    ]
    return statistics.median(means) if means else statistics.fmean(durations)


def summarise_timing(rounds, settings):
    """
    Median over rounds of each configuration's time and ratio.

    :param list rounds: The timing results of one width, one per round.
    :param dict settings: The resolved settings.
    :return: ``{key: {"seconds", "ratio", "low", "high"}}``.
    :rtype: dict
    """
    per_round = [round_ratios(r["runs"], settings) for r in rounds]
    summary = {}
    for key in configurations.CONFIG_KEYS:
        seconds = [r[key][0] for r in per_round]
        ratios = [r[key][1] for r in per_round]
        summary[key] = {
            "seconds": statistics.median(seconds),
            "ratio": statistics.median(ratios),
            "low": min(ratios),
            "high": max(ratios),
        }
    return summary


def cells(summary, key):
    """
    The time cells of a table row.

    :param dict summary: :func:`summarise_timing` of the row's network.
    :param str key: The configuration.
    :return: ms per step, ratio, range over rounds.
    :rtype: list[str]
    """
    row = summary[key]
    return [
        harness.fmt(1e3 * row["seconds"], 1),
        harness.fmt(row["ratio"]),
        f"{harness.fmt(row['low'])}–{harness.fmt(row['high'])}",
    ]


def target_checks(width, summary, settings):
    """
    The time targets of one network, checked on the ratios rounded to the
    three decimals the report shows.

    :param int width: The network width.
    :param dict summary: :func:`summarise_timing` of that network.
    :param dict settings: The resolved settings (for the labels).
    :return: ``[(width, description, measured, limit, passed,
        reference)]``, ``reference`` the ratio of the target's reference
        row.
    :rtype: list[tuple]
    """
    checks = []
    for key, reference_key in TIME_REFERENCES.items():
        value = round(summary[key]["ratio"], 3)
        reference = round(summary[reference_key]["ratio"], 3)
        limit = round(reference + SAMPLE_MARGIN, 3)
        label = (
            f"time, {configurations.config_label(key, settings)} "
            f"(reference + {SAMPLE_MARGIN})"
        )
        checks.append((width, label, value, limit, value <= limit, reference))
    for key, limit in AMORTISED_TARGETS.items():
        value = round(summary[key]["ratio"], 3)
        label = f"time, {configurations.config_label(key, settings)}"
        checks.append((width, label, value, limit, value <= limit, None))
    return checks


def settings_line(settings):
    """
    The report's line on this study's settings.

    :param dict settings: The resolved settings.
    :return: The line (markdown, no bullet).
    :rtype: str
    """
    return (
        f"Time per step: {settings['rounds']} interleaved round(s); per-step "
        f"rows: median over {settings['steps']} steps after "
        f"{settings['warmup']} warm-up steps; exact every step: median over "
        f"{settings['exact_steps']} step(s) after one warm-up step; exact "
        f"every {settings['period']} steps and sketches every k > 1 steps: "
        "median over the periods of a window of whole periods of each "
        "period's mean step ("
        + ", ".join(
            f"{period_window(settings, key)} steps for "
            f"{'exact' if key == 'exact_every_period' else key}"
            for key in PERIODIC_KEYS
        )
        + ")"
    )


def measure(settings, workdir, log):
    """
    Every timing round, one fresh worker per round and network.

    :param dict settings: The resolved settings.
    :param str workdir: A directory for the workers' result files.
    :param log: ``log(message)`` reports progress.
    :return: ``{"timing": {width: [round results]}, "parameters": {width:
        count}, "threads": int}``.
    :rtype: dict
    """
    timing = {w: [] for w in settings["widths"]}
    parameters, envelope = {}, None
    for round_index in range(settings["rounds"]):
        for width in settings["widths"]:
            task = dict(settings, jobs=[JOB], width=width, round=round_index)
            envelope = harness.run_worker(task, workdir)
            timing[width].append(envelope["results"][JOB])
            parameters[width] = envelope["results"][JOB]["parameters"]
            log(
                f"round {round_index + 1}/{settings['rounds']}, width "
                f"{width}: timing done"
            )
    return {
        "timing": timing,
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
    summaries = {
        w: summarise_timing(results["timing"][w], settings)
        for w in settings["widths"]
    }
    checks = []
    for width in settings["widths"]:
        checks += target_checks(width, summaries[width], settings)
    link = harness.method_link(run["output"], "time-per-step")
    lines = harness.report_header(
        "Benchmark: time per training step of NTK loss weights in PINA",
        run,
        settings,
        [configurations.problem_line(settings), settings_line(settings)],
    )
    lines += [
        "",
        "## Time per step",
        "",
        "Median over rounds of the per-round ratio to the same round's "
        f"unweighted runs, and its range; [method]({link}).",
        "",
        *configurations.weighting_table(
            settings,
            results["parameters"],
            [(HEADER, lambda w, key: cells(summaries[w], key))],
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
        "step_time.py",
        __doc__.split("\n\n")[0],
        SETTINGS,
        measure,
        render,
    )


if __name__ == "__main__":
    raise SystemExit(main())
