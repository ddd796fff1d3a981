"""Spaced sketch samples on the wave tutorial: accuracy against k.

Trains the wave tutorial's sketch-NTK PINN per estimator, k and seed,
recording the relative L2 error every ``--error-every`` steps and, for seed
0, the exact weights every ``--track-every`` (a multiple of it). Writes the
results after each run; ``--combine`` joins those of several machines."""

import argparse
import itertools
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from pina_ntk import solver_ntk_weights
from pina_ntk.paper.experiments.outputs import relative_error_fn
from pina_ntk.paper.experiments.training import ntk_weights_of, train_pinn
from pina_ntk.paper.experiments.wave import WaveSettings, wave_grid
from pina_ntk.paper.problems import WaveProblem

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness

ESTIMATORS, EVERY, SEEDS = ("parameter", "predictor"), (1, 10, 50), (0, 1, 2)
SCRIPT = "estimators/spaced_samples.py"
TITLE = "Spaced sketch samples on the wave tutorial"
PAGE, FIGURE = "spaced-samples.md", "figures/spaced-samples-weights.png"
#: The summary's entries per seed (of run entries).
PER_SEED = dict(seeds="seed", errors="relative_l2", wall_times_s="wall_time_s")


def run_job(job):
    """Train one run of the study (a worker's job); return its numbers."""
    torch.set_num_threads(1)
    options = dict(estimator=job["estimator"], sample_every=job["every"])
    if job["steps"] is not None:
        options["steps"] = job["steps"]
    make = WaveSettings.quick if job["quick"] else WaveSettings
    settings = make(  # no safeguard: the study's runs, as its page says
        weightings=("sketch",), seed=job["seed"], safeguard="none", **options
    )
    error = relative_error_fn(*wave_grid(settings.grid)[2:])
    tracked = {"steps": [], "sketch": [], "exact": []}
    track = job["seed"] == 0

    def evaluate(solver):
        step = solver.trainer.global_step
        if track and (step % job["track_every"] == 0 or step == settings.steps):
            tracked["steps"].append(step)
            tracked["sketch"].append(ntk_weights_of(solver))
            tracked["exact"].append(solver_ntk_weights(solver, chunk_size=64))
        return error(solver)

    fit = dict(error_fn=evaluate, error_every=job["error_every"])
    started = time.time()
    run = train_pinn(WaveProblem(), "sketch", settings, **fit)
    history = run.error_history
    out = dict(job, steps=settings.steps, relative_l2=history["errors"][-1])
    out.update(wall_time_s=run.wall_time, process_seconds=time.time() - started)
    weights = {"steps": run.steps, "values": run.weights}
    return dict(out, error_history=history, weights=weights, tracked=tracked)


def summarise(record):
    """Set ``record``'s ``summary`` (per estimator and k: errors, wall times,
    machines) and ``weight_errors`` (median ``|log(w_sketch / w_exact)|``)."""
    cells, found, parts = {}, {}, record["parts"]
    for run in record["runs"]:
        cells.setdefault((run["estimator"], run["every"]), []).append(run)
        tracked = run["tracked"]
        gaps = [
            abs(math.log(sketch[name] / exact[name]))
            for sketch, exact in zip(tracked["sketch"], tracked["exact"])
            for name in exact
            if sketch.get(name, 0) > 0 and exact[name] > 0
        ]
        if gaps:
            key = f"{run['estimator']}, k={run['every']}"
            found[key] = statistics.median(gaps)
    record["summary"] = []
    for (estimator, every), group in sorted(cells.items()):
        group.sort(key=lambda r: r["seed"])
        row = dict(estimator=estimator, every=every)
        row.update({k: [r[v] for r in group] for k, v in PER_SEED.items()})
        machines = {parts[r.get("part", 0)]["machine_label"] for r in group}
        record["summary"].append(dict(row, machines=sorted(machines)))
    record["weight_errors"] = found


def render(record):
    """The page's generated block, from the results document alone."""
    median, rows = statistics.median, []
    base = {r["estimator"]: r for r in record["summary"] if r["every"] == 1}
    for row in record["summary"]:
        errors, ref = row["errors"], base.get(row["estimator"])
        ratio = f"{median(errors) / median(ref['errors']):.2f}×" if ref else "–"
        rows.append(
            [row["estimator"], row["every"], f"{median(errors):.3e}"]
            + [f"{min(errors):.2e}–{max(errors):.2e}"]
            + [", ".join(f"{e:.2e}" for e in errors)]
            + [f"{median(row['wall_times_s']):.0f}", ratio]
            + [", ".join(row["machines"])]
        )
    seeds = ", ".join(map(str, record["summary"][0]["seeds"]))
    header = (
        "estimator|k|median relative L2|range over seeds|seeds ({})|"
        "median wall time (s)|median vs k = 1|machine"
    ).format(seeds)
    gaps = [[k, f"{v:.3f}"] for k, v in sorted(record["weight_errors"].items())]
    parts = harness.parts_lines(record, lambda _, part: part["machine_label"])
    # blocks (text or lines) between blank lines; ``parts`` ends with one
    blocks = [
        "Each run trains the wave tutorial's sketch-NTK PINN "
        "(`WaveSettings()`: 64 Fourier features into a 3×128 tanh MLP, "
        "10,000 Adam steps, the paper's points resampled every step, "
        "`alpha=1e-3`, no safeguard) with `sample_every_n_steps=k`, one "
        "process per run and one torch thread each; wall times exclude the "
        "error evaluations and the exact weights of the figure.",
        parts[:-1],
        "## Final relative L2 error",
        "Relative L2 error on the 101×101 grid after the last step. Wall "
        "times depend on the machine and on what else ran on it: compare "
        "them within a machine only; the cost of a step for each k is "
        "measured in interleaved rounds by `benchmarks/cost/step_time.py` "
        "(`docs/step-time.md`).",
        harness.markdown_table(header.split("|"), rows, "lrrrlrrl"),
        "Median over the tracked evaluations and conditions of "
        "|log(w_sketch / w_exact)|, seed 0 (exact weights at the run's own "
        "parameters and points, every --track-every steps):",
        harness.markdown_table(["run", "median log-ratio"], gaps),
        "## Sketched against exact weights",
        f"![Sketched vs exact weights]({FIGURE})",
        "Lines: the weights the run used; dots: the exact NTK weights at the "
        "same parameters and points.",
    ]
    text = [b if isinstance(b, str) else "\n".join(b) for b in blocks]
    return "\n\n".join(b for b in text if b) + "\n"


