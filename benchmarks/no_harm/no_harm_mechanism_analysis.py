"""The arithmetic of the mechanism study of issue #76
(``no_harm_mechanism.py``) on its results: the traces' growth rates, the
applied weights and the averaged traces against the exact ones, the
default's moving average replayed on the exact traces and a moving
average's lag behind a steadily growing trace, and the outcome's ratios to
no weighting."""

import math

from benchmarks.no_harm.no_harm_mechanism_setups import DEFAULT_ALPHA


def record_at(trajectory, step):
    """The record of ``step`` in a trajectory, or ``None``."""
    return next((r for r in trajectory if r["step"] == step), None)


def growth_rate(steps, values, start, end):
    """The mean log-growth rate per step of ``values`` (at ``steps``)
    between ``start`` and ``end``: ``ln(v(end) / v(start)) / (end -
    start)``; NaN if either step is missing or a value is not positive."""
    found = dict(zip(steps, values))
    first, last = found.get(start), found.get(end)
    if first is None or last is None or first <= 0 or last <= 0:
        return math.nan
    return math.log(last / first) / (end - start)


def trace_growth(trajectory, windows):
    """``{condition: [rate per window]}`` of the exact traces."""
    steps = [r["step"] for r in trajectory]
    names = list(trajectory[0]["exact_traces"])
    return {
        c: [
            growth_rate(steps, [r["exact_traces"][c] for r in trajectory], a, b)
            for a, b in windows
        ]
        for c in names
    }


def weight_ratios(record):
    """``{condition: applied weight / exact weight}`` of a record."""
    exact = record["exact_weights"]
    return {c: record["applied_weights"][c] / w for c, w in exact.items()}


def replay_average(steps, values, alpha, every):
    """The default's moving average run on ``values`` (one per step of
    ``steps``, which start at 0 and hold every sample step): the average
    behind the weights applied at each step. The warm start is ``values[0]``;
    each later sample step ``s`` folds ``values(s)`` in with rate ``1 - (1 -
    alpha)^every``, and enters the weights from the next step on (the
    deferred sample), so the weights at a sample step still come from the
    samples before it.

    :return: The averages, one per step of ``steps``."""
    if not steps or steps[0] != 0:
        raise ValueError("the steps must start at the warm start, 0.")
    rate = 1 - (1 - alpha) ** every
    average, found = values[0], []
    for step, value in zip(steps, values):
        found.append(average)
        if step % every == 0:
            average = (1 - rate) * average + rate * value
    return found


def ratio_of_weights(averaged, exact):
    """``{condition: w(averaged) / w(exact)}`` for NTK weights ``w_c =
    mean diag(K) / mean diag(K_cc)`` of two sets of block traces on the
    same points: ``(sum averaged / sum exact) (exact_c / averaged_c)``."""
    total = sum(averaged.values()) / sum(exact.values())
    return {c: total * exact[c] / averaged[c] for c in exact}


def replayed_weight_ratios(trajectory, alpha=DEFAULT_ALPHA, every=None):
    """``{step: {condition: ratio}}``: the weights of the default's moving
    average replayed on the exact traces (:func:`replay_average`, ``every``
    the records' spacing by default) over the exact weights."""
    steps = [r["step"] for r in trajectory]
    every = every or steps[1] - steps[0]
    names = list(trajectory[0]["exact_traces"])
    replayed = {
        c: replay_average(
            steps, [r["exact_traces"][c] for r in trajectory], alpha, every
        )
        for c in names
    }
    return {
        step: ratio_of_weights(
            {c: replayed[c][i] for c in names},
            trajectory[i]["exact_traces"],
        )
        for i, step in enumerate(steps)
    }


def trace_lag(record):
    """``{condition: exact trace / averaged trace}`` per entry: how far the
    default's average behind its weights is below the kernel."""
    found = {}
    for c, exact in record["exact_traces"].items():
        behind = record["averaged_traces"].get(c)
        if behind is None or behind <= 0:
            found[c] = math.nan
            continue
        per_entry = behind / record["train_points"][c]
        found[c] = exact / record["points"][c] / per_entry
    return found


def replayed_trace_lag(trajectory, step, alpha=DEFAULT_ALPHA):
    """``{condition: exact / replayed average}`` of the traces at
    ``step`` (empty if not recorded)."""
    steps = [r["step"] for r in trajectory]
    if step not in steps:
        return {}
    index, every = steps.index(step), steps[1] - steps[0]
    found = {}
    for c in trajectory[0]["exact_traces"]:
        values = [r["exact_traces"][c] for r in trajectory]
        replayed = replay_average(steps, values, alpha, every)[index]
        found[c] = values[index] / replayed
    return found


def constant_growth_lag(growth, alpha, steps):
    """The lag ``T(t) / M(t)`` after ``steps`` steps of a moving average
    ``M`` of rate ``alpha`` per step, warm-started at ``T(0)``, behind a
    trace growing as ``T(s) = T(0) exp(growth s)``: ``M(s) = (1 - alpha)
    M(s - 1) + alpha T(s)``. For ``growth > 0`` it tends to ``(1 - (1 -
    alpha) exp(-growth)) / alpha``, about ``1 + growth / alpha``, as
    ``steps`` grows: however old the average, its latest samples carry
    weight ``alpha`` each."""
    average = 1.0
    for step in range(1, steps + 1):
        average = (1 - alpha) * average + alpha * math.exp(growth * step)
    return math.exp(growth * steps) / average


def span_delay_lag(growth, alpha):
    """The hypothesis' lag ``exp(growth / alpha)``: the growth of the
    trace over the average's span ``1 / alpha`` (``inf`` past floats)."""
    exponent = growth / alpha
    return math.inf if exponent > 700 else math.exp(exponent)


def off_factor(ratio):
    """How far a ratio is from 1, either way: ``max(r, 1 / r)``."""
    return max(ratio, 1 / ratio)


def off_factors(trajectory, step):
    """``(default, replay, default ÷ replay)`` at ``step``: each the
    geometric mean over the conditions of :func:`off_factor` of the
    applied over the exact weight, of the replayed over the exact weight,
    and of the applied over the replayed weight; ``None`` if not
    recorded."""
    record = record_at(trajectory, step)
    if record is None:
        return None
    measured = weight_ratios(record)
    replayed = replayed_weight_ratios(trajectory)[step]
    names = list(measured)
    return tuple(
        geometric_mean(off_factor(f(c)) for c in names)
        for f in (
            measured.get,
            replayed.get,
            lambda c: measured[c] / replayed[c],
        )
    )


def geometric_mean(values):
    """The geometric mean of positive values (NaN if none)."""
    values = list(values)
    if not values:
        return math.nan
    return math.exp(sum(math.log(v) for v in values) / len(values))


def ratios_to_none(document, case, row):
    """``{seed: final error / none's final error}`` of the outcome runs."""
    runs = {
        (r["row"], r["seed"]): r
        for r in document["outcome"]
        if r["case"] == case and r["status"] == "ok"
    }
    return {
        seed: run["errors"][-1] / runs[("none", seed)]["errors"][-1]
        for (name, seed), run in sorted(runs.items())
        if name == row and ("none", seed) in runs
    }


def error_after(run, steps):
    """A run's error after ``steps`` steps (NaN if not recorded)."""
    found = dict(zip(run["error_steps"], run["errors"]))
    return found.get(steps, math.nan)
