"""Spaced sketch samples on the wave tutorial: accuracy against k.

Trains the wave tutorial's sketch-NTK PINN (:class:`~pina_ntk.paper.
experiments.wave.WaveSettings`: 64 Fourier features into a 3×128 tanh MLP,
10,000 Adam steps, the paper's point counts resampled every step) with
``SketchNTKWeighting(sample_every_n_steps=k)`` for each estimator, each ``k``
and each seed, one process per run, one torch thread each. Every
``--error-every`` steps it records the relative L2 error on the 101×101 grid
and, for seed 0, the exact NTK weights at the run's current parameters and
points (:func:`~pina_ntk.integration.diagnostics.solver_ntk_weights`) beside
the sketched weights the run uses; those evaluations are excluded from the
wall time. Writes ``spaced-samples.json`` (every number),
``spaced-samples.md`` (the table) and ``spaced-samples-weights.png``
(sketched vs exact weights) into ``--output-dir``.

    python benchmarks/spaced_samples.py --workers 2            # full study
    python benchmarks/spaced_samples.py --quick --output-dir /tmp/s  # smoke
"""

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import harness

ESTIMATORS = ("parameter", "predictor")
EVERY = (1, 10, 50)
SEEDS = (0, 1, 2)
#: Seed whose runs also record the exact weights along their trajectory.
TRACKED_SEED = 0


def run_job(job):
    """
    Train one sketch-NTK PINN of the study in this process.

    :param dict job: ``estimator``, ``every``, ``seed``, ``steps``,
        ``error_every``, ``quick``.
    :return: The run's numbers (JSON-serialisable).
    :rtype: dict
    """
    import torch

    torch.set_num_threads(1)
    from pina_ntk.integration.diagnostics import solver_ntk_weights
    from pina_ntk.paper.experiments.outputs import relative_error_fn
    from pina_ntk.paper.experiments.training import (
        ntk_weights_of,
        train_pinn,
    )
    from pina_ntk.paper.experiments.wave import WaveSettings, wave_grid
    from pina_ntk.paper.problems import WaveProblem

    options = dict(
        weightings=("sketch",),
        estimator=job["estimator"],
        sample_every=job["every"],
        seed=job["seed"],
    )
    if job["steps"] is not None:
        options["steps"] = job["steps"]
    settings = (
        WaveSettings.quick(**options)
        if job["quick"]
        else WaveSettings(**options)
    )
    _, _, points, exact = wave_grid(settings.grid)
    error = relative_error_fn(points, exact)
    tracked = {"steps": [], "sketch": [], "exact": []}

    def evaluate(solver):
        step = solver.trainer.global_step
        if job["seed"] == TRACKED_SEED and (
            step % job["track_every"] == 0 or step == settings.steps
        ):
            tracked["steps"].append(solver.trainer.global_step)
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


def jobs_of(args):
    """The study's runs, the slowest first (k = 1, predictor)."""
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
        for every in args.every
        for estimator in reversed(args.estimators)
        for seed in args.seeds
    ]
    return jobs


def summarise(runs):
    """
    Per (estimator, k): the median, range and seeds' errors and wall times.

    :param list runs: Results of :func:`run_job`.
    :rtype: list[dict]
    """
    cells = {}
    for run in runs:
        cells.setdefault((run["estimator"], run["every"]), []).append(run)
    rows = []
    for (estimator, every), group in sorted(cells.items()):
        group.sort(key=lambda r: r["seed"])
        errors = [r["relative_l2"] for r in group]
        times = [r["wall_time_s"] for r in group]
        rows.append(
            dict(
                estimator=estimator,
                every=every,
                seeds=[r["seed"] for r in group],
                errors=errors,
                median_error=statistics.median(errors),
                median_wall_time_s=statistics.median(times),
                wall_times_s=times,
                machines=sorted({r.get("machine", "?") for r in group}),
            )
        )
    return rows


def weight_errors(runs):
    """
    Median over the tracked evaluations (after the first) and conditions of
    ``|log(w_sketch / w_exact)|`` per (estimator, k), seed 0.

    :param list runs: Results of :func:`run_job`.
    :rtype: dict
    """
    import math

    out = {}
    for run in runs:
        tracked = run["tracked"]
        if not tracked["steps"]:
            continue
        gaps = [
            abs(math.log(sketch[name] / exact[name]))
            for sketch, exact in zip(tracked["sketch"], tracked["exact"])
            for name in exact
            if sketch.get(name, 0) > 0 and exact[name] > 0
        ]
        key = f"{run['estimator']}, k={run['every']}"
        out[key] = statistics.median(gaps) if gaps else float("nan")
    return out


