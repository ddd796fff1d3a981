"""NTK weights on PINA inverse problems: the unknown parameters.

PINA trains an ``InverseProblem``'s unknowns with the network, hands them to
every residual through ``solver._params`` and clamps them into their domain
in place, after the step's residuals and before its backward pass. The
weightings evaluate the recorded residuals again at the unknowns the step's
loss used, so the clamp changes nothing in a step's statistics, and with
``unknowns="kernel"`` the kernel has the unknowns' columns too.
"""

import math
import warnings

import lightning
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch
from pina import Condition, LabelTensor
from pina.domain import CartesianDomain
from pina.equation import Equation, FixedValue
from pina.model import FeedForward
from pina.operator import laplacian
from pina.optim import TorchOptimizer
from pina.problem import InverseProblem, SpatialProblem
from pina.solver import PhysicsInformedSingleModelSolver

from pina_ntk import NTKWeighting, SketchNTKWeighting, ntk_traces
from pina_ntk.integration.diagnostics import condition_calls
from pina_ntk.integration.recording import ResidualRecorder

from helpers import (
    inverse_line_problem,
    make_solver,
    make_trainer,
    mlp,
    ntk_callback,
)
from reference import jacobian_rows

#: Where the unknown starts: above the upper bound of the clamped problem.
START = 3.0


def line_solver(upper, weighting=None):
    problem = inverse_line_problem(upper, START)
    lightning.seed_everything(1, verbose=False)
    return PhysicsInformedSingleModelSolver(
        problem, mlp(1, 1), weighting=weighting
    )


def first_step_traces(upper, weighting):
    """The traces a weighting forms at the first step, with a coupling
    warning turned into an error."""
    solver = line_solver(upper, weighting)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*couples the points")
        trainer = make_trainer(solver, 1)
        trainer.train()
    return ntk_callback(trainer).statistics.traces, solver


WEIGHTINGS = {
    "exact": lambda unknowns: NTKWeighting(unknowns=unknowns),
    "predictor": lambda unknowns: SketchNTKWeighting(
        seed=3, warmup_samples=4, unknowns=unknowns
    ),
    "parameter": lambda unknowns: SketchNTKWeighting(
        seed=3, warmup_samples=4, estimator="parameter", unknowns=unknowns
    ),
}


@pytest.mark.parametrize(
    "unknowns", ["observations_first", "excluded", "kernel"]
)
@pytest.mark.parametrize("kind", sorted(WEIGHTINGS))
def test_the_clamp_of_the_unknowns_changes_no_statistic(
    float64, kind, unknowns
):
    # the same network, points, unknown and probes; in the first problem
    # PINA clamps mu from 3 to 2 between the loss and the backward pass
    # (float64: the finite differences of the sketches round alike)
    clamped, solver = first_step_traces(2.0, WEIGHTINGS[kind](unknowns))
    assert float(solver.problem.unknown_parameters["mu"]) <= 2.0
    free, solver = first_step_traces(4.0, WEIGHTINGS[kind](unknowns))
    assert float(solver.problem.unknown_parameters["mu"]) > 2.0
    assert clamped.keys() == free.keys()
    for name, value in free.items():
        assert math.isfinite(value) and value > 0.0
        assert clamped[name] == pytest.approx(value, rel=1e-5), name


def reference_traces(solver, with_unknowns):
    """``sum_i ||grad R_i||^2`` per condition, row by row, over the
    network's parameters and, if asked, the unknown."""
    params = [p for p in solver.parameters() if p.requires_grad]
    if with_unknowns:
        params.append(solver.problem.unknown_parameters["mu"])
    return {
        name: float((jacobian_rows(evaluate(batch, solver), params) ** 2).sum())
        for name, evaluate, batch in condition_calls(solver)
    }


