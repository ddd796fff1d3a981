"""Cost of the NTK loss weights as the work grows: points and width.

Times a step, and its peak extra memory, with each weighting of
:data:`scaling_setup.ROWS` against an unweighted step on PINA's stationary
Poisson problem as the residual entries n and the width grow
(``docs/benchmark-method.md``); writes ``docs/scaling.md`` and ``.json``
(``--quick``: a smoke run; ``--from-json docs/scaling.json``: the page from
the results alone, with the default's bookkeeping of ``bookkeeping.py`` from
``docs/scaling-bookkeeping.json`` beside them). The rows, plan and targets:
``scaling_setup.py``; the page: ``scaling_page.py``."""

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

from pina_ntk import ntk_traces
from pina_ntk.core.estimators import chunked_block_traces
from pina_ntk.integration.diagnostics import condition_calls
from pina_ntk.integration.ntk_weighting import EXACT_CHUNK_POINTS
from pina_ntk.integration.recording import replay_residual_fn

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness
from benchmarks.cost import configurations
from benchmarks.cost.step_time import median_period_mean
from benchmarks.scaling import scaling_page
from benchmarks.scaling.scaling_setup import EXACT, FLOOR_REFERENCE, FULL
from benchmarks.scaling.scaling_setup import PER_STEP, QUICK, SAMPLE_PERIOD
from benchmarks.scaling.scaling_setup import SPECS

SCRIPT = "scaling/scaling.py"
#: The worker job of one size in a round.
JOB = "benchmarks.scaling.scaling:run_size"


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
    cuda = task["accelerator"] == "cuda"
    found = {"runs": [], "memory": {}}
    if task["chunks"]:
        found["chunks"] = time_chunks(task)
    steps = task["warmup"] + task["measured"]
    train = configurations.train_row
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
    points = ["rows", *task["chunk_points"]]
    found = {}
    shift = task["round"] % len(points)
    for chunk in points[shift:] + points[:shift]:
        start = time.perf_counter()
        weights = list(params.values())
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
    base = [
        d
        for r in runs
        if r["key"] == "unweighted"
        for d in r["durations"][warmup:]
    ]
    step = median(base)
    period = median_period_mean(base, SAMPLE_PERIOD)
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
    # the reference's extra work once per sample period
    ref = FLOOR_REFERENCE
    floors = {k: 1 + (rows[ref[k]]["ratio"] - 1) / SAMPLE_PERIOD for k in ref}
    excesses = [
        r["default"][1] - 1 - (r[ref["default"]][1] - 1) / SAMPLE_PERIOD
        for r in per_round
    ]
    excess = rows["default"]["ratio"] - floors["default"]
    memory = [r["memory"] for r in rounds if "memory" in r]
    memory = {k: [m for m in memory if k in m] for k in SPECS}  # not all: exact
    memory_ratios = {
        k: [m[k] / max(m["unweighted"], 1) for m in found]
        for k, found in memory.items()
        if found
    }
    memory = {k: median(m[k] for m in memory[k]) for k in memory_ratios}
    chunks = [r["chunks"] for r in rounds if "chunks" in r]
    chunks = {k: [c[k] for c in chunks] for k in (chunks[0] if chunks else {})}
    return {
        "rows": rows,
        "floors": floors,
        "excess": excess,
        "excess_rounds": excesses,
        "memory": memory,
        "memory_ratios": memory_ratios,
        "chunks": chunks,
    }


def projected_exact(size, measured, parameters):
    """One exact step's seconds at ``size`` from the nearest smaller size
    measured, as entries times parameters; ``None`` if none smaller."""
    smaller = [s for s in measured if s[0] * s[1] <= size[0] * size[1]]
    near = max(smaller, key=lambda s: s[0] * s[1], default=None)
    work = size[0] * parameters[size]
    return near and measured[near] * work / (near[0] * parameters[near])


