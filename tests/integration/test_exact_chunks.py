"""Exact traces at a cost linear in the points (one reverse pass per
residual column, else chunk by chunk, ``NTKWeighting(chunk_size=...)``):
the same traces as the row-by-row float64 Jacobian, a fallback for models
that couple the points, and backward work linear in the residual entries."""

import warnings
from unittest import mock

import lightning
import pytest
import torch
from pina import Condition, LabelTensor
from pina.domain import CartesianDomain
from pina.equation import Equation, FixedValue, SystemEquation
from pina.operator import grad
from pina.problem import SpatialProblem
from pina.problem.zoo import InversePoisson2DSquareProblem
from pina.solver import PhysicsInformedSingleModelSolver

from pina_ntk import NTKWeighting, ntk_traces
from pina_ntk.integration import ntk_weighting

from helpers import make_solver, make_trainer, mlp, ntk_callback, own_problem
from reference import block_traces, jacobian_blocks

#: Points per chunk in these tests: the problems' conditions hold 9-16
#: points, so every condition is split and its last chunk is short.
CHUNK = 5


def _rotation(input_, output_):
    """``u' = v``, ``v' = -u``: two residual columns per point."""
    return torch.cat(
        [
            grad(output_, input_, components=["u"], d=["x"]) - output_["v"],
            grad(output_, input_, components=["v"], d=["x"]) + output_["u"],
        ],
        dim=1,
    )


class TwoOutputs(SpatialProblem):
    """Two outputs, a two-column PDE residual, a Dirichlet end and a data
    condition (``u = sin x``, ``v = cos x``)."""

    output_variables = ["u", "v"]
    spatial_domain = CartesianDomain({"x": [0, 2]})
    domains = {"D": spatial_domain, "end": CartesianDomain({"x": 0.0})}
    conditions = {
        "D": Condition(domain="D", equation=Equation(_rotation)),
        "end": Condition(
            domain="end",
            equation=SystemEquation(
                [FixedValue(0.0, ["u"]), FixedValue(1.0, ["v"])]
            ),
        ),
    }

    def __init__(self):
        super().__init__()
        x = LabelTensor(torch.linspace(0.1, 1.9, 9)[:, None], ["x"])
        target = LabelTensor(torch.cat([x.sin(), x.cos()], 1), ["u", "v"])
        self.conditions = dict(self.conditions)
        self.conditions["data"] = Condition(input=x, target=target)


def _solver(kind, model=None, n=12):
    """A float64-ready solver whose conditions hold their points."""
    if kind in ("poisson", "supervised"):
        solver = make_solver(kind, n=n)
        make_trainer(solver, steps=1, ntk=False)
        return solver
    lightning.seed_everything(0, verbose=False)
    if kind == "two_outputs":
        problem = TwoOutputs()
        problem.discretise_domain(n, "random", domains=["D"])
        problem.discretise_domain(1, "grid", domains=["end"])
    else:  # inverse: the unknowns mu1, mu2 enter the interior residual
        problem = own_problem(InversePoisson2DSquareProblem, load=False)
        problem.discretise_domain(n, "random")
    n_in, n_out = len(problem.input_variables), len(problem.output_variables)
    solver = PhysicsInformedSingleModelSolver(
        problem, model or mlp(n_in, n_out, width=12)
    )
    make_trainer(solver, steps=1, ntk=False)
    return solver


@pytest.mark.parametrize(
    "kind", ["poisson", "two_outputs", "supervised", "inverse"]
)
def test_chunked_traces_equal_the_row_by_row_jacobian(float64, kind):
    solver = _solver(kind)
    expected = block_traces(jacobian_blocks(solver))
    if kind == "inverse":  # trained, but not the kernel's parameters
        unknowns = list(solver.problem.unknown_parameters.values())
        assert all(p.requires_grad for p in unknowns)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*couples the points")
        got = ntk_traces(solver, method="exact", chunk_size=CHUNK)
    assert set(got) == set(expected)
    for name, value in expected.items():
        assert value > 0.0
        assert float(got[name]) == pytest.approx(value, rel=1e-10)


def test_training_weights_equal_the_whole_batch_weights(float64):
    def traces(chunk_size):
        solver = make_solver(
            "wave", n=15, weighting=NTKWeighting(chunk_size=chunk_size)
        )
        make_trainer(solver, steps=2).train()
        return ntk_callback(solver.trainer).statistics.traces

    chunked, whole = traces(CHUNK), traces(None)
    assert chunked.keys() == whole.keys()
    for name in whole:
        assert chunked[name] == pytest.approx(whole[name], rel=1e-10)


