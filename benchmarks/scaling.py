"""Cost of the NTK loss weights as the work grows: points and width.

Times a step, and its peak extra memory, with each weighting of :data:`ROWS`
against an unweighted step on PINA's stationary Poisson problem as the
residual entries n and the width grow (``docs/benchmark-method.md``); writes
``docs/scaling.md`` and ``.json`` (``--quick``: a smoke run; ``--from-json
docs/scaling.json``: the page from the results alone)."""

import argparse
import itertools
import math
import os
import sys
import tempfile
import time
from statistics import median

import configurations
import harness
from step_time import median_period_mean
from pina_ntk import ntk_traces
from pina_ntk.core.estimators import chunked_block_traces
from pina_ntk.integration.diagnostics import condition_calls
from pina_ntk.integration.ntk_weighting import EXACT_CHUNK_POINTS
from pina_ntk.integration.recording import replay_residual_fn

# fmt: off
#: Rows: key, label as a user writes it, weighting spec for
#: :func:`configurations.build_solver` (``None``: unweighted).
ROWS = (
    ("unweighted", "no weighting (PINA default)", None),
    ("default", "`SketchNTKWeighting()` (default)", ("sketch", {})),
    ("parameter", '`SketchNTKWeighting(estimator="parameter")`',
     ("sketch", {"estimator": "parameter"})),
    ("band", "`SketchNTKWeighting(gradient_band=4)`",
     ("sketch", {"gradient_band": 4.0})),
    ("exact_every_100", "`NTKWeighting(update_every_n_steps=100)`",
     ("exact", {"update_every_n_steps": 100})),
    ("exact_every_step", "`NTKWeighting()`", None),
    ("pina_ntk", "PINA `NeuralTangentKernelWeighting()`", ("pina_ntk", {})),
    ("pina_self_adaptive", "PINA `SelfAdaptiveWeighting()`",
     ("pina_self_adaptive", {})),
    ("reference_evaluation", configurations.REFERENCE + "*", None),
    ("reference_predictor",
     configurations.REFERENCE + " and one `Jᵀg` backward*", None),
)
#: The sketch rows (a sample every 10 steps) and the reference of each floor.
FLOOR_REFERENCE = {"default": "reference_predictor",
                   "band": "reference_predictor",
                   "parameter": "reference_evaluation"}
#: Settings of a full run and of ``--quick``; no memory at ``no_memory``
#: (the CPU profiler outgrew 24 GiB there); more rounds where a step is
#: short and noisy (``rounds_at``); ``chunk_points`` timed at ``chunk_size``.
FULL = dict(
    points=[100, 1000, 10000, 100000], widths=[50, 100, 300, 1000],
    width=100, n=1000, depth=3, rounds=3, warmup=2, seed=0, threads=1,
    steps={"100": 200, "1000": 100, "10000": 40, "100000": 10},
    wide_steps={"300": 60, "1000": 20}, exact_cap_s=120.0,
    exact_memory_cap_s=10.0, exact_rounds_s=60.0, memory_rounds=3,
    rounds_at={"100,100": 30, "1000,100": 18, "10000,100": 6, "1000,50": 18,
               "1000,300": 6, "1000,1000": 6}, default_steps=100,
    no_memory=["100000,100"], chunk_size="1000,100",
    chunk_points=[1, 2, 4, 8, 16, 32, 64, None],
)
QUICK = dict(
    FULL, points=[40], widths=[20], width=20, n=40, rounds=1, steps={},
    wide_steps={}, default_steps=10, exact_cap_s=5.0, exact_memory_cap_s=5.0,
    rounds_at={}, no_memory=[], chunk_size="40,20", chunk_points=[4, None],
)
#: The targets, fixed before the run that judges them, each at every n and
#: width measured: ``(row, most, less)``, the row's ratio to an unweighted
#: step less ``less`` at most ``most`` (one exact update alone: its step less
#: the step itself); one exact update's seconds per entry at the second n
#: within the factor of the first's; the exact run's peak extra memory at n at
#: most the factor times an unweighted step's; the default's excess over its
#: floor within a share of a step or seconds per step, whichever allows more.
EXACT_TARGETS = (("exact_every_step", 4.0, 1.0), ("exact_every_100", 1.1, 0.0))
PER_ENTRY_FLAT, MEMORY_TARGET = (1000, 10000, 1.5), (10000, 1.5)
FLOOR_MARGIN, FLOOR_MARGIN_S = 0.02, 2e-4
# fmt: on
LABELS = {key: label for key, label, _ in ROWS}
SPECS = {key: spec for key, _, spec in ROWS}
EXACT = ("exact_every_100", "exact_every_step")
#: Rows timed step by step (median over the measured steps).
PER_STEP = ("pina_ntk", "pina_self_adaptive", *configurations.REFERENCE_KEYS)
SAMPLE_PERIOD = 10


