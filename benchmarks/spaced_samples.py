"""Spaced sketch samples on the wave tutorial: accuracy against k.

Trains the wave tutorial's sketch-NTK PINN (``WaveSettings()``) with
``SketchNTKWeighting(sample_every_n_steps=k)`` for each estimator, k and
seed, ``--workers`` processes at once, one torch thread each, recording the
relative L2 error every ``--error-every`` steps and, for seed 0, the exact
NTK weights beside the sketched ones every ``--track-every`` steps (both
outside the wall time). Writes ``spaced-samples.json`` (after each run),
the page rendered from it and ``figures/spaced-samples-weights.png``.

    python benchmarks/spaced_samples.py --workers 2            # full study
    python benchmarks/spaced_samples.py --quick --output-dir /tmp/s  # smoke
    # parts run on two machines, then one page with the long runs
    python benchmarks/spaced_samples.py --every 1 --output-dir a
    python benchmarks/spaced_samples.py --every 10 50 --output-dir b
    python benchmarks/spaced_samples.py --combine a/spaced-samples.json \\
        b/spaced-samples.json --long-runs docs/long-runs/*.json
    python benchmarks/spaced_samples.py --from-json docs/spaced-samples.json
"""

import argparse
import math
import os
import statistics
import sys
import time

import torch

import harness
from pina_ntk import solver_ntk_weights
from pina_ntk.paper.experiments.outputs import relative_error_fn
from pina_ntk.paper.experiments.training import ntk_weights_of, train_pinn
from pina_ntk.paper.experiments.wave import WaveSettings, wave_grid
from pina_ntk.paper.problems import WaveProblem

ESTIMATORS = ("parameter", "predictor")
EVERY = (1, 10, 50)
SEEDS = (0, 1, 2)
#: Seed whose runs also record the exact weights along their trajectory.
TRACKED_SEED = 0
SCRIPT = "spaced_samples.py"
TITLE = "Spaced sketch samples on the wave tutorial"


def run_job(job):
    """Train one sketch-NTK PINN of the study (a worker's job); return its
    numbers."""
    torch.set_num_threads(1)
    options = dict(
        weightings=("sketch",),
        estimator=job["estimator"],
        sample_every=job["every"],
        seed=job["seed"],
        safeguard="none",  # the study's runs, as its page says
    )
    if job["steps"] is not None:
        options["steps"] = job["steps"]
    make = WaveSettings.quick if job["quick"] else WaveSettings
    settings = make(**options)
    _, _, points, exact = wave_grid(settings.grid)
    error = relative_error_fn(points, exact)
    tracked = {"steps": [], "sketch": [], "exact": []}

    def evaluate(solver):
        step = solver.trainer.global_step
        if job["seed"] == TRACKED_SEED and (
            step % job["track_every"] == 0 or step == settings.steps
        ):
            tracked["steps"].append(step)
            tracked["sketch"].append(ntk_weights_of(solver))
            tracked["exact"].append(solver_ntk_weights(solver, chunk_size=64))
        return error(solver)

    started = time.time()
    run = train_pinn(
        WaveProblem(),
        "sketch",
        settings,
        error_fn=evaluate,
        error_every=job["error_every"],
    )
    return {
        **job,
        "steps": settings.steps,
        "relative_l2": run.error_history["errors"][-1],
        "wall_time_s": run.wall_time,
        "process_seconds": time.time() - started,
        "error_history": run.error_history,
        "weights": {"steps": run.steps, "values": run.weights},
        "tracked": tracked,
    }


def summarise(runs, parts):
    """Per (estimator, k): the seeds' errors and wall times, the machines."""
    cells = {}
    for run in runs:
        cells.setdefault((run["estimator"], run["every"]), []).append(run)
    rows = []
    for (estimator, every), group in sorted(cells.items()):
        group.sort(key=lambda r: r["seed"])
        rows.append(
            dict(
                estimator=estimator,
                every=every,
                seeds=[r["seed"] for r in group],
                errors=[r["relative_l2"] for r in group],
                wall_times_s=[r["wall_time_s"] for r in group],
                machines=sorted(
                    {parts[r.get("part", 0)]["machine_label"] for r in group}
                ),
            )
        )
    return rows


def weight_errors(runs):
    """Per (estimator, k), seed 0: the median over the tracked evaluations
    and conditions of ``|log(w_sketch / w_exact)|``."""
    found = {}
    for run in runs:
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
    return found


