r"""Which loss weighting reaches the lowest error for a time budget?

Trains the same network, points and optimiser on each problem of
:data:`PROBLEMS` with each weighting of :data:`WEIGHTINGS`, recording the
relative L2 error on a fixed grid against the training time (evaluations
excluded). Writes ``weightings.json`` (after each finished run, so an
interrupted run keeps what it measured), the block of ``weightings.md`` and
one figure per problem rendered from it, and with ``--readme`` README.md's
*Choosing a weighting* table. A full run first times ``--calibrate`` steps
of each pair to start the longest jobs first.

    python benchmarks/weightings.py                 # docs/weightings.md
    python benchmarks/weightings.py --quick --output-dir /tmp/weightings
    python benchmarks/weightings.py --from-json docs/weightings.json --readme
    # split over two machines, then combined into docs/
    python benchmarks/weightings.py --problems poisson --output-dir a
    python benchmarks/weightings.py --problems wave --output-dir b
    python benchmarks/weightings.py --combine {a,b}/weightings.json
"""

import argparse
import copy
import importlib
import inspect
import math
import os
import statistics
import sys
import time
import traceback

import lightning
import torch
from lightning.pytorch.callbacks import Callback
from pina.optim import TorchOptimizer, TorchScheduler
from pina.solver import PhysicsInformedSingleModelSolver

import harness
from pina_ntk.integration import resampling
from pina_ntk.paper.experiments import training
from pina_ntk.paper.experiments.models import ScaledMLP, input_box
from pina_ntk.paper.experiments.outputs import grid_points, relative_error_fn
from pina_ntk.paper.experiments.settings import make_weighting
from pina_ntk.paper.experiments.wave import WaveSettings

SCRIPT = "weightings.py"
TITLE = "Loss weightings: error against training time"
#: Problems: the class and the fresh points per condition and step, about
#: 1000 residual entries as the wave problem's (``t0`` of acoustic_wave
#: holds two columns); ``None`` takes the class's ``PAPER_POINTS``.
ZOO = "pina.problem.zoo:"
# fmt: off
PROBLEMS = {
    "poisson": (ZOO + "Poisson2DSquareProblem", {"D": 800, "boundary": 200}),
    "helmholtz": (ZOO + "HelmholtzProblem", {"D": 800, "boundary": 200}),
    "diffusion_reaction": (
        ZOO + "DiffusionReactionProblem", {"D": 600, "t0": 200, "boundary": 200}
    ),
    "acoustic_wave": (
        ZOO + "AcousticWaveProblem", {"D": 300, "t0": 200, "boundary": 200}
    ),
    "advection": (ZOO + "AdvectionProblem", {"D": 800, "t0": 200}),
    "wave": ("pina_ntk.paper.problems:WaveProblem", None),
}
# fmt: on
#: The smoothing study's spacing in units of ``update_every`` (500 steps in
#: the full run) and its moving-average rate per step.
SPACED_FACTOR = 5
SMOOTHING_ALPHA = 1e-3
#: Weightings: label, and kind and options for the experiments' factory
#: :func:`~pina_ntk.paper.experiments.settings.make_weighting`
#: (``"every"``, ``"slow"``: ``update_every`` and 5 times it).
EXACT, SKETCH = "`NTKWeighting(update_every_n_steps=", "`SketchNTKWeighting("
# fmt: off
WEIGHTINGS = {
    "none": ("none (plain sum)", "none", {}),
    "pina_ntk": ("PINA `NeuralTangentKernelWeighting()`", "pina_ntk", {}),
    "pina_self_adaptive": (
        "PINA `SelfAdaptiveWeighting(update_every_n_epochs={every})`",
        "pina_self_adaptive", {"update_every_n_epochs": "every"},
    ),
    "exact": (EXACT + "{every})`", "exact", {"update_every_n_steps": "every"}),
    "sketch_parameter": (
        SKETCH + 'estimator="parameter")`', "sketch", {"estimator": "parameter"}
    ),
    "sketch_predictor": (
        SKETCH + 'estimator="predictor")`', "sketch", {"estimator": "predictor"}
    ),
    "exact_500": (
        EXACT + "{slow})`", "exact",
        {"update_every_n_steps": "slow", "alpha": 1.0},
    ),
    "exact_500_smoothed": (
        EXACT + f"{{slow}}, alpha={SMOOTHING_ALPHA:g})`", "exact",
        {"update_every_n_steps": "slow", "alpha": SMOOTHING_ALPHA},
    ),
}
# fmt: on
SMOOTHING_WEIGHTINGS = ("exact_500", "exact_500_smoothed")
SMOOTHING_PROBLEMS = ("wave", "helmholtz", "poisson")
SMOOTHING_COMPARED = (*SMOOTHING_WEIGHTINGS, "exact", "sketch_parameter")
SMOOTHING_COMPARED += ("sketch_predictor",)
#: Settings of every run: a tanh ``ScaledMLP``, Adam with a learning rate
#: decaying smoothly per step (a run cut at a time budget is the start of a
#: longer one), the error on a ``grid`` x ``grid`` grid ``records`` times.
FULL = dict(width=64, depth=3, fourier_features=0, fourier_scale=1.0)
FULL.update(lr=1e-3, lr_decay=0.9, lr_decay_steps=1000, grid=101, records=50)
FULL.update(update_every=100, point_scale=1.0, steps=4000, seeds=3)
FULL.update(calibrate=30, quick=False)
QUICK = dict(FULL, width=8, depth=2, grid=11, records=2, update_every=5)
QUICK.update(point_scale=0.03, steps=10, seeds=1, calibrate=0, quick=True)
QUICK_PROBLEMS = ("poisson", "wave")
#: Seeds where a problem departs from ``seeds``: ``wave`` trains the
#: tutorial's wider network, about twice the cost per step.
SEEDS = {"wave": 2}
#: ``wave`` trains the wave tutorial's network (without it no weighting
#: learnt it in a first, reduced run); in ``--quick`` only its embedding.
TUTORIAL_NETWORK = ("width", "depth", "fourier_features", "fourier_scale")
TUTORIAL_NETWORK += ("lr", "lr_decay", "lr_decay_steps")
TUTORIAL_NETWORK_PROBLEMS = ("wave",)


