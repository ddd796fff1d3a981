"""Shared builders for the pina-ntk tests: small PINA problems and trainers,
recorders of what a training run did, and a check of written figures.

Imported as ``from helpers import ...``: ``tests/`` is on ``sys.path``
(``pythonpath`` in ``pyproject.toml``'s pytest options), as for
``reference.py``.
"""

import copy
import math
import os
import sys

import lightning
from lightning.pytorch.loggers import Logger
import numpy as np
import torch
from pina import Condition, LabelTensor, Trainer
from pina.domain import CartesianDomain
from pina.equation import Equation, FixedValue
from pina.model import FeedForward
from pina.operator import laplacian
from pina.problem import AbstractProblem, InverseProblem, SpatialProblem
from pina.problem.zoo import (
    AcousticWaveProblem,
    Poisson2DSquareProblem,
    SupervisedProblem,
)
from pina.solver import (
    AutoregressiveEnsembleSolver,
    CompetitivePhysicsInformedSolver,
    PhysicsInformedEnsembleSolver,
    PhysicsInformedSingleModelSolver,
    SelfAdaptivePhysicsInformedSolver,
    SupervisedEnsembleSolver,
    SupervisedSingleModelSolver,
)

from pina_ntk import NTKCallback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the benchmarks and the tests build PINA problems alike
from benchmarks.harness import own_problem  # noqa: E402


def mlp(n_in, n_out, width=16, layers=2):
    """A tanh feed-forward network in the default dtype."""
    return FeedForward(
        n_in, n_out, inner_size=width, n_layers=layers, func=torch.nn.Tanh
    )


def make_problem(kind, n=12, seed=0):
    """A discretised zoo problem with conditions of its own
    (``harness.own_problem``): ``poisson``, ``wave`` or ``supervised``."""
    # PINA's samplers draw from torch, NumPy and Python's random module.
    lightning.seed_everything(seed, verbose=False)
    if kind == "poisson":
        problem = own_problem(Poisson2DSquareProblem)
        problem.discretise_domain(n, "random")
    elif kind == "wave":
        problem = own_problem(AcousticWaveProblem)
        problem.discretise_domain(n, "random")
    elif kind == "supervised":
        x = LabelTensor(torch.rand(n, 2), ["x", "y"])
        y = LabelTensor(torch.sin(3 * x.tensor).sum(1, keepdim=True), ["u"])
        problem = own_problem(SupervisedProblem, x, y, ["x", "y"], ["u"])
    else:
        raise ValueError(kind)
    return problem


def poisson_residual(input_, output_):
    """``u'' + pi^2 sin(pi x)`` (solution ``sin(pi x)``)."""
    x = input_.extract(["x"])
    return laplacian(output_, input_, components=["u"], d=["x"]) + (
        torch.pi**2 * torch.sin(torch.pi * x)
    )


def line_problem(extra_residual, name="extra"):
    """A 1-D Poisson problem (16 interior points, both ends) with one more
    condition ``name`` of residual ``extra_residual`` on 16 points."""

    class Line(SpatialProblem):
        output_variables = ["u"]
        spatial_domain = CartesianDomain({"x": [0, 1]})
        domains = {
            "D": spatial_domain,
            "ends": CartesianDomain({"x": [0, 1]}),
            name: CartesianDomain({"x": [0, 1]}),
        }
        conditions = {
            "D": Condition(domain="D", equation=Equation(poisson_residual)),
            "ends": Condition(domain="ends", equation=FixedValue(0.0)),
            name: Condition(domain=name, equation=Equation(extra_residual)),
        }

    problem = Line()
    torch.manual_seed(0)
    problem.discretise_domain(16, "random", domains=["D", name])
    problem.discretise_domain(2, "grid", domains=["ends"])
    return problem


def make_solver(
    kind, weighting=None, seed=0, n=12, width=16, loss=None, optimizer=None
):
    """A problem of ``kind`` with a small tanh network, ``weighting`` and
    ``optimizer`` (``None``: PINA's Adam)."""
    problem = make_problem(kind, n=n, seed=seed)
    torch.manual_seed(seed)
    model = mlp(
        len(problem.input_variables), len(problem.output_variables), width
    )
    cls = (
        SupervisedSingleModelSolver
        if kind == "supervised"
        else PhysicsInformedSingleModelSolver
    )
    return cls(
        problem, model, optimizer=optimizer, weighting=weighting, loss=loss
    )


