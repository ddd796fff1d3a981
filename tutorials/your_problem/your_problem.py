# %% [markdown]
# # Tutorial: NTK loss weights on your own problem
#
# A physics-informed neural network (PINN) minimises one loss term per
# condition of its problem. When these terms train at very different
# speeds, the network satisfies some conditions and neglects the others.
# `pina-ntk` weights the terms by the traces of the blocks of the neural
# tangent kernel (NTK) $K = J J^\top$, $J$ the Jacobian of the residuals
# with respect to the network's parameters, so that every condition
# trains at a comparable rate.
#
# The other two tutorials reproduce the paper's experiments. This one
# starts where a PINA user starts: from a problem of your own. You will
#
# * write a stationary PINA `Problem` from scratch: domains, conditions, an
#   `Equation` per condition and the exact solution;
# * ask the kernel, **before training**, whether the conditions are out of
#   balance (`pina_ntk.ntk_traces`, `pina_ntk.solver_ntk_weights`);
# * train it with no weighting, with `SketchNTKWeighting()` and with PINA's
#   own `SelfAdaptiveWeighting()`, three seeds each, logged with
#   Lightning's `CSVLogger`;
# * read the logged losses, weights and traces back from the logger's
#   files with the standard library's `csv` module and plot them with
#   matplotlib, check whether the weights have settled, and look at each
#   weighting's error field;
# * see how to switch to exact weights and what they cost on this problem;
# * do the same on a time-dependent problem, and learn how to check on your
#   own problem whether a weighting moves the error at all.
#
# Every number in the text below is printed by the cells that computed it.
# What holds across problems is not this notebook's to say: the
# [problem suite](../../docs/suite.md) measures it, over problems and
# seeds the library was not tuned on.
#
# **Components used.** From [PINA](https://github.com/mathLab/PINA):
# `SpatialProblem`, `TimeDependentProblem`, `CartesianDomain`, `Union`,
# `Condition`, `Equation`, the operators `grad` and `laplacian`,
# `FeedForward`, `PhysicsInformedSingleModelSolver`, `Trainer` and
# `SelfAdaptiveWeighting`. From `pina-ntk`: `SketchNTKWeighting`,
# `NTKWeighting`, `NTKCallback`, `ntk_traces` and `solver_ntk_weights`.
# From Lightning: `CSVLogger` and a small `Callback`.
#
# **Run time.** A few minutes on one laptop CPU core; the training time of
# each run of the stored outputs is in the results tables. Set the
# environment variable `PINA_NTK_QUICK=1` to run the notebook in seconds
# with one seed and a few steps (the results are then not meaningful; the
# test suite runs it that way).

# %%
## Routine needed to run the notebook on Google Colab. pina-ntk is not on
## PyPI: install it from a clone of its repository, in the clone's root
## folder, with `pip install ".[tutorials]"` (on Colab, clone or upload the
## repository and `%cd` into its root before running this cell).
try:
    import google.colab

    IN_COLAB = True
except ImportError:
    IN_COLAB = False
if IN_COLAB:
    # !pip install ".[tutorials]"
    pass

import csv
import logging
import math
import os
import tempfile
import time
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from IPython.display import Markdown, display

# tqdm's notebook bars need ipywidgets; the plain text bar is used instead
warnings.filterwarnings("ignore", message="IProgress not found")

import lightning
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger

from pina import Condition, LabelTensor, Trainer
from pina.domain import CartesianDomain, Union
from pina.equation import Equation
from pina.model import FeedForward
from pina.operator import grad, laplacian
from pina.problem import SpatialProblem, TimeDependentProblem
from pina.solver import PhysicsInformedSingleModelSolver
from pina.weighting import SelfAdaptiveWeighting

from pina_ntk import (
    NTKCallback,
    NTKWeighting,
    SketchNTKWeighting,
    ntk_traces,
    solver_ntk_weights,
)

# Lightning's start-up banners, and warnings that do not apply here (no
# validation set; a deprecation inside Lightning itself; one process)
logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
logging.getLogger("lightning.fabric").setLevel(logging.WARNING)
warnings.filterwarnings("ignore", message=".*val_dataloader.*")
warnings.filterwarnings("ignore", message=".*LeafSpec.*")
warnings.filterwarnings("ignore", message=".*does not have many workers.*")
# small networks gain nothing from threads
torch.set_num_threads(1)

# PINA_NTK_QUICK=1: a smoke run in seconds, its results not meaningful
quick = os.environ.get("PINA_NTK_QUICK", "").strip().lower()
QUICK = quick not in ("", "0", "false", "no")
STEPS = 20 if QUICK else 1000  # full batch: one optimisation step per epoch
SEEDS = (0,) if QUICK else (0, 1, 2)
PILOT_STEPS = 5 if QUICK else 100  # the short plain run before training
LOG_EVERY = 5 if QUICK else 10  # steps between logged weights and traces
WIDTH = 64  # FeedForward: two hidden tanh layers of WIDTH neurons
# the CSV logs, in a temporary folder; pass a folder of your own to keep them
LOGS = Path(tempfile.mkdtemp(prefix="pina-ntk-tutorial-"))
print(f"{STEPS} steps, seeds {SEEDS}, logs in the temporary folder LOGS")