# ----------------------------------------------------------------- workers
def label(weighting, every):
    """The page's label of a weighting, with its actual spacing."""
    text = WEIGHTINGS[weighting][0]
    return text.format(every=every, slow=SPACED_FACTOR * every)


def build_weighting(job):
    """A fresh weighting of a job, from the experiments' shared factory
    (``None`` for ``"none"``)."""
    _, kind, options = WEIGHTINGS[job["weighting"]]
    every = job["update_every"]
    spacing = {"every": every, "slow": SPACED_FACTOR * every}
    options = {k: spacing.get(v, v) for k, v in options.items()}
    if kind == "sketch":
        options["seed"] = job["seed"]
    return make_weighting(kind, **options)


def describe_weighting(weighting):
    """The class of a weighting and its constructor options, for JSON."""
    if weighting is None:
        return {"class": None}
    cls = type(weighting)
    found = {"class": f"{cls.__module__}.{cls.__qualname__}"}
    for name in inspect.signature(cls).parameters:
        value = getattr(weighting, name, None)
        if isinstance(value, tuple):
            value = list(value)
        elif not isinstance(value, (int, float, str, bool, type(None))):
            value = f"<{type(value).__name__}>"
        found[name] = value
    return found


def problem_class(name):
    """The class of a problem of :data:`PROBLEMS`."""
    module, _, attribute = PROBLEMS[name][0].partition(":")
    return getattr(importlib.import_module(module), attribute)


def fresh_problem(name):
    """A new instance of a problem with conditions of its own: the zoo
    problems keep them in a class-level dict that the trainer fills."""
    cls = problem_class(name)
    if isinstance(cls.__dict__.get("conditions"), dict):
        own = {"conditions": copy.deepcopy(cls.conditions)}
        cls = type(cls.__name__, (cls,), dict(own, domains=dict(cls.domains)))
    return cls()


