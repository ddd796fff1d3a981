"""The kernel is that of the loss each solver minimises, in float64.

PINA's causal, RBA and autoregressive solvers weigh each squared residual
entry inside a condition's loss by a factor ``f`` out of the autograd
graph: the loss is ``mean(f * r^2)``, the mean of the squares of
``s = sqrt(f) * r``, and the kernel of that loss is the kernel of ``s``.
Each test derives ``f`` from the solver's documented rule, checks it
against the condition loss PINA itself computes at the same parameters,
builds the Jacobian of ``s`` row by row in float64 (``reference.py``) and
compares its block traces with those ``NTKWeighting`` used at the first
step. A weighting that took the plain residual, or ``f`` instead of its
square root, fails them. The physics-informed, supervised and
gradient-enhanced solvers' kernels are those of the plain residual, in
float64 too.
"""

import lightning
import pytest
import torch
from pina import Condition, LabelTensor
from pina.domain import CartesianDomain
from pina.equation import Equation, FixedValue
from pina.operator import grad, laplacian
from pina.problem import SpatialProblem, TimeDependentProblem
from pina.solver import (
    AutoregressiveSingleModelSolver,
    CausalPhysicsInformedSingleModelSolver,
    GradientPhysicsInformedSingleModelSolver,
    PhysicsInformedSingleModelSolver,
    RBAPhysicsInformedSingleModelSolver,
    SupervisedSingleModelSolver,
)

from pina_ntk import NTKWeighting

from helpers import (
    first_step_traces,
    make_problem,
    mlp,
    pina_condition_loss,
    plain_evaluate,
    series_problem,
)
from reference import jacobian_rows

# every test in float64 (the fixture of conftest.py)
pytestmark = pytest.mark.usefixtures("float64")


def trace(residual, solver):
    """``sum_i ||grad_theta s_i||^2`` in float64, row by row."""
    params = [p for p in solver.parameters() if p.requires_grad]
    return float((jacobian_rows(residual, params) ** 2).sum())


evaluate = plain_evaluate


def time_sliced(solver, batch, eps, slices):
    """``D``'s residual on each of the causal solver's time slices of the
    batch's spatial points, their squares and the causal factors
    ``exp(-eps * cumsum of the squares)``, derived here from PINA's rule."""
    spatial = batch["D"]["input"].extract(solver.spatial_variables)
    residuals = []
    for time in torch.linspace(0, 1, slices):
        times = LabelTensor(torch.full((len(spatial), 1), float(time)), ["t"])
        points = LabelTensor.cat([spatial, times], dim=1).requires_grad_(True)
        residuals.append(evaluate(solver, "D", {"input": points}))
    squares = torch.stack([r.detach() ** 2 for r in residuals])
    return residuals, squares, torch.exp(-eps * torch.cumsum(squares, dim=0))


def test_causal_solver_kernel_is_its_time_weighted_residual():
    eps, slices = 50.0, 3
    lightning.seed_everything(0, verbose=False)
    problem = make_problem("wave", n=6)
    solver = CausalPhysicsInformedSingleModelSolver(
        problem,
        mlp(2, 1, width=6),
        weighting=NTKWeighting(safeguard=None),
        eps=eps,
        n_steps=slices,
        regularized_conditions=["D"],
    )
    traces, batch = first_step_traces(solver)
    residuals, squares, factors = time_sliced(solver, batch, eps, slices)
    assert float(factors.min()) < 0.9  # the time weights matter here
    # the factors are the solver's: its loss is mean(f * r^2)
    assert pina_condition_loss(solver, "D", batch["D"]) == pytest.approx(
        float((factors * squares).mean()), rel=1e-12
    )
    effective = torch.cat([f.sqrt() * r for f, r in zip(factors, residuals)])
    assert traces["D"] == pytest.approx(trace(effective, solver), rel=1e-6)
    for name in ("t0", "boundary"):  # not regularised: the plain residual
        plain_residual = evaluate(solver, name, batch[name])
        assert traces[name] == pytest.approx(
            trace(plain_residual, solver), rel=1e-6
        )


def heat_residual(input_, output_):
    """``u_t - u_xx / 10``."""
    u_t = grad(output_, input_, components=["u"], d=["t"])
    u_xx = laplacian(output_, input_, components=["u"], d=["x"])
    return u_t - u_xx / 10


def heat_with_data():
    """A heat problem whose data condition comes first: the causal solver
    regularises ``data`` and ``D``, and PINA leaves the data condition's
    loss as it is (its class has its own conditions: ``own_problem``
    cannot copy a data condition)."""
    lightning.seed_everything(0, verbose=False)
    x = LabelTensor(torch.rand(5, 2), ["x", "t"])
    target = LabelTensor(torch.sin(torch.pi * x.extract(["x"]).tensor), ["u"])

    class HeatWithData(SpatialProblem, TimeDependentProblem):
        output_variables = ["u"]
        spatial_domain = CartesianDomain({"x": [0, 1]})
        temporal_domain = CartesianDomain({"t": [0, 1]})
        domains = {
            "D": CartesianDomain({"x": [0, 1], "t": [0, 1]}),
            "t0": CartesianDomain({"x": [0, 1], "t": 0}),
        }
        conditions = {
            "data": Condition(input=x, target=target),
            "D": Condition(domain="D", equation=Equation(heat_residual)),
            "t0": Condition(domain="t0", equation=FixedValue(0.0)),
        }

    problem = HeatWithData()
    problem.discretise_domain(6, "random", domains=["D", "t0"])
    return problem


