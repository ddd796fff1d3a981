r"""NTK weights on PINA's multi-model solvers: a physics-informed ensemble
and the self-adaptive solver, each with and without the default weighting
(issue #70).

On two settings of the suite's tuning half whose points are drawn once
(:data:`SETTINGS`; the self-adaptive solver keeps one weight per point),
with :data:`SEEDS` seeds and the suite's network, optimiser, decay, points
and :data:`STEPS` steps (each run a job of ``weightings.run_job``), the rows
of :data:`ROWS`:

* ``ensemble_none`` / ``ensemble_default``: PINA's
  ``PhysicsInformedEnsembleSolver`` of :data:`MEMBERS` networks, each with
  its own Adam and decay, without a weighting and with
  ``SketchNTKWeighting()``; scored on the members' mean;
* ``self_adaptive_none`` / ``self_adaptive_default``: PINA's
  ``SelfAdaptivePhysicsInformedSolver`` (sigmoid pointwise weights,
  maximised by their own Adam at the same rate);
* ``single_none`` / ``single_default``: PINA's physics-informed solver of
  one network, for scale.

Each run reports its solution error (the suite's measure: the median of its
last records), its condition losses and its time per step. No rule decides
here: the page states, per solver and setting, the default's paired error
ratio to the same solver without weighting, its worst seed, and the
losses. Writes ``multi-model.json`` (after each run) and the block of
``multi-model.md``.

    python benchmarks/multi_model/multi_model.py      # docs/multi-model.json
    python benchmarks/multi_model/multi_model.py --quick  # a temporary folder
    python benchmarks/multi_model/multi_model.py \
        --from-json docs/multi-model.json
"""

import math
import os
import statistics
import sys
from pathlib import Path

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness
from benchmarks.suite import suite_protocol as protocol
from benchmarks.suite import weightings
from benchmarks.suite.weightings_setup import FULL, QUICK

SCRIPT = "multi_model/multi_model.py"
PAGE, TITLE = "multi-model.md", "Multi-model solvers"
#: The settings (tuning half, points drawn once), seeds, steps, records
#: and ensemble size, fixed before the run.
SETTINGS = ("poisson_fixed", "heat_data")
SEEDS, STEPS, RECORD_EVERY, MEMBERS = 3, 3000, 60, 5
#: Rows: the weighting of ``weightings_setup.WEIGHTINGS`` and the solver.
ROWS = {
    "single_none": ("none", None),
    "single_default": ("default", None),
    "ensemble_none": ("none", "ensemble"),
    "ensemble_default": ("default", "ensemble"),
    "self_adaptive_none": ("none", "self_adaptive"),
    "self_adaptive_default": ("default", "self_adaptive"),
}
SOLVER_LABELS = {
    "single": "physics-informed (one network)",
    "ensemble": "physics-informed ensemble (the members' mean)",
    "self_adaptive": "self-adaptive",
}
#: ``--quick``: one setting and seed, a few steps, two members.
QUICK_RUN = dict(settings=SETTINGS[:1], seeds=1, steps=4, every=2, members=2)


def study_jobs(settings, recipe):
    """Every run: each setting, seed and row (rows inner, so that a
    partial run holds whole seeds)."""
    bases = weightings.plan_jobs(
        recipe["settings"], lambda _: ["none"], settings, recipe["seeds"]
    )
    jobs = []
    for base in bases:
        for row, (weighting, solver) in ROWS.items():
            job = dict(
                base, weighting=weighting, row=row, steps=recipe["steps"]
            )
            # its runs never drew the ScaledMLP the suite's first runs built
            job["draw_scaled"] = False
            job["records"] = recipe["steps"] // recipe["every"]
            if solver is not None:
                job.update(solver=solver, members=recipe["members"])
            jobs.append(job)
    return jobs


def runs_of(document, setting, row):
    """``{seed: run}`` of a setting and row."""
    return {
        run["seed"]: run
        for run in document["runs"]
        if run["problem"] == setting and run["weighting"] == row
    }