# ---------------------------------------------------------------- worker side
def run_order(round_index, exact):
    """A round's rows: unweighted first and halfway, the cheap rows rotated
    by the round, the exact run (both exact rows) last."""
    cheap = [k for k in SPECS if k not in ("unweighted", *EXACT)]
    shift = round_index % len(cheap)
    cheap = cheap[shift:] + cheap[:shift]
    half = len(cheap) // 2
    order = ["unweighted", *cheap[:half], "unweighted", *cheap[half:]]
    return order + (["exact_every_100"] if exact else [])


def run_size(task):
    """One round at one size (a worker job): ``{"runs": [{"key", "durations"}],
    "parameters", "memory": {key: bytes}}``, and ``"chunks"``, if asked."""
    cuda, found = task["accelerator"] == "cuda", {"runs": [], "memory": {}}
    if task["chunks"]:
        found["chunks"] = time_chunks(task)
    steps, train = task["warmup"] + task["measured"], configurations.train_row
    for key in run_order(task["round"], task["exact"]):
        timer = harness.StepTimer(synchronize=cuda)
        found["parameters"] = train(task, key, steps, timer, spec=SPECS[key])
        found["runs"].append({"key": key, "durations": timer.durations})
    skip = EXACT[1:] if task["exact_memory"] else EXACT
    for key in [k for k in SPECS if task["memory"] and k not in skip]:
        probe = harness.MemoryProbe(cuda=cuda)
        train(task, key, 2, probe, spec=SPECS[key])
        found["memory"][key] = probe.peak_bytes
    return found


def time_chunks(task):
    """``{points: seconds}`` of one exact update by each of ``chunk_points``
    (chunks' batched passes, the fallback; ``"None"``: whole-batch passes)
    and ``"rows"`` (the default's reverse pass per column), rotated."""
    solver, _ = configurations.build_solver(task, "unweighted")
    configurations.make_trainer(solver, 1, [], task["accelerator"])
    calls = condition_calls(solver)
    params = configurations.trainable_parameters(solver)
    replay = replay_residual_fn(solver, calls, [c[0] for c in calls])
    points, found = ["rows", *task["chunk_points"]], {}
    shift = task["round"] % len(points)
    for chunk in points[shift:] + points[:shift]:
        start, weights = time.perf_counter(), list(params.values())
        if chunk in ("rows", None):
            ntk_traces(solver, chunk_size=chunk and EXACT_CHUNK_POINTS)
        else:
            chunks = replay.chunks(params, chunk)
            chunked_block_traces(chunks, len(calls), weights)
        found[str(chunk)] = time.perf_counter() - start
    return found


# ---------------------------------------------------------------- parent side
def round_ratios(runs, warmup):
    """``{key: (seconds per step, ratio to unweighted)}`` of one round:
    per-step rows the median step; sketch rows the median mean of whole
    sample periods; exact every step its refresh (step 0, which the exact
    run trains), every 100 steps that plus 99 median steps, over 100."""
    durations = {r["key"]: r["durations"] for r in runs}
    base = [d for r in runs if r["key"] == "unweighted"
            for d in r["durations"][warmup:]]  # fmt: skip
    step, period = median(base), median_period_mean(base, SAMPLE_PERIOD)
    ratios = {"unweighted": (step, 1.0)}
    for key in FLOOR_REFERENCE:
        value = median_period_mean(durations[key][warmup:], SAMPLE_PERIOD)
        ratios[key] = (value, value / period)
    for key in PER_STEP:
        value = median(durations[key][warmup:])
        ratios[key] = (value, value / step)
    if "exact_every_100" in durations:
        exact = durations["exact_every_100"]
        value = (exact[0] + 99 * median(exact[warmup:])) / 100
        ratios["exact_every_step"] = (exact[0], exact[0] / step)
        ratios["exact_every_100"] = (value, value / step)
    return ratios