def test_causal_solver_leaves_a_regularised_data_condition_plain():
    # a data condition named before "D" in the regularised conditions:
    # its loss stays plain, and "D" still takes its time factors
    eps, slices = 50.0, 3
    solver = CausalPhysicsInformedSingleModelSolver(
        heat_with_data(),
        mlp(2, 1, width=6),
        weighting=NTKWeighting(safeguard=None),
        eps=eps,
        n_steps=slices,
        regularized_conditions=["data", "D"],
    )
    traces, batch = first_step_traces(solver)
    residuals, squares, factors = time_sliced(solver, batch, eps, slices)
    assert float(factors.min()) < 0.9
    effective = torch.cat([f.sqrt() * r for f, r in zip(factors, residuals)])
    assert traces["D"] == pytest.approx(trace(effective, solver), rel=1e-6)
    data = batch["data"]
    misfit = solver.forward(data["input"]) - data["target"]
    misfit = torch.Tensor.as_subclass(misfit, torch.Tensor)
    assert pina_condition_loss(solver, "data", data) == pytest.approx(
        float((misfit.detach() ** 2).mean()), rel=1e-12
    )
    assert traces["data"] == pytest.approx(trace(misfit, solver), rel=1e-6)


@pytest.mark.parametrize("chunk_size", [8, 3])
def test_rba_solver_kernel_is_its_attention_weighted_residual(
    chunk_size, recwarn
):
    # chunks of 3 of 8 points: the first chunk, checked against the step's
    # residual, takes its own rows of the attention weights
    lightning.seed_everything(0, verbose=False)
    # its attention buffers are sized from the conditions when it is built
    problem = make_problem("poisson", n=8)
    solver = RBAPhysicsInformedSingleModelSolver(
        problem,
        mlp(2, 1, width=6),
        weighting=NTKWeighting(safeguard=None, chunk_size=chunk_size),
        eta=0.5,
        gamma=0.9,
    )
    traces, batch = first_step_traces(solver)
    assert not [w for w in recwarn if "couples the points" in str(w.message)]
    for name in ("D", "boundary"):
        residual = evaluate(solver, name, batch[name])
        # the attention weights after the first update from zero:
        # eta * |r_i| / max |r| (PINA's RBA rule)
        norms = residual.detach().norm(dim=1, keepdim=True)
        attention = 0.5 * norms / norms.max()
        buffer = getattr(solver, solver.weight_buffers[name])
        buffer.zero_()  # as before the first step, for PINA's own loss
        assert pina_condition_loss(solver, name, batch[name]) == (
            pytest.approx(float((attention * residual**2).mean()), rel=1e-12)
        )
        effective = attention.sqrt() * residual
        assert traces[name] == pytest.approx(trace(effective, solver), rel=1e-6)


@pytest.mark.parametrize("chunk_size", [8, 2])
def test_autoregressive_solver_kernel_is_its_step_weighted_residual(
    chunk_size, recwarn
):
    # its residual runs over the unrolling steps first, the trajectories
    # second: chunks of 2 of the 5 trajectories take their own entries
    eps = 3.0
    lightning.seed_everything(0, verbose=False)
    solver = AutoregressiveSingleModelSolver(
        series_problem(),
        mlp(2, 2, width=6),
        weighting=NTKWeighting(safeguard=None, chunk_size=chunk_size),
        eps=eps,
    )
    traces, batch = first_step_traces(solver)
    assert not [w for w in recwarn if "couples the points" in str(w.message)]
    for name in ("long", "short"):
        residual = evaluate(solver, name, batch[name])
        squares = residual.detach() ** 2
        # the first running average of each unrolling step's loss is that
        # step's mean loss; f_t = exp(-eps * cumsum of the averages)
        means = squares.mean(dim=tuple(range(1, squares.dim())), keepdim=True)
        factors = torch.exp(-eps * torch.cumsum(means, dim=0))
        assert float(factors.min()) < 0.9
        solver.on_train_epoch_start()  # PINA resets its running averages
        assert pina_condition_loss(solver, name, batch[name]) == (
            pytest.approx(float((factors * squares).mean()), rel=1e-12)
        )
        effective = factors.sqrt() * residual
        assert traces[name] == pytest.approx(trace(effective, solver), rel=1e-6)


@pytest.mark.parametrize("kind", ["physics-informed", "gradient", "supervised"])
def test_the_other_solvers_kernels_are_their_condition_residuals(kind):
    # the physics-informed and supervised losses are mean(r^2): the kernel
    # of r; the gradient-enhanced one adds a penalty on grad_x r, left out
    # of the kernel (docs/guide.md): the kernel of r too
    lightning.seed_everything(0, verbose=False)
    weighting = NTKWeighting(safeguard=None)
    if kind == "supervised":
        problem = make_problem("supervised", n=10)
        solver = SupervisedSingleModelSolver(
            problem, mlp(2, 1, width=6), weighting=weighting
        )
    else:
        problem = make_problem("poisson", n=8)
        solver_class = PhysicsInformedSingleModelSolver
        if kind == "gradient":
            solver_class = GradientPhysicsInformedSingleModelSolver
        solver = solver_class(problem, mlp(2, 1, width=6), weighting=weighting)
    traces, batch = first_step_traces(solver)
    for name in problem.conditions:
        residual = evaluate(solver, name, batch[name])
        if kind != "gradient":
            assert pina_condition_loss(solver, name, batch[name]) == (
                pytest.approx(float((residual.detach() ** 2).mean()), rel=1e-12)
            )
        assert traces[name] == pytest.approx(trace(residual, solver), rel=1e-6)