class BatchCentred(torch.nn.Module):
    """A network whose output is centred over the batch: every point's
    output depends on every other point."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        out = self.net(x)
        return out - out.mean(dim=0, keepdim=True)


def test_a_model_that_couples_the_points_falls_back_with_one_warning(
    float64,
):
    lightning.seed_everything(0, verbose=False)
    solver = _solver("supervised", n=12)
    solver = type(solver)(solver.problem, BatchCentred(mlp(2, 1, width=12)))
    make_trainer(solver, steps=1, ntk=False)
    expected = block_traces(jacobian_blocks(solver))
    with pytest.warns(UserWarning, match="couples the points") as caught:
        got = ntk_traces(solver, method="exact", chunk_size=CHUNK)
    assert sum("couples the points" in str(w.message) for w in caught) == 1
    for name, value in expected.items():
        # the whole batch's kernel, not the chunks' (which differs)
        assert float(got[name]) == pytest.approx(value, rel=1e-10)


def test_a_coupled_model_warns_once_per_fit_and_keeps_training(float64):
    lightning.seed_everything(0, verbose=False)
    base = make_solver("poisson", n=12)
    solver = PhysicsInformedSingleModelSolver(
        base.problem,
        BatchCentred(mlp(2, 1, width=12)),
        weighting=NTKWeighting(chunk_size=CHUNK),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_trainer(solver, steps=3).train()
    coupled = [w for w in caught if "couples the points" in str(w.message)]
    assert len(coupled) == 1
    weights = ntk_callback(solver.trainer).statistics.weights
    assert all(torch.isfinite(torch.as_tensor(w)) for w in weights.values())


def _backward_work(solver, chunk_size):
    """Elements of saved tensors read by the backward passes of one exact
    update: the work of the passes, which grows with the graph they run
    through."""
    read = []

    def pack(tensor):
        return tensor

    def unpack(tensor):
        read.append(tensor.numel())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        ntk_traces(solver, method="exact", chunk_size=chunk_size)
    return sum(read)


@pytest.mark.parametrize("kind", ["poisson", "inverse"])
def test_backward_work_is_linear_in_the_residual_entries(kind):
    # Doubling the points doubles the work of the default passes (one per
    # residual column on PINA's feed-forward network; chunk by chunk on the
    # inverse problem, whose unknowns multiply the residual) but quadruples
    # that of passes through the whole batch's graph (chunk_size=None).
    # (zoo problems share their conditions: one solver at a time)
    work = {}
    for n in (16, 32):
        solver = _solver(kind, n=n)
        work[n] = _backward_work(solver, CHUNK), _backward_work(solver, None)
    chunked, whole = (large / small for small, large in zip(*work.values()))
    assert 1.6 < chunked < 2.4
    assert whole > 3.3


@pytest.mark.parametrize("kind", ["poisson", "two_outputs", "supervised"])
def test_a_feed_forward_network_takes_a_few_passes_whatever_the_points(kind):
    # PINA's FeedForward enters its residuals through linear layers only:
    # its traces come from a few reverse passes per residual column (the
    # rest of the calls are PINA's operators and one chunk's check), not
    # from one pass per chunk or per entry
    calls = []
    for n in (12, 36):
        solver = _solver(kind, n=n)
        with mock.patch.object(
            torch.autograd, "grad", wraps=torch.autograd.grad
        ) as grad:
            ntk_traces(solver, method="exact", chunk_size=CHUNK)
        calls.append(grad.call_count)
    assert calls[0] == calls[1]


def test_mixed_precision_updates_take_the_rows():
    # under autocast the step's graph casts the weights, which the rows do
    # not follow; the update takes the residual again in full precision,
    # where they apply: no condition falls back to chunks
    taken = []
    rows = ntk_weighting.row_gradient_traces

    def spy(residual, weights):
        traces = rows(residual, weights)
        taken.append(traces is not None)
        return traces

    solver = make_solver("poisson", weighting=NTKWeighting())
    with mock.patch.object(ntk_weighting, "row_gradient_traces", spy):
        make_trainer(solver, steps=2, precision="bf16-mixed").train()
    assert taken and all(taken)
    # which a graph built under autocast would not give
    model = mlp(2, 1)
    points = torch.randn(5, 2, requires_grad=True)
    weights = list(model.parameters())
    assert rows(model(points).reshape(-1), weights) is not None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert rows(model(points).reshape(-1), weights) is None


class ScaledOutput(torch.nn.Module):
    """A network times a trainable scale per output: a parameter outside
    the matrix products, so no block's traces come by rows."""

    def __init__(self, net, outputs):
        super().__init__()
        self.net = net
        self.scale = torch.nn.Parameter(torch.ones(outputs))

    def forward(self, x):
        return self.scale * self.net(x)


class EndFirst(TwoOutputs):
    """TwoOutputs with its one-point condition first in block order: that
    block's first chunk is the whole block and cannot show a coupling."""

    conditions = {k: TwoOutputs.conditions[k] for k in ("end", "D")}


def _coupled_traces(solver):
    """The traces of a model that couples the points: the one warning, and
    the whole batch's kernel (not the chunks')."""
    expected = block_traces(jacobian_blocks(solver))
    with pytest.warns(UserWarning, match="couples the points") as caught:
        got = ntk_traces(solver, method="exact", chunk_size=CHUNK)
    (message,) = [str(w.message) for w in caught if "couples" in str(w.message)]
    assert message.startswith(f"NTKWeighting(chunk_size={CHUNK}): ")
    assert message.endswith(
        ", so the model couples the points (a layer over the batch, such as "
        "batch normalisation). Exact traces are taken through the whole "
        "batch instead, at a cost quadratic in the residual entries; pass "
        "chunk_size=None to choose that and silence this warning."
    )
    for name, value in expected.items():
        assert float(got[name]) == pytest.approx(value, rel=1e-10)


def test_blocks_in_chunks_are_checked_for_coupling_too(float64):
    # no block by rows: the chunks' own check must find the coupling
    lightning.seed_everything(0, verbose=False)
    solver = _solver("supervised", n=12)
    model = BatchCentred(ScaledOutput(mlp(2, 1, width=12), 1))
    solver = type(solver)(solver.problem, model)
    make_trainer(solver, steps=1, ntk=False)
    _coupled_traces(solver)


def test_every_block_by_rows_is_checked_not_the_first_alone(float64):
    lightning.seed_everything(0, verbose=False)
    problem = EndFirst()
    problem.discretise_domain(12, "random", domains=["D"])
    problem.discretise_domain(1, "grid", domains=["end"])
    model = BatchCentred(mlp(1, 2, width=12))
    solver = PhysicsInformedSingleModelSolver(problem, model)
    make_trainer(solver, steps=1, ntk=False)
    assert list(solver.problem.conditions)[0] == "end"
    _coupled_traces(solver)