def summarise(rounds, settings):
    """One size's rows (medians, ranges and values over the rounds), the
    sketch rows' floors, the default's excess over its floor (each round's
    against its own reference), memory ratios and chunk times by round."""
    per_round = [round_ratios(r["runs"], settings["warmup"]) for r in rounds]
    rows = {}
    for key in SPECS:
        found = [r[key] for r in per_round if key in r]
        if found:
            seconds, ratios = zip(*found)
            rows[key] = dict(seconds=median(seconds), ratio=median(ratios))
            rows[key].update(low=min(ratios), high=max(ratios))
            rows[key].update(rounds=list(ratios), round_seconds=list(seconds))
    ref = FLOOR_REFERENCE
    floors = {k: 1 + (rows[ref[k]]["ratio"] - 1) / SAMPLE_PERIOD for k in ref}
    excesses = [r["default"][1] - 1 - (r[ref["default"]][1] - 1) / SAMPLE_PERIOD
                for r in per_round]  # fmt: skip
    excess = rows["default"]["ratio"] - floors["default"]
    memory = [r["memory"] for r in rounds if "memory" in r]
    memory = {k: [m for m in memory if k in m] for k in SPECS}  # not all: exact
    memory_ratios = {k: [m[k] / max(m["unweighted"], 1) for m in found]
                     for k, found in memory.items() if found}  # fmt: skip
    memory = {k: median(m[k] for m in memory[k]) for k in memory_ratios}
    chunks = [r["chunks"] for r in rounds if "chunks" in r]
    chunks = {k: [c[k] for c in chunks] for k in (chunks[0] if chunks else {})}
    return {"rows": rows, "floors": floors, "excess": excess,
            "excess_rounds": excesses, "memory": memory,
            "memory_ratios": memory_ratios, "chunks": chunks}  # fmt: skip


def projected_exact(size, measured, parameters):
    """One exact step's seconds at ``size`` from the nearest smaller size
    measured, as entries times parameters; ``None`` if none smaller."""
    smaller = [s for s in measured if s[0] * s[1] <= size[0] * size[1]]
    near = max(smaller, key=lambda s: s[0] * s[1], default=None)
    work = size[0] * parameters[size]
    return near and measured[near] * work / (near[0] * parameters[near])


def parameters_of(settings, size):
    """:return: The parameters of the tanh network of ``size``."""
    width, depth = size[1], settings["depth"]
    return 3 * width + (depth - 1) * (width + 1) * width + width + 1