def parameters_of(settings, size):
    """:return: The parameters of the tanh network of ``size``."""
    width = size[1]
    depth = settings["depth"]
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
    cap = settings["exact_cap_s"]
    measured = {}
    most = max([settings["rounds"], *settings["rounds_at"].values()])
    for index, size in itertools.product(range(most), sizes):
        n, width = size
        entry = results[size]
        took = measured.get(size, 0)
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
        task.update(jobs=[JOB], exact=exact)
        task["chunks"] = name == settings["chunk_size"]
        memory = name not in settings["no_memory"]
        task["memory"] = memory and index < settings["memory_rounds"]
        task["exact_memory"] = exact and took <= settings["exact_memory_cap_s"]
        found = harness.run_worker(task, workdir)["results"][JOB]
        kept = {k: found[k] for k in ("memory", "chunks") if task[k]}
        entry["rounds"].append({"runs": found["runs"], **kept})
        entry["parameters"] = found["parameters"]
        if exact:
            measured[size] = max(took, found["runs"][-1]["durations"][0])
        log(f"round {index + 1}, n={n}, width {width} done")
        save(list(results.values()))
    return list(results.values())


def run(settings, argv, args, stem):
    """Measure every size, keeping what was measured in
    ``stem.partial.json`` while it runs; write ``stem.json``; return the
    results document."""
    started = time.perf_counter()
    part = harness.provenance(
        SCRIPT, argv, args.machine_label, device=args.device, workers=1
    )
    part["threads"] = 1

    def log(message):
        elapsed = time.perf_counter() - started
        print(f"[{elapsed:7.1f} s] {message}", file=sys.stderr, flush=True)

    def save(sizes):  # a crash keeps what was measured
        found = dict(settings=settings, sizes=sizes, parts=[part])
        harness.write_json(stem + ".partial.json", found)

    with tempfile.TemporaryDirectory() as workdir:
        sizes = measure(settings, workdir, log, save)
    for entry in sizes:
        entry["summary"] = summarise(entry["rounds"], settings)
    document = {"script": SCRIPT}
    document["parts"] = [harness.finish(part, started)]
    document.update(settings=settings, sizes=sizes)
    harness.write_json(stem + ".json", document)
    os.remove(stem + ".partial.json")
    return document


def main(argv=None):
    """Measure (or read ``--from-json``), write the JSON, page and figure."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--device", choices=("cpu", "cuda"), default="cpu", help="default cpu")
    add(
        "--output",
        help="the page, its results beside it as .json (default "
        "docs/scaling.md; docs/scaling-gpu.md with --device cuda; --quick: "
        "a temporary folder)",
    )
    add(
        "--readme",
        nargs="?",
        const=os.path.join(harness.ROOT, "README.md"),
        help="also write README.md's block (or FILE's)",
    )
    harness.add_run_flags(parser)
    args = parser.parse_args(argv)
    name = "scaling-gpu.md" if args.device == "cuda" else "scaling.md"
    page = os.path.join(harness.ROOT, "docs", name)
    args.output = harness.output_location(args, "output", page)
    stem = os.path.splitext(args.output)[0]
    if args.from_json:
        results = args.from_json
        document = harness.read_json(results)
    else:
        results = stem + ".json"
        settings = dict(QUICK if args.quick else FULL, accelerator=args.device)
        document = run(settings, argv, args, stem)
    bookkeeping = scaling_page.read_bookkeeping(results)
    folder = os.path.dirname(os.path.abspath(args.output))
    scaling_page.plot(document, os.path.join(folder, scaling_page.FIGURE))
    block = scaling_page.render(document, bookkeeping)
    title = "Benchmark: cost of NTK loss weights as the work grows"
    harness.write_page(args.output, SCRIPT, block, title)
    if args.readme:
        page = os.path.relpath(args.output, os.path.dirname(args.readme))
        text = scaling_page.readme_block(document, page.replace(os.sep, "/"))
        harness.write_block(args.readme, *scaling_page.README_MARKERS, text)
    print(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