class FailureWatch(Callback):
    """Stops at the first non-finite loss or weight (Lightning would train
    on with NaN to the last step)."""

    failure = failed_at = None

    def on_train_batch_end(self, trainer, solver, outputs, batch, index):
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        loss = math.nan if loss is None else float(loss)
        weights = harness.applied_weights(solver)
        bad = {c: w for c, w in weights.items() if not math.isfinite(w)}
        if math.isfinite(loss) and not bad:
            return
        self.failed_at = step = trainer.global_step
        self.failure = f"non-finite weights {bad} at step {step}"
        if not math.isfinite(loss):
            self.failure = f"non-finite loss ({loss}) at step {step}"
        trainer.should_stop = True


def run_job(job):
    """Train one PINN (a worker's job); return the job with its results. A
    run that raises or turns non-finite (it stops there) is recorded as
    failed, with what it measured before."""
    torch.set_num_threads(1)  # the jobs share the machine's cores
    record = dict(job, status="ok", failure=None, final_weights={})
    record["history"] = {"steps": [], "seconds": [], "errors": []}
    try:
        _train(job, record)
    except Exception as error:  # recorded, not hidden: see the page
        record["failure"] = f"raised {type(error).__name__}: {error}"
        record["traceback"] = traceback.format_exc()[-3000:]
    history = record["history"]
    done = history["steps"][-1] if history["steps"] else 0
    if record["failure"] is None:
        if not all(math.isfinite(e) for e in history["errors"]):
            record["failure"] = "non-finite error on the evaluation grid"
        elif done != job["steps"]:
            record["failure"] = f"stopped at step {done} of {job['steps']}"
    if record["failure"] is not None:
        record["status"] = "failed"
    seconds = history["seconds"][-1] if history["seconds"] else 0.0
    record.update(steps_done=done, train_seconds=seconds)
    record["ms_per_step"] = 1e3 * seconds / done if done else None
    record["final_error"] = history["errors"][-1] if done else None
    return record