# %% [markdown]
# ## Your problem, written as a PINA `Problem`
#
# The example is the Helmholtz equation on the unit square, for a membrane
# clamped on three edges and free on the fourth:
#
# $$\Delta u + k^2 u = f \text{ in } (0,1)^2,\qquad u = 0 \text{ on }
# x = 0,\ x = 1,\ y = 0,\qquad \frac{\partial u}{\partial y} = 0 \text{ on }
# y = 1,$$
#
# with $k = 1$ and the forcing $f$ chosen so that the exact solution is
# $u = \sin(\pi x)\sin(\tfrac72\pi y)$, which is zero on the clamped
# edges and flat across the free one. The forcing,
# $f = (k^2 - \tfrac{53}{4}\pi^2)\,u$, is large while the boundary data
# are zero, so the interior's loss starts far above the boundary losses
# (the first table below gives them). Wang, Teng & Perdikaris (2021,
# *Understanding and mitigating gradient pathologies in physics-informed
# neural networks*) study this imbalance on a Helmholtz problem with
# Dirichlet data only. The problem here is not one of the problems of
# the suite on which `pina-ntk`'s defaults were chosen and checked.
#
# A PINA problem lists its **domains** (here the interior, the union of
# the three clamped edges, and the free edge), one **condition** per loss
# term, each an `Equation` whose function returns the residual, and a
# `solution` for measuring the error. Each condition gets its own weight.

# %%
K = 1.0  # the wavenumber
FREQ = 3.5  # the solution's frequency in y, in half periods


def exact_membrane(x, y):
    """The exact solution u = sin(pi x) sin(3.5 pi y)."""
    return torch.sin(torch.pi * x) * torch.sin(FREQ * torch.pi * y)


def helmholtz(input_, output_):
    """Residual of Laplacian(u) + k^2 u - f in the interior."""
    x, y = input_.extract(["x"]), input_.extract(["y"])
    forcing = (K**2 - (1 + FREQ**2) * torch.pi**2) * exact_membrane(x, y)
    lap_u = laplacian(output_, input_, components=["u"], d=["x", "y"])
    return lap_u + K**2 * output_ - forcing


def clamped(input_, output_):
    """Residual of u = 0."""
    return output_


def free(input_, output_):
    """Residual of du/dy = 0."""
    return grad(output_, input_, components=["u"], d=["y"])


class MembraneProblem(SpatialProblem):
    """Helmholtz equation, clamped on three edges, free on the top one."""

    output_variables = ["u"]
    spatial_domain = CartesianDomain({"x": [0, 1], "y": [0, 1]})
    domains = {
        "interior": CartesianDomain({"x": [0, 1], "y": [0, 1]}),
        "clamped": Union(
            [
                CartesianDomain({"x": 0, "y": [0, 1]}),
                CartesianDomain({"x": 1, "y": [0, 1]}),
                CartesianDomain({"x": [0, 1], "y": 0}),
            ]
        ),
        "free": CartesianDomain({"x": [0, 1], "y": 1}),
    }
    conditions = {
        "interior": Condition(domain="interior", equation=Equation(helmholtz)),
        "clamped": Condition(domain="clamped", equation=Equation(clamped)),
        "free": Condition(domain="free", equation=Equation(free)),
    }

    def solution(self, pts):
        """The exact solution at the points ``pts``."""
        return exact_membrane(pts.extract(["x"]), pts.extract(["y"]))


#: random collocation points per domain, drawn once
MEMBRANE_POINTS = {"interior": 300, "clamped": 60, "free": 20}

# %% [markdown]
# Every run below builds its solver the same way: seed with
# `lightning.seed_everything` **before** the points are drawn (then two runs
# with one seed are identical), discretise each domain, and pass a PINA
# `FeedForward` network and a weighting (`None`: no weighting) to the
# solver. `make_trainer` wraps PINA's `Trainer`; with the whole point set
# in one batch, each epoch is one optimisation step.


# %%
def make_solver(problem_class, points, weighting=None, seed=0, scale=1):
    """A PINN for ``problem_class`` on ``scale`` times ``points`` points."""
    lightning.seed_everything(seed, verbose=False)
    problem = problem_class()
    for domain, n in points.items():
        problem.discretise_domain(scale * n, "random", domains=[domain])
    model = FeedForward(
        len(problem.input_variables),
        len(problem.output_variables),
        inner_size=WIDTH,
        n_layers=2,
        func=torch.nn.Tanh,
    )
    return PhysicsInformedSingleModelSolver(problem, model, weighting=weighting)


def make_trainer(solver, steps, logger=False, callbacks=()):
    """PINA's Trainer on the CPU, without progress bar or checkpoints."""
    return Trainer(
        solver,
        max_epochs=steps,
        accelerator="cpu",
        logger=logger,
        callbacks=list(callbacks),
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )


