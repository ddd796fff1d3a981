"""The scaling study's page, from its results document alone (and the
default's bookkeeping, timed by ``bookkeeping.py``, from its own): the
targets, the points per chunk, time and memory against n and width, the
sketches against their floors; README.md's block and the figure."""

import math
import os
from statistics import median, pstdev

from benchmarks import harness
from benchmarks.cost import configurations
from benchmarks.scaling import bookkeeping
from benchmarks.scaling.scaling_setup import EXACT, EXACT_TARGETS, FLOOR_MARGIN
from benchmarks.scaling.scaling_setup import FLOOR_MARGIN_SMALL, FLOOR_REFERENCE
from benchmarks.scaling.scaling_setup import FLOOR_SMALL_N, LABELS
from benchmarks.scaling.scaling_setup import MEMORY_TARGET, PER_ENTRY_FLAT
from benchmarks.scaling.scaling_setup import SAMPLE_PERIOD, SPECS, floor_margin

#: The markers of README.md's block (a sentence and the figure).
README_MARKERS = ("<!-- scaling -->", "<!-- /scaling -->")
FIGURE = "figures/scaling.png"
#: The rows of the figure: all but unweighted (the first) and the references.
PLOTTED = [k for k in SPECS if k not in configurations.REFERENCE_KEYS][1:]
#: The order of the verdicts, the worst last.
RANK = {"pass": 0, "not resolved": 1, "**miss**": 2}
#: The page's prose: paragraphs, each one line once its whitespace is joined.
TEXT = """PINA's `Poisson2DSquareProblem` (stationary: the `gradient_band=4`
row's band acts), fixed random points, a quarter of them on the boundary,
one full batch per step (no mini-batches at any size), PINA's `FeedForward`
tanh networks with {depth} hidden layers, Adam, seed {seed}. {rounds}
interleaved round(s) per size ({few}), one fresh worker each; {warmup} warm-up
steps, then measured steps by n ({steps}; {default_steps} otherwise, by width
{wide}). Sketch rows sample every {period} steps (amortised over whole
periods). `NTKWeighting()` is its refresh step (step 0; a reverse pass per
residual column); every 100 steps is that step plus 99 median steps, over
100. Exact steps projected above {exact_cap_s:.0f} s are skipped, those
over {exact_rounds_s:.0f} s run in the first round only; memory: two steps per
row {memory_when} (exact where one exact step took at most
{exact_memory_cap_s:.0f} s; none at n, width = {no_memory}: the CPU profiler
outgrew the machine's memory). Rows in italics: the [reference
rows](benchmark-method.md#reference-rows).

## The sketches against their floors

Floor: `1 + (reference − 1) / {period}`, the reference row's unavoidable
work once per sample period (predictor rows: the reference with the `Jᵀg`
backward; parameter-space: with the evaluation only). Target: the default's
excess within {margin_small} of a step at n ≤ {small_n:,} and {margin} of a
step above (shares of a step, which do not move with the host's speed:
{margin_small} is what 0.2 ms per step was of the 4 ms step at n = 100 the
allowance was set on), each round's excess against its own reference."""
#: Why a verdict on the floor is not resolved, from the results.
NOISE = """**Why a verdict here is not resolved.** The verdicts keep the
measure between separate runs: each round's excess is a difference of
ratios between the default's run, its reference's and the unweighted ones,
and this host's speed moves from run to run. The two unweighted runs of one
round differ by a median of {typical_low:.0f}–{typical_high:.0f} % over the
sizes, and by up to {most:.0f} %; one round's excess spreads accordingly, by
{spread_low:.2f}–{spread_high:.2f} of a step (its standard deviation over
rounds), against an allowance of {margin_small} or {margin} of a step. Where
the median excess lies within a few hundredths of a step of the allowance,
the interval over the rounds run straddles it: *not resolved*, not a pass
and not a miss."""


def read_bookkeeping(path):
    """:return: The default's bookkeeping document beside the results file
    or page ``path`` (``docs/scaling.json`` or ``.md``:
    ``docs/scaling-bookkeeping.json``), or ``None`` where there is none."""
    path = os.path.splitext(path)[0] + "-bookkeeping.json"
    return harness.read_json(path) if os.path.isfile(path) else None


def sweeps(document):
    """``[(title, axis, [(value, entry)])]``: the points sweep (at the fixed
    width), then the widths sweep (at the fixed n)."""
    settings = document["settings"]
    width = settings["width"]
    n = settings["n"]
    by_size = {tuple(e["size"]): e for e in document["sizes"]}
    points = [(v, by_size[(v, width)]) for v in settings["points"]]
    widths = [(w, by_size[(n, w)]) for w in settings["widths"]]
    return [
        (f"residual entries n (3×{width})", "n", points),
        (f"width (3 hidden layers, n = {n:,})", "width", widths),
    ]


