r"""The suite's introductory half (issue #76): does a weighting do harm where
no weighting already works?

Nine settings in the style of PINA's tutorials: small networks, the
tutorials' optimisers and budgets (1,000-2,000 epochs, one full-batch step
per epoch), a few points drawn once. Three are PINA's tutorials 1 and 2
themselves, set up as PINA 0.3.2's tutorials write them (``tutorial_ode``;
``tutorial_poisson``, the first network of tutorial 2; and
``tutorial_poisson_feature``, its network with the fixed extra feature
:math:`2\pi^2 \sin \pi x \sin \pi y`); six are problems of
``suite_intro_problems.py``, named in ``suite-split.toml``'s
``introductory`` half before any candidate was shaped on them.

Each run is seeded with ``lightning.seed_everything(seed)`` before the points
are drawn and the network is built; its error is the relative L2 error on a
fixed grid, recorded :data:`RECORDS` times along training, and the run's
error the protocol's (``suite_protocol.run_error``: the median of the last
five records). A weighting's ratio on a setting is the geometric mean over
seeds of its error over no weighting's with the same seed.

    python benchmarks/suite/introductory.py            # 5 seeds, all rows
    python benchmarks/suite/introductory.py --quick    # smoke run, temp dir
    python benchmarks/suite/introductory.py --settings tutorial_poisson \
        --weightings none,sketch_predictor --seeds 8 --resume
    python benchmarks/suite/introductory.py \
        --from-json docs/suite/introductory.json
"""

import math
import os
import sys
import time
import tomllib
from pathlib import Path

import lightning
import torch

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness
from benchmarks.suite import suite_protocol
from benchmarks.suite.introductory_setups import SETUPS, assemble

SCRIPT = "suite/introductory.py"
RESULTS = "suite/introductory.json"
PAGE = "suite/introductory.md"
#: Error records along a run (the last five give its error).
RECORDS = 50
#: Seeds per setting of a full run.
SEEDS = 5
#: Criterion (d) of the suite's rule: on every setting of this half, a
#: candidate's geometric-mean ratio to no weighting is at most this.
NO_HARM = 1.10
#: Grid points per axis of the error.
GRID = 64

#: The published sketch's options, today's defaults written out, so that
#: its rows (``sketch_predictor`` and the ramps) stay what they are when the
#: default changes.
PUBLISHED_OPTIONS = {
    "alpha": 1e-3,
    "sample_every_n_steps": 10,
    "warmup_samples": 32,
    "ramp_steps": 0,
}
#: The rows: ``(label, class path, options)``.
WEIGHTINGS = {
    "none": ("no weighting", None, {}),
    "sketch_predictor": (
        "`SketchNTKWeighting()` (the default)",
        "pina_ntk.SketchNTKWeighting",
        PUBLISHED_OPTIONS,
    ),
    **{
        f"sketch_ramp_{steps}": (
            f"`SketchNTKWeighting(ramp_steps={steps})`",
            "pina_ntk.SketchNTKWeighting",
            dict(PUBLISHED_OPTIONS, ramp_steps=steps),
        )
        for steps in (1000, 300, 500)
    },
    # exact weights that follow the kernel within 10 or 20 steps: how the
    # outcome depends on the refresh (issue #76's mechanism)
    **{
        f"ntk_exact_{every}": (
            f"`NTKWeighting(update_every_n_steps={every})`",
            "pina_ntk.NTKWeighting",
            {"update_every_n_steps": every, "alpha": 1.0, "ramp_steps": 0},
        )
        for every in (10, 20)
    },
    "pina_self_adaptive": (
        "PINA `SelfAdaptiveWeighting()`",
        "pina.weighting.SelfAdaptiveWeighting",
        {},
    ),
    "pina_ntk": (
        "PINA `NeuralTangentKernelWeighting()`",
        "pina.weighting.NeuralTangentKernelWeighting",
        {},
    ),
}
#: The rows of a full run.
FULL = ("none", "sketch_predictor", "pina_self_adaptive", "pina_ntk")