# %% [markdown]
# ## Before training: what the kernel says
#
# `ntk_traces(solver)` returns the trace $\operatorname{Tr} K_{cc}$ of
# each condition's block of the kernel at the current parameters, and
# `solver_ntk_weights(solver)` the weights that `NTKWeighting` would give
# (for PINA's mean loss, $w_c = \bar t / (\operatorname{Tr}K_{cc}/n_c)$
# with $n_c$ the residual entries of condition $c$ and $\bar t$ the mean
# of all diagonal entries). Both need a solver whose `Trainer` has been
# created (that moves the points into the conditions). By default both
# are exact: they differentiate every residual entry, which is cheap on a
# few hundred points.
# A trace per entry far above the others' means that this condition's
# residual moves fastest under gradient descent, and that the other
# conditions lag behind it; a weight far from 1 is the correction.
#
# The kernel changes as the network learns, so `kernel_check` below asks
# it twice: at initialisation, and after a short pilot of plain training
# (`PILOT_STEPS` steps, logged, so that the losses at both moments come
# from the same run). It takes any problem class and its points: it is the
# check to run on your own problem before the real training.


# %%
def read_metrics(log_dir):
    """
    The columns of a CSVLogger run: ``{name: (steps, values)}``, each column
    without the steps at which it was not logged.
    """
    columns = {}
    with open(Path(log_dir) / "metrics.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            for name, value in row.items():
                if value and name not in ("step", "epoch"):
                    steps, values = columns.setdefault(name, ([], []))
                    steps.append(int(row["step"]))
                    values.append(float(value))
    return columns


def num(x, digits=2):
    """``x`` to ``digits`` significant figures, as Markdown."""
    if x == 0 or not math.isfinite(x):
        return str(x)
    exponent = math.floor(math.log10(abs(x)))
    if exponent >= 5 or exponent <= -4:
        return f"${x / 10**exponent:.{digits - 1}f} \\times 10^{{{exponent}}}$"
    return f"{x:,.{max(digits - 1 - exponent, 0)}f}"


def spread(weights):
    """The largest weight over the smallest."""
    return max(weights.values()) / min(weights.values())


def balance(ratio):
    """Words for a spread of weights (a factor 10 as the threshold)."""
    return "within a factor 10" if ratio < 10 else "far apart"


def kernel_check(problem_class, points):
    """
    NTK traces and weights at initialisation and after a logged pilot of
    plain training, as a Markdown table and a paragraph.
    """
    solver = make_solver(problem_class, points, seed=0)
    logger = CSVLogger(LOGS, name=f"{problem_class.__name__}/pilot")
    trainer = make_trainer(solver, PILOT_STEPS, logger=logger)
    names = list(solver.problem.conditions)
    sizes = {c: len(solver.problem.conditions[c].input) for c in names}
    traces_init = {c: float(t) for c, t in ntk_traces(solver).items()}
    weights_init = solver_ntk_weights(solver)
    trainer.train()
    traces_pilot = {c: float(t) for c, t in ntk_traces(solver).items()}
    weights_pilot = solver_ntk_weights(solver)

    log = read_metrics(logger.log_dir)
    first_loss = {c: log[f"{c}_loss"][1][0] for c in names}
    last_loss = {c: log[f"{c}_loss"][1][-1] for c in names}
    per_entry = {c: traces_init[c] / sizes[c] for c in names}
    growth = {c: traces_pilot[c] / traces_init[c] for c in names}
    table = [
        "| condition | entries | loss, first step | trace per entry at "
        "initialisation, relative to the smallest | NTK weight at "
        "initialisation | loss, last pilot step | trace growth over the "
        "pilot | NTK weight after the pilot |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in names:
        table.append(
            f"| `{c}` | {sizes[c]} | {num(first_loss[c])} | "
            f"{num(per_entry[c] / min(per_entry.values()))} | "
            f"{num(weights_init[c])} | {num(last_loss[c])} | "
            f"×{num(growth[c])} | {num(weights_pilot[c])} |"
        )
    fastest = max(names, key=growth.get)
    slowest = min(names, key=growth.get)
    loudest = max(names, key=first_loss.get)
    text = (
        f"At initialisation the NTK weights are "
        f"{balance(spread(weights_init))} (the largest is "
        f"{num(spread(weights_init))} times the smallest). The losses at the "
        f"first step range from {num(min(first_loss.values()))} to "
        f"{num(first_loss[loudest])} (`{loudest}`). Over the {PILOT_STEPS} "
        f"pilot steps the trace of `{fastest}` grew "
        f"{num(growth[fastest])}-fold, that of `{slowest}` "
        f"{num(growth[slowest])}-fold, and the weights are now "
        f"{balance(spread(weights_pilot))} (a factor "
        f"{num(spread(weights_pilot))}; the largest goes to "
        f"`{max(names, key=weights_pilot.get)}`, the smallest to "
        f"`{min(names, key=weights_pilot.get)}`)."
    )
    if spread(weights_init) < 10 <= spread(weights_pilot):
        text += (
            " The kernel at initialisation did not show the imbalance that "
            "the pilot of the planned training shows."
        )
    return "\n".join(table) + "\n\n" + text


display(Markdown(kernel_check(MembraneProblem, MEMBRANE_POINTS)))

# %% [markdown]
# ## Training with three weightings
#
# The three weightings are passed to the solver as `weighting=...`; all
# else is the same: the network, PINA's default optimiser (Adam, learning
# rate $10^{-3}$), the steps, the points and the seeds.
#
# * `None`: every condition's loss has weight 1;
# * `SketchNTKWeighting()`: pina-ntk's default, sketched NTK traces in a
#   moving average with its spaced-update safeguard, the weights as
#   published (`gradient_band=None`);
# * `SelfAdaptiveWeighting()`: PINA's rule, with its default update at
#   every step: each condition's weight is the sum of the conditions'
#   loss-gradient norms over its own (the problem suite runs it with
#   `update_every_n_epochs=100`).
#
# Logging needs nothing of pina-ntk: a `CSVLogger` records PINA's
# `<condition>_loss` columns every step, and the NTK weighting's callback
# adds `ntk_weight/<condition>`, `ntk_trace/<condition>` and the
# safeguard's counters. The weighting brings its callback by itself; it is
# passed here only to log every `LOG_EVERY` steps (PINA's full-batch
# trainer has no logging interval of its own). PINA does not log the
# weights of its own weightings, so `LogWeights`, a small Lightning
# callback, logs them as `weight/<condition>`.


# %%
class LogWeights(Callback):
    """Log ``solver.weighting``'s current weights as ``weight/<name>``."""

    def on_train_batch_end(self, trainer, solver, outputs, batch, batch_idx):
        step = trainer.global_step - 1  # the step just taken
        if step % LOG_EVERY == 0:
            for name, weight in solver.weighting.last_saved_weights().items():
                # at epoch level, as PINA logs its losses in full batch
                solver.log(
                    f"weight/{name}",
                    float(weight),
                    on_step=False,
                    on_epoch=True,
                    batch_size=1,
                )


def train(problem_class, points, key, weighting_factory, seed):
    """
    Train one PINN; return its solver, its CSV log folder and its training
    time in seconds.
    """
    weighting = weighting_factory()
    solver = make_solver(problem_class, points, weighting, seed)
    callbacks = []
    if isinstance(weighting, (SketchNTKWeighting, NTKWeighting)):
        callbacks.append(NTKCallback(log_every_n_steps=LOG_EVERY))
    elif weighting is not None:
        callbacks.append(LogWeights())
    name = f"{problem_class.__name__}/{key}"
    logger = CSVLogger(LOGS, name=name, version=seed)
    trainer = make_trainer(solver, STEPS, logger, callbacks)
    start = time.perf_counter()
    trainer.train()
    return solver, Path(logger.log_dir), time.perf_counter() - start


WEIGHTINGS = {
    "no weighting": lambda: None,
    "SketchNTKWeighting()": SketchNTKWeighting,
    "SelfAdaptiveWeighting()": SelfAdaptiveWeighting,
}
membrane_runs = {
    key: [train(MembraneProblem, MEMBRANE_POINTS, key, make, s) for s in SEEDS]
    for key, make in WEIGHTINGS.items()
}

# %% [markdown]
# ## Results
#
# ### Errors
#
# The relative $L^2$ error is measured on a regular $101 \times 101$ grid
# against the exact solution. To compare two weightings, divide their
# errors **seed by seed** (the same seed draws the same points and the same
# initial network) and take the geometric mean of the ratios, as the
# problem suite does.


# %%
def grid(problem_class, n=101):
    """A regular n x n grid of the problem's square, as a LabelTensor."""
    box = problem_class.domains["interior"].range
    (a, (x0, x1)), (b, (y0, y1)) = box.items()
    xs, ys = torch.linspace(x0, x1, n), torch.linspace(y0, y1, n)
    X, Y = torch.meshgrid(xs, ys, indexing="ij")
    return LabelTensor(torch.stack([X.flatten(), Y.flatten()], 1), [a, b])


def field_error(solver, pts):
    """``(|u - u_exact|, relative L2 error)`` of a trained solver."""
    with torch.no_grad():
        u = solver(pts).tensor.flatten()
    exact = torch.Tensor.as_subclass(solver.problem.solution(pts), torch.Tensor)
    difference = (u - exact.flatten()).abs()
    return difference, float(difference.norm() / exact.norm())


def geometric_mean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def error_table(runs, pts):
    """Markdown table of each weighting's errors, ratios and times."""
    errors = {
        key: [field_error(s, pts)[1] for s, _, _ in seeds]
        for key, seeds in runs.items()
    }
    base = errors["no weighting"]
    head = " | ".join(f"seed {s}" for s in SEEDS)
    lines = [
        f"| weighting | rel. L2 error, {head} | ÷ no weighting, per seed "
        "| ÷ no weighting, geometric mean | training time (s), mean |",
        "|---|" + "---:|" * (len(SEEDS) + 3),
    ]
    for key, errs in errors.items():
        ratios = [e / b for e, b in zip(errs, base)]
        seconds = sum(t for _, _, t in runs[key]) / len(runs[key])
        lines.append(
            f"| {key} | "
            + " | ".join(num(e) for e in errs)
            + f" | {', '.join(num(r) for r in ratios)} | "
            f"{num(geometric_mean(ratios))} | {num(seconds)} |"
        )
    return errors, "\n".join(lines)


membrane_grid = grid(MembraneProblem)
membrane_errors, membrane_table = error_table(membrane_runs, membrane_grid)
display(Markdown(membrane_table))

# %% [markdown]
# ### Losses, weights and traces, read back from the logs
#
# Each run's `CSVLogger` wrote a `metrics.csv` in its own folder
# (`LOGS/<problem>/<weighting>/version_<seed>`): one column per logged
# value, beside `step` (and `epoch` for PINA's losses), and one row per
# call to the logger, so that a step can have two rows (PINA's losses at the
# end of the epoch, the weighting's values from its callback) and a cell is
# empty where its value was not logged in that call. `read_metrics` above
# reads it with the `csv` module and drops the empty cells;
# `pandas.read_csv` reads the same file (empty cells as `NaN`). The figure draws, per
# condition (columns), the loss (top), the weight (middle: 1 without
# weighting) and, for the NTK weighting, the moving-average trace
# $\operatorname{Tr} K_{cc}$ behind its weight (bottom); one line per
# seed.

# %%
COLOURS = dict(zip(WEIGHTINGS, ["tab:grey", "tab:blue", "tab:orange"]))


def plot_histories(runs, names, title):
    """Loss, weight and trace of each condition against the steps."""
    rows = ["loss", "weight", "trace"]
    fig, axes = plt.subplots(
        3, len(names), figsize=(4 * len(names), 8), sharex=True
    )
    for key, seeds in runs.items():
        for index, (_, log_dir, _) in enumerate(seeds):
            log = read_metrics(log_dir)
            label = key if index == 0 else None
            for column, c in enumerate(names):
                candidates = {
                    "loss": [f"{c}_loss"],
                    "weight": [f"ntk_weight/{c}", f"weight/{c}"],
                    "trace": [f"ntk_trace/{c}"],
                }
                for row, quantity in enumerate(rows):
                    found = [k for k in candidates[quantity] if k in log]
                    if found:
                        steps, values = log[found[0]]
                    elif quantity == "weight":
                        steps, values = [0, STEPS - 1], [1.0, 1.0]
                    else:
                        continue
                    axes[row, column].plot(
                        steps,
                        values,
                        color=COLOURS[key],
                        lw=1,
                        alpha=0.8,
                        label=label if (row, column) == (0, 0) else None,
                    )
    for column, c in enumerate(names):
        axes[0, column].set_title(f"condition {c!r}")
        axes[-1, column].set_xlabel("optimisation step")
        for row, quantity in enumerate(rows):
            axes[row, column].set_yscale("log")
            axes[row, column].grid(alpha=0.3)
            if column == 0:
                axes[row, column].set_ylabel(quantity)
    fig.legend(loc="upper center", ncol=len(runs), bbox_to_anchor=(0.5, 1.0))
    fig.suptitle(title, y=1.04)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    return fig


MEMBRANE_NAMES = list(MembraneProblem.conditions)
plot_histories(
    membrane_runs,
    MEMBRANE_NAMES,
    "Membrane problem: loss, weight and trace per condition",
)
plt.show()


# %%
def final_losses(runs, names):
    """Each weighting's last logged loss per condition, median over seeds."""
    finals = {}
    for key, seeds in runs.items():
        for c in names:
            values = sorted(
                read_metrics(d)[f"{c}_loss"][1][-1] for _, d, _ in seeds
            )
            finals[key, c] = values[len(values) // 2]
    return finals


finals = final_losses(membrane_runs, MEMBRANE_NAMES)
lines = [
    "| weighting | " + " | ".join(f"`{c}`" for c in MEMBRANE_NAMES) + " |",
    "|---|" + "---:|" * len(MEMBRANE_NAMES),
]
for key in membrane_runs:
    lines.append(
        f"| {key} | "
        + " | ".join(num(finals[key, c]) for c in MEMBRANE_NAMES)
        + " |"
    )
ratios = {
    c: finals["no weighting", c] / finals["SketchNTKWeighting()", c]
    for c in MEMBRANE_NAMES
}
display(
    Markdown(
        "Last logged loss of each condition (median over the seeds):\n\n"
        + "\n".join(lines)
        + "\n\nWithout weighting, the last loss of each condition divided by "
        "that of `SketchNTKWeighting()`: "
        + ", ".join(f"`{c}` {num(r)}" for c, r in ratios.items())
        + "."
    )
)

# %% [markdown]
# ### Have the weights settled?
#
# A weight that still moves at the end of training is worth another look
# before trusting the error. Two readings from the same logs: how far each
# weight moved over the last quarter of the steps (the ratio of its largest
# to its smallest logged value there), and, for the NTK weighting, the
# safeguard's counters: `ntk_safeguard/accepted` and
# `ntk_safeguard/rejected` count the proposed weight updates it let
# through and those it held back (a held-back update keeps the previous
# weights).


# %%
def weight_drift(log_dir, prefix, names):
    """Largest ratio max/min of a condition's logged weight over the last
    quarter of the steps."""
    log = read_metrics(log_dir)
    drift = 1.0
    for c in names:
        if f"{prefix}{c}" not in log:
            continue
        steps, values = log[f"{prefix}{c}"]
        tail = [v for s, v in zip(steps, values) if s >= 0.75 * STEPS]
        if tail:
            drift = max(drift, max(tail) / min(tail))
    return drift


def settled_report(runs, names):
    """Markdown sentences on the weights' drift and the safeguard."""
    lines = []
    for key, prefix in (
        ("SketchNTKWeighting()", "ntk_weight/"),
        ("SelfAdaptiveWeighting()", "weight/"),
    ):
        if key not in runs:
            continue
        drifts = [weight_drift(d, prefix, names) for _, d, _ in runs[key]]
        lines.append(
            f"* `{key}`: over the last quarter of the steps, the weight that "
            f"moved most changed by a factor of {num(max(drifts))} "
            f"(per seed: {', '.join(num(x) for x in drifts)})."
        )
    sketch_runs = runs.get("SketchNTKWeighting()", [])
    if sketch_runs:
        log = read_metrics(sketch_runs[0][1])
        last = {c: log[f"ntk_weight/{c}"][1][-1] for c in names}
        lines.append(
            "* `SketchNTKWeighting()`'s last logged weights, seed 0: "
            + ", ".join(f"`{c}` {num(w)}" for c, w in last.items())
            + "."
        )
    counters = []
    for _, log_dir, _ in sketch_runs:
        log = read_metrics(log_dir)
        accepted = log["ntk_safeguard/accepted"][1][-1]
        rejected = log["ntk_safeguard/rejected"][1][-1]
        counters.append(f"{accepted:.0f} accepted, {rejected:.0f} held back")
    if counters:
        lines.append(
            "* The NTK weighting's safeguard, at the last logged step, per "
            "seed: " + "; ".join(counters) + "."
        )
    return "\n".join(lines)


display(Markdown(settled_report(membrane_runs, MEMBRANE_NAMES)))

# %% [markdown]
# ### Error fields
#
# $|u_\theta - u|$ on the grid for each weighting (seed 0; each panel has
# its own colour scale, its relative error in the title).


# %%
def plot_error_fields(runs, problem_class, pts, labels=("x", "y")):
    n = int(round(math.sqrt(len(pts))))
    extent = [
        v
        for bounds in problem_class.domains["interior"].range.values()
        for v in bounds
    ]
    fig, axes = plt.subplots(
        1, len(runs) + 1, figsize=(4.2 * (len(runs) + 1), 3.6)
    )
    solver = next(iter(runs.values()))[0][0]
    exact = torch.Tensor.as_subclass(solver.problem.solution(pts), torch.Tensor)
    panels = [("exact solution", exact.reshape(n, n), "viridis")]
    for key, seeds in runs.items():
        difference, error = field_error(seeds[0][0], pts)
        panels.append(
            (f"{key}\nerror {num(error)}", difference.reshape(n, n), "magma")
        )
    for ax, (title, values, cmap) in zip(axes, panels):
        image = ax.imshow(
            values.T, origin="lower", extent=extent, cmap=cmap, aspect="equal"
        )
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(labels[0])
        ax.set_ylabel(labels[1])
    fig.tight_layout()
    return fig


plot_error_fields(membrane_runs, MembraneProblem, membrane_grid)
plt.show()


# %% [markdown]
# A ratio of errors says which run is closer to the solution, not whether
# either solved the problem: a relative error of 1 is what $u = 0$ scores,
# and a ratio between two runs that both missed is still a failure. Here a
# run counts as **solved** when its relative $L^2$ error is below `SOLVED`
# (10 %); `verdict` reads a ratio as a gain only where the weighted run
# solved the problem on some seed.


# %%
SOLVED = 0.1  # relative L2 error below which a run counts as solved


def verdict(errors, key):
    """What the errors of ``key`` against no weighting show, in words."""
    ratios = [e / b for e, b in zip(errors[key], errors["no weighting"])]
    solved = sum(e < SOLVED for e in errors[key])
    if solved == 0:
        return (
            f"`{key}` solved the problem on none of {len(ratios)} seeds "
            f"(errors {', '.join(num(e) for e in errors[key])}, all at or "
            f"above {num(SOLVED)}; no weighting: "
            f"{', '.join(num(e) for e in errors['no weighting'])}), so its "
            f"error ratios (geometric mean {num(geometric_mean(ratios))}) "
            "compare two failures and are no gain"
        )
    lower = sum(r < 1 for r in ratios)
    if lower == len(ratios):
        sides = "below 1 on every seed"
    elif lower == 0:
        sides = "above 1 on every seed"
    else:
        sides = "on both sides of 1"
    return (
        f"`{key}` gave a lower error than no weighting on {lower} of "
        f"{len(ratios)} seeds (errors "
        f"{', '.join(num(e) for e in errors[key])} against "
        f"{', '.join(num(e) for e in errors['no weighting'])}): ratios "
        f"{sides}, geometric mean {num(geometric_mean(ratios))}; solved "
        f"(error below {num(SOLVED)}) on {solved} of {len(ratios)} seeds"
    )


display(
    Markdown(
        f"On this problem, with these settings: "
        f"{verdict(membrane_errors, 'SketchNTKWeighting()')}; "
        f"{verdict(membrane_errors, 'SelfAdaptiveWeighting()')}. "
        f"Seed 0's error fields above show where each run is wrong."
    )
)

# %% [markdown]
# These are three seeds of one problem at one step count. Whether a
# weighting helps across problems, and by how much, is what the
# [problem suite](../../docs/suite.md#the-confirmation-half) measures:
# problems and point regimes the default was not tuned on, several seeds
# each, at equal steps and at equal time, with PINA's two weightings
# beside it.
#
# ## Exact weights for a small problem
#
# `NTKWeighting(update_every_n_steps=n)` computes the traces exactly
# (Algorithm 1 of Hirsch & Pichi; the weights of Wang, Yu & Perdikaris)
# every `n` steps: each update differentiates every residual entry, so its
# cost grows with the number of points. On a problem as small as this one
# it is affordable, and it gives reference weights to compare a sketch
# with. Switching is one argument:
#
# ```python
# solver = PhysicsInformedSingleModelSolver(
#     problem, model, weighting=NTKWeighting(update_every_n_steps=100)
# )
# ```
#
# The cell below measures the cost on this problem: one exact trace
# computation (what each update does) at the tutorial's points and at two
# and four times as many, and a training run of seed 0 with exact updates
# every 100 steps. [Cost as the work grows](../../docs/scaling.md)
# measures the time per step of exact and sketched weights as the points
# and the network grow.

# %%
scales = (1,) if QUICK else (1, 2, 4)
exact_seconds = {}
for scale in scales:
    solver = make_solver(MembraneProblem, MEMBRANE_POINTS, seed=0, scale=scale)
    make_trainer(solver, 1)  # moves the points into the conditions
    entries = sum(len(c.input) for c in solver.problem.conditions.values())
    start = time.perf_counter()
    ntk_traces(solver, method="exact")
    exact_seconds[entries] = time.perf_counter() - start

exact_key = "NTKWeighting(update_every_n_steps=100)"
exact_solver, _, exact_time = train(
    MembraneProblem,
    MEMBRANE_POINTS,
    "exact",
    lambda: NTKWeighting(update_every_n_steps=100),
    0,
)
exact_error = field_error(exact_solver, membrane_grid)[1]
plain_time = membrane_runs["no weighting"][0][2]
sketch_time = membrane_runs["SketchNTKWeighting()"][0][2]
sizes_text = ", ".join(
    f"{num(s, 2)} s at {n} entries" for n, s in exact_seconds.items()
)
display(
    Markdown(
        f"One exact trace computation took {sizes_text}. Trained for {STEPS} "
        f"steps with `{exact_key}`, seed 0 took {num(exact_time)} s, against "
        f"{num(plain_time)} s without weighting and {num(sketch_time)} s "
        f"with `SketchNTKWeighting()`; its relative L2 error is "
        f"{num(exact_error)} (the sketch's, seed 0: "
        f"{num(membrane_errors['SketchNTKWeighting()'][0])})."
    )
)

# %% [markdown]
# ## A time-dependent problem
#
# On the suite, the default's large gains are all on stationary settings;
# on its time-dependent settings it moves the error less than on most
# stationary ones, and on some of them it is worse than no weighting
# (the per-problem tables of
# [the confirmation half](../../docs/suite.md#the-confirmation-half) and
# [the tuning half](../../docs/suite.md#the-tuning-half)). Being
# time-dependent is not the only reason for a small effect: it moves the
# error as little on several stationary settings (`stokes`, `lshape`,
# `neumann_cosine`, `helmholtz_4d`).
# The option that reacts to the losses, `gradient_band` (off by default),
# does not help there by design: it acts on stationary problems only (an
# error in the initial data travels through the whole time domain, and
# equalising gradient norms would lower the weights of the initial and
# boundary data), so on a problem with a temporal variable every
# `SketchNTKWeighting` trains the sketched NTK weights
# ([The weights](../../docs/weights.md#a-gradient-norm-factor-in-a-band)).
#
# The example is the advection-diffusion of a decaying travelling wave,
#
# $$u_t + c\,u_x = \nu\,u_{xx} \text{ on } (0,1)\times(0,1),\qquad
# u = e^{-\nu\kappa^2 t}\sin\big(\kappa(x - ct)\big),$$
#
# with $c = 1$, $\nu = 0.01$, $\kappa = 2\pi$, the exact solution given as
# the initial and boundary data. In PINA it is a `TimeDependentProblem`:
# the temporal variable `t` is what tells pina-ntk that the problem is not
# stationary.

# %%
SPEED, NU, KAPPA = 1.0, 0.01, 2 * torch.pi


def exact_wave(x, t):
    """The exact solution exp(-nu kappa^2 t) sin(kappa (x - c t))."""
    return torch.exp(-NU * KAPPA**2 * t) * torch.sin(KAPPA * (x - SPEED * t))


def advection_diffusion(input_, output_):
    """Residual of u_t + c u_x - nu u_xx."""
    u_t = grad(output_, input_, components=["u"], d=["t"])
    u_x = grad(output_, input_, components=["u"], d=["x"])
    u_xx = laplacian(output_, input_, components=["u"], d=["x"])
    return u_t + SPEED * u_x - NU * u_xx


def matches_exact(input_, output_):
    """Residual of u = the exact solution (initial and boundary data)."""
    return output_ - exact_wave(input_.extract(["x"]), input_.extract(["t"]))


class TravellingWaveProblem(TimeDependentProblem, SpatialProblem):
    """Advection-diffusion of a decaying travelling wave."""

    output_variables = ["u"]
    spatial_domain = CartesianDomain({"x": [0, 1]})
    temporal_domain = CartesianDomain({"t": [0, 1]})
    domains = {
        "interior": spatial_domain.update(temporal_domain),
        "initial": spatial_domain.update(CartesianDomain({"t": 0})),
        "ends": spatial_domain.partial().update(temporal_domain),
    }
    conditions = {
        "interior": Condition(
            domain="interior", equation=Equation(advection_diffusion)
        ),
        "initial": Condition(
            domain="initial", equation=Equation(matches_exact)
        ),
        "ends": Condition(domain="ends", equation=Equation(matches_exact)),
    }

    def solution(self, pts):
        """The exact solution at the points ``pts``."""
        return exact_wave(pts.extract(["x"]), pts.extract(["t"]))


WAVE_POINTS = {"interior": 300, "initial": 40, "ends": 40}

# %% [markdown]
# The same checks as before: whether the problem is stationary, the kernel
# before training (`kernel_check`), the training with and without the NTK
# weighting over the same seeds, and the paired ratio of their errors.

# %%
temporal = TravellingWaveProblem().temporal_variables
display(
    Markdown(
        f"Temporal variables: `{temporal}`, so `gradient_band`, if set, "
        f"{'would not act' if temporal else 'would act'}."
        "\n\n" + kernel_check(TravellingWaveProblem, WAVE_POINTS)
    )
)
wave_runs = {
    key: [
        train(TravellingWaveProblem, WAVE_POINTS, key, WEIGHTINGS[key], s)
        for s in SEEDS
    ]
    for key in ("no weighting", "SketchNTKWeighting()")
}
wave_grid = grid(TravellingWaveProblem)
wave_errors, wave_table = error_table(wave_runs, wave_grid)
display(Markdown(wave_table))

# %%
plot_histories(
    wave_runs,
    list(TravellingWaveProblem.conditions),
    "Travelling wave: loss, weight and trace per condition",
)
plt.show()
display(
    Markdown(
        f"On the time-dependent problem: "
        f"{verdict(wave_errors, 'SketchNTKWeighting()')}; on the membrane: "
        f"{verdict(membrane_errors, 'SketchNTKWeighting()')}.\n\n"
        + settled_report(wave_runs, list(TravellingWaveProblem.conditions))
    )
)

# %% [markdown]
# ### Checking on your own problem
#
# The recipe of this notebook carries over to any PINA problem:
#
# 1. **Is it stationary?** `problem.temporal_variables` empty:
#    `gradient_band=4` can help where a boundary or data loss stalls in the
#    first hundreds of steps while the weights stay put
#    ([where the band helps](../../docs/weights.md#where-the-band-helps-and-where-it-hurts));
#    on a time-dependent problem the sketched NTK weights are all there is,
#    and on the suite they move the error less there than on most
#    stationary problems.
# 2. **Does the kernel see an imbalance?** `solver_ntk_weights(solver)`
#    at initialisation and after a short pilot of plain training: weights
#    within a small factor of each other leave the weighting little to
#    correct, and the kernel of a freshly initialised network can differ
#    from the one it trains with.
# 3. **Does the weighting move the error?** Train with and without it on
#    a few seeds, at the step count you can afford, and divide the errors
#    seed by seed (`error_table` above). Ratios near 1, or on both sides
#    of 1, do not show that the weighting pays for its extra time on your
#    problem; ratios below 1 on every seed do. The suite's protocol
#    ([docs/suite.md](../../docs/suite.md)) does the same over several
#    seeds, at equal steps and at equal training time.
#
# ## What's next?
#
# Congratulations on completing the your-own-problem tutorial of
# `pina-ntk`! Here are a few directions you can explore:
#
# 1. **A problem where plain training fails outright** — the
#    [wave tutorial](../wave/wave_ntk.ipynb) compares a vanilla, an
#    exact-NTK and a sketch-NTK PINN on the wave equation, and draws the
#    sketched weights against the exact ones.
#
# 2. **A problem that is already balanced** — the
#    [Q-tensor tutorial](../qtensor/qtensor_ntk.ipynb) trains a PINN and an
#    NTK-PINN on a nonlinear system and checks both against finite
#    elements.
#
# 3. **Across problems** — [the problem suite](../../docs/suite.md) and
#    [docs/weightings.md](../../docs/weightings.md) compare every weighting
#    over problems and seeds; [docs/scaling.md](../../docs/scaling.md) gives
#    the cost per step as the points and the network grow.
#
# 4. **...and more** — every option of the weightings and the callback
#    (estimators, safeguard, weight bounds, the gradient band, logging,
#    diagnostics) is described in the [user guide](../../docs/guide.md) and
#    the API documentation (`docs/`, build instructions in the README).
#
# For more on PINA itself, see the
# [PINA documentation](https://mathlab.github.io/PINA/) and its tutorials.
