"""Hostile and awkward inputs: each has a clear, tested outcome."""

import math
import warnings

import lightning
import numpy as np
import pytest
import torch
from pina import Condition
from pina.domain import CartesianDomain
from pina.equation import Equation, FixedValue
from pina.operator import laplacian
from pina.problem import SpatialProblem
from pina.solver import PhysicsInformedSingleModelSolver

from pina_ntk import NTKWeighting, SketchNTKWeighting, ntk_traces
from pina_ntk.core.estimators import flatten_parameters, parameter_probe
from pina_ntk.integration.diagnostics import condition_calls
from pina_ntk.integration.pina_adapter import trainable_parameters
from pina_ntk.integration.recording import replay_residual_fn

from helpers import (
    WeightHistory,
    float32_exact,
    inverse_line_problem,
    make_solver,
    make_trainer,
    mlp,
    ntk_callback,
    own_problem,
)
from reference import (
    block_traces,
    jacobian_blocks,
    parameter_sample,
    predictor_sample,
)

SKETCHES = {
    "predictor": lambda: SketchNTKWeighting(
        sample_every_n_steps=1, alpha=0.3, warmup_samples=3
    ),
    "parameter": lambda: SketchNTKWeighting(
        sample_every_n_steps=1,
        alpha=0.3,
        warmup_samples=3,
        estimator="parameter",
    ),
}


def ntk_warnings(record):
    return [w for w in record if "NTK weight proposals" in str(w.message)]


# -------------------------------------------------------- numerical trouble
class NaNAtSteps(SketchNTKWeighting):
    """A sketch whose estimates are NaN at chosen steps."""

    def __init__(self, bad_steps, **kwargs):
        # these tests follow the samples of every step
        super().__init__(**{"sample_every_n_steps": 1, **kwargs})
        self.bad_steps = bad_steps

    def complete_sample(self, residual_fn, params, prepared, generator):
        traces, kernel = super().complete_sample(
            residual_fn, params, prepared, generator
        )
        if self.driver.step in self.bad_steps:
            traces = traces * float("nan")
        return traces, kernel


@pytest.mark.parametrize("deferred", [False, True])
def test_nan_estimates_keep_last_weights_and_are_warned_of(deferred):
    weighting = NaNAtSteps(
        {2, 3, 5},
        alpha=0.5,
        warmup_samples=2,
        sample_after_backward=deferred,
    )
    solver = make_solver("wave", weighting=weighting)
    history = WeightHistory()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        make_trainer(solver, steps=9, callbacks=[history]).train()
    # a deferred sample of step t enters the weights of step t + 1
    weights = history.weights[int(deferred) :]
    assert weights[2] == weights[1] and weights[3] == weights[1]
    assert weights[5] == weights[4]
    assert weights[4] != weights[1]  # updates resumed after the bad steps
    assert all(
        math.isfinite(v) and v > 0 for step in weights for v in step.values()
    )
    # at the first rejection, then at the end with all three of nine
    first, last = [str(w.message) for w in ntk_warnings(record)]
    assert first.startswith("1 of") and "1 non finite" in first
    assert last.startswith("3 of 9 ") and "3 non finite" in last


class Scale:
    """A residual multiplier a callback can turn into NaN mid-training."""

    value = 1.0


def scaled_poisson(input_, output_):
    lap = laplacian(output_, input_, components=["u"], d=["x"])
    return (lap + torch.sin(math.pi * input_.extract(["x"]))) * Scale.value


class Line(SpatialProblem):
    output_variables = ["u"]
    spatial_domain = CartesianDomain({"x": [0, 1]})
    domains = {"D": spatial_domain, "left": CartesianDomain({"x": 0.0})}
    conditions = {
        "D": Condition(domain="D", equation=Equation(scaled_poisson)),
        "left": Condition(domain="left", equation=FixedValue(0.0)),
    }


class PoisonAt(lightning.Callback):
    def __init__(self, step):
        self.step = step

    def on_train_batch_start(self, trainer, pl_module, batch, idx):
        Scale.value = float("nan") if trainer.global_step >= self.step else 1.0