def _train(job, record):
    """Build and train one PINN, filling ``record`` as it goes."""
    # the grid and exact solution before seeding: the same for every run
    problem = fresh_problem(job["problem"])
    if hasattr(problem, "temporal_domain"):
        lower, upper = input_box(problem)
    else:  # input_box reads a temporal domain, which these lack
        box, names = problem.spatial_domain.range, problem.input_variables
        lower, upper = ([float(box[v][i]) for v in names] for i in (0, 1))
    axes = [torch.linspace(a, b, job["grid"]) for a, b in zip(lower, upper)]
    points = grid_points(problem.input_variables, axes)
    exact = torch.Tensor.as_subclass(problem.solution(points), torch.Tensor)
    error_fn = relative_error_fn(points, exact)
    lightning.seed_everything(job["seed"], verbose=False)
    resampling.discretise_conditions(problem, job["counts"])
    network = [job[k] for k in ("width", "depth")]
    fourier = {k: job[k] for k in ("fourier_features", "fourier_scale")}
    dimensions = len(problem.output_variables)
    model = ScaledMLP(lower, upper, dimensions, *network, **fourier)
    weighting = build_weighting(job)
    record["weighting_options"] = describe_weighting(weighting)
    gamma = job["lr_decay"] ** (1.0 / job["lr_decay_steps"])
    decay = torch.optim.lr_scheduler.ExponentialLR
    solver = PhysicsInformedSingleModelSolver(
        problem,
        model,
        optimizer=TorchOptimizer(torch.optim.Adam, lr=job["lr"]),
        scheduler=TorchScheduler(decay, gamma=gamma),
        weighting=weighting,
    )
    # the untrained network's error at 0 s: every run has a point at or
    # before any time budget
    history = record["history"]
    history.update(steps=[0], seconds=[0.0], errors=[float(error_fn(solver))])
    solver.train()  # error_fn left it in evaluation mode
    watch = FailureWatch()
    every = max(1, job["steps"] // job["records"])
    errors = training.ErrorHistory(every, error_fn)
    callbacks = [watch, resampling.ResampleCallback(1, job["counts"]), errors]
    try:
        with training.quiet_lightning(".*does not have many workers.*"):
            training.make_trainer(solver, job["steps"], callbacks).train()
    finally:
        for name, values in errors.as_dict().items():
            history[name] += values
        record["failure"] = watch.failure
        record["failed_at_step"] = watch.failed_at
        try:
            record["final_weights"] = harness.applied_weights(solver)
        except Exception:  # a failed run may leave no weights to read
            pass


# ------------------------------------------------------------------ driver
def plan_jobs(problems, weightings_of, settings, seeds=None):
    """Every job of a run: each problem, weighting (``weightings_of(problem)``)
    and seed (``seeds``, else the settings' and :data:`SEEDS`)."""
    jobs = []
    for problem in problems:
        own = dict(settings)
        if problem in TUTORIAL_NETWORK_PROBLEMS:
            names = TUTORIAL_NETWORK
            if settings["quick"]:  # the embedding only, on the tiny MLP
                names = ("fourier_features", "fourier_scale")
            own.update({name: getattr(WaveSettings(), name) for name in names})
        counts = PROBLEMS[problem][1] or problem_class(problem).PAPER_POINTS
        scale = settings["point_scale"]
        counts = {c: max(4, round(n * scale)) for c, n in counts.items()}
        count = seeds or settings["seeds"]
        if not (seeds or settings["quick"]):
            count = SEEDS.get(problem, count)
        jobs += [
            dict(own, problem=problem, weighting=w, seed=s, counts=counts)
            for w in weightings_of(problem)
            for s in range(count)
        ]
    return jobs


def key(job):
    """:return: ``(problem, weighting, seed)`` of a job or run."""
    return job["problem"], job["weighting"], job["seed"]


def pair(job):
    """:return: ``"problem/weighting"`` of a job, as calibrated."""
    return f"{job['problem']}/{job['weighting']}"


def calibrate(jobs, steps, workers, log):
    """The ms per step of each ``"problem/weighting"`` over a short run of
    ``steps`` steps, seed 0: what orders the jobs and estimates the time."""
    short = {}
    for job in jobs:
        short.setdefault(pair(job), dict(job, steps=steps, records=1, seed=0))
    costs = {}

    def keep(job, record):
        costs[pair(job)] = record.get("ms_per_step")

    harness.map_jobs(run_job, list(short.values()), workers, keep)
    log(f"calibrated {len(costs)} problem/weighting pairs over {steps} steps")
    return costs


# ---------------------------------------------------------------- analysis
def error_at(run, budget):
    """The last error a run recorded at or before ``budget`` seconds
    (``nan`` for a run that failed before the budget)."""
    history = run["history"]
    found = math.nan
    for seconds, error in zip(history["seconds"], history["errors"]):
        if seconds > budget:
            break
        found = error
    stopped = history["seconds"][-1] if history["seconds"] else 0.0
    if run["status"] != "ok" and stopped <= budget:
        return math.nan
    return found


def spread(values):
    """``(median, low, high, failed)`` of the finite values."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    failed = len(values) - len(finite)
    if not finite:
        return None, None, None, failed
    return statistics.median(finite), min(finite), max(finite), failed


def error_cell(values):
    """A table cell: ``median (low–high)``, with failed runs counted."""
    median, low, high, failed = spread(values)
    if median is None:
        return f"**failed** ({failed}/{len(values)})"
    cell = f"{median:.2e}"
    if len(values) - failed > 1:
        cell += f" ({low:.2e}–{high:.2e})"
    return cell + (f", **{failed}/{len(values)} failed**" if failed else "")


def short(value):
    """An error in two significant digits, as the summaries show it."""
    for limit, digits in ((10, 0), (1, 1), (0.1, 2)):
        if value >= limit:
            return f"{value:.{digits}f}"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def analyse(runs, problem, weightings):
    """
    One problem's numbers: the ``budget`` (the smallest median training
    time over weightings) and per weighting its ``runs``, ``final`` and
    ``at_budget`` errors, median ``ms_per_step`` and ``cost_ratio`` to
    ``none``'s.
    """
    rows = {}
    for weighting in weightings:
        own = [r for r in runs if key(r)[:2] == (problem, weighting)]
        if not own:
            continue
        own.sort(key=lambda r: r["seed"])
        ok = [r for r in own if r["status"] == "ok"]
        ms = [r["ms_per_step"] for r in (ok or own) if r["ms_per_step"]]
        times = [r["train_seconds"] for r in ok]
        rows[weighting] = dict(
            runs=own,
            final=[r["final_error"] if r in ok else math.nan for r in own],
            ms_per_step=statistics.median(ms) if ms else None,
            time=statistics.median(times) if times else None,
        )
    times = [row["time"] for row in rows.values() if row["time"]]
    budget = min(times) if times else None
    base = rows.get("none", {}).get("ms_per_step")
    for row in rows.values():
        row["at_budget"] = [
            math.nan if budget is None else error_at(r, budget)
            for r in row["runs"]
        ]
        ms = row["ms_per_step"]
        row["cost_ratio"] = ms / base if ms and base else None
    return {"budget": budget, "rows": rows}


def summary_table(document, final):
    """
    Median relative L2 after the same steps (``final``) or at each
    problem's time budget (headed by the budgets): problems as columns,
    weightings as rows, the lowest per problem in bold.
    """
    every = document["settings"]["update_every"]
    weightings, runs = document["weightings"], document["runs"]
    analyses = {p: analyse(runs, p, weightings) for p in document["problems"]}
    problems = [p for p in document["problems"] if analyses[p]["rows"]]
    cells, best, table = {}, {}, []
    for problem in problems:
        for weighting, row in analyses[problem]["rows"].items():
            median, _, _, failed = spread(
                row["final" if final else "at_budget"]
            )
            cells[problem, weighting] = (median, failed, len(row["runs"]))
            if median is not None:
                best[problem] = min(best.get(problem, median), median)
    if not final:
        budgets = [analyses[p]["budget"] for p in problems]
        budgets = ["—" if b is None else f"{b:.0f} s" for b in budgets]
        table.append(["*time budget*", *budgets])
    for weighting in weightings:
        if not any((p, weighting) in cells for p in problems):
            continue
        row = [label(weighting, every)]
        for problem in problems:
            median, failed, count = cells.get(
                (problem, weighting), (None, 0, 0)
            )
            text = "—" if not count else "failed"
            if median is not None:
                text = short(median)
                text = f"**{text}**" if text == short(best[problem]) else text
            row.append(text + (f" ({failed}/{count} failed)" if failed else ""))
        table.append(row)
    align = "l" + "r" * len(problems)
    return harness.markdown_table(["weighting", *problems], align, table)


def network_text(settings):
    """The network and optimiser of some settings, in words."""
    features, embedding = settings["fourier_features"], ""
    if features:
        embedding = (
            f"{features} random Fourier features (scale "
            f"{settings['fourier_scale']:g}) into "
        )
    return (
        f"{embedding}a tanh MLP with {settings['depth']} hidden layers of "
        f"{settings['width']}; Adam, learning rate {settings['lr']:g}, "
        f"multiplied by {settings['lr_decay']:g} every "
        f"{settings['lr_decay_steps']} steps (smoothly, per step)"
    )


def options_text(runs, weighting):
    """The constructor options a weighting ran with, as recorded."""
    for run in runs:
        options = run.get("weighting_options")
        if run["weighting"] == weighting and options:
            shown = [
                f"`{k}={v if str(v).startswith('<') else repr(v)}`"
                for k, v in options.items()
                if k != "class"
            ]
            return ", ".join(shown) or "—"
    return "—"


def make_figure(problem, analysis, every, path):
    """Error against training time, a colour per weighting: thin lines the
    seeds, thick the median over seeds, dotted the time budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    for index, (weighting, row) in enumerate(analysis["rows"].items()):
        colour = f"C{index}"
        for run in row["runs"]:
            curve = run["history"]["seconds"], run["history"]["errors"]
            ax.plot(*curve, color=colour, lw=0.7, alpha=0.35)
        ok = [r["history"] for r in row["runs"] if r["status"] == "ok"]
        if ok:
            length = min(len(h["errors"]) for h in ok)
            median = [
                [statistics.median(h[k][i] for h in ok) for i in range(length)]
                for k in ("seconds", "errors")
            ]
            ax.plot(*median, color=colour, lw=2.0)
        text = label(weighting, every).replace("`", "")
        ax.plot([], [], color=colour, lw=2.0, label=text)
    if analysis["budget"]:
        budget = analysis["budget"]
        ax.axvline(budget, color="0.4", ls=":", lw=1.0, label="time budget")
    ax.set_yscale("log")
    ax.set_xlabel("training time (s, evaluations excluded)")
    ax.set_ylabel("relative L2 error")
    ax.set_title(f"{problem}: error against training time")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -------------------------------------------------------------------- page