def series_problem():
    """Two trajectory sets of a rotation, for the autoregressive solver."""
    times = torch.linspace(0, 1, 10)
    phases = torch.tensor([0.0, 0.7, 1.9, 2.6, 3.1]).unsqueeze(1)
    states = torch.stack(
        [torch.sin(times + phases), torch.cos(times + phases)], dim=-1
    )  # [trajectories, time steps, features]

    class Series(AbstractProblem):
        input_variables = None
        output_variables = None
        conditions = {
            "long": Condition(input=states, unroll_length=4, n_windows=3),
            "short": Condition(
                input=0.5 * states, unroll_length=2, n_windows=2
            ),
        }

    return Series()


#: PINA's five multi-model solvers (:func:`multi_model_solver`).
MULTI_MODEL_KINDS = (
    "physics-informed ensemble",
    "supervised ensemble",
    "autoregressive ensemble",
    "self-adaptive",
    "competitive",
)


def multi_model_solver(kind, weighting, members=2, width=16, n=10, eps=0.5):
    """One of PINA's multi-model solvers (:data:`MULTI_MODEL_KINDS`) on a
    small problem, seeded: ensembles of ``members`` tanh networks of
    ``width`` (the autoregressive one with ``eps``), the self-adaptive and
    competitive solvers of one network (and PINA's default weights or
    discriminator); ``n`` points per condition."""
    lightning.seed_everything(0, verbose=False)
    if kind == "autoregressive ensemble":
        models = [mlp(2, 2, width=width) for _ in range(members)]
        return AutoregressiveEnsembleSolver(
            series_problem(), models, weighting=weighting, eps=eps
        )
    if kind == "supervised ensemble":
        models = [mlp(2, 1, width=width) for _ in range(members)]
        return SupervisedEnsembleSolver(
            make_problem("supervised", n=n), models, weighting=weighting
        )
    problem = make_problem("poisson", n=n)
    if kind == "physics-informed ensemble":
        models = [mlp(2, 1, width=width) for _ in range(members)]
        return PhysicsInformedEnsembleSolver(
            problem, models, weighting=weighting
        )
    classes = {
        "self-adaptive": SelfAdaptivePhysicsInformedSolver,
        "competitive": CompetitivePhysicsInformedSolver,
    }
    return classes[kind](problem, mlp(2, 1, width=width), weighting=weighting)


def untouched_line_problem():
    """``u = 0`` on ``[0, 1]`` (5 grid points), of a problem class of its own:
    PINA's zoo classes share their condition objects between instances, so
    an earlier test's ``Trainer`` would have turned theirs into
    input-equation conditions."""

    class Line(SpatialProblem):
        output_variables = ["u"]
        spatial_domain = CartesianDomain({"x": [0, 1]})
        domains = {"D": spatial_domain}
        conditions = {"D": Condition(domain="D", equation=FixedValue(0.0))}

    problem = Line()
    problem.discretise_domain(5, "grid")
    return problem


def make_trainer(solver, steps, callbacks=None, ntk=True, **kwargs):
    """A quiet CPU ``pina.Trainer`` doing ``steps`` full-batch steps."""
    callbacks = list(callbacks or [])
    if ntk:
        callbacks.append(NTKCallback(log_every_n_steps=1))
    options = dict(
        max_epochs=steps,
        accelerator="cpu",
        callbacks=callbacks,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        enable_checkpointing=False,
        train_size=1.0,
        val_size=0.0,
        test_size=0.0,
        log_every_n_steps=1,
    )
    options.update(kwargs)
    return Trainer(solver, **options)


class FirstBatch(lightning.Callback):
    """Keeps the first training batch and the parameters it was taken at."""

    def on_train_batch_start(self, trainer, pl_module, batch, index):
        if not hasattr(self, "batch"):
            self.batch = {name: dict(data) for name, data in batch}
            self.state = copy.deepcopy(pl_module.state_dict())


def first_step_traces(solver):
    """Train one step; return the traces its weights used, the first
    batch, and leave the solver at its first step's parameters."""
    first = FirstBatch()
    make_trainer(solver, 1, callbacks=[first]).train()
    solver.load_state_dict(first.state)
    return solver.weighting.driver.traces, first.batch


def plain_evaluate(solver, name, data):
    """Condition ``name``'s own ``evaluate`` (no recording wrapper) on
    ``data``, as a plain tensor."""
    condition = solver.problem.conditions[name]
    residual = type(condition).evaluate(condition, data, solver)
    return torch.Tensor.as_subclass(residual, torch.Tensor)


