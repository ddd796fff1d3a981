"""Cost of the NTK loss weights as the work grows: points and width.

Times a PINA training step, and measures its peak extra memory, with each
weighting of :data:`ROWS` on PINA's ``Poisson2DSquareProblem`` (stationary:
the default's gradient band acts), relative to an unweighted step, as the
residual entries n grow at a fixed 3x100 network and as the width grows at
a fixed n; interleaved rounds of fresh single-threaded workers, as the
other cost studies (``docs/benchmark-method.md``). Checks that the
default's amortised ratio is within :data:`FLOOR_MARGIN` of its floor
``1 + (reference - 1) / k`` at every size.

    python benchmarks/scaling.py --quick --output /tmp/scaling.md
    python benchmarks/scaling.py                  # docs/scaling.md, .json
    python benchmarks/scaling.py --from-json docs/scaling.json
"""

import argparse
import gc
import math
import os
import statistics
import sys
import tempfile
import time

import configurations
import harness
from step_time import median_period_mean

# fmt: off
#: Rows: key, label as a user writes it, weighting spec for
#: :func:`configurations.build_solver` (``None``: unweighted).
ROWS = (
    ("unweighted", "no weighting (PINA default)", None),
    ("default", "`SketchNTKWeighting()` (default)", ("sketch", {})),
    ("parameter", '`SketchNTKWeighting(estimator="parameter")`',
     ("sketch", {"estimator": "parameter"})),
    ("published", "`SketchNTKWeighting(gradient_band=None)`",
     ("sketch", {"gradient_band": None})),
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
# fmt: on
LABELS = {key: label for key, label, _ in ROWS}
SPECS = {key: spec for key, _, spec in ROWS}
#: The sketch rows (a sample every :data:`SAMPLE_PERIOD` steps, amortised)
#: and the reference row that is each one's floor.
FLOOR_REFERENCE = {
    "default": "reference_predictor",
    "published": "reference_predictor",
    "parameter": "reference_evaluation",
}
SAMPLE_PERIOD = 10
EXACT_PERIOD = 100
#: The target: the default's amortised ratio at most its floor plus this.
FLOOR_MARGIN = 0.02
#: Rows timed step by step (median over the measured steps).
PER_STEP = ("pina_ntk", "pina_self_adaptive", *configurations.REFERENCE_KEYS)
#: Settings of a full run and of ``--quick``: the sizes, measured steps by
#: size (a multiple of the sample period), the time cap of one exact step
#: (larger ones are skipped), and the cap below which its memory is taken.
FULL = dict(points=[100, 1000, 10000, 100000], widths=[50, 100, 300, 1000])
FULL.update(width=100, n=1000, depth=3, rounds=2, warmup=2, seed=0, threads=1)
FULL.update(steps={"100": 200, "1000": 100, "10000": 40, "100000": 10})
FULL.update(wide_steps={"300": 60, "1000": 20}, exact_cap_s=120.0)
FULL.update(exact_memory_cap_s=10.0, exact_rounds_s=10.0)
FULL.update(few_rounds={"100000,100": 1}, default_steps=100)
#: Sizes without memory runs: the CPU profiler's record of every allocation
#: of the warm start outgrew 24 GiB at n = 100,000.
FULL["no_memory"] = ["100000,100"]
QUICK = dict(FULL, points=[40], widths=[20], width=20, n=40)
QUICK.update(rounds=1, steps={}, wide_steps={}, default_steps=10)
QUICK.update(exact_cap_s=5.0, exact_memory_cap_s=5.0, few_rounds={})
QUICK["no_memory"] = []


# ---------------------------------------------------------------- worker side
def task_of(settings, size):
    """The :func:`configurations.build_solver` task of a size ``(n,
    width)``: a quarter of the entries on the boundary."""
    n, width = size
    points = [n - n // 4, 0, n // 4]
    return dict(settings, problem="poisson", width=width, points=points)


def steps_of(settings, size):
    """:return: The measured steps of each run at a size. :rtype: int"""
    n, width = size
    if width != settings["width"]:
        return settings["wide_steps"].get(str(width), settings["default_steps"])
    return settings["steps"].get(str(n), settings["default_steps"])


def run_order(round_index, exact):
    """A round's rows: unweighted first and halfway, the cheap rows rotated
    by the round, the exact run (both exact rows) last."""
    cheap = [k for k in SPECS if k not in ("unweighted", "exact_every_step")]
    cheap.remove("exact_every_100")
    shift = round_index % len(cheap)
    cheap = cheap[shift:] + cheap[:shift]
    half = len(cheap) // 2
    order = ["unweighted", *cheap[:half], "unweighted", *cheap[half:]]
    return order + (["exact_every_100"] if exact else [])


def run_size(task):
    """One round at one size (a worker job): ``{"runs": [{"key",
    "durations"}], "parameters", "memory": {key: bytes} (with
    ``task["memory"]``)}``. The exact run trains its refresh at step 0 (an
    exact step) and the steps between refreshes."""
    runs, memory, parameters = [], {}, None
    cuda = task["accelerator"] == "cuda"
    steps = task["warmup"] + task["measured"]
    for key in run_order(task["round"], task["exact"]):
        solver, callbacks = configurations.build_solver(
            task, key, spec=SPECS[key]
        )
        parameters = configurations.parameter_count(solver)
        timer = harness.StepTimer(synchronize=cuda)
        configurations.train(task, solver, steps, [timer] + callbacks)
        runs.append({"key": key, "durations": timer.durations})
        del solver, callbacks
        gc.collect()
    if task["memory"]:
        keys = [k for k in SPECS if k != "exact_every_step"]
        if not task["exact_memory"]:
            keys.remove("exact_every_100")
        for key in keys:
            solver, callbacks = configurations.build_solver(
                task, key, spec=SPECS[key]
            )
            probe = harness.MemoryProbe(cuda=cuda)
            configurations.train(task, solver, 2, [probe] + callbacks)
            memory[key] = probe.peak_bytes
            del solver, callbacks
            gc.collect()
    return {"runs": runs, "parameters": parameters, "memory": memory}


# ---------------------------------------------------------------- parent side
def round_ratios(runs, warmup):
    """
    ``{key: (seconds per step, ratio to unweighted)}`` of one round:
    per-step rows the median step against the median of both unweighted
    runs' steps; sketch rows the median over whole sample periods of the
    period's mean step against the same statistic of the unweighted steps;
    exact every step its refresh step (step 0); exact every 100 steps that
    step plus 99 times the median step between refreshes, over 100.
    """
    durations = {r["key"]: r["durations"] for r in runs}
    base = [d for r in runs if r["key"] == "unweighted"
            for d in r["durations"][warmup:]]  # fmt: skip
    median = statistics.median(base)
    base_period = median_period_mean(base, SAMPLE_PERIOD)
    ratios = {"unweighted": (median, 1.0)}
    for key in FLOOR_REFERENCE:
        value = median_period_mean(durations[key][warmup:], SAMPLE_PERIOD)
        ratios[key] = (value, value / base_period)
    for key in PER_STEP:
        value = statistics.median(durations[key][warmup:])
        ratios[key] = (value, value / median)
    if "exact_every_100" in durations:
        exact = durations["exact_every_100"]
        between = statistics.median(exact[warmup:])
        ratios["exact_every_step"] = (exact[0], exact[0] / median)
        value = (exact[0] + (EXACT_PERIOD - 1) * between) / EXACT_PERIOD
        ratios["exact_every_100"] = (value, value / median)
    return ratios


def summarise(rounds, settings):
    """
    Per row of one size: median seconds, median ratio and its range over
    the rounds; the floors and the target check of the sketch rows.

    :return: ``{"rows": {key: {...}}, "floors": {key: float}, "check"}``.
    """
    per_round = [round_ratios(r["runs"], settings["warmup"]) for r in rounds]
    rows = {}
    for key in SPECS:
        found = [r[key] for r in per_round if key in r]
        if not found:
            continue
        ratios = [ratio for _, ratio in found]
        rows[key] = {
            "seconds": statistics.median(s for s, _ in found),
            "ratio": statistics.median(ratios),
            "low": min(ratios),
            "high": max(ratios),
        }
    floors = {
        key: 1 + (rows[reference]["ratio"] - 1) / SAMPLE_PERIOD
        for key, reference in FLOOR_REFERENCE.items()
    }
    excess = rows["default"]["ratio"] - floors["default"]
    return {"rows": rows, "floors": floors, "excess": excess}


def sizes_of(settings):
    """The sizes ``(n, width)``: the points sweep, then the widths sweep
    (the shared size once), each in order of growing work."""
    sizes = [(n, settings["width"]) for n in settings["points"]]
    sizes += [(settings["n"], w) for w in settings["widths"]]
    return sorted(set(sizes), key=lambda s: s[0] * s[1] ** 2)


def projected_exact(size, measured, parameters):
    """
    One exact step's seconds at ``size`` from the nearest smaller size
    measured: one backward pass per entry, each through the whole batch's
    graph, so in proportion to entries squared times parameters (measured:
    an exact step grows faster than linearly in n); ``None`` when nothing
    smaller was measured.
    """
    smaller = [s for s in measured if s[0] * s[1] <= size[0] * size[1]]
    if not smaller:
        return None
    near = max(smaller, key=lambda s: s[0] * s[1])
    work = size[0] ** 2 * parameters[size]
    return measured[near] * work / (near[0] ** 2 * parameters[near])


def parameters_of(settings, size):
    """:return: The parameters of the tanh network of ``size``."""
    width, depth = size[1], settings["depth"]
    return 3 * width + (depth - 1) * (width + 1) * width + width + 1


def measure(settings, workdir, log, save=lambda results: None):
    """
    Every round at every size, smallest first (the sizes of ``few_rounds``
    in fewer rounds). The exact run is skipped where one exact step is
    projected above ``exact_cap_s`` (the reason kept and printed), and runs
    in the first round only where its step took over ``exact_rounds_s``.
    ``save(sizes)`` gets the results so far after every worker.
    """
    sizes = sizes_of(settings)
    parameters = {s: parameters_of(settings, s) for s in sizes}
    results = {str(s): {"size": list(s), "rounds": []} for s in sizes}
    measured = {}
    for index in range(settings["rounds"]):
        for size in sizes:
            entry = results[str(size)]
            rounds = settings["few_rounds"].get(
                f"{size[0]},{size[1]}", settings["rounds"]
            )
            if index >= rounds:
                continue
            projected = projected_exact(size, measured, parameters)
            exact = projected is None or projected <= settings["exact_cap_s"]
            if not exact and "skipped" not in entry:
                entry["skipped"] = (
                    f"one exact step projected at {projected:.0f} s from a "
                    f"smaller size (cap {settings['exact_cap_s']:.0f} s)"
                )
                log(f"n={size[0]}, width {size[1]}: exact rows skipped: "
                    f"{entry['skipped']}")  # fmt: skip
            if measured.get(size, 0) > settings["exact_rounds_s"]:
                exact = False  # measured in the first round
            last = index == rounds - 1
            task = dict(task_of(settings, size), round=index, exact=exact)
            name = f"{size[0]},{size[1]}"
            memory = last and name not in settings["no_memory"]
            task.update(jobs=["scaling:run_size"], memory=memory)
            task["measured"] = steps_of(settings, size)
            task["exact_memory"] = exact and measured.get(size, 0) <= (
                settings["exact_memory_cap_s"]
            )
            found = harness.run_worker(task, workdir)["results"]
            found = found["scaling:run_size"]
            entry["rounds"].append({"runs": found["runs"]})
            entry["parameters"] = found["parameters"]
            if memory:
                entry["memory"] = found["memory"]
            if exact:
                exact_run = found["runs"][-1]["durations"]
                measured[size] = max(measured.get(size, 0), exact_run[0])
            log(f"round {index + 1}, n={size[0]}, width {size[1]} done")
            save(list(results.values()))
    return list(results.values())


# ---------------------------------------------------------------- the page
#: The markers of README.md's block (a sentence and the figure).
README_MARKERS = ("<!-- scaling -->", "<!-- /scaling -->")
FIGURE = "figures/scaling.png"
#: The rows of the figure.
PLOTTED = ("default", "parameter", "published", "exact_every_100")
PLOTTED += ("exact_every_step", "pina_ntk", "pina_self_adaptive")


def sweeps(document):
    """``[(title, axis, [(value, entry)])]``: the points sweep (entries at
    the fixed width) and the widths sweep (at the fixed n)."""
    settings, entries = document["settings"], document["sizes"]
    by_size = {tuple(e["size"]): e for e in entries}
    points = [(n, by_size[(n, settings["width"])]) for n in settings["points"]]
    widths = [(w, by_size[(settings["n"], w)]) for w in settings["widths"]]
    return [
        (f"residual entries n (3×{settings['width']})", "n", points),
        (f"width (3 hidden layers, n = {settings['n']:,})", "width", widths),
    ]


def cell(row):
    """``ratio (low–high)`` of a summary row, ``—`` when absent."""
    if row is None:
        return "skipped"
    return f"{row['ratio']:.2f} ({row['low']:.2f}–{row['high']:.2f})"


def crossing(values, entries, key="exact_every_100", level=2.0):
    """Where ``key``'s ratio first reaches ``level``: ``(below, above,
    interpolated)`` in log-log between the neighbours, ``None`` if never."""
    found = [
        (v, e["summary"]["rows"].get(key)) for v, e in zip(values, entries)
    ]
    found = [(v, row["ratio"]) for v, row in found if row is not None]
    for (v0, r0), (v1, r1) in zip(found, found[1:]):
        if r0 < level <= r1:
            share = (math.log(level) - math.log(r0)) / (
                math.log(r1) - math.log(r0)
            )
            at = math.exp(math.log(v0) + share * (math.log(v1) - math.log(v0)))
            return v0, v1, at
    return None


def crossing_sentence(document):
    """The sentence on where exact every 100 steps crosses 2×."""
    _, _, points = sweeps(document)[0]
    values, entries = zip(*points)
    found = crossing(values, entries)
    width = document["settings"]["width"]
    if found is None:
        return (
            f"Exact weights every 100 steps (3×{width}) stay below 2× an "
            "unweighted step at every n measured."
        )
    below, above, at = found
    return (
        f"Exact weights every 100 steps (3×{width}) cross 2× an unweighted "
        f"step between n = {below:,} and n = {above:,} residual entries "
        f"(about {at:,.0f} by log-log interpolation)."
    )


def render(document, figure_link=FIGURE):
    """The page's generated block, from the results document alone."""
    settings = document["settings"]
    steps = ", ".join(f"{n}: {s}" for n, s in settings["steps"].items())
    few = (
        "; ".join(
            f"{count} at n, width = {size}"
            for size, count in settings["few_rounds"].items()
        )
        or "at every size"
    )
    lines = [
        "PINA's `Poisson2DSquareProblem` (stationary, so the default's "
        "gradient band acts), fixed random points, a quarter of them on the "
        "boundary, one full batch per step (no mini-batches at any size), "
        "PINA's `FeedForward` tanh networks with "
        f"{settings['depth']} hidden layers, Adam, seed {settings['seed']}. "
        f"{settings['rounds']} interleaved round(s) per size ({few}), one "
        f"fresh worker each; {settings['warmup']} warm-up steps, then measured "
        f"steps by n ({steps or settings['default_steps']}; "
        f"{settings['default_steps']} otherwise, by width "
        f"{settings['wide_steps'] or '—'}). Sketch rows sample every "
        f"{SAMPLE_PERIOD} steps (amortised over whole periods). "
        "`NTKWeighting()` is its refresh step (step 0); every 100 steps is "
        "that step plus 99 times the median step between refreshes, over "
        "100. Exact steps "
        f"projected above {settings['exact_cap_s']:.0f} s are skipped, "
        f"those over {settings['exact_rounds_s']:.0f} s run in the first "
        "round only; "
        "memory: two steps per row in the last round (exact only where one "
        f"exact step took at most {settings['exact_memory_cap_s']:.0f} s; "
        f"none at n, width = {', '.join(settings['no_memory']) or '—'}: the "
        "CPU profiler's record of every allocation outgrew the machine's "
        "memory there). "
        "Rows in italics: the [reference rows]"
        "(benchmark-method.md#reference-rows).",
        "",
        *harness.parts_lines(document, lambda _, p: p["machine_label"]),
        f"![cost as the work grows]({figure_link})",
        "",
        crossing_sentence(document),
        "",
    ]
    for title, axis, found in sweeps(document):
        values = [f"{axis} = {v:,}" for v, _ in found]
        lines += [f"## Time per step against {title}", ""]
        lines += ["Median ratio to an unweighted step over rounds (range).", ""]
        rows = [["unweighted, ms / step"] + [
            f"{e['summary']['rows']['unweighted']['seconds'] * 1e3:.1f}"
            for _, e in found]]  # fmt: skip
        for key in SPECS:
            if key != "unweighted":
                rows.append([LABELS[key]] + [
                    cell(e["summary"]["rows"].get(key)) for _, e in found
                ])  # fmt: skip
        header = ["weighting", *values]
        lines += harness.markdown_table(header, "l" + "r" * len(found), rows)
        lines += ["", f"### Peak extra memory against {title}", ""]
        rows = [
            ["unweighted, MiB"]
            + [mebibytes(e.get("memory", {})) for _, e in found]
        ]
        for key in SPECS:
            if key not in ("unweighted", "exact_every_step"):
                rows.append(
                    [LABELS[key]]
                    + [memory_cell(e.get("memory", {}), key) for _, e in found]
                )
        lines += harness.markdown_table(header, "l" + "r" * len(found), rows)
        lines.append("")
    lines += floor_section(document)
    for entry in document["sizes"]:
        if "skipped" in entry:
            n, width = entry["size"]
            lines.append(f"- n = {n:,}, width {width}: exact rows skipped, "
                         f"{entry['skipped']}.")  # fmt: skip
    return "\n".join(lines).rstrip("\n") + "\n"


def mebibytes(memory):
    """Unweighted training's peak extra memory in MiB."""
    if "unweighted" not in memory:
        return "not measured"
    return f"{memory['unweighted'] / 2**20:.2f}"


def memory_cell(memory, key):
    """Peak extra memory of ``key`` over unweighted training's."""
    if key not in memory:
        return "not measured"
    return f"{memory[key] / max(memory['unweighted'], 1):.2f}×"


def floor_section(document):
    """The floors table: each sketch row against ``1 + (reference - 1) /
    k`` at every size, and the default's target."""
    lines = [
        "## The sketches against their floors",
        "",
        f"Floor: `1 + (reference − 1) / {SAMPLE_PERIOD}`, the reference "
        "row's unavoidable work once per sample period (predictor rows: the "
        "reference with the `Jᵀg` backward; parameter-space: with the "
        f"evaluation only). Target: the default within {FLOOR_MARGIN} of its "
        "floor.",
        "",
    ]
    header = ["n", "width", "default", "its floor", "excess", "target"]
    header += ["`gradient_band=None`", "excess", "parameter-space", "excess"]
    rows = []
    for entry in document["sizes"]:
        summary = entry["summary"]
        ratio = {k: summary["rows"][k]["ratio"] for k in FLOOR_REFERENCE}
        floor = summary["floors"]
        verdict = "pass" if summary["excess"] <= FLOOR_MARGIN else "**miss**"
        rows.append([
            f"{entry['size'][0]:,}", entry["size"][1],
            f"{ratio['default']:.3f}", f"{floor['default']:.3f}",
            f"{summary['excess']:+.3f}", verdict,
            f"{ratio['published']:.3f}",
            f"{ratio['published'] - floor['published']:+.3f}",
            f"{ratio['parameter']:.3f}",
            f"{ratio['parameter'] - floor['parameter']:+.3f}",
        ])  # fmt: skip
    lines += harness.markdown_table(header, "rr" + "r" * 8, rows)
    return lines + [""]


def exact_growth(document):
    """``[(n, seconds)]`` of one exact step at each n of the points sweep
    where it was measured."""
    _, _, points = sweeps(document)[0]
    rows = [
        (n, e["summary"]["rows"].get("exact_every_step")) for n, e in points
    ]
    return [(n, row["seconds"]) for n, row in rows if row is not None]


def readme_block(document, page="docs/scaling.md"):
    """README.md's block: the figure, the crossing, the growth of an exact
    step, the range of the default's ratio and its worst excess over its
    floor, linking ``page``; every number from ``document``."""
    sizes = document["sizes"]
    worst = max(sizes, key=lambda e: e["summary"]["excess"])
    n, width = worst["size"]
    ratios = [e["summary"]["rows"]["default"]["ratio"] for e in sizes]
    largest = max(sizes, key=lambda e: e["size"][0])["size"][0]
    widest = max(e["size"][1] for e in sizes)
    growth = exact_growth(document)
    exact = ""
    if len(growth) > 1:
        (n0, t0), (n1, t1) = growth[0], growth[-1]
        exact = (
            f"One exact step took {t0:.2f} s at n = {n0:,} and {t1:.1f} s at "
            f"n = {n1:,} ({t1 / t0:.0f}× for {n1 / n0:.0f}× the entries). "
        )
    figure = "/".join(filter(None, (os.path.dirname(page), FIGURE)))
    return (
        f"![cost as the work grows]({figure})\n\n"
        f"{crossing_sentence(document)} {exact}The default "
        f"`SketchNTKWeighting()` took {min(ratios):.2f}–{max(ratios):.2f}× "
        f"an unweighted step at every size measured (n up to {largest:,}, "
        f"width up to {widest:,}); its largest excess over its floor is "
        f"{worst['summary']['excess']:+.3f} (n = {n:,}, width {width}). "
        f"Details: [{page}]({page}).\n"
    )


def plot(document, path):
    """The log-log figure: ratio to an unweighted step, per sweep."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for axis, (title, _, found) in zip(axes, sweeps(document)):
        values = [v for v, _ in found]
        for key in PLOTTED:
            shown = [(v, e["summary"]["rows"].get(key)) for v, e in found]
            shown = [(v, r["ratio"]) for v, r in shown if r is not None]
            if shown:
                style = "-o" if key == "default" else "--."
                xs, ys = zip(*shown)
                axis.plot(xs, ys, style, label=LABELS[key].replace("`", ""))
        floors = [e["summary"]["floors"]["default"] for _, e in found]
        axis.plot(values, floors, ":", color="grey", label="default's floor")
        axis.axhline(2.0, color="black", linewidth=0.5)
        axis.set(xscale="log", yscale="log", xlabel=title)
    axes[0].set_ylabel("time per step / unweighted step")
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    """Measure (or read ``--from-json``), write the JSON, page and figure."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where to train (default cpu)",
    )
    parser.add_argument(
        "--output",
        help="the page; its results go to the same name with .json "
        "(default docs/scaling.md, with --device cuda docs/scaling-gpu.md)",
    )
    parser.add_argument("--rounds", type=int, help="interleaved rounds")
    parser.add_argument(
        "--readme",
        nargs="?",
        const=os.path.join(harness.ROOT, "README.md"),
        help="also write README.md's figure and sentence (or FILE's)",
    )
    harness.add_run_flags(parser)
    args = parser.parse_args(argv)
    if args.output is None:
        name = "scaling-gpu.md" if args.device == "cuda" else "scaling.md"
        args.output = os.path.join(harness.ROOT, "docs", name)
    if args.from_json:
        document = harness.read_json(args.from_json)
    else:
        settings = dict(QUICK if args.quick else FULL)
        if args.rounds is not None:
            if args.rounds < 1:
                parser.error("--rounds must be >= 1.")
            settings["rounds"] = args.rounds
        started = time.perf_counter()
        part = harness.provenance(
            "scaling.py",
            argv,
            args.machine_label,
            device=args.device,
            workers=1,
        )
        part["threads"] = 1

        def log(message):
            elapsed = time.perf_counter() - started
            print(f"[{elapsed:7.1f} s] {message}", file=sys.stderr, flush=True)

        settings["accelerator"] = args.device
        with tempfile.TemporaryDirectory() as workdir:
            partial = os.path.splitext(args.output)[0] + ".partial.json"

            def save(sizes):  # a crash keeps what was measured
                found = dict(settings=settings, sizes=sizes, parts=[part])
                harness.write_json(partial, found)

            sizes = measure(settings, workdir, log, save)
        for entry in sizes:
            entry["summary"] = summarise(entry["rounds"], settings)
        document = {
            "script": "scaling.py",
            "parts": [harness.finish(part, started)],
            "settings": settings,
            "sizes": sizes,
        }
        harness.write_json(os.path.splitext(args.output)[0] + ".json", document)
        os.remove(partial)
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