def long_run(path):
    """What the page shows of a ``wave_long_run.py`` results file."""
    run = harness.read_json(path)
    settings = run["settings"]
    name = run["weighting"]
    if name == "sketch":
        name = (
            f"sketch ({settings['estimator']}, k = "
            f"{settings['sample_every']})"
        )
    return dict(
        pinn=name,
        steps=settings["steps"],
        wall_time_s=run["wall_time_s"],
        relative_l2=run["final_relative_l2"],
        machine=run["machine"],
        started=run["started"],
        file=harness.public_path(path),
    )


def render(record):
    """The page's generated block, from the results document alone."""
    lines = [
        "Each run trains the wave tutorial's sketch-NTK PINN "
        "(`WaveSettings()`: 64 Fourier features into a 3×128 tanh MLP, "
        "10,000 Adam steps, the paper's points resampled every step, "
        "`alpha=1e-3`, no safeguard) with `sample_every_n_steps=k`, one "
        "process per run and one torch thread each; wall times exclude the "
        "error evaluations and the exact weights of the figure.",
        "",
        *harness.parts_lines(record, lambda _, part: part["machine_label"]),
    ]
    rows = []
    base = {r["estimator"]: r for r in record["summary"] if r["every"] == 1}
    for row in record["summary"]:
        median = statistics.median(row["errors"])
        ref = base.get(row["estimator"])
        ratio = "–"
        if ref:
            ratio = f"{median / statistics.median(ref['errors']):.2f}×"
        rows.append(
            [
                row["estimator"],
                row["every"],
                f"{median:.3e}",
                f"{min(row['errors']):.2e}–{max(row['errors']):.2e}",
                ", ".join(f"{e:.2e}" for e in row["errors"]),
                f"{statistics.median(row['wall_times_s']):.0f}",
                ratio,
                ", ".join(row["machines"]),
            ]
        )
    seeds = ", ".join(map(str, record["summary"][0]["seeds"]))
    header = ["estimator", "k", "median relative L2", "range over seeds"]
    header += [f"seeds ({seeds})", "median wall time (s)", "median vs k = 1"]
    header.append("machine")
    gaps = sorted(record["weight_errors"].items())
    lines += [
        "## Final relative L2 error",
        "",
        "Relative L2 error on the 101×101 grid after the last step. Wall "
        "times depend on the machine and on what else ran on it: compare "
        "them within a machine only; the cost of a step for each k is "
        "measured in interleaved rounds by `benchmarks/step_time.py` "
        "(`docs/step-time.md`).",
        "",
        *harness.markdown_table(header, "lrrrlrrl", rows),
        "",
        "Median over the tracked evaluations and conditions of "
        "|log(w_sketch / w_exact)|, seed 0 (exact weights at the run's own "
        "parameters and points, every --track-every steps):",
        "",
        *harness.markdown_table(
            ["run", "median log-ratio"],
            "lr",
            [[k, f"{v:.3f}"] for k, v in gaps],
        ),
        "",
        "## Sketched against exact weights",
        "",
        "![Sketched vs exact weights](figures/spaced-samples-weights.png)",
        "",
        "Lines: the weights the run used; dots: the exact NTK weights at the "
        "same parameters and points.",
    ]
    if record.get("long_runs"):
        header = ["PINN", "steps", "training time (s)", "relative L2"]
        header.append("machine, started")
        rows = [
            [r["pinn"], r["steps"], f"{r['wall_time_s']:.0f}"]
            + [f"{r['relative_l2']:.3e}", f"{r['machine']}, {r['started']}"]
            for r in record["long_runs"]
        ]
        lines += [
            "",
            "## Long runs",
            "",
            "`benchmarks/wave_long_run.py --paper-settings`: the tutorial's "
            "settings as `pina-ntk wave --paper-settings` trains them "
            "(parameter-space sketch, no safeguard) with the "
            "learning-rate schedule stretched to the run, one process per "
            "PINN, one torch thread; results in "
            + ", ".join(f"`{r['file']}`" for r in record["long_runs"])
            + ".",
            "",
            *harness.markdown_table(header, "lrrrl", rows),
        ]
    return "\n".join(lines) + "\n"