def test_nan_residuals_do_not_corrupt_weights_and_training_continues():
    lightning.seed_everything(0, verbose=False)
    problem = own_problem(Line)
    problem.discretise_domain(8, "grid", domains="D")
    problem.discretise_domain(1, "grid", domains="left")  # a single point
    solver = PhysicsInformedSingleModelSolver(
        problem,
        mlp(1, 1),
        weighting=SketchNTKWeighting(sample_every_n_steps=1, warmup_samples=2),
    )
    history = WeightHistory()
    try:
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            trainer = make_trainer(
                solver, steps=6, callbacks=[PoisonAt(3), history]
            )
            trainer.train()
    finally:
        Scale.value = 1.0
    assert len(history.weights) == 6  # training ran to the end
    assert history.weights[3:] == [history.weights[2]] * 3
    # step 3's proposal (from step 2's sample) meets a NaN residual, which
    # the safeguard rejects; the samples of steps 3 and 4 are NaN, so the
    # proposals of steps 4 and 5 are rejected for it: warned of at the
    # first, then at the end, naming the poisoned blocks
    first, last = [str(w.message) for w in ntk_warnings(record)]
    assert first.startswith("1 of 5 ") and last.startswith("2 of 6 ")
    assert "blocks ['D', 'left']" in last


@pytest.mark.parametrize("name", list(SKETCHES))
def test_exactly_zero_residual_entries(float64, name):
    solver = make_solver("poisson", weighting=SKETCHES[name]())
    last = solver.model.model[-1]
    with torch.no_grad():  # u == 0: the boundary residual is exactly zero
        last.weight.zero_()
        last.bias.zero_()
    make_trainer(solver, steps=1, ntk=False)  # the conditions get points
    calls = condition_calls(solver)
    names = [n for n, _, _ in calls]
    residual_fn = replay_residual_fn(solver, calls, names)
    params = trainable_parameters(solver)
    residuals = residual_fn(params)
    assert not residuals[names.index("boundary")].any()
    assert residuals[names.index("D")].any()
    blocks = list(jacobian_blocks(solver).values())
    # zero residual entries with nonzero rows of J: a kernel to sketch
    assert blocks[names.index("boundary")].any()
    # One sample given its probe (predictor; scales as a balanced probe's)
    # or its direction z (parameter): recomputed with the brute-force
    # kernel. A direction formed through diag(R)^+ would be NaN here.
    weighting = solver.weighting
    weighting.set_conditions(names, solver.problem)
    generator = torch.Generator().manual_seed(0)
    for scales in (None, torch.tensor([0.5, 3.0])):
        if name == "parameter" and scales is not None:
            continue  # no probe over the residual to scale
        prepared = weighting.prepare_sample(
            params, residuals, generator, scales
        )
        state = generator.get_state()
        got, _ = weighting.complete_sample(
            residual_fn, params, prepared, generator
        )
        if name == "predictor":
            expected = predictor_sample(blocks, prepared["probe"], scales)
        else:  # z ~ N(0, I_p), the next draw of the generator
            z = parameter_probe(
                flatten_parameters(params.values()),
                torch.Generator().set_state(state),
            )
            expected = parameter_sample(blocks, z)
        # float64 forward differences at the automatic step: errors near
        # sqrt(eps) ~ 1.5e-8 of the sample's largest block (the boundary
        # block's cross terms with the interior), hence the absolute part
        np.testing.assert_allclose(
            got.numpy(), expected, rtol=1e-6, atol=1e-6 * abs(expected).max()
        )
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        trainer = make_trainer(solver, steps=1)
        trainer.train()
    assert not ntk_warnings(record)  # usable estimates, not the fallback
    weights = ntk_callback(trainer).statistics.weights
    assert all(math.isfinite(w) and w > 0 for w in weights.values())


# --------------------------------------------------------------- parameters
def test_frozen_parameters_are_left_out_of_the_kernel():
    solver = make_solver("wave", weighting=NTKWeighting())
    make_trainer(solver, steps=1, ntk=False)
    full = block_traces(jacobian_blocks(solver))
    for p in solver.model.model[0].parameters():
        p.requires_grad_(False)
    frozen = block_traces(jacobian_blocks(solver))  # trainable rows only
    got = ntk_traces(solver)
    for name in full:
        assert float(got[name]) == pytest.approx(frozen[name], rel=1e-6)
        assert frozen[name] < full[name]
    trainer = make_trainer(solver, steps=2)
    trainer.train()
    assert all(w > 0 for w in ntk_callback(trainer).statistics.weights.values())


