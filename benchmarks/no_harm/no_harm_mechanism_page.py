"""The page of the mechanism study of issue #76 (``no_harm_mechanism.py``):
its tables and prose from the results document alone, the block of
``docs/weights.md`` between :data:`MARKERS`."""

import math
import os

from benchmarks import harness
from benchmarks.no_harm.no_harm_mechanism_analysis import (
    constant_growth_lag,
    error_after,
    geometric_mean,
    growth_rate,
    off_factors,
    ratios_to_none,
    record_at,
    replayed_trace_lag,
    replayed_weight_ratios,
    span_delay_lag,
    trace_growth,
    trace_lag,
    weight_ratios,
)
from benchmarks.no_harm.no_harm_mechanism_setups import DEFAULT_ALPHA
from benchmarks.no_harm.no_harm_mechanism_setups import DEFAULT_EVERY, EPOCHS
from benchmarks.no_harm.no_harm_mechanism_setups import ROWS

PAGE = "weights.md"
#: The markers of the page's block, and what a new page holds.
MARKERS = ("<!-- no-harm-mechanism -->", "<!-- /no-harm-mechanism -->")
HEADING = "## Why the default can lag the kernel"
NEW_PAGE = f"# The weights\n\n{HEADING}\n\n{MARKERS[0]}\n{MARKERS[1]}\n"


def number(value, digits=3):
    """``value`` with ``digits`` significant digits (``—`` for NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.{digits}g}"


def rate(value):
    """A growth rate per step, signed, three decimals."""
    return "—" if math.isnan(value) else f"{value:+.3f}"


def row_label(row):
    """The weighting of a row, as a user writes it."""
    kind, options = ROWS[row]
    if kind is None:
        return "none (plain sum)"
    if row == "default":
        return "`SketchNTKWeighting()`, the default"
    cls = "SketchNTKWeighting" if kind == "sketch" else "NTKWeighting"
    args = ", ".join(f"{k}={v:g}" for k, v in options.items())
    return f"`{cls}({args})`"


def row_span(row):
    """Steps the row's weights average over and between refreshes."""
    kind, options = ROWS[row]
    if kind is None:
        return "—", "—"
    if kind == "exact":
        return "none (alpha 1)", str(options["update_every_n_steps"])
    alpha = options.get("alpha", DEFAULT_ALPHA)
    every = options.get("sample_every_n_steps", DEFAULT_EVERY)
    return f"{1 / alpha:,.0f}", str(every)


def _trajectories(document):
    return [
        r
        for r in document["trajectories"]
        if r["status"] == "ok" and r.get("trajectory")
    ]


def growth_table(document):
    """The lines of the growth-rate table."""
    settings = document["settings"]["trajectory"]
    windows = settings["windows"]
    header = ["case", "seed", "condition"]
    header += [f"rate {a}–{b}" for a, b in windows]
    first, last = windows[0][0], windows[-1][1]
    header += [f"Tr at {first}", f"Tr at {last}"]
    rows = []
    for run in _trajectories(document):
        trajectory = run["trajectory"]
        growth = trace_growth(trajectory, windows)
        start, end = record_at(trajectory, first), record_at(trajectory, last)
        for c, rates in growth.items():
            rows.append(
                [f"`{run['case']}`", run["seed"], f"`{c}`"]
                + [rate(g) for g in rates]
                + [
                    number(start["exact_traces"][c]) if start else "—",
                    number(end["exact_traces"][c]) if end else "—",
                ]
            )
    return harness.markdown_table(header, rows, "lrl" + "r" * (len(header) - 3))


def lag_table(document):
    """The lines of the weight-lag table: per case, seed and condition, the
    applied over the exact weight at each lag step, with the replay's."""
    steps = document["settings"]["trajectory"]["lag_steps"]
    header = ["case", "seed", "condition"]
    header += [f"step {s}: default ÷ exact (replay)" for s in steps]
    rows = []
    for run in _trajectories(document):
        trajectory = run["trajectory"]
        replayed = replayed_weight_ratios(trajectory)
        for c in trajectory[0]["exact_traces"]:
            cells = [f"`{run['case']}`", run["seed"], f"`{c}`"]
            for s in steps:
                record = record_at(trajectory, s)
                if record is None:
                    cells.append("—")
                    continue
                measured = weight_ratios(record)[c]
                cells.append(f"{number(measured)} ({number(replayed[s][c])})")
            rows.append(cells)
    return harness.markdown_table(header, rows, "lrl" + "r" * (len(header) - 3))