def table(record):
    """The markdown table of a study (``record`` as written to the JSON)."""
    rows = record["summary"]
    lines = [
        "| estimator | k | median relative L2 | range over seeds | seeds "
        "(0, 1, 2) | median wall time (s) | median vs k = 1 | machine |",
        "|---|---:|---:|---:|---|---:|---:|---|",
    ]
    base = {r["estimator"]: r for r in rows if r["every"] == 1}
    for row in rows:
        ref = base.get(row["estimator"])
        ratio = (
            f"{row['median_error'] / ref['median_error']:.2f}×" if ref else "–"
        )
        lines.append(
            f"| {row['estimator']} | {row['every']} | "
            f"{row['median_error']:.3e} | {min(row['errors']):.2e}–"
            f"{max(row['errors']):.2e} | "
            + ", ".join(f"{e:.2e}" for e in row["errors"])
            + f" | {row['median_wall_time_s']:.0f} | {ratio} | "
            + ", ".join(row["machines"])
            + " |"
        )
    lines += [
        "",
        "Median over the tracked evaluations and conditions of "
        "|log(w_sketch / w_exact)|, seed 0 (exact weights at the run's own "
        "parameters and points, every --track-every steps):",
        "",
        "| run | median log-ratio |",
        "|---|---:|",
    ]
    for key, value in sorted(record["weight_errors"].items()):
        lines.append(f"| {key} | {value:.3f} |")
    return "\n".join(lines) + "\n"


def long_run_table(paths):
    """
    The table of ``benchmarks/wave_long_run.py`` results.

    :param list paths: Their JSON files.
    :rtype: str
    """
    lines = [
        "| PINN | steps | training time (s) | relative L2 | machine, "
        "started |",
        "|---|---:|---:|---:|---|",
    ]
    for path in paths:
        run = json.loads(Path(path).read_text())
        settings = run["settings"]
        name = run["weighting"]
        if name == "sketch":
            name = (
                f"sketch ({settings['estimator']}, k = "
                f"{settings['sample_every']})"
            )
        lines.append(
            f"| {name} | {settings['steps']} | {run['wall_time_s']:.0f} | "
            f"{run['final_relative_l2']:.3e} | {run['machine']}, "
            f"{run['started']} |"
        )
    return "\n".join(lines) + "\n"


def markdown(record):
    """
    The study's page: how it ran, the table, the figure and, if given,
    the long runs.

    :param dict record: As written to ``spaced-samples.json``.
    :rtype: str
    """
    parts = record.get("parts") or [record]
    lines = [
        "# Spaced sketch samples on the wave tutorial",
        "",
        "Generated by `benchmarks/spaced_samples.py`; do not edit by hand. "
        "Each run trains the wave tutorial's sketch-NTK PINN "
        "(`WaveSettings()`: 64 Fourier features into a 3×128 tanh MLP, "
        "10,000 Adam steps, the paper's points resampled every step, "
        "`alpha=1e-3`, no safeguard) with `sample_every_n_steps=k`, one "
        "process per run and one torch thread each; wall times exclude the "
        "error evaluations and the exact weights of the figure.",
        "",
    ]
    for part in parts:
        lines.append(
            f"- `python benchmarks/{part['command']}` on {part['machine']}, "
            f"{part['workers']} run(s) at a time, "
            f"started {part['started']} UTC, "
            f"{part.get('duration_s', 0) / 60:.1f} min"
        )
    if record.get("combined_by"):
        lines.append(f"- page: `python benchmarks/{record['combined_by']}`")
    lines += [
        "",
        "## Final relative L2 error",
        "",
        "Relative L2 error on the 101×101 grid after the last step. Wall "
        "times depend on the machine and on what else ran on it: compare "
        "them within a machine only; the cost of a step for each k is "
        "measured in interleaved rounds by `benchmarks/step_time.py` "
        "(`docs/step-time.md`).",
        "",
        table(record),
        "## Sketched against exact weights",
        "",
        "![Sketched vs exact weights](figures/spaced-samples-weights.png)",
        "",
        "Lines: the weights the run used; dots: the exact NTK weights at the "
        "same parameters and points.",
        "",
    ]
    if record.get("long_runs"):
        lines += [
            "## Long runs",
            "",
            "`benchmarks/wave_long_run.py`: the tutorial's settings with the "
            "learning-rate schedule stretched to the run, one process per "
            "PINN, one torch thread.",
            "",
            long_run_table(record["long_runs"]),
        ]
    return "\n".join(lines)