@pytest.mark.parametrize("name", ["exact", *SKETCHES])
def test_parameter_unused_by_every_condition(name):
    weighting = NTKWeighting() if name == "exact" else SKETCHES[name]()
    solver = make_solver("poisson", weighting=weighting)
    solver.model.register_parameter("unused", torch.nn.Parameter(torch.ones(3)))
    make_trainer(solver, steps=1, ntk=False)
    expected = block_traces(jacobian_blocks(solver))
    got = ntk_traces(solver)
    for key, value in expected.items():
        assert float(got[key]) == pytest.approx(value, rel=1e-6)
    trainer = make_trainer(solver, steps=2)
    trainer.train()
    assert all(w > 0 for w in ntk_callback(trainer).statistics.weights.values())


# -------------------------------------------------------------- conditions
class OnlyInterior(SpatialProblem):
    output_variables = ["u"]
    spatial_domain = CartesianDomain({"x": [0, 1]})
    domains = {"D": spatial_domain}
    conditions = {
        "D": Condition(domain="D", equation=Equation(scaled_poisson)),
    }


@pytest.mark.parametrize("name", ["exact", *SKETCHES])
def test_single_condition_has_weight_one(name):
    lightning.seed_everything(0, verbose=False)
    problem = own_problem(OnlyInterior)
    problem.discretise_domain(6, "grid")
    weighting = NTKWeighting() if name == "exact" else SKETCHES[name]()
    solver = PhysicsInformedSingleModelSolver(
        problem, mlp(1, 1), weighting=weighting
    )
    history = WeightHistory()
    make_trainer(solver, steps=3, callbacks=[history]).train()
    assert all(step == {"D": 1.0} for step in history.weights)


def test_single_point_condition_matches_exact_traces():
    lightning.seed_everything(0, verbose=False)
    problem = own_problem(Line)
    problem.discretise_domain(8, "grid", domains="D")
    problem.discretise_domain(1, "grid", domains="left")
    solver = PhysicsInformedSingleModelSolver(
        problem, mlp(1, 1), weighting=NTKWeighting()
    )
    make_trainer(solver, steps=1, ntk=False)
    assert len(solver.problem.conditions["left"].input) == 1
    expected = block_traces(jacobian_blocks(solver))
    trainer = make_trainer(solver, steps=1)
    trainer.train()
    for name, value in expected.items():
        assert ntk_callback(trainer).statistics.traces[name] == pytest.approx(
            value, rel=1e-5
        )


def test_inverse_problem_unknowns_stay_out_of_the_kernel():
    problem = inverse_line_problem()
    solver = PhysicsInformedSingleModelSolver(
        problem,
        mlp(1, 1),
        weighting=SketchNTKWeighting(sample_every_n_steps=1, warmup_samples=2),
    )
    make_trainer(solver, steps=1, ntk=False)
    network_only = block_traces(jacobian_blocks(solver))
    got = ntk_traces(solver)
    for name, value in network_only.items():
        assert float(got[name]) == pytest.approx(value, rel=1e-6)
    mu_before = float(problem.unknown_parameters["mu"].detach())
    trainer = make_trainer(solver, steps=3)
    trainer.train()
    assert set(ntk_callback(trainer).statistics.weights) == {
        "D",
        "left",
        "data",
    }
    assert (
        float(problem.unknown_parameters["mu"].detach()) != mu_before
    )  # still trained


# ------------------------------------------------------------------ dtype
@pytest.mark.parametrize(
    "name", ["exact", "predictor", "parameter", "predictor-central"]
)
def test_float64_end_to_end(float64, name):
    weighting = {
        "exact": lambda: NTKWeighting(),
        "predictor-central": lambda: SketchNTKWeighting(
            sample_every_n_steps=1, warmup_samples=2, difference="central"
        ),
        **SKETCHES,
    }[name]()
    solver = make_solver("wave", weighting=weighting)
    trainer = make_trainer(solver, steps=3)
    trainer.train()
    callback = ntk_callback(trainer)
    assert all(
        w.dtype == torch.float64
        for w in callback.statistics.weight_tensors.values()
    )
    assert callback.statistics.trace_buffer.dtype == torch.float64
    saved = solver.weighting.last_saved_weights()
    assert all(w.dtype == torch.float64 for w in saved.values())
    # computed in float64, not in float32 and stored as float64: none of
    # the traces and weights (three conditions) is a float32 value
    values = [
        *callback.statistics.traces.values(),
        *callback.statistics.weights.values(),
    ]
    assert len(values) == 6
    assert not any(float32_exact(v) for v in values), values