def series(found, key, field="ratio"):
    """``[(value, field)]`` of ``key``'s row over ``[(value, entry)]``."""
    rows = [(v, e["summary"]["rows"].get(key)) for v, e in found]
    return [(v, row[field]) for v, row in rows if row is not None]


def cell(entry, key, memory):
    """A table cell: a row's median ratio (range) or peak extra memory over
    unweighted's; unweighted's own ms per step or MiB."""
    summary = entry["summary"]
    found = summary["memory"] if memory else summary["rows"]
    if key not in found:
        return "not measured" if memory else "skipped"
    value = found[key]
    unweighted = key == "unweighted"
    if memory and unweighted:
        return f"{value / 2**20:.2f}"
    if memory:
        ratios = summary["memory_ratios"][key]
        return f"{median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f})"
    if unweighted:
        return f"{value['seconds'] * 1e3:.1f}"
    return f"{value['ratio']:.2f} ({value['low']:.2f}–{value['high']:.2f})"


def render(document, bookkeeping_document=None):
    """The page's generated block, from the results document alone (and
    the default's bookkeeping from its own, where given)."""
    text = harness.paragraphs(TEXT, text_values(document["settings"]))
    parts = harness.parts_lines(document, lambda _, p: p["machine_label"])
    lines = [text[0], "", *parts, f"![cost as the work grows]({FIGURE})", ""]
    lines += [*target_lines(document), "", *chunk_lines(document), ""]
    lines += sweep_lines(document)
    lines += [text[1], "", text[2], ""]
    lines += floor_table(document) + [""]
    skipped = [e for e in document["sizes"] if "skipped" in e]
    for entry in skipped:
        n, width = entry["size"]
        lines.append(
            f"- n = {n:,}, width {width}: exact rows skipped, "
            f"{entry['skipped']}."
        )
    if skipped:
        lines.append("")
    lines += [*noise_lines(document), ""]
    if bookkeeping_document is not None:
        lines += bookkeeping.page_lines(bookkeeping_document)
    return "\n".join(lines).rstrip("\n") + "\n"


def text_values(settings):
    """:return: The values the page's prose names: the settings of the run
    and the floor's allowance."""
    steps = ", ".join(f"{n}: {s}" for n, s in settings["steps"].items())
    few = settings["rounds_at"].items()
    few = "; ".join(f"{count} at n, width = {size}" for size, count in few)
    values = dict(settings, few=few or "at every size", period=SAMPLE_PERIOD)
    values["steps"] = steps or settings["default_steps"]
    values.update(margin_small=FLOOR_MARGIN_SMALL, margin=FLOOR_MARGIN)
    values["small_n"] = FLOOR_SMALL_N
    values["no_memory"] = ", ".join(settings["no_memory"]) or "—"
    values["wide"] = settings["wide_steps"] or "—"
    most = settings.get("memory_rounds")  # older runs probed every round
    if most:
        values["memory_when"] = f"in the first {most} rounds"
    else:
        values["memory_when"] = "in every round"
    return values


def sweep_lines(document):
    """The tables of time per step and peak extra memory, each against n
    and against the width."""
    lines = []
    intro = ["Median ratio to an unweighted step over rounds (range).", ""]
    for title, axis, found in sweeps(document):
        header = ["weighting", *(f"{axis} = {v:,}" for v, _ in found)]
        for heading, unit, memory, note in (
            ("## Time per step", "ms / step", False, intro),
            ("### Peak extra memory", "MiB", True, []),
        ):
            labels = dict(LABELS, unweighted=f"unweighted, {unit}")
            keys = [k for k in SPECS if not memory or k != "exact_every_step"]
            cells = [[cell(e, k, memory) for _, e in found] for k in keys]
            rows = [[labels[k], *row] for k, row in zip(keys, cells)]
            table = harness.markdown_table(header, rows)
            lines += [f"{heading} against {title}", "", *note, *table, ""]
    return lines