def plot(runs, path):
    """Sketched vs exact weights along the seed-0 runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tracked = [r for r in runs if r["tracked"]["steps"]]
    if not tracked:
        return
    estimators = sorted({r["estimator"] for r in tracked})
    everys = sorted({r["every"] for r in tracked})
    fig, axes = plt.subplots(
        len(estimators),
        len(everys),
        figsize=(4.2 * len(everys), 3.4 * len(estimators)),
        sharey=True,
        squeeze=False,
    )
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for run in tracked:
        row = estimators.index(run["estimator"])
        ax = axes[row][everys.index(run["every"])]
        data = run["tracked"]
        for i, name in enumerate(data["exact"][0]):
            colour = colours[i % len(colours)]
            sketch = [w.get(name, float("nan")) for w in data["sketch"]]
            ax.plot(data["steps"], sketch, color=colour, lw=1.5, label=name)
            exact = [w[name] for w in data["exact"]]
            ax.plot(
                data["steps"], exact, color=colour, ls="none", marker="o", ms=3
            )
        ax.set_yscale("log")
        ax.set_title(f"{run['estimator']}, k = {run['every']}")
        ax.set_xlabel("optimisation step")
    for row in axes:
        row[0].set_ylabel("loss weight (log)")
    first = next(ax for row in axes for ax in row if ax.lines)
    axes[0][0].legend(
        *first.get_legend_handles_labels(),
        fontsize=7,
        title="line: sketch, dots: exact",
    )
    fig.suptitle(
        "Wave tutorial, seed 0: sketched weights vs exact weights at the "
        "same parameters"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(record, output_dir, figure=True):
    """Write the JSON, the page and (with ``figure``) its figure."""
    record["summary"] = summarise(record["runs"], record["parts"])
    record["weight_errors"] = weight_errors(record["runs"])
    harness.write_json(os.path.join(output_dir, "spaced-samples.json"), record)
    page = os.path.join(output_dir, "spaced-samples.md")
    harness.write_page(page, SCRIPT, render(record), TITLE)
    if figure:
        os.makedirs(os.path.join(output_dir, "figures"), exist_ok=True)
        plot(
            record["runs"],
            os.path.join(output_dir, "figures", "spaced-samples-weights.png"),
        )


def main(argv=None):
    """Run the study, or combine or re-render results; the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--error-every", type=int, default=500)
    parser.add_argument(
        "--track-every",
        type=int,
        default=1000,
        help="steps between exact weights along the seed-0 runs (a "
        "multiple of --error-every)",
    )
    parser.add_argument(
        "--long-runs",
        nargs="+",
        default=[],
        metavar="JSON",
        help="results of benchmarks/wave_long_run.py to report (with "
        "--combine)",
    )
    parser.add_argument(
        "--estimators", nargs="+", choices=ESTIMATORS, default=ESTIMATORS
    )
    parser.add_argument("--every", nargs="+", type=int, default=EVERY)
    parser.add_argument("--seeds", nargs="+", type=int, default=SEEDS)
    harness.add_run_flags(parser, os.path.join(harness.ROOT, "docs"))
    args = parser.parse_args(argv)
    if args.from_json:
        record = harness.read_json(args.from_json)
        page = os.path.join(args.output_dir, "spaced-samples.md")
        harness.write_page(page, SCRIPT, render(record), TITLE)
        return 0
    if args.combine:
        record = harness.combine_documents(
            [harness.read_json(path) for path in args.combine],
            lambda r: (r["estimator"], r["every"], r["seed"]),
            harness.public_command(SCRIPT, argv),
        )
        record["long_runs"] = [long_run(path) for path in args.long_runs]
        write_outputs(record, args.output_dir)
        return 0
    if args.quick:
        args.steps = args.steps or 20
        args.error_every = min(args.error_every, 10)
        args.track_every = args.error_every
        args.every = [e for e in args.every if e <= 10] or [1]
        args.seeds = args.seeds[:1]
    started = time.perf_counter()
    part = harness.provenance(
        SCRIPT, argv, args.machine_label, workers=args.workers, threads=1
    )
    record = {"script": SCRIPT, "parts": [part], "runs": []}
    jobs = [
        dict(
            estimator=estimator,
            every=every,
            seed=seed,
            steps=args.steps,
            error_every=args.error_every,
            track_every=args.track_every,
            quick=args.quick,
        )
        for every in args.every  # the slowest (k = 1, predictor) first
        for estimator in reversed(args.estimators)
        for seed in args.seeds
    ]

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