def problem_section(document, problem):
    """One problem's section: its set-up, table, failures and figure."""
    runs, parts = document["runs"], document["parts"]
    every = document["settings"]["update_every"]
    analysis = analyse(runs, problem, document["weightings"])
    if not analysis["rows"]:
        return []
    first = next(iter(analysis["rows"].values()))["runs"]
    budget = analysis["budget"]
    budget = "—" if budget is None else f"{budget:.0f} s"
    machines = {
        parts[r.get("part", 0)]["machine_label"]
        for r in runs
        if r["problem"] == problem
    }
    counts = ", ".join(f"{c} {n}" for c, n in first[0]["counts"].items())
    lines = [
        "",
        f"## {problem}",
        "",
        f"`{PROBLEMS[problem][0]}`; points per step: {counts}; "
        f"{first[0]['steps']} steps, {len(first)} seed(s); time budget "
        f"{budget}; ran on {'; '.join(sorted(machines))}.",
    ]
    if any(first[0][k] != document["settings"][k] for k in TUTORIAL_NETWORK):
        lines += ["", f"Network of this problem: {network_text(first[0])}."]
    table, notes = [], []
    for weighting, row in analysis["rows"].items():
        name = label(weighting, every)
        ms, ratio = row["ms_per_step"], row["cost_ratio"]
        weights = [w for r in row["runs"] for w in r["final_weights"].values()]
        finite = [w for w in weights if math.isfinite(w)]
        shown = f"{min(finite):.2g}–{max(finite):.2g}" if finite else "—"
        if len(finite) < len(weights):
            shown += " **non-finite**"
        errors = [error_cell(row["final"]), error_cell(row["at_budget"])]
        ms = "—" if ms is None else f"{ms:.1f}"
        ratio = "—" if ratio is None else f"{ratio:.2f}×"
        table.append([name, *errors, ms, ratio, shown])
        for run in row["runs"]:
            start = (run["history"]["errors"] or [None])[0]
            note = run["failure"]
            if run["status"] == "ok" and run["final_error"] >= start:
                note = (
                    f"final error above the untrained network's ({start:.2e})"
                )
            if note:
                notes.append(f"- {name}, seed {run['seed']}: {note}")
    header = ["weighting", f"rel. L2 at step {first[0]['steps']}"]
    header += [f"rel. L2 at {budget}", "ms/step", "cost per step"]
    header.append("final weights")
    lines += ["", *harness.markdown_table(header, "lrrrrr", table)]
    if notes:
        lines += ["", "Failures and notes:", "", *notes]
    figure = f"figures/weightings/{problem}.png"
    return lines + ["", f"![{problem}: error against time]({figure})"]