def plot(runs, path):
    """Sketched vs exact weights along the seed-0 runs."""
    from matplotlib import figure

    tracked = [r for r in runs if r["tracked"]["steps"]]
    if not tracked:
        return
    estimators = sorted({r["estimator"] for r in tracked})
    ks = sorted({r["every"] for r in tracked})
    fig = figure.Figure(figsize=(4.2 * len(ks), 3.4 * len(estimators)))
    axes = fig.subplots(len(estimators), len(ks), sharey=True, squeeze=False)
    for run in tracked:
        ax = axes[estimators.index(run["estimator"])][ks.index(run["every"])]
        data, steps = run["tracked"], run["tracked"]["steps"]
        for i, name in enumerate(data["exact"][0]):
            sketch = [w.get(name, float("nan")) for w in data["sketch"]]
            ax.plot(steps, sketch, color=f"C{i}", lw=1.5, label=name)
            exact = [w[name] for w in data["exact"]]
            ax.plot(steps, exact, color=f"C{i}", ls="none", marker="o", ms=3)
        ax.set_yscale("log")
        ax.set_title(f"{run['estimator']}, k = {run['every']}")
        ax.set_xlabel("optimisation step")
    for row in axes:
        row[0].set_ylabel("loss weight (log)")
    handles = next(a for a in axes.flat if a.lines).get_legend_handles_labels()
    axes[0][0].legend(*handles, fontsize=7, title="line: sketch, dots: exact")
    fig.suptitle(
        "Wave tutorial, seed 0: sketched weights vs exact weights at the "
        "same parameters"
    )
    harness.save_figure(fig, path)


def write_outputs(record, output_dir, figure=True):
    """Write the JSON, the page and (with ``figure``) its figure."""
    summarise(record)
    harness.write_json(os.path.join(output_dir, "spaced-samples.json"), record)
    page = os.path.join(output_dir, PAGE)
    harness.write_page(page, SCRIPT, render(record), TITLE)
    if figure:
        plot(record["runs"], os.path.join(output_dir, FIGURE))


def main(argv=None):
    """Run the study, or combine or re-render results; the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--steps", type=int)
    add("--error-every", type=int, default=500)
    add("--track-every", type=int, default=1000, help="seed 0's exact weights")
    add("--estimators", nargs="+", choices=ESTIMATORS, default=ESTIMATORS)
    add("--every", nargs="+", type=int, default=EVERY)
    add("--seeds", nargs="+", type=int, default=SEEDS)
    docs = os.path.join(harness.ROOT, "docs")
    harness.add_run_flags(parser, docs)
    add("--combine", nargs="+", metavar="JSON", help="one page of these")
    args = parser.parse_args(argv)
    args.output_dir = harness.output_location(args, "output_dir", docs)
    if args.from_json:
        record = harness.read_json(args.from_json)
        page = os.path.join(args.output_dir, PAGE)
        harness.write_page(page, SCRIPT, render(record), TITLE)
        return 0
    if args.combine:
        record = harness.combine_documents(
            [harness.read_json(path) for path in args.combine],
            lambda r: (r["estimator"], r["every"], r["seed"]),
            harness.public_command(SCRIPT, argv),
        )
        write_outputs(record, args.output_dir)
        return 0
    if args.quick:
        args.steps = args.steps or 20
        args.error_every = min(args.error_every, 10)
        args.track_every = args.error_every
        args.every = [e for e in args.every if e <= 10] or [1]
        args.seeds = args.seeds[:1]
    started = time.perf_counter()
    extra = dict(workers=args.workers, threads=1)
    part = harness.provenance(SCRIPT, argv, args.machine_label, **extra)
    record = {"script": SCRIPT, "parts": [part], "runs": []}
    common = dict(steps=args.steps, error_every=args.error_every)
    common.update(track_every=args.track_every, quick=args.quick)
    # the slowest (k = 1, predictor) first
    order = itertools.product(args.every, reversed(args.estimators), args.seeds)
    jobs = [dict(estimator=e, every=k, seed=s, **common) for k, e, s in order]

    def keep(job, run):
        if "worker_error" in run:
            raise RuntimeError(f"{job}: {run['worker_error']}")
        record["runs"].append(dict(run, part=0))
        write_outputs(record, args.output_dir, figure=False)
        print(
            f"{run['estimator']:9s} k={run['every']:<3d} seed={run['seed']}: "
            f"{run['relative_l2']:.3e} in {run['wall_time_s']:.0f} s",
            flush=True,
        )

    harness.map_jobs(run_job, jobs, args.workers, keep)
    harness.finish(part, started)
    write_outputs(record, args.output_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