def read_half(path=suite_protocol.SPLIT):
    """The introductory half of the split: ``[{setting, kind, stationary}]``.

    :raises ValueError: If an entry lacks a field, names no setting of
        :data:`SETUPS`, or is in another half too."""
    with open(path, "rb") as handle:
        split = tomllib.load(handle)
    entries = split.get("introductory", [])
    others = {e["setting"] for h in suite_protocol.HALVES for e in split[h]}
    for entry in entries:
        for field, kind in (("setting", str), ("kind", str)):
            if not isinstance(entry.get(field), kind):
                raise ValueError(f"introductory entry {entry}: {field!r}.")
        if entry["setting"] not in SETUPS or entry["setting"] in others:
            why = "no set-up of introductory.py, or in another half"
            raise ValueError(f"{entry['setting']}: {why}.")
    return entries


def evaluation_points(problem):
    """The error's grid: :data:`GRID` points per axis of the problem's
    box (space, and time for a time-dependent problem)."""
    from pina import LabelTensor

    box = dict(problem.spatial_domain.range)
    temporal = getattr(problem, "temporal_domain", None)
    if temporal is not None:
        box.update(temporal.range)
    axes = [torch.linspace(low, high, GRID) for low, high in box.values()]
    grid = torch.cartesian_prod(*axes).reshape(-1, len(axes))
    return LabelTensor(grid, list(box))


def relative_error(solver, points, exact):
    """:return: ``||u_net - u|| / ||u||`` on ``points``."""
    with torch.no_grad():
        found = torch.Tensor.as_subclass(solver(points), torch.Tensor)
    found = found.flatten()
    return float(torch.linalg.norm(found - exact) / torch.linalg.norm(exact))


def build_weighting(name):
    """A fresh weighting of a row (``None`` for no weighting)."""
    import pkgutil

    _, path, options = WEIGHTINGS[name]
    return None if path is None else pkgutil.resolve_name(path)(**options)


class ErrorRecorder(lightning.Callback):
    """The relative L2 error every ``every`` steps and at the last."""

    def __init__(self, points, exact, every, last):
        self.points, self.exact = points, exact
        self.every, self.last = every, last
        self.steps, self.errors, self.seconds = [], [], 0.0
        self._started = None

    def on_train_batch_start(self, trainer, solver, batch, index):
        self._started = time.perf_counter()

    def on_train_batch_end(self, trainer, solver, outputs, batch, index):
        self.seconds += time.perf_counter() - self._started
        step = trainer.global_step
        if step % self.every == 0 or step == self.last:
            self.steps.append(step)
            self.errors.append(relative_error(solver, self.points, self.exact))


