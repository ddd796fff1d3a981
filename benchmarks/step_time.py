"""Wall time of a PINA training step with each NTK loss weighting.

On PINA's ``AcousticWaveProblem`` with tanh networks of several widths,
measures the time of a training step of every configuration of
:data:`configurations.CONFIGS` (unweighted, exact, the sketches, PINA's own NTK
weighting and the two reference rows doing only a sketch's unavoidable
work) relative to an unweighted step, in interleaved rounds of fresh
single-threaded worker processes, and checks the time targets: a sample
(k = 1) at most 0.15x above its reference row, and with a sample every
k = 10 steps an amortised step at most 1.15x (predictor) and 1.10x
(parameter-space) an unweighted one. ``docs/benchmark-method.md``
describes the method; ``overhead.py`` runs this study with the memory and
accuracy studies.

:Example:
    Smoke run::

        python benchmarks/step_time.py --quick

    Full run (writes the page and its results, ``docs/step-time.json``)::

        python benchmarks/step_time.py --output docs/step-time.md

    The page again from the committed results::

        python benchmarks/step_time.py --from-json docs/step-time.json \
            --output docs/step-time.md
"""

import gc
import statistics

import configurations
import harness

#: The settings this study takes as flags.
SETTINGS = ("steps", "warmup", "rounds", "threads", "widths", "depth")
SETTINGS += ("points", "period", "exact_steps", "seed")
#: The worker job of one timing round for one network.
JOB = "step_time:run_timing"
#: Configurations that are timed step by step (median over steps).
PER_STEP_KEYS = tuple(
    key
    for key in configurations.CONFIG_KEYS[3:]  # after unweighted and exact
    if key not in configurations.SAMPLE_PERIODS
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


def target_checks(width, summary, settings):
    """
    The time targets of one network, on the ratios rounded to the three
    decimals the page shows.

    :param int width: The network width.
    :param dict summary: :func:`summarise_timing` of that network.
    :param dict settings: The resolved settings (for the labels).
    :return: The checks (see :func:`configurations.render`).
    :rtype: list[dict]
    """
    checks = []
    for key, reference_key in TIME_REFERENCES.items():
        value = round(summary[key]["ratio"], 3)
        reference = round(summary[reference_key]["ratio"], 3)
        label = (
            f"time, {configurations.config_label(key, settings)} "
            f"(reference + {SAMPLE_MARGIN})"
        )
        checks.append(
            dict(
                width=width,
                label=label,
                measured=value,
                limit=round(reference + SAMPLE_MARGIN, 3),
                reference=reference,
            )
        )
    for key, limit in AMORTISED_TARGETS.items():
        label = f"time, {configurations.config_label(key, settings)}"
        value = round(summary[key]["ratio"], 3)
        checks.append(
            dict(width=width, label=label, measured=value, limit=limit)
        )
    return checks


def settings_line(settings):
    """The page's line on this study's settings."""
    windows = ", ".join(
        f"{period_window(settings, key)} steps for "
        f"{'exact' if key == 'exact_every_period' else key}"
        for key in PERIODIC_KEYS
    )
    return (
        f"Time per step: {settings['rounds']} interleaved round(s); per-step "
        f"rows: median over {settings['steps']} steps after "
        f"{settings['warmup']} warm-up steps; exact every step: median over "
        f"{settings['exact_steps']} step(s) after one warm-up step; exact "
        f"every {settings['period']} steps and sketches every k > 1 steps: "
        "median over the periods of a window of whole periods of each "
        f"period's mean step ({windows})"
    )


def summarise(results, settings):
    """
    The page's numbers: per network and configuration the median ms per
    step, the median ratio and its range over rounds; the targets.

    :param dict results: From :func:`measure` (``timing``).
    :param dict settings: The resolved settings.
    :return: ``line``, ``parameters``, ``rows`` and ``targets`` (see
        :func:`configurations.render`).
    :rtype: dict
    """
    rows, targets, parameters = [], [], {}
    for width in settings["widths"]:
        rounds = results["timing"][width]
        parameters[str(width)] = rounds[-1]["parameters"]
        summary = summarise_timing(rounds, settings)
        for key in configurations.CONFIG_KEYS:
            row = summary[key]
            rows.append(
                dict(
                    width=width,
                    key=key,
                    label=configurations.config_label(key, settings),
                    time=[
                        1e3 * row["seconds"],
                        row["ratio"],
                        row["low"],
                        row["high"],
                    ],
                )
            )
        targets += target_checks(width, summary, settings)
    line = settings_line(settings)
    return dict(line=line, parameters=parameters, rows=rows, targets=targets)


def main(argv=None):
    """
    Run the study (or render ``--from-json``) and write its page.

    :param list argv: Command-line arguments (default ``sys.argv[1:]``).
    :return: The process exit code.
    :rtype: int
    """
    return configurations.study_main(argv, "step_time.py", SETTINGS, ("time",))


if __name__ == "__main__":
    raise SystemExit(main())