def floor_table(document):
    """The table of the sketch rows against their floors: the default's
    excess, its interval and verdict at each size; the other two's excess."""
    header = ["n", "width", "default", "its floor", "excess"]
    header += [f"{harness.LEVEL:.0%} interval", "target"]
    header += ["`gradient_band=4`", "excess", "parameter-space", "excess"]
    rows = []
    for entry in document["sizes"]:
        n, width = entry["size"]
        summary = entry["summary"]
        floor = summary["floors"]
        ratio = {k: summary["rows"][k]["ratio"] for k in FLOOR_REFERENCE}
        low, high = harness.bootstrap_interval(summary["excess_rounds"])
        margin = floor_margin(n)
        judged = harness.judged(summary["excess_rounds"], margin)
        row = [f"{n:,}", width]
        row += [f"{ratio['default']:.3f}", f"{floor['default']:.3f}"]
        row += [f"{summary['excess']:+.3f}", f"{low:+.3f} to {high:+.3f}"]
        row += [f"{judged} (≤ {margin:+.3f})"]
        for key in ("band", "parameter"):
            row += [f"{ratio[key]:.3f}", f"{ratio[key] - floor[key]:+.3f}"]
        rows.append(row)
    return harness.markdown_table(header, rows, "r" * 11)


def run_to_run(entry, warmup):
    """:return: Per round at one size, how far the median steps of its two
    unweighted runs differ: ``|second / first - 1|``."""
    found = []
    for measured in entry["rounds"]:
        runs = [r for r in measured["runs"] if r["key"] == "unweighted"]
        first, second = (median(r["durations"][warmup:]) for r in runs)
        found.append(abs(second / first - 1))
    return found


def noise_lines(document):
    """:return: Why a verdict on the floor is not resolved: the host's
    run-to-run noise, read off the rounds' two unweighted runs, and the
    rounds' spread of the default's excess, against the allowance."""
    warmup = document["settings"]["warmup"]
    sizes = document["sizes"]
    differences = [run_to_run(e, warmup) for e in sizes]
    typical = [100 * median(d) for d in differences]
    spread = [pstdev(e["summary"]["excess_rounds"]) for e in sizes]
    values = dict(margin_small=FLOOR_MARGIN_SMALL, margin=FLOOR_MARGIN)
    values.update(typical_low=min(typical), typical_high=max(typical))
    values["most"] = 100 * max(max(d) for d in differences)
    values.update(spread_low=min(spread), spread_high=max(spread))
    return harness.paragraphs(NOISE, values)


def exact_targets(document):
    """``[(target, [(size, per-round values, most)], least)]``: the targets
    of :data:`EXACT_TARGETS`, the floor's, :data:`PER_ENTRY_FLAT`'s and
    :data:`MEMORY_TARGET`'s, at each size they judge."""
    found = {tuple(e["size"]): e["summary"] for e in document["sizes"]}
    name = {EXACT[0]: "exact every 100 steps, per step"}
    targets = []
    for key, most, less in EXACT_TARGETS:
        what = f"{name.get(key, 'one exact update alone')} ÷ unweighted step"
        judged = []
        for size, summary in found.items():
            rounds = summary["rows"].get(key, {}).get("rounds", [])
            judged.append((size, [r - less for r in rounds], most))
        targets.append((f"{what}: ≤ {most:g}", judged, None))
    what = (
        f"the default's excess over its floor: ≤ {FLOOR_MARGIN_SMALL:g} of a "
        f"step at n ≤ {FLOOR_SMALL_N:,}, {FLOOR_MARGIN:g} above"
    )
    judged = [
        (size, summary["excess_rounds"], floor_margin(size[0]))
        for size, summary in found.items()
    ]
    targets.append((what, judged, None))
    a, b, factor = PER_ENTRY_FLAT
    rows = {s[0]: m["rows"] for s, m in found.items() if s[1] == 100}
    seconds = [
        rows.get(n, {}).get(EXACT[1], {}).get("round_seconds", [])
        for n in (a, b)
    ]
    values = [(tb / b) / (ta / a) for ta, tb in zip(*seconds)]
    what = f"an exact update's seconds per entry, n = {b:,} ÷ {a:,}"
    judged = [((b, 100), values, factor)]
    targets.append((f"{what}: within {factor:g}×", judged, 1 / factor))
    n, most = MEMORY_TARGET
    entry = found.get((n, 100), {})
    values = entry.get("memory_ratios", {}).get(EXACT[0], [])
    what = f"exact run's peak extra memory ÷ unweighted's, n = {n:,}: ≤ {most}"
    targets.append((what, [((n, 100), values, most)], None))
    return targets


def target_lines(document):
    """The targets table, headed."""
    return [
        "## Targets",
        "",
        "Each target at every size it judges; the worst size's median and "
        "interval over rounds; the verdict *pass* where every size passes, "
        "*miss* where one misses.",
        "",
        *target_table(document),
    ]


def target_table(document):
    """The targets table: a row of :func:`target_rows` per target."""
    header = ["target", "sizes passed", "worst n, width", "median"]
    header += [f"{harness.LEVEL:.0%} interval", "rounds", "verdict"]
    return harness.markdown_table(header, target_rows(document), "lrrrrrl")


