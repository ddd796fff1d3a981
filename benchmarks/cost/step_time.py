"""Time per PINA training step with each NTK loss weighting, against an
unweighted step, in interleaved rounds of fresh workers; its targets.
Method: ``docs/benchmark-method.md``.

    python benchmarks/cost/step_time.py --quick"""

import functools
import statistics
import sys
from pathlib import Path

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness
from benchmarks.cost import configurations
from benchmarks.cost.configurations import CONFIG_KEYS, SAMPLE_PERIODS
from benchmarks.cost.configurations import config_label, train_row

SCRIPT = "cost/step_time.py"
#: The settings this study takes as flags.
SETTINGS = ("steps", "warmup", "rounds", "threads", "widths", "depth")
SETTINGS += ("points", "period", "exact_steps", "seed", "rows", "problem")
#: Rows timed over whole periods, which amortises their refreshes.
PERIODIC_KEYS = ("exact_every_period", "exact_rayleigh_every_period")
PERIODIC_KEYS += tuple(SAMPLE_PERIODS)
#: A round's rows between its unweighted runs (rotated by the round), then
#: the long exact rows: far above the noise, they need no interleaving.
LONG_KEYS = ("exact_every_period", "exact_every_step")
CHEAP_KEYS = [k for k in CONFIG_KEYS if k not in ("unweighted", *LONG_KEYS)]
CHEAP_KEYS = [k for k in CHEAP_KEYS if k not in PERIODIC_KEYS]
CHEAP_KEYS += [k for k in PERIODIC_KEYS if k not in LONG_KEYS]
#: A sample every step costs at most this much above its reference row.
SAMPLE_MARGIN = 0.15
TIME_REFERENCES = dict(predictor_forward="reference_predictor")
TIME_REFERENCES["parameter"] = "reference_evaluation"
#: The largest ratio to an unweighted step with a sample every 10 steps.
AMORTISED_TARGETS = {
    f"{estimator}{variant}_every_10": limit
    for variant in ("", *(f"_{key}" for key, _, _ in configurations.VARIANTS))
    for estimator, limit in (("predictor", 1.15), ("parameter", 1.10))
}


def window(settings, key):
    """A run's warm-up and measured steps and period (``None``: per-step);
    whole periods, ``min_periods`` (3 in older results) at least."""
    if key == "exact_every_step":
        return 1, settings["exact_steps"], None
    if key not in PERIODIC_KEYS:
        return settings["warmup"], settings["steps"], None
    period = SAMPLE_PERIODS.get(key, settings["period"])
    least = settings.get("min_periods", 3)
    steps = max(least, round(settings["steps"] / period)) * period
    return settings["warmup"], steps, period


def round_order(keys, index):
    """The rows of round ``index`` among ``keys``: unweighted first and
    after the cheap rows (rotated by the round), the long rows last."""
    cheap = [k for k in CHEAP_KEYS if k in keys]
    shift = index % len(cheap) if cheap else 0
    cheap = cheap[shift:] + cheap[:shift]
    long = [k for k in LONG_KEYS if k in keys]
    return ["unweighted", *cheap, "unweighted", *long]


def run_timing(task):
    """A worker job: one timing round of a network, ``{"runs": [{"key",
    "durations"}], "parameters"}``."""
    runs = []
    keys = configurations.measured_keys(task)
    for key in round_order(keys, task["round"]):
        timer = harness.StepTimer(synchronize=task["accelerator"] == "cuda")
        parameters = train_row(task, key, sum(window(task, key)[:2]), timer)
        runs.append({"key": key, "durations": timer.durations})
    return {"runs": runs, "parameters": parameters}


def round_ratios(runs, settings):
    """``{key: (seconds per step, ratio)}`` of a round: the median step (or
    period's mean step), against that of the pooled unweighted steps."""
    measured = {}
    for run in runs:
        skip, steps, period = window(settings, run["key"])
        durations = run["durations"][skip:][: steps if period else None]
        measured.setdefault(run["key"], []).extend(durations)
    result = {}
    for key, durations in measured.items():
        statistic, period = statistics.median, window(settings, key)[2]
        if period:
            statistic = functools.partial(median_period_mean, period=period)
        value = statistic(durations)
        result[key] = (value, value / statistic(measured["unweighted"]))
    return result


def median_period_mean(durations, period):
    """The median over consecutive whole periods of their mean step (the
    plain mean when not even one period fits)."""
    means = [
        statistics.fmean(durations[i : i + period])
        for i in range(0, len(durations) - period + 1, period)
    ]
    return statistics.median(means) if means else statistics.fmean(durations)


def numbers(results, settings, width):
    """A network's parameters, ``{key: [ms, ratio, low, high]}`` (medians
    over rounds, the ratios' range) and targets, on the shown ratios."""
    rounds = results["timing"][width]
    per_round = [round_ratios(r["runs"], settings) for r in rounds]
    time, checks = {}, []
    for key in configurations.measured_keys(settings):
        seconds, ratios = zip(*(r[key] for r in per_round))
        time[key] = [1e3 * statistics.median(seconds)]
        time[key] += [statistics.median(ratios), min(ratios), max(ratios)]
    ratio = {key: round(row[1], 3) for key, row in time.items()}
    targets = [(k, r, SAMPLE_MARGIN) for k, r in TIME_REFERENCES.items()]
    targets += [(k, limit, None) for k, limit in AMORTISED_TARGETS.items()]
    for key, limit, margin in targets:
        if key not in time or (margin is not None and limit not in time):
            continue
        label, extra = f"time, {config_label(key, settings)}", {}
        measured, values = ratio[key], [r[key][1] for r in per_round]
        if margin is not None:  # limit: the key of the reference row
            extra = {"reference": ratio[limit]}
            label += f" (reference + {margin})"
            excess = [r[key][1] - r[limit][1] for r in per_round]
            values = [ratio[limit] + e for e in excess]
            limit = round(ratio[limit] + margin, 3)
        check = dict(width=width, label=label, measured=measured)
        checks.append(dict(check, limit=limit, rounds=values, **extra))
    return rounds[-1]["parameters"], time, checks


def settings_line(settings):
    """The page's line on this study's settings."""
    keys = configurations.measured_keys(settings)
    windows = ", ".join(
        f"{window(settings, key)[1]} steps for "
        f"{'exact' if key == 'exact_every_period' else key}"
        for key in PERIODIC_KEYS
        if key in keys
    )
    problem = (
        "The `gradient_band` rows run without their band here, which acts on "
        "stationary problems only (`--problem poisson`). "
    ) * (settings.get("problem") == "acoustic_wave")
    return problem + (
        f"Time per step: {settings['rounds']} interleaved round(s); per-step "
        f"rows: median over {settings['steps']} steps after "
        f"{settings['warmup']} warm-up steps; exact every step: median over "
        f"{settings['exact_steps']} step(s) after one warm-up step; exact "
        f"every {settings['period']} steps and sketches every k > 1 steps: "
        "median over the periods of a window of whole periods of each "
        f"period's mean step ({windows})"
    )


main = configurations.study_main(SCRIPT, SETTINGS, ("time",))

if __name__ == "__main__":
    raise SystemExit(main())