def pina_condition_loss(solver, name, data):
    """PINA's own loss of condition ``name`` at the present parameters (a
    private method: the tests' only way to the loss before the weighting
    aggregates it)."""
    condition = solver.problem.conditions[name]
    return float(solver._compute_condition_loss(condition, data, 0).detach())


class WeightHistory(lightning.Callback):
    """Records the weights the solver used at each training step."""

    def __init__(self):
        self.weights = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, idx):
        saved = pl_module.weighting.last_saved_weights()
        self.weights.append({k: float(v) for k, v in saved.items()})


class MemoryLogger(Logger):
    """A Lightning logger keeping every ``log_metrics`` call in ``rows``:
    ``(step, {name: value})``."""

    def __init__(self):
        super().__init__()
        self.rows = []

    @property
    def name(self):
        return "memory"

    @property
    def version(self):
        return 0

    def log_hyperparams(self, params, *args, **kwargs):
        pass

    def log_metrics(self, metrics, step=None):
        self.rows.append((step, dict(metrics)))

    def series(self, key):
        """:return: ``[(step, value)]`` of every row holding ``key``."""
        return [(step, row[key]) for step, row in self.rows if key in row]

    def last(self, key):
        """:return: The last value logged under ``key``."""
        return self.series(key)[-1][1]


def ntk_callback(trainer):
    """The trainer's :class:`NTKCallback`."""
    return next(c for c in trainer.callbacks if isinstance(c, NTKCallback))


def float32_exact(value):
    """
    Whether ``value`` survives a round trip through float32: every value
    computed in float32 does, one computed in float64 almost never (about
    one in 2**29). Tells a float64 result from a float32 one cast up.
    """
    return float(torch.tensor(value, dtype=torch.float32)) == value


def assert_figure(path, min_pixels=(300, 200)):
    """
    ``path`` is a PNG image with something drawn on it.

    It decodes as an image (a truncated or non-image file raises), is at
    least ``min_pixels`` (width, height), and is neither blank nor one flat
    colour: lines, text and their anti-aliasing give many distinct colours,
    and at least 1% of the pixels differ from the background.

    :return: The image as an ``(height, width, channels)`` array.
    """
    import matplotlib.image  # only where a figure is checked

    image = matplotlib.image.imread(str(path))
    height, width = image.shape[:2]
    assert (width, height) >= min_pixels, (path, width, height)
    pixels = image.reshape(height * width, -1)
    assert len(np.unique(pixels, axis=0)) > 32, path
    background = np.median(pixels, axis=0)
    drawn = np.abs(pixels - background).max(axis=1) > 0.05
    assert drawn.mean() > 0.01, (path, drawn.mean())
    return image


def worker_state(job):
    """What a benchmark worker (``harness.map_jobs``) sees of its process:
    its id, torch threads and seed; ``job="exit"`` ends it abruptly."""
    if job == "exit":
        os._exit(3)
    seed = torch.initial_seed()
    return {
        "pid": os.getpid(),
        "threads": torch.get_num_threads(),
        "seed": seed,
    }


def inverse_line_problem(upper=2.0, start=None):
    """An inverse problem: ``u'' = -mu pi^2 sin(pi x)`` on eight grid
    points, ``u(0) = 0``, five observations of ``sin(pi x)``; ``mu``
    unknown in ``[0.5, upper]`` (true 1), starting at ``start`` (``None``:
    PINA's random draw, seeded)."""

    def residual(input_, output_, params_):
        lap = laplacian(output_, input_, components=["u"], d=["x"])
        source = torch.sin(math.pi * input_.extract(["x"]))
        return lap + params_["mu"] * math.pi**2 * source

    x_data = LabelTensor(torch.linspace(0.1, 0.9, 5).reshape(-1, 1), ["x"])

    class Line(SpatialProblem, InverseProblem):
        output_variables = ["u"]
        spatial_domain = CartesianDomain({"x": [0, 1]})
        unknown_parameter_domain = CartesianDomain({"mu": [0.5, upper]})
        domains = {"D": spatial_domain, "left": CartesianDomain({"x": 0.0})}
        conditions = {
            "D": Condition(domain="D", equation=Equation(residual)),
            "left": Condition(domain="left", equation=FixedValue(0.0)),
            "data": Condition(
                input=x_data,
                target=LabelTensor(torch.sin(math.pi * x_data.tensor), ["u"]),
            ),
        }

    lightning.seed_everything(0, verbose=False)
    problem = Line()
    problem.discretise_domain(8, "grid", domains="D")
    problem.discretise_domain(1, "grid", domains="left")
    if start is not None:
        problem.unknown_parameters["mu"].data.fill_(start)
    return problem