def plot(runs, path):
    """Sketched vs exact weights along the seed-0 runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tracked = [r for r in runs if r["tracked"]["steps"]]
    estimators = sorted({r["estimator"] for r in tracked})
    everys = sorted({r["every"] for r in tracked})
    if not tracked:
        return None
    fig, axes = plt.subplots(
        len(estimators),
        len(everys),
        figsize=(4.2 * len(everys), 3.4 * len(estimators)),
        sharey=True,
        squeeze=False,
    )
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for run in tracked:
        ax = axes[estimators.index(run["estimator"])][
            everys.index(run["every"])
        ]
        data = run["tracked"]
        names = list(data["exact"][0])
        for i, name in enumerate(names):
            colour = colours[i % len(colours)]
            ax.plot(
                data["steps"],
                [w.get(name, float("nan")) for w in data["sketch"]],
                color=colour,
                lw=1.5,
                label=name,
            )
            ax.plot(
                data["steps"],
                [w[name] for w in data["exact"]],
                color=colour,
                ls="none",
                marker="o",
                ms=3,
            )
        ax.set_yscale("log")
        ax.set_title(f"{run['estimator']}, k = {run['every']}")
        ax.set_xlabel("optimisation step")
    for row in axes:
        row[0].set_ylabel("loss weight (log)")
    axes[0][0].legend(
        *next(
            ax for row in axes for ax in row if ax.lines
        ).get_legend_handles_labels(),
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
    return path


def write_outputs(record, output_dir):
    """Write the JSON, the page and its figure into ``output_dir``."""
    output_dir.mkdir(parents=True, exist_ok=True)
    record["summary"] = summarise(record["runs"])
    record["weight_errors"] = weight_errors(record["runs"])
    (output_dir / "spaced-samples.json").write_text(
        json.dumps(record, indent=1)
    )
    (output_dir / "spaced-samples.md").write_text(markdown(record))
    (output_dir / "figures").mkdir(exist_ok=True)
    plot(record["runs"], output_dir / "figures" / "spaced-samples-weights.png")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workers", type=int, default=2)
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
        "--combine",
        nargs="+",
        type=Path,
        default=None,
        metavar="DIR",
        help="merge the spaced-samples.json of earlier runs (e.g. parts run "
        "on different machines) into --output-dir instead of training",
    )
    parser.add_argument(
        "--machine-labels",
        nargs="+",
        default=None,
        metavar="LABEL",
        help="with --combine: a name for each part's machine, in order "
        "(two machines may report the same CPU model)",
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
    parser.add_argument("--output-dir", type=Path, default=Path("docs"))
    args = parser.parse_args(argv)
    if args.combine:
        parts = [
            json.loads((d / "spaced-samples.json").read_text())
            for d in args.combine
        ]
        if args.machine_labels:
            if len(args.machine_labels) != len(parts):
                parser.error("--machine-labels needs one label per part.")
            for part, label in zip(parts, args.machine_labels):
                part["machine"] = label
                for run in part["runs"]:
                    run["machine"] = label
        record = {
            "parts": [
                {
                    k: v
                    for k, v in part.items()
                    if k not in ("runs", "summary", "weight_errors")
                }
                for part in parts
            ],
            "runs": [run for part in parts for run in part["runs"]],
            "long_runs": [str(p) for p in args.long_runs],
            "combined_by": " ".join(
                [Path(sys.argv[0]).name, *map(shlex.quote, sys.argv[1:])]
            ),
        }
        write_outputs(record, args.output_dir)
        print(markdown(record))
        return
    if args.quick:
        args.steps = args.steps or 20
        args.error_every = min(args.error_every, 10)
        args.track_every = args.error_every
        args.every = [e for e in args.every if e <= 10] or [1]
        args.seeds = args.seeds[:1]
    record = {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "machine": harness.machine_name(),
        "cpus": os.cpu_count(),
        "workers": args.workers,
        "torch_threads": 1,
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "runs": [],
    }
    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        futures = [pool.submit(run_job, job) for job in jobs_of(args)]
        for future in as_completed(futures):
            run = future.result()
            run["machine"] = record["machine"]
            record["runs"].append(run)
            record["duration_s"] = time.perf_counter() - start
            write_outputs(record, args.output_dir)
            print(
                f"{run['estimator']:9s} k={run['every']:<3d} "
                f"seed={run['seed']}: {run['relative_l2']:.3e} in "
                f"{run['wall_time_s']:.0f} s",
                flush=True,
            )
    print(markdown(record))


if __name__ == "__main__":
    main()