def summary(document, setting, solver):
    """``{row: (errors, ratios, losses, ms)}`` of a solver's two rows on a
    setting: ``{seed: error}``, the default's ``{seed: error / none's}``
    (paired by seed), the median over seeds of each condition's last
    logged loss, and the median time per step."""
    found = {}
    for weighting in ("none", "default"):
        runs = runs_of(document, setting, f"{solver}_{weighting}")
        errors = {seed: protocol.run_error(run) for seed, run in runs.items()}
        losses = {}
        for run in runs.values():
            history = run["history"].get("conditions") or {}
            if run.get("status") == "ok" and history.get("losses"):
                for name, value in history["losses"][-1].items():
                    losses.setdefault(name, []).append(value)
        losses = {name: statistics.median(v) for name, v in losses.items()}
        times = [r["ms_per_step"] for r in runs.values() if r["ms_per_step"]]
        ms = statistics.median(times) if times else math.nan
        found[weighting] = [errors, {}, losses, ms]
    none = found["none"][0]
    found["default"][1] = {
        seed: error / none[seed]
        for seed, error in found["default"][0].items()
        if seed in none and math.isfinite(none[seed]) and none[seed] > 0
    }
    return found


def _spread(values):
    """``median (min–max)`` of values, 3 significant digits."""
    values = sorted(values)
    if not values:
        return "—"
    middle = statistics.median(values)
    return f"{middle:.3g} ({values[0]:.3g}–{values[-1]:.3g})"


def render(document):
    """The page's block: the runs, a table per setting, the losses."""
    recipe = document["recipe"]
    lines = harness.parts_lines(document, lambda index, part: part["what"])
    lines += [
        f"{recipe['seeds']} seeds, {recipe['steps']} steps, an ensemble of "
        f"{recipe['members']} networks; the suite's network, optimiser, "
        "decay and points. Error: the relative L2 error, the median of each "
        "run's last records (median over seeds, and the range); ratio: the "
        "default's error over the same solver's without weighting, seed by "
        "seed (geometric mean, worst seed); losses: each condition's last "
        "logged loss, median over seeds.",
        "",
    ]
    for setting in recipe["settings"]:
        lines += [f"### `{setting}`", ""]
        table = []
        for solver, label in SOLVER_LABELS.items():
            found = summary(document, setting, solver)
            ratios = list(found["default"][1].values())
            for weighting in ("none", "default"):
                errors, _, losses, ms = found[weighting]
                ratio = "—"
                if weighting == "default" and ratios:
                    mean = protocol.geometric_mean(ratios)
                    ratio = f"{mean:.3g} (worst {max(ratios):.3g})"
                table.append(
                    [
                        label,
                        "none" if weighting == "none" else "default",
                        _spread(list(errors.values())),
                        ratio,
                        ", ".join(f"{c} {v:.2g}" for c, v in losses.items()),
                        f"{ms:.1f}",
                    ]
                )
        lines += harness.markdown_table(
            ["solver", "weighting", "error", "ratio", "losses", "ms / step"],
            table,
            align="llrrlr",
        )
        lines.append("")
    return "\n".join(lines[:-1]) + "\n"


def write_outputs(document, output_dir):
    """The page's block, from the document."""
    harness.write_page(
        os.path.join(output_dir, PAGE), SCRIPT, render(document), TITLE
    )


def run_all(args, argv):
    """The study's runs; return the document (written after each run)."""
    settings = dict(QUICK if args.quick else FULL, calibrate=0)
    recipe = dict(QUICK_RUN) if args.quick else None
    recipe = recipe or dict(
        settings=SETTINGS,
        seeds=SEEDS,
        steps=STEPS,
        every=RECORD_EVERY,
        members=MEMBERS,
    )
    recipe["settings"] = list(recipe["settings"])
    path = os.path.join(args.output_dir, "multi-model.json")
    document = dict(script=SCRIPT, parts=[], recipe=recipe, runs=[])
    document["settings"] = settings
    jobs = study_jobs(settings, recipe)
    return weightings.run_study(document, jobs, args, argv, path)


def main(argv=None):
    """Run the study, or re-render; the exit code."""
    description = __doc__.splitlines()[0]
    return harness.study_main(argv, description, run_all, write_outputs)


if __name__ == "__main__":
    sys.exit(main())