def off_table(document):
    """The lines of the summary of the weight lag: per case and lag step,
    the geometric mean over seeds of :func:`off_factors`."""
    steps = document["settings"]["trajectory"]["lag_steps"]
    header = ["case", "weights", *(f"step {s}" for s in steps)]
    labels = (
        "default off the exact (×)",
        "replay off the exact (×)",
        "default off the replay (×)",
    )
    runs = _trajectories(document)
    rows = []
    for case in dict.fromkeys(r["case"] for r in runs):
        found = {
            s: [off_factors(r["trajectory"], s) for r in runs] for s in steps
        }
        for index, label in enumerate(labels):
            cells = [f"`{case}`", label]
            for s in steps:
                values = [
                    f[index]
                    for r, f in zip(runs, found[s])
                    if r["case"] == case and f is not None
                ]
                cells.append(number(geometric_mean(values)))
            rows.append(cells)
    return harness.markdown_table(header, rows, "ll" + "r" * len(steps))


def trace_lag_table(document, steps):
    """The lines of the trace-lag table: at each of ``steps``, the exact
    trace per entry over the default's average behind its weights
    (measured, and replayed on the exact traces), against a moving average
    behind a trace growing at the constant rate it grew at since step 0
    and against ``exp(rate × span)``."""
    header = ["case", "seed", "condition"]
    for s in steps:
        header += [
            f"step {s}: exact ÷ average (replay)",
            "constant rate",
            "exp(rate × span)",
        ]
    rows = []
    for run in _trajectories(document):
        trajectory = run["trajectory"]
        order = [r["step"] for r in trajectory]
        for c in trajectory[0]["exact_traces"]:
            cells = [f"`{run['case']}`", run["seed"], f"`{c}`"]
            values = [r["exact_traces"][c] for r in trajectory]
            for s in steps:
                record = record_at(trajectory, s)
                if record is None:
                    cells += ["—"] * 3
                    continue
                measured = trace_lag(record)[c]
                replay = replayed_trace_lag(trajectory, s).get(c)
                growth = growth_rate(order, values, 0, s)
                cells += [
                    f"{number(measured)} ({number(replay)})",
                    number(constant_growth_lag(growth, DEFAULT_ALPHA, s)),
                    number(span_delay_lag(growth, DEFAULT_ALPHA)),
                ]
            rows.append(cells)
    return harness.markdown_table(header, rows, "lrl" + "r" * (len(header) - 3))


def events_lines(document):
    """What else held the default's weights: rejections and isolations."""
    lines = []
    for run in _trajectories(document):
        trajectory = run["trajectory"]
        end = trajectory[-1]
        rejected = {
            k: v for k, v in end["rejections"].items() if k != "proposals" and v
        }
        isolated = next(
            ((r["step"], r["isolated"]) for r in trajectory if r["isolated"]),
            None,
        )
        text = f"`{run['case']}` seed {run['seed']}: "
        proposals = end["rejections"].get("proposals", 0)
        text += f"{proposals} proposals in steps 0–{end['step']}, "
        text += (
            "rejected: "
            + ", ".join(f"{v} ({k})" for k, v in sorted(rejected.items()))
            if rejected
            else "none rejected"
        )
        if isolated:
            blocks = ", ".join(f"`{b}`" for b in isolated[1])
            own = "its own" if len(isolated[1]) == 1 else "their own"
            text += (
                f"; {blocks} sketched on {own} from the end of step "
                f"{isolated[0]} on (an averaged sketch turned negative)"
            )
        lines.append(f"- {text}.")
    return lines


def loss_table(document):
    """The condition losses of the trajectories at the lag steps."""
    steps = document["settings"]["trajectory"]["lag_steps"]
    header = ["case", "seed", "condition"]
    header += [f"loss at {s}" for s in [0, *steps]]
    rows = []
    for run in _trajectories(document):
        trajectory = run["trajectory"]
        for c in trajectory[0]["exact_traces"]:
            cells = [f"`{run['case']}`", run["seed"], f"`{c}`"]
            for s in [0, *steps]:
                record = record_at(trajectory, s)
                loss = record["losses"].get(f"{c}_loss") if record else None
                cells.append(number(loss))
            rows.append(cells)
    return harness.markdown_table(header, rows, "lrl" + "r" * (len(header) - 3))