def measure(settings, workdir, log, save):
    """Every round at every size ``(n, width)`` by growing work (as many as
    ``rounds_at`` says); the exact run skipped where projected above
    ``exact_cap_s``, in the first round only where it took over
    ``exact_rounds_s``. ``save(sizes)`` after every worker."""
    sizes = [(n, settings["width"]) for n in settings["points"]]
    sizes += [(settings["n"], w) for w in settings["widths"]]
    sizes = sorted(set(sizes), key=lambda s: s[0] * s[1] ** 2)
    parameters = {s: parameters_of(settings, s) for s in sizes}
    results = {s: {"size": list(s), "rounds": []} for s in sizes}
    cap, measured = settings["exact_cap_s"], {}
    most = max([settings["rounds"], *settings["rounds_at"].values()])
    for index, size in itertools.product(range(most), sizes):
        (n, width), entry, took = size, results[size], measured.get(size, 0)
        name = f"{n},{width}"
        if index >= settings["rounds_at"].get(name, settings["rounds"]):
            continue
        projected = projected_exact(size, measured, parameters)
        exact = projected is None or projected <= cap
        if not exact and "skipped" not in entry:
            why = f"one exact step projected at {projected:.0f} s from a "
            entry["skipped"] = why + f"smaller size (cap {cap:.0f} s)"
            log(f"n={n}, width {width}: exact rows skipped: {entry['skipped']}")
        exact = exact and took <= settings["exact_rounds_s"]
        wide = width != settings["width"]
        by = settings["wide_steps"] if wide else settings["steps"]
        steps = by.get(str(width if wide else n), settings["default_steps"])
        # A quarter of the entries on the boundary.
        task = dict(settings, problem="poisson", width=width, round=index)
        task.update(points=[n - n // 4, 0, n // 4], measured=steps)
        task.update(jobs=["scaling:run_size"], exact=exact)
        task["chunks"] = name == settings["chunk_size"]
        memory = name not in settings["no_memory"]
        task["memory"] = memory and index < settings["memory_rounds"]
        task["exact_memory"] = exact and took <= settings["exact_memory_cap_s"]
        found = harness.run_worker(task, workdir)["results"]["scaling:run_size"]
        kept = {k: found[k] for k in ("memory", "chunks") if task[k]}
        entry["rounds"].append({"runs": found["runs"], **kept})
        entry["parameters"] = found["parameters"]
        if exact:
            measured[size] = max(took, found["runs"][-1]["durations"][0])
        log(f"round {index + 1}, n={n}, width {width} done")
        save(list(results.values()))
    return list(results.values())


# ---------------------------------------------------------------- the page
#: The markers of README.md's block (a sentence and the figure).
README_MARKERS = ("<!-- scaling -->", "<!-- /scaling -->")
FIGURE = "figures/scaling.png"
#: The rows of the figure: all but unweighted (the first) and the references.
PLOTTED = [k for k in SPECS if k not in configurations.REFERENCE_KEYS][1:]
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
excess within {margin} of a step or {margin_ms} ms per step, whichever allows
more, each round's excess against its own reference."""


def sweeps(document):
    """``[(title, axis, [(value, entry)])]``: the points sweep (at the fixed
    width), then the widths sweep (at the fixed n)."""
    settings = document["settings"]
    width, n = settings["width"], settings["n"]
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
    value, unweighted = found[key], key == "unweighted"
    if memory and unweighted:
        return f"{value / 2**20:.2f}"
    if memory:
        ratios = summary["memory_ratios"][key]
        return f"{median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f})"
    if unweighted:
        return f"{value['seconds'] * 1e3:.1f}"
    return f"{value['ratio']:.2f} ({value['low']:.2f}–{value['high']:.2f})"


def render(document):
    """The page's generated block, from the results document alone."""
    settings, sizes = document["settings"], document["sizes"]
    steps = ", ".join(f"{n}: {s}" for n, s in settings["steps"].items())
    few = settings["rounds_at"].items()
    few = "; ".join(f"{count} at n, width = {size}" for size, count in few)
    values = dict(settings, few=few or "at every size", period=SAMPLE_PERIOD)
    values.update(
        steps=steps or settings["default_steps"],
        margin=FLOOR_MARGIN,
        margin_ms=FLOOR_MARGIN_S * 1e3,
    )
    values.update(no_memory=", ".join(settings["no_memory"]) or "—")
    values["wide"] = settings["wide_steps"] or "—"
    most = settings.get("memory_rounds")  # older runs probed every round
    values["memory_when"] = (
        f"in the first {most} rounds" if most else "in every round"
    )
    text = [" ".join(p.split()).format_map(values) for p in TEXT.split("\n\n")]
    parts = harness.parts_lines(document, lambda _, p: p["machine_label"])
    lines = [text[0], "", *parts, f"![cost as the work grows]({FIGURE})", ""]
    lines += [*target_lines(document), "", *chunk_lines(document), ""]
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
    lines += [text[1], "", text[2], ""]
    header = ["n", "width", "default", "its floor", "excess",
              f"{harness.LEVEL:.0%} interval", "target"]  # fmt: skip
    header += ["`gradient_band=4`", "excess", "parameter-space", "excess"]
    rows = []
    for entry in sizes:
        summary, floor = entry["summary"], entry["summary"]["floors"]
        ratio = {k: summary["rows"][k]["ratio"] for k in FLOOR_REFERENCE}
        low, high = harness.bootstrap_interval(summary["excess_rounds"])
        row = [f"{entry['size'][0]:,}", entry["size"][1]]
        row += [f"{ratio['default']:.3f}", f"{floor['default']:.3f}"]
        row += [f"{summary['excess']:+.3f}", f"{low:+.3f} to {high:+.3f}"]
        margin = floor_margin(summary)
        judged = harness.judged(summary["excess_rounds"], margin)
        row += [f"{judged} (≤ {margin:+.3f})"]
        for key in ("band", "parameter"):
            row += [f"{ratio[key]:.3f}", f"{ratio[key] - floor[key]:+.3f}"]
        rows.append(row)
    lines += harness.markdown_table(header, rows, "r" * 11) + [""]
    for entry in [e for e in sizes if "skipped" in e]:
        n, width = entry["size"]
        lines.append(f"- n = {n:,}, width {width}: exact rows skipped, "
                     f"{entry['skipped']}.")  # fmt: skip
    return "\n".join(lines).rstrip("\n") + "\n"


# fmt: off
def floor_margin(summary):
    """The default's allowance over its floor at one size, in steps."""
    step = summary["rows"]["unweighted"]["seconds"]
    return max(FLOOR_MARGIN, FLOOR_MARGIN_S / step)


def exact_targets(document):
    """``[(target, [(size, per-round values, most)], least)]``: the targets
    of :data:`EXACT_TARGETS`, the floor's, :data:`PER_ENTRY_FLAT`'s and
    :data:`MEMORY_TARGET`'s, at each size they judge."""
    found = {tuple(e["size"]): e["summary"] for e in document["sizes"]}
    name = {EXACT[0]: "exact every 100 steps, per step"}
    targets = [(f"{name.get(key, 'one exact update alone')} ÷ unweighted "
                f"step: ≤ {most:g}", [(size, [r - less for r in summary[
                    "rows"].get(key, {}).get("rounds", [])], most)
                for size, summary in found.items()], None)
               for key, most, less in EXACT_TARGETS]
    targets.append((f"the default's excess over its floor: ≤ {FLOOR_MARGIN:g}"
                    f" of a step or {FLOOR_MARGIN_S * 1e3:g} ms", [
                        (size, summary["excess_rounds"], floor_margin(summary))
                        for size, summary in found.items()], None))
    (a, b, factor), exact = PER_ENTRY_FLAT, "exact_every_step"
    rows = {s[0]: m["rows"] for s, m in found.items() if s[1] == 100}
    seconds = [rows.get(n, {}).get(exact, {}).get("round_seconds", [])
               for n in (a, b)]
    values = [(tb / b) / (ta / a) for ta, tb in zip(*seconds)]
    what = f"an exact update's seconds per entry, n = {b:,} ÷ {a:,}"
    targets.append((f"{what}: within {factor:g}×", [((b, 100), values,
                                                     factor)], 1 / factor))
    (n, most), entry = MEMORY_TARGET, found.get((MEMORY_TARGET[0], 100), {})
    values = entry.get("memory_ratios", {}).get(EXACT[0], [])
    what = f"exact run's peak extra memory ÷ unweighted's, n = {n:,}: ≤ {most}"
    return targets + [(what, [((n, 100), values, most)], None)]


def target_lines(document):
    """The targets table, headed."""
    header = ["target", "sizes passed", "worst n, width", "median",
              f"{harness.LEVEL:.0%} interval", "rounds", "verdict"]
    return ["## Targets", "", "Each target at every size it judges; the "
            "worst size's median and interval over rounds; the verdict "
            "*pass* where every size passes, *miss* where one misses.", "",
            *harness.markdown_table(header, target_rows(document), "lrrrrrl")]


def target_rows(document):
    """The targets table's rows: sizes passed, the worst size (a miss, else
    not resolved, else the highest interval's end against its limit), its
    median, interval and rounds, the verdict over every size."""
    rows, rank = [], {"**miss**": 2, "not resolved": 1, "pass": 0}
    for target, sizes, least in exact_targets(document):
        judged = [(harness.judged(v, most, least), harness.bootstrap_interval(
            v), size, v, most) for size, v, most in sizes if v]
        if not judged:
            rows.append([target, "—", "—", "—", "—", "0", "not measured"])
            continue
        verdict, (low, high), size, v, _ = max(judged, key=lambda j: (
            rank[j[0]], j[1][1] / j[4] if least is None else abs(
                math.log(j[1][1])) + abs(math.log(j[1][0]))))
        passed = sum(j[0] == "pass" for j in judged)
        rows.append([target, f"{passed} of {len(judged)}", "{:,}, {}".format(
            *size), f"{median(v):.3f}", f"{low:.3f}–{high:.3f}", str(len(v)),
            verdict])
    return rows


def chunk_lines(document):
    """The table of one exact update's seconds by points per chunk."""
    sizes = {"{},{}".format(*e["size"]): e for e in document["sizes"]}
    entry = sizes.get(document["settings"]["chunk_size"], {"summary": {}})
    if not entry["summary"].get("chunks"):
        return []
    chunks, rows = entry["summary"]["chunks"], entry["summary"]["rows"]
    best, step = min(map(median, chunks.values())), rows["unweighted"]
    header = ["points per chunk", "seconds", "range", "÷ fastest", "÷ step"]
    name = {"None": "whole batch (`None`)", "rows": "none: a pass per column"}
    rows = [[name.get(k, k), f"{median(v):.3f}",
             f"{min(v):.3f}–{max(v):.3f}", f"{median(v) / best:.2f}",
             f"{median(v) / step['seconds']:.1f}"] for k, v in chunks.items()]
    return ["## Points per chunk (n = {:,}, 3×{})".format(*entry["size"]), "",
            "One exact update (every condition's trace): by default one "
            "reverse pass per residual column; in chunks (the fallback, "
            "`chunked_block_traces`) by `chunk_size`; median over rounds "
            "(range), each round in a rotated order.", "",
            *harness.markdown_table(header, rows)]


def readme_block(document, page="docs/scaling.md"):
    """README.md's block linking ``page``: the figure, the ranges of the
    default's and the exact rows' ratios over the sizes, the targets."""
    rows = [e["summary"]["rows"] for e in document["sizes"]]
    span = {k: [r[k]["ratio"] for r in rows if k in r] for k in SPECS}
    span = {k: f"{min(v):.2f}–{max(v):.2f}×" for k, v in span.items() if v}
    figure = "/".join(filter(None, (os.path.dirname(page), FIGURE)))
    return "\n".join([
        f"![cost as the work grows]({figure})", "", "At every size measured, "
        f"a step of the default `SketchNTKWeighting()` took {span['default']}"
        f" an unweighted step, a step with an exact update (`NTKWeighting()`)"
        f" {span[EXACT[1]]}, and exact updates every 100 steps "
        f"{span[EXACT[0]]} per step. The targets, by the {harness.LEVEL:.0%} "
        f"interval over rounds ([details]({page})):", "",
        *target_lines(document)[4:]]) + "\n"
# fmt: on


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
        floors = [e["summary"]["floors"]["default"] for _, e in found]
        axis.plot([v for v, _ in found], floors, ":", color="grey",
                  label="default's floor")  # fmt: skip
        axis.axhline(2.0, color="black", linewidth=0.5)
        axis.set(xscale="log", yscale="log", xlabel=title)
    axes[0].set_ylabel("time per step / unweighted step")
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)
    harness.save_figure(fig, path)


def main(argv=None):
    """Measure (or read ``--from-json``), write the JSON, page and figure."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--device", choices=("cpu", "cuda"), default="cpu", help="default cpu")
    add("--output", help="the page, its results beside it as .json (default "
        "docs/scaling.md; docs/scaling-gpu.md with --device cuda; --quick: "
        "a temporary folder)")  # fmt: skip
    add("--readme", nargs="?", const=os.path.join(harness.ROOT, "README.md"),
        help="also write README.md's block (or FILE's)")  # fmt: skip
    harness.add_run_flags(parser)
    args = parser.parse_args(argv)
    name = "scaling-gpu.md" if args.device == "cuda" else "scaling.md"
    page = os.path.join(harness.ROOT, "docs", name)
    args.output = harness.output_location(args, "output", page)
    stem = os.path.splitext(args.output)[0]
    if args.from_json:
        document = harness.read_json(args.from_json)
    else:
        settings = dict(QUICK if args.quick else FULL, accelerator=args.device)
        started = time.perf_counter()
        part = harness.provenance("scaling.py", argv, args.machine_label,
                                  device=args.device, workers=1)  # fmt: skip
        part["threads"] = 1

        def log(message):
            print(f"[{time.perf_counter() - started:7.1f} s] {message}",
                  file=sys.stderr, flush=True)  # fmt: skip

        def save(sizes):  # a crash keeps what was measured
            found = dict(settings=settings, sizes=sizes, parts=[part])
            harness.write_json(stem + ".partial.json", found)

        with tempfile.TemporaryDirectory() as workdir:
            sizes = measure(settings, workdir, log, save)
        for entry in sizes:
            entry["summary"] = summarise(entry["rounds"], settings)
        document = {"script": "scaling.py"}
        document["parts"] = [harness.finish(part, started)]
        document.update(settings=settings, sizes=sizes)
        harness.write_json(stem + ".json", document)
        os.remove(stem + ".partial.json")
    folder = os.path.dirname(os.path.abspath(args.output))
    plot(document, os.path.join(folder, FIGURE))
    block = render(document)
    title = "Benchmark: cost of NTK loss weights as the work grows"
    harness.write_page(args.output, "scaling.py", block, title)
    if args.readme:
        page = os.path.relpath(args.output, os.path.dirname(args.readme))
        text = readme_block(document, page.replace(os.sep, "/"))
        harness.write_block(args.readme, *README_MARKERS, text)
    print(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
