"""Wall time of a PINA training step with each NTK loss weighting.

Times a training step of every row of :data:`configurations.CONFIGS` on
PINA's ``AcousticWaveProblem`` relative to an unweighted step, in
interleaved rounds of fresh single-threaded workers, and checks the time
targets (:data:`SAMPLE_MARGIN`, :data:`AMORTISED_TARGETS`). Method:
``docs/benchmark-method.md``; ``overhead.py`` runs it with the memory and
accuracy studies.

    python benchmarks/step_time.py --quick
    python benchmarks/step_time.py --output docs/step-time.md
    python benchmarks/step_time.py --from-json docs/step-time.json \\
        --output docs/step-time.md
"""

import gc
import statistics

import configurations
import harness

#: The settings this study takes as flags.
SETTINGS = ("steps", "warmup", "rounds", "threads", "widths", "depth")
SETTINGS += ("points", "period", "exact_steps", "seed", "problem")
#: The worker job of one timing round for one network.
JOB = "step_time:run_timing"
#: Exact rows with an update every ``period`` steps (from the settings).
EXACT_PERIODIC_KEYS = ("exact_every_period", "exact_rayleigh_every_period")
#: Configurations timed over a window of whole periods (mean per step, so
#: their periodic refreshes are amortised): the exact ones and the sketches
#: with a sample every k > 1 steps.
PERIODIC_KEYS = (*EXACT_PERIODIC_KEYS, *configurations.SAMPLE_PERIODS)
#: Configurations that are timed step by step (median over steps).
PER_STEP_KEYS = tuple(
    key
    for key in configurations.CONFIG_KEYS
    if key not in ("unweighted", "exact_every_step", *PERIODIC_KEYS)
)
#: Whole periods a periodic row measures at the least (their median resists
#: a stray slow step) in results that predate the ``min_periods`` setting.
MIN_PERIODS = 3
#: Per-sample targets: a sample every step (k = 1) may cost at most this
#: much above its reference row, the extra work its estimator cannot avoid
#: done without any NTK bookkeeping.
SAMPLE_MARGIN = 0.15
TIME_REFERENCES = {
    "predictor_forward": "reference_predictor",
    "parameter": "reference_evaluation",
}
#: Amortised targets: the largest allowed ratio to an unweighted step with
#: a sample every 10 steps.
AMORTISED_TARGETS = {
    f"{estimator}{variant}_every_10": limit
    for variant in ("", *(f"_{key}" for key, _, _ in configurations.VARIANTS))
    for estimator, limit in (("predictor", 1.15), ("parameter", 1.10))
}


# ---------------------------------------------------------------- worker side
def timing_order(round_index):
    """The run order of a timing round (from 0): unweighted, the cheap rows
    rotated by the round, unweighted again, then the exact trace rows (long,
    and far above the noise)."""
    long = ("exact_every_period", "exact_every_step")
    cheap = PER_STEP_KEYS + tuple(k for k in PERIODIC_KEYS if k not in long)
    shift = round_index % len(cheap)
    rotated = list(cheap[shift:] + cheap[:shift])
    return ["unweighted"] + rotated + ["unweighted", *long]


def period_of(settings, key):
    """:return: The steps between the refreshes of a periodic row."""
    if key in EXACT_PERIODIC_KEYS:
        return settings["period"]
    return configurations.SAMPLE_PERIODS[key]


def period_window(settings, key="exact_every_period"):
    """Measured steps of a periodic row: a whole number of its periods (at
    least ``min_periods``), so exactly that many refreshes fall in it."""
    period = period_of(settings, key)
    least = settings.get("min_periods", MIN_PERIODS)
    periods = max(least, round(settings["steps"] / period))
    return periods * period


def steps_of(task, key):
    """:return: The steps (warm-up and measured) a timing run trains."""
    if key == "exact_every_step":
        return 1 + task["exact_steps"]
    if key in PERIODIC_KEYS:
        return task["warmup"] + period_window(task, key)
    return task["warmup"] + task["steps"]


def run_timing(task):
    """One timing round of a network (a worker job): ``{"runs": [{"key",
    "durations"}], "parameters": int}``."""
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
    ``{key: (seconds per step, ratio)}`` of one round, against the pooled
    measured steps of its two unweighted runs: per-step rows the median
    step; periodic rows the median over whole periods of the period's mean
    step, against the same statistic of the unweighted steps.
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
    """The median over consecutive whole periods of their mean step (the
    plain mean when not even one period fits)."""
    means = [
        statistics.fmean(durations[i : i + period])
        for i in range(0, len(durations) - period + 1, period)
    ]
    return statistics.median(means) if means else statistics.fmean(durations)


def summarise_timing(rounds, settings):
    """``{key: {"seconds", "ratio", "low", "high"}}`` of one network: the
    medians over rounds and the range of the ratios."""
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
    """The time targets of one network (:func:`summarise_timing`), on the
    ratios rounded to the three decimals the page shows."""
    checks = []
    for key, reference_key in TIME_REFERENCES.items():
        value = round(summary[key]["ratio"], 3)
        reference = round(summary[reference_key]["ratio"], 3)
        label = f"time, {configurations.config_label(key, settings)}"
        label += f" (reference + {SAMPLE_MARGIN})"
        limit = round(reference + SAMPLE_MARGIN, 3)
        check = dict(width=width, label=label, measured=value, limit=limit)
        checks.append(dict(check, reference=reference))
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
    problem = ""
    if settings.get("problem") == "acoustic_wave":
        problem = (
            "The `gradient_band` rows run without their band here, which "
            "acts on stationary problems only (`--problem poisson`). "
        )
    return problem + (
        f"Time per step: {settings['rounds']} interleaved round(s); per-step "
        f"rows: median over {settings['steps']} steps after "
        f"{settings['warmup']} warm-up steps; exact every step: median over "
        f"{settings['exact_steps']} step(s) after one warm-up step; exact "
        f"every {settings['period']} steps and sketches every k > 1 steps: "
        "median over the periods of a window of whole periods of each "
        f"period's mean step ({windows})"
    )


def summarise(results, settings):
    """The page's numbers (:func:`configurations.render`): per network and
    row the median ms per step, ratio and range; the targets."""
    rows, targets, parameters = [], [], {}
    for width in settings["widths"]:
        rounds = results["timing"][width]
        parameters[str(width)] = rounds[-1]["parameters"]
        summary = summarise_timing(rounds, settings)
        for key in configurations.CONFIG_KEYS:
            row = summary[key]
            time = [1e3 * row["seconds"], row["ratio"], row["low"], row["high"]]
            label = configurations.config_label(key, settings)
            rows.append(dict(width=width, key=key, label=label, time=time))
        targets += target_checks(width, summary, settings)
    line = settings_line(settings)
    return dict(line=line, parameters=parameters, rows=rows, targets=targets)


def main(argv=None):
    """Run the study (or render ``--from-json``) and write its page."""
    return configurations.study_main(argv, "step_time.py", SETTINGS, ("time",))


if __name__ == "__main__":
    raise SystemExit(main())