def test_kernel_of_the_unknowns_adds_their_columns(float64):
    solver = line_solver(4.0, NTKWeighting(unknowns="kernel"))
    make_trainer(solver, 0).train()  # PINA's set-up of the conditions
    with_mu = reference_traces(solver, with_unknowns=True)
    network = reference_traces(solver, with_unknowns=False)
    # mu enters the interior residual only, and visibly so
    assert with_mu["D"] > network["D"] * (1 + 1e-3)
    for name in ("left", "data"):
        assert with_mu[name] == pytest.approx(network[name], rel=1e-12)
    for unknowns, expected in (("kernel", with_mu), ("excluded", network)):
        got = ntk_traces(solver, unknowns=unknowns)
        for name, value in expected.items():
            assert float(got[name]) == pytest.approx(value, rel=1e-10)
    # training takes the same traces at its first step
    trained, _ = first_step_traces(4.0, NTKWeighting(unknowns="kernel"))
    for name, value in with_mu.items():
        assert trained[name] == pytest.approx(value, rel=1e-10)


def test_sketched_traces_of_the_unknowns_average_to_the_kernel(float64):
    # the parameter-space sketch ||J_c z||^2 (z ~ N(0, I)) has mean
    # Tr(K_cc) and variance 2 Tr(K_cc^2): the mean of n samples lies
    # within 4 standard errors
    solver = line_solver(4.0)
    make_trainer(solver, 0, ntk=False).train()
    params = [p for p in solver.parameters() if p.requires_grad]
    params.append(solver.problem.unknown_parameters["mu"])
    samples = 400
    got = ntk_traces(
        solver,
        method="sketch",
        samples=samples,
        seed=0,
        estimator="parameter",
        unknowns="kernel",
    )
    for name, evaluate, batch in condition_calls(solver):
        rows = jacobian_rows(evaluate(batch, solver), params)
        kernel = rows @ rows.T
        trace = float(kernel.trace())
        spread = math.sqrt(2 * float((kernel**2).sum()) / samples)
        assert abs(float(got[name]) - trace) < 4 * spread, name


def test_the_unknowns_enter_the_interior_and_the_data_are_observations():
    solver = line_solver(4.0)
    make_trainer(solver, 0, ntk=False).train()  # PINA's set-up
    recorder = ResidualRecorder(solver)
    recorder.attach()
    recorder.start()
    for name, _, batch in condition_calls(solver):
        solver.problem.conditions[name].evaluate(batch, solver)
    entered, observed = recorder.inverse_roles(["D", "left", "data"])
    recorder.detach()
    assert entered == (True, False, False)
    assert observed == (False, False, True)


@pytest.mark.parametrize("kind", ["exact", "predictor"])
def test_observations_first_caps_the_interior_at_the_data(kind):
    def weights(unknowns):
        traces, solver = first_step_traces(4.0, WEIGHTINGS[kind](unknowns))
        return solver.weighting.driver.weights

    plain, capped = weights("excluded"), weights("observations_first")
    # the interior's NTK weight is above the data's: the cap acts
    assert plain["D"] > plain["data"] * 1.01
    assert capped["D"] == pytest.approx(plain["data"], rel=1e-6)
    for name in ("left", "data"):
        assert capped[name] == pytest.approx(plain[name], rel=1e-6)