def run_job(job):
    """Train one seed of one setting with one weighting; its record."""
    import warnings

    from pina import Trainer
    from pina.solver import PhysicsInformedSingleModelSolver

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    epochs, sizes = SETUPS[job["setting"]][-2:]
    epochs = job.get("epochs") or epochs
    lightning.seed_everything(job["seed"], verbose=False)
    problem, model, optimizer = assemble(job["setting"])
    solver = PhysicsInformedSingleModelSolver(
        problem,
        model,
        optimizer=optimizer,
        weighting=build_weighting(job["weighting"]),
    )
    points = evaluation_points(problem)
    exact = torch.Tensor.as_subclass(problem.solution(points), torch.Tensor)
    recorder = ErrorRecorder(
        points, exact.flatten(), max(epochs // RECORDS, 1), epochs
    )
    trainer = Trainer(
        solver=solver,
        max_epochs=epochs,
        accelerator="cpu",
        enable_model_summary=False,
        enable_progress_bar=False,
        logger=False,
        enable_checkpointing=False,
        callbacks=[recorder],
        **sizes,
    )
    record = dict(job, status="ok", failure=None)
    try:
        trainer.train()
    except Exception as error:  # a diverged run is counted, not dropped
        record.update(status="failed", failure=f"{type(error).__name__}")
    final = recorder.errors[-1] if recorder.errors else math.nan
    if not math.isfinite(final):
        record.update(status="failed", failure=record["failure"] or "nan")
    saved = getattr(solver.weighting, "last_saved_weights", None) or dict
    record.update(
        history={"steps": recorder.steps, "errors": recorder.errors},
        final_error=final,
        train_seconds=recorder.seconds,
        final_weights={str(k): float(v) for k, v in saved().items()},
    )
    return record


# --------------------------------------------------------------- summary
def identity(run):
    return (run["setting"], run["weighting"], run["seed"])


def ratios(runs, setting, weighting):
    """``[error / none's error]`` paired by seed (a diverged run: inf)."""
    errors = {}
    for run in runs:
        if run["setting"] == setting and not run.get("superseded"):
            errors[(run["weighting"], run["seed"])] = suite_protocol.run_error(
                run
            )
    seeds = sorted(s for w, s in errors if w == weighting)
    return [
        errors[(weighting, s)] / errors[("none", s)]
        for s in seeds
        if ("none", s) in errors and math.isfinite(errors[("none", s)])
    ]


def summarise(document):
    """``{weighting: {setting: {geo, worse, seeds, low, high}}}`` and, per
    weighting, criterion (d): every setting's ratio at most
    :data:`NO_HARM`."""
    runs, table = document["runs"], {}
    settings = document["settings"]
    for weighting in document["weightings"]:
        if weighting == "none":
            continue
        rows = {}
        for setting in settings:
            found = ratios(runs, setting, weighting)
            if not found:
                continue
            rows[setting] = {
                "geo": suite_protocol.geometric_mean(found),
                "worse": sum(r > 1 for r in found),
                "diverged": sum(not math.isfinite(r) for r in found),
                "seeds": len(found),
                "low": min(found),
                "high": max(found),
            }
        complete = len(rows) == len(settings)
        passes = complete and all(r["geo"] <= NO_HARM for r in rows.values())
        table[weighting] = {
            "settings": rows,
            "no_harm": passes,
            "complete": complete,
        }
    return table


def render(document):
    """The page's generated block (markdown)."""
    summary = summarise(document)
    settings = document["settings"]
    header = ["weighting", *(f"`{s}`" for s in settings), "(d)"]
    rows = []
    for weighting, found in summary.items():
        cells = [WEIGHTINGS[weighting][0]]
        for setting in settings:
            row = found["settings"].get(setting)
            cells.append(
                "—"
                if row is None
                else f"{row['geo']:.2f} ({row['worse']}/{row['seeds']})"
            )
        verdict = "pass" if found["no_harm"] else "**miss**"
        cells.append(verdict if found["complete"] else "not run on all")
        rows.append(cells)
    lines = [
        "Each weighting's error divided by no weighting's, geometric mean "
        "over seeds (in brackets: on how many seeds it is worse); (d): "
        f"every setting at most {NO_HARM:.2f}.",
        "",
        *harness.markdown_table(header, rows),
        "",
        "No weighting's error (median over seeds):",
        "",
    ]
    none = [
        (
            s,
            sorted(
                suite_protocol.run_error(r)
                for r in document["runs"]
                if r["setting"] == s and r["weighting"] == "none"
            ),
        )
        for s in settings
    ]
    lines.extend(
        harness.markdown_table(
            ["setting", "error"],
            [
                [f"`{s}`", f"{e[len(e) // 2]:.2e}" if e else "—"]
                for s, e in none
            ],
        )
    )
    lines += ["", *harness.parts_lines(document, lambda i, p: p["date"])]
    return "\n".join(lines)


#: README.md's block: where the shipped default helps, does nothing and
#: can hurt on this half.
README_MARKERS = ("<!-- introductory -->", "<!-- /introductory -->")
#: A setting's ratio at most 1 / this: helps; above this: hurts.
LEVEL_BAND = NO_HARM


#: The README block's rows.
README_ROWS = ("sketch_predictor", "sketch_ramp_300", "pina_self_adaptive")


def readme_block(document, rows=README_ROWS):
    """README.md's block: per row, the introductory settings where it
    helps (ratio to none at most ``1 / LEVEL_BAND``), is about level and
    hurts (above ``LEVEL_BAND``), with each ratio."""
    summary, lines = summarise(document), []
    for weighting in rows:
        found = summary[weighting]["settings"]
        kinds = {
            "helps": [],
            "is about level with no weighting": [],
            "hurts": [],
        }
        for setting, row in found.items():
            geo = row["geo"]
            kind = "is about level with no weighting"
            if geo <= 1 / LEVEL_BAND:
                kind = "helps"
            elif geo > LEVEL_BAND:
                kind = "hurts"
            # three digits: at two, a ratio just inside the band and one
            # just outside it (1.05, 1.14) both read 1.1
            shown = f"{geo:.3g}×"
            if not math.isfinite(geo):
                shown = f"diverged on {row['diverged']} of {row['seeds']} seeds"
            kinds[kind].append(f"`{setting}` ({shown})")
        parts = [f"{k} on {', '.join(v)}" for k, v in kinds.items() if v]
        seeds = sorted({row["seeds"] for row in found.values()})
        count = f"{seeds[0]}" + (f"–{seeds[-1]}" if len(seeds) > 1 else "")
        lines.append(
            f"- {WEIGHTINGS[weighting][0]} {'; '.join(parts)} (its error "
            f"over no weighting's, geometric mean over {count} seeds)."
        )
    return "\n".join(lines) + "\n"


def write_outputs(document, output_dir):
    harness.write_json(os.path.join(output_dir, RESULTS), document)
    harness.write_page(
        os.path.join(output_dir, PAGE),
        SCRIPT,
        render(document),
        "The introductory half: do no harm",
    )


# --------------------------------------------------------------- running
def flags(parser):
    add = parser.add_argument
    add("--settings", help="comma-separated (default: the split's half)")
    add("--weightings", help=f"comma-separated (default: {','.join(FULL)})")
    add("--seeds", type=int, help=f"seeds 0..N-1 (default {SEEDS})")
    add("--resume", action="store_true", help="add to the committed runs")

    def check(args):
        for name in (
            (args.weightings or "").split(",") if args.weightings else []
        ):
            if name not in WEIGHTINGS:
                return (
                    f"--weightings: unknown {name!r}; one of {list(WEIGHTINGS)}"
                )
        return None

    return check


def run_all(args, argv):
    half = [e["setting"] for e in read_half()]
    settings = args.settings.split(",") if args.settings else half
    unknown = [s for s in settings if s not in SETUPS]
    if unknown:
        raise SystemExit(
            f"--settings: unknown {unknown}; one of {list(SETUPS)}"
        )
    weightings = args.weightings.split(",") if args.weightings else list(FULL)
    if "none" not in weightings:
        weightings.insert(0, "none")
    seeds = args.seeds or (1 if args.quick else SEEDS)
    path = os.path.join(args.output_dir, RESULTS)
    document = {
        "script": SCRIPT,
        "settings": [],
        "weightings": [],
        "runs": [],
        "parts": [],
    }
    if args.resume and os.path.exists(path):
        document = harness.read_json(path)
    for key, values in (("settings", settings), ("weightings", weightings)):
        document[key] += [v for v in values if v not in document[key]]
    done = {identity(r) for r in document["runs"] if not r.get("superseded")}
    jobs = [
        {
            "setting": s,
            "weighting": w,
            "seed": seed,
            "epochs": 20 if args.quick else None,
        }
        for seed in range(seeds)
        for s in settings
        for w in weightings
        if (s, w, seed) not in done
    ]
    started = time.perf_counter()
    part = harness.provenance(
        SCRIPT, argv, args.machine_label, workers=args.workers, threads=1
    )
    document["parts"].append(part)
    index = len(document["parts"]) - 1
    print(f"{len(jobs)} runs", file=sys.stderr)

    def keep(job, record):
        if "worker_error" in record:
            record = dict(
                job,
                status="failed",
                failure=record["worker_error"],
                history={"steps": [], "errors": []},
            )
        document["runs"].append(dict(record, part=index))
        harness.finish(part, started)
        harness.write_json(path, document)
        print(f"{identity(record)}: {record.get('final_error')}", flush=True)

    harness.map_jobs(run_job, jobs, args.workers, keep)
    harness.finish(part, started)
    return document


def main(argv=None):
    return harness.study_main(
        argv, "The introductory half.", run_all, write_outputs, flags
    )


if __name__ == "__main__":
    sys.exit(main())