def outcome_table(document):
    """The lines of the outcome table: per row, per case, the geometric
    mean over seeds of the final error's ratio to none, with the seeds
    above 1 and the median final error."""
    settings = document["settings"]["outcome"]
    cases = settings["cases"]
    header = ["weighting", "averages over (steps)", "refreshed every (steps)"]
    for case in cases:
        header += [f"`{case}`: ÷ none, geometric mean (seeds above 1)"]
    rows = []
    for row in settings["rows"]:
        span, every = row_span(row)
        cells = [row_label(row), span, every]
        for case in cases:
            ratios = ratios_to_none(document, case, row)
            if not ratios:
                cells.append("—")
                continue
            above = sum(r > 1 for r in ratios.values())
            cells.append(
                f"{number(geometric_mean(ratios.values()))} "
                f"({above} of {len(ratios)})"
            )
        rows.append(cells)
    return harness.markdown_table(header, rows, "lrr" + "r" * len(cases))


def final_cell(run):
    """A run's final error, or that it failed or was not run."""
    if run is None:
        return "not run"
    if run["status"] != "ok":
        return "failed"
    return number(run["errors"][-1])


def outcome_errors_table(document):
    """Every outcome run's final error, seed by seed, per case and row."""
    settings = document["settings"]["outcome"]
    seeds = settings["seeds"]
    header = ["case", "weighting"] + [f"seed {s}" for s in seeds]
    found = {(r["case"], r["row"], r["seed"]): r for r in document["outcome"]}
    rows = []
    for case in settings["cases"]:
        for row in settings["rows"]:
            cells = [f"`{case}`", row_label(row)]
            for seed in seeds:
                cells.append(final_cell(found.get((case, row, seed))))
            rows.append(cells)
    return harness.markdown_table(header, rows, "ll" + "r" * len(seeds))


def budget_table(document):
    """The budget table: per seed and budget, none's and the default's
    error and their ratio; the geometric mean of the ratios per budget."""
    settings = document["settings"]["budget"]
    budgets = settings["budgets"]
    runs = {(r["row"], r["seed"]): r for r in document["budget"]}
    header = ["seed"]
    header += [f"{b:,} steps: none / default (÷)" for b in budgets]
    rows, ratios = [], {b: [] for b in budgets}
    for seed in settings["seeds"]:
        cells = [str(seed)]
        for budget in budgets:
            none, default = (runs.get((r, seed)) for r in ("none", "default"))
            if none is None or default is None:
                cells.append("not run")
                continue
            if "failed" in (none["status"], default["status"]):
                cells.append("failed")
                continue
            a, b = error_after(none, budget), error_after(default, budget)
            if not (math.isfinite(a) and math.isfinite(b)):
                cells.append("—")
                continue
            ratios[budget].append(b / a)
            cells.append(f"{number(a)} / {number(b)} ({number(b / a)})")
        rows.append(cells)
    cells = ["geometric mean of ÷"]
    for budget in budgets:
        above = sum(r > 1 for r in ratios[budget])
        cells.append(
            f"{number(geometric_mean(ratios[budget]))} "
            f"({above} of {len(ratios[budget])} above 1)"
        )
    rows.append(cells)
    return harness.markdown_table(header, rows)


def consistency_lines(document):
    """The checks that the runs measure what they claim: the trajectory
    recording leaves a run as it was (the outcome study's default runs,
    unrecorded, reach the same error at the trajectories' last step), and a
    long budget run is the tutorial's run continued (its error after the
    tutorial's budget equals the outcome run's)."""
    lines = []
    last = document["settings"]["trajectory"]["last"]
    outcome = {
        (r["case"], r["row"], r["seed"]): r
        for r in document["outcome"]
        if r["status"] == "ok"
    }
    same = total = 0
    for run in _trajectories(document):
        twin = outcome.get((run["case"], "default", run["seed"]))
        record = record_at(run["trajectory"], last)
        if twin is None or record is None:
            continue
        total += 1
        same += error_after(twin, last) == record["error"]
    if total:
        lines.append(
            f"- The trajectories' error at step {last} equals that of the "
            f"outcome study's unrecorded default run of the same case and "
            f"seed to the bit on {same} of {total} runs."
        )
    budget = document["settings"]["budget"]
    case = budget["case"]
    steps = document["settings"]["outcome"]["steps"] or EPOCHS[case]
    same = total = 0
    for run in document["budget"]:
        twin = outcome.get((case, run["row"], run["seed"]))
        if twin is None or run["status"] != "ok":
            continue
        total += 1
        same += error_after(run, steps) == twin["errors"][-1]
    if total:
        lines.append(
            f"- The budget runs' error after {steps:,} steps equals the "
            f"outcome study's run of the same row and seed to the bit on "
            f"{same} of {total} runs."
        )
    return lines