def render(document):
    """The page's generated block, from the results document alone."""
    runs, settings = document["runs"], document["settings"]

    def problems_of(index, part):
        mine = {r["problem"] for r in runs if r.get("part", 0) == index}
        return ", ".join(sorted(mine))

    failed = sum(r["status"] != "ok" for r in runs)
    steps = ", ".join(map(str, sorted({r["steps"] for r in runs})))
    recorded = [
        [label(w, settings["update_every"]), options_text(runs, w)]
        for w in document["weightings"]
    ]
    lines = harness.parts_lines(document, problems_of) + [
        f"Runs: {len(runs)} of {document['planned_runs']} planned ({failed} "
        "failed). Network and optimiser unless a problem says otherwise: "
        f"{network_text(settings)}. Error: relative L2 on a "
        f"{settings['grid']}² grid of the input box, {settings['records']} "
        "times per run.",
        "",
        "## Summary",
        "",
        "Median relative L2 over seeds; per problem the lowest in bold; — "
        "where the weighting was not run.",
        "",
        f"After the same number of steps ({steps}):",
        "",
        *summary_table(document, final=True),
        "",
        "After the same training time (each problem's time budget):",
        "",
        *summary_table(document, final=False),
        "",
        "## Weightings as recorded",
        "",
        *harness.markdown_table(["weighting", "options"], "ll", recorded),
    ]
    for problem in document["problems"]:
        lines += problem_section(document, problem)
    smoothed = {
        r["problem"] for r in runs if r["weighting"] in SMOOTHING_WEIGHTINGS
    }
    shown = [p for p in SMOOTHING_PROBLEMS if p in smoothed]
    if shown:
        compared = dict(document, problems=shown, weightings=SMOOTHING_COMPARED)
        lines += [
            "",
            "## Smoothing exact weights",
            "",
            "Median over seeds of the relative L2 at the last step (per "
            "problem the lowest in bold; ranges in the sections above).",
            "",
            *summary_table(compared, final=True),
        ]
    return "\n".join(lines) + "\n"