def severity(judged, least):
    """How bad one size's verdict is: its :data:`RANK`, then how far its
    interval reaches (its high end against its limit; with a lower limit
    too, its ends' distances from 1 on a log scale)."""
    verdict, (low, high), _, _, most = judged
    if least is None:
        return RANK[verdict], high / most
    return RANK[verdict], abs(math.log(high)) + abs(math.log(low))


def target_rows(document):
    """The targets table's rows: sizes passed, the worst size (a miss, else
    not resolved, else the highest interval's end against its limit), its
    median, interval and rounds, the verdict over every size."""
    rows = []
    for target, sizes, least in exact_targets(document):
        judged = [
            (
                harness.judged(values, most, least),
                harness.bootstrap_interval(values),
                size,
                values,
                most,
            )
            for size, values, most in sizes
            if values
        ]
        if not judged:
            rows.append([target, "—", "—", "—", "—", "0", "not measured"])
            continue
        worst = max(judged, key=lambda j: severity(j, least))
        verdict, (low, high), size, values, _ = worst
        passed = sum(j[0] == "pass" for j in judged)
        rows.append(
            [
                target,
                f"{passed} of {len(judged)}",
                "{:,}, {}".format(*size),
                f"{median(values):.3f}",
                f"{low:.3f}–{high:.3f}",
                str(len(values)),
                verdict,
            ]
        )
    return rows


def chunk_lines(document):
    """The table of one exact update's seconds by points per chunk."""
    sizes = {"{},{}".format(*e["size"]): e for e in document["sizes"]}
    entry = sizes.get(document["settings"]["chunk_size"], {"summary": {}})
    if not entry["summary"].get("chunks"):
        return []
    chunks = entry["summary"]["chunks"]
    step = entry["summary"]["rows"]["unweighted"]["seconds"]
    best = min(map(median, chunks.values()))
    header = ["points per chunk", "seconds", "range", "÷ fastest", "÷ step"]
    name = {"None": "whole batch (`None`)", "rows": "none: a pass per column"}
    rows = []
    for key, seconds in chunks.items():
        typical = median(seconds)
        rows.append(
            [
                name.get(key, key),
                f"{typical:.3f}",
                f"{min(seconds):.3f}–{max(seconds):.3f}",
                f"{typical / best:.2f}",
                f"{typical / step:.1f}",
            ]
        )
    return [
        "## Points per chunk (n = {:,}, 3×{})".format(*entry["size"]),
        "",
        "One exact update (every condition's trace): by default one "
        "reverse pass per residual column; in chunks (the fallback, "
        "`chunked_block_traces`) by `chunk_size`; median over rounds "
        "(range), each round in a rotated order.",
        "",
        *harness.markdown_table(header, rows),
    ]


def readme_block(document, page="docs/scaling.md"):
    """README.md's block linking ``page``: the figure, the ranges of the
    default's and the exact rows' ratios over the sizes, the targets."""
    rows = [e["summary"]["rows"] for e in document["sizes"]]
    span = {k: [r[k]["ratio"] for r in rows if k in r] for k in SPECS}
    span = {k: f"{min(v):.2f}–{max(v):.2f}×" for k, v in span.items() if v}
    figure = "/".join(filter(None, (os.path.dirname(page), FIGURE)))
    text = (
        "At every size measured, a step of the default "
        f"`SketchNTKWeighting()` took {span['default']} an unweighted step, "
        f"a step with an exact update (`NTKWeighting()`) {span[EXACT[1]]}, "
        f"and exact updates every 100 steps {span[EXACT[0]]} per step. The "
        f"targets, by the {harness.LEVEL:.0%} interval over rounds "
        f"([details]({page})):"
    )
    lines = [f"![cost as the work grows]({figure})", "", text, ""]
    return "\n".join(lines + target_table(document)) + "\n"


def plot(document, path):
    """The log-log figure: ratio to an unweighted step, per sweep."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2))
    axes = fig.subplots(1, 2, sharey=True)
    for axis, (title, _, found) in zip(axes, sweeps(document)):
        for key in [k for k in PLOTTED if series(found, k)]:
            style = "-o" if key == "default" else "--."
            label = LABELS[key].replace("`", "")
            axis.plot(*zip(*series(found, key)), style, label=label)
        points = [v for v, _ in found]
        floors = [e["summary"]["floors"]["default"] for _, e in found]
        axis.plot(points, floors, ":", color="grey", label="default's floor")
        axis.axhline(2.0, color="black", linewidth=0.5)
        axis.set(xscale="log", yscale="log", xlabel=title)
    axes[0].set_ylabel("time per step / unweighted step")
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)
    harness.save_figure(fig, path)