def failures_lines(document):
    """The runs that failed, if any."""
    failed = [
        r
        for part in ("trajectories", "outcome", "budget")
        for r in document[part]
        if r["status"] != "ok"
    ]
    return [
        f"- failed: `{r['case']}` {row_label(r['row'])} seed {r['seed']}: "
        f"{r.get('failure') or 'not finite or stopped early'}"
        for r in failed
    ]


def render(document):
    """The page's block, from the results alone."""
    settings = document["settings"]
    trajectory, outcome = settings["trajectory"], settings["outcome"]
    budget = settings["budget"]
    lines = [
        harness.BEGIN.format(script="no_harm/no_harm_mechanism.py"),
        "",
    ]
    lines += harness.header_lines(document["part"])
    lines += [
        "",
        "Every run is seeded with `lightning.seed_everything(seed)` and "
        "trained in a fresh single-threaded process, one step per epoch; "
        "the set-ups (tutorial 1's `ode`, tutorial 2's `poisson` and "
        "`poisson_feature`, the suite's `lshape`) are described in the "
        "script's docstring. Errors are relative L2 errors on a "
        f"{settings['grid']}-point grid per axis.",
        "",
        "### The kernel grows, the average follows late",
        "",
        f"The first {trajectory['last']:,} steps under the default, seeds "
        f"{', '.join(map(str, trajectory['seeds']))}, recorded every "
        f"{trajectory['every']} steps at the step's parameters. The rate is "
        "the mean log-growth rate per step of the condition's exact trace "
        "over the window, `ln(Tr(end) / Tr(start)) / (end - start)`.",
        "",
    ]
    lines += growth_table(document)
    lines += [
        "",
        "The weight the default applied over the exact weight at the same "
        "parameters, and in brackets the same ratio for the default's "
        f"moving average (rate {DEFAULT_ALPHA:g} per step, a sample every "
        f"{DEFAULT_EVERY} steps, entering the weights from the next step) "
        "replayed on the exact traces: what the default would apply if each "
        "sketch were exact.",
        "",
    ]
    lines += lag_table(document)
    lines += [
        "",
        "In short, per case: how far the weights are from the exact ones, "
        "either way (the geometric mean over the conditions of the larger "
        "of the ratio and its inverse, then over the seeds): the default's, "
        "the replay's, and the default's from the replay's (the sketches' "
        "noise).",
        "",
    ]
    lines += off_table(document)
    steps = trajectory["lag_steps"][-2:]
    lines += [
        "",
        "The exact trace per entry over the default's averaged trace "
        "behind its weights (in brackets, over the replayed average), "
        "against two predictions from the rate `g` at which the trace grew "
        "since step 0: a moving average of rate alpha per step behind a "
        "trace growing at the constant rate `g` (its lag tends to about "
        "`1 + g / alpha`), and `exp(g / alpha)`, the growth over the "
        f"average's span of {1 / DEFAULT_ALPHA:,.0f} steps.",
        "",
    ]
    lines += trace_lag_table(document, steps)
    lines += ["", "What else acted on the default's weights:", ""]
    lines += events_lines(document)
    lines += ["", "Each condition's loss at the step (the training loss):", ""]
    lines += loss_table(document)
    steps = outcome["steps"]
    budgets = ", ".join(
        f"{EPOCHS[c]:,} (`{c}`)" if steps is None else f"{steps:,}"
        for c in outcome["cases"]
    )
    lines += [
        "",
        "### The outcome against the average's span and the refresh",
        "",
        f"Final error over no weighting's, seed by seed (seeds "
        f"{', '.join(map(str, outcome['seeds']))}), after the tutorial's "
        f"budget: {budgets} steps.",
        "",
    ]
    lines += outcome_table(document)
    lines += ["", "The final errors:", ""]
    lines += outcome_errors_table(document)
    lines += [
        "",
        "### Does the default catch up with a longer budget?",
        "",
        f"`{budget['case']}`, no weighting against the default: one run per "
        "seed and row, its error read after each budget (nothing in the "
        "set-up depends on the budget).",
        "",
    ]
    lines += budget_table(document)
    checks = consistency_lines(document) + failures_lines(document)
    if checks:
        lines += ["", "Checks:", ""] + checks
    return "\n".join(lines) + "\n"


def write_outputs(document, output_dir):
    """Write the page's block (the results file is written by the run)."""
    page = os.path.join(output_dir, PAGE)
    harness.write_block(page, *MARKERS, render(document), NEW_PAGE)