#: The markers of README.md's compact table.
README_MARKERS = ("<!-- weightings-table -->", "<!-- /weightings-table -->")


def readme_table(document):
    """README.md's *Choosing a weighting* table: the median relative L2 at
    each problem's time budget, the lowest in bold, and a link."""
    link = (
        "Medians over seeds at each problem's time budget; set-up, ranges "
        "and costs: [docs/weightings.md](docs/weightings.md)."
    )
    table = summary_table(document, final=False)
    return "\n".join([*table, "", link]) + "\n"


def write_outputs(document, output_dir):
    """Write the JSON, the page and the figures."""
    harness.write_json(os.path.join(output_dir, "weightings.json"), document)
    page = os.path.join(output_dir, "weightings.md")
    harness.write_page(page, SCRIPT, render(document), TITLE)
    folder = os.path.join(output_dir, "figures", "weightings")
    for problem in document["problems"]:
        analysis = analyse(document["runs"], problem, document["weightings"])
        if analysis["rows"]:
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, f"{problem}.png")
            every = document["settings"]["update_every"]
            make_figure(problem, analysis, every, path)


# ------------------------------------------------------------ command line
def main(argv=None):
    """Run the benchmark, or combine or re-render results; the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--problems", nargs="+", choices=list(PROBLEMS))
    smoothing = " ".join(SMOOTHING_PROBLEMS)
    add(
        "--weightings",
        nargs="+",
        choices=list(WEIGHTINGS),
        help=f"on every problem (default all; {smoothing} only)",
    )
    add("--seeds", type=int, help="per weighting (default 3, wave 2)")
    add("--steps", type=int, help="of every run (default 4000)")
    add(
        "--calibrate",
        type=int,
        metavar="STEPS",
        help="steps of the calibration run made first (default 30; "
        "--quick: 0, none)",
    )
    add(
        "--resume",
        action="store_true",
        help="keep the runs of the same settings already in the output "
        "folder's weightings.json",
    )
    add(
        "--readme",
        nargs="?",
        const=os.path.join(harness.ROOT, "README.md"),
        metavar="FILE",
        help="also write the compact table into README.md (or FILE)",
    )
    harness.add_run_flags(parser, os.path.join(harness.ROOT, "docs"))
    args = parser.parse_args(argv)
    for name in ("seeds", "steps", "workers"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1.")
    if args.from_json:
        document = harness.read_json(args.from_json)
    elif args.combine:
        documents = [harness.read_json(path) for path in args.combine]
        command = harness.public_command(SCRIPT, argv)
        try:
            document = harness.combine_documents(documents, key, command)
        except ValueError as error:
            parser.error(str(error))
        found = {r["problem"] for r in document["runs"]}
        document["problems"] = [p for p in PROBLEMS if p in found]
        found = {r["weighting"] for r in document["runs"]}
        document["weightings"] = [w for w in WEIGHTINGS if w in found]
        document["planned_runs"] = sum(d["planned_runs"] for d in documents)
    else:
        document = run_all(args, argv)
    write_outputs(document, args.output_dir)
    if args.readme:
        table = readme_table(document)
        harness.write_block(args.readme, *README_MARKERS, table)
    return 130 if document.get("interrupted") else 0


def run_all(args, argv):
    """Train every job of the command line; return the results."""
    settings = dict(QUICK if args.quick else FULL)
    for name in ("steps", "calibrate"):
        if getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    problems = args.problems or list(QUICK_PROBLEMS if args.quick else PROBLEMS)

    def weightings_of(problem):
        if args.weightings:
            return list(dict.fromkeys(args.weightings))
        smoothing = problem in SMOOTHING_PROBLEMS
        return [
            w for w in WEIGHTINGS if smoothing or w not in SMOOTHING_WEIGHTINGS
        ]

    def log(message):
        print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    part = harness.provenance(
        SCRIPT, argv, args.machine_label, workers=args.workers, threads=1
    )
    jobs = plan_jobs(problems, weightings_of, settings, args.seeds)
    costs = {}
    if settings["calibrate"]:
        costs = calibrate(jobs, settings["calibrate"], args.workers, log)

    def seconds(job):
        ms = costs.get(pair(job)) or 0.0
        return job["steps"] * ms / 1e3

    kept, path = [], os.path.join(args.output_dir, "weightings.json")
    if args.resume and os.path.exists(path):
        # a recorded run is kept when it has every setting of its job
        done = {key(r): r for r in harness.read_json(path)["runs"]}

        def same(job):
            return job.items() <= done.get(key(job), {}).items()

        kept = [done[key(j)] for j in jobs if same(j)]
        jobs = [j for j in jobs if not same(j)]
        log(f"resuming: {len(kept)} runs kept, {len(jobs)} to run")
    jobs.sort(key=seconds, reverse=True)  # longest first
    if costs:
        minutes = sum(map(seconds, jobs)) / args.workers / 60
        log(
            f"{len(jobs)} runs, {args.workers} workers: about {minutes:.0f} min"
        )
    chosen = [w for p in problems for w in weightings_of(p)]
    document = {
        "script": SCRIPT,
        "parts": [part],
        "settings": settings,
        "problems": problems,
        "weightings": list(dict.fromkeys(chosen)),
        "planned_runs": len(jobs) + len(kept),
        "calibration_ms_per_step": costs,
        "runs": [dict(r, part=0) for r in kept],
    }

    def keep(job, record):
        if "worker_error" in record:
            record = dict(job, status="failed", failure=record["worker_error"])
            record.update(history={"steps": [], "seconds": [], "errors": []})
            record.update(final_weights={}, final_error=None, ms_per_step=None)
            record["train_seconds"] = None
        document["runs"].append(dict(record, part=0))
        harness.write_json(path, document)
        done, planned = len(document["runs"]), document["planned_runs"]
        log(
            f"{done}/{planned} {job['problem']} {job['weighting']} seed "
            f"{job['seed']}: {record['status']}"
        )

    try:
        harness.map_jobs(run_job, jobs, args.workers, keep)
    except KeyboardInterrupt:
        document["interrupted"] = True
    harness.finish(part, started)
    return document


if __name__ == "__main__":
    sys.exit(main())