def gaussian_source_problem():
    """PINA's inverse-problem tutorial: Poisson on ``[-2, 2]^2`` with the
    source ``exp(-2 (x - mu1)^2 - 2 (y - mu2)^2)``, ``u = 0`` on the edge,
    ``(mu1, mu2)`` unknown in ``[-1, 1]^2`` (true ``(0.5, 0.5)``), observed
    on a 50 x 50 grid of a finite-difference solution (201 x 201 grid)."""
    n, true = 201, (0.5, 0.5)
    grid = np.linspace(-2, 2, n)
    h, m = 4.0 / (n - 1), n - 2
    x, y = np.meshgrid(grid[1:-1], grid[1:-1], indexing="ij")
    source = np.exp(-2 * (x - true[0]) ** 2 - 2 * (y - true[1]) ** 2)
    second = sp.diags([1, -2, 1], [-1, 0, 1], shape=(m, m)) / h**2
    eye = sp.identity(m)
    laplace = (sp.kron(eye, second) + sp.kron(second, eye)).tocsc()
    u = np.zeros((n, n))
    u[1:-1, 1:-1] = spla.spsolve(laplace, source.ravel()).reshape(m, m)
    index = np.round(np.linspace(0, n - 1, 50)).astype(int)
    xs, ys = np.meshgrid(grid[index], grid[index], indexing="ij")
    points = torch.tensor(np.stack([xs.ravel(), ys.ravel()], 1)).float()
    values = torch.tensor(u[np.ix_(index, index)].reshape(-1, 1)).float()

    def poisson(input_, output_, params_):
        force = torch.exp(
            -2 * (input_.extract(["x"]) - params_["mu1"]) ** 2
            - 2 * (input_.extract(["y"]) - params_["mu2"]) ** 2
        )
        return (
            laplacian(output_, input_, components=["u"], d=["x", "y"]) - force
        )

    class GaussianSource(SpatialProblem, InverseProblem):
        output_variables = ["u"]
        spatial_domain = CartesianDomain({"x": [-2, 2], "y": [-2, 2]})
        unknown_parameter_domain = CartesianDomain(
            {"mu1": [-1, 1], "mu2": [-1, 1]}
        )
        domains = {"boundary": spatial_domain.partial(), "D": spatial_domain}
        conditions = {
            "boundary": Condition(domain="boundary", equation=FixedValue(0.0)),
            "D": Condition(domain="D", equation=Equation(poisson)),
            "data": Condition(
                input=LabelTensor(points, ["x", "y"]),
                target=LabelTensor(values, ["u"]),
            ),
        }

    return GaussianSource()


@pytest.mark.parametrize(
    "unknowns, error_range",
    [("observations_first", (0.0, 0.5)), ("excluded", (0.9, 1.01))],
)
def test_the_default_identifies_the_source_the_plain_weights_lose(
    unknowns, error_range
):
    # the tutorial's network and optimiser, 300 steps: the NTK weight of
    # the interior (about 1,500 times the data's) sends the unknowns to
    # their bound and keeps them there; capped, they head for the truth
    lightning.seed_everything(883, verbose=False)
    problem = gaussian_source_problem()
    problem.discretise_domain(20, "grid", domains=["D"])
    problem.discretise_domain(1000, "random", domains="boundary")
    model = FeedForward(
        input_dimensions=2,
        output_dimensions=1,
        layers=[20, 20, 20],
        func=torch.nn.Softplus,
    )
    solver = PhysicsInformedSingleModelSolver(
        problem,
        model,
        weighting=SketchNTKWeighting(unknowns=unknowns),
        optimizer=TorchOptimizer(torch.optim.Adam, lr=0.005),
    )
    make_trainer(solver, 300).train()
    mu = problem.unknown_parameters
    error = max(abs(float(mu[k]) - 0.5) / 0.5 for k in ("mu1", "mu2"))
    low, high = error_range
    assert low <= error <= high


@pytest.mark.parametrize("kind", ["exact", "predictor"])
def test_a_forward_problem_gets_the_same_weights_in_every_mode(kind):
    # no unknowns: the three modes are one rule (bitwise), observations or
    # not (the supervised problem holds input-target data only)
    for problem in ("poisson", "supervised"):
        found = []
        for unknowns in ("observations_first", "excluded", "kernel"):
            solver = make_solver(problem, WEIGHTINGS[kind](unknowns))
            trainer = make_trainer(solver, 3)
            trainer.train()
            found.append(ntk_callback(trainer).statistics.weights)
        assert found[0] == found[1] == found[2], problem


@pytest.mark.parametrize("unknowns", ["observations_first", "kernel"])
def test_the_unknowns_train_through_the_gradient_band_tap(unknowns):
    # at a due step the band runs the step's evaluations through views of
    # the parameters; the unknowns must still take the loss's gradient
    weighting = SketchNTKWeighting(
        seed=0, sample_every_n_steps=1, gradient_band=4.0, unknowns=unknowns
    )
    solver = line_solver(4.0, weighting)
    trainer = make_trainer(solver, 3)
    trainer.train()
    assert ntk_callback(trainer).statistics.refreshes == 3
    assert float(solver.problem.unknown_parameters["mu"]) != START
