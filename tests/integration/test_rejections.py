"""Every proposal of weights that is not used is counted, by reason, and a
block the predictor's cross terms drown is sketched on its own.

The counts are read from the logged values (``ntk_rejected/<reason>``,
``ntk_proposals``) and the warnings; the expected counts follow from the
steps at which a test forces a sample to be non-finite or negative.
"""

import math
import os
import sys
import warnings

import lightning
import pytest
import torch
from pina import Condition
from pina.domain import CartesianDomain, Union
from pina.equation import Equation
from pina.model import FeedForward
from pina.operator import grad, laplacian
from pina.problem import SpatialProblem, TimeDependentProblem
from pina.solver import (
    CausalPhysicsInformedSingleModelSolver,
    PhysicsInformedSingleModelSolver,
)

from pina_ntk import NTKCallback, SketchNTKWeighting
from pina_ntk.integration import ResampleCallback
from pina_ntk.integration.reports import REJECTIONS
from pina_ntk.paper.experiments.models import ScaledMLP

from helpers import (
    MULTI_MODEL_KINDS,
    MemoryLogger,
    WeightHistory,
    make_solver,
    make_trainer,
    multi_model_solver,
    own_problem,
)

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.abspath(ROOT))


def rejection_warnings(record):
    return [w for w in record if "weight proposals" in str(w.message)]


class Forced(SketchNTKWeighting):
    """A sketch whose sample of ``block`` is replaced by ``value`` at
    ``steps``; ``isolating=False`` keeps a negative average (as a rule
    without cross terms to drop would)."""

    def __init__(self, steps, value, block=0, isolating=True, **kwargs):
        options = dict(sample_every_n_steps=1, warmup_samples=2)
        super().__init__(**{**options, **kwargs})
        self.forced_steps, self.value, self.block = steps, value, block
        self.isolating = isolating

    @property
    def isolates_blocks(self):
        return self.isolating and super().isolates_blocks

    def complete_sample(self, residual_fn, params, prepared, generator):
        traces, kernel = super().complete_sample(
            residual_fn, params, prepared, generator
        )
        if self.driver.step in self.forced_steps:
            traces = traces.clone()
            traces[self.block] = self.value
        return traces, kernel


def train(weighting, steps, kind="poisson"):
    """Train ``kind``: a problem of ``make_solver``, or one of PINA's
    multi-model solvers on the Poisson problem."""
    if kind in MULTI_MODEL_KINDS:
        solver = multi_model_solver(kind, weighting)
    else:
        solver = make_solver(kind, weighting=weighting)
    logger, history = MemoryLogger(), WeightHistory()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        make_trainer(solver, steps, callbacks=[history], logger=logger).train()
    return logger, history, record


@pytest.mark.parametrize("deferred", [False, True])
def test_a_non_finite_sample_is_counted_and_named(deferred):
    bad = {2, 3, 6}
    weighting = Forced(bad, math.nan, sample_after_backward=deferred)
    logger, history, record = train(weighting, 9)
    # one proposal per step: the warm start's at step 0, then each
    # sample's (a deferred one's at the next step)
    proposals = 9
    assert logger.last("ntk_proposals") == proposals
    assert logger.last("ntk_rejected/non_finite") == len(bad)
    for reason in ("negative", "all_zero"):
        assert logger.last(f"ntk_rejected/{reason}") == 0
    # the first is warned of when it happens, the rest at the end
    first, last = [str(w.message) for w in rejection_warnings(record)]
    assert "1 of" in first and "non finite" in first
    assert f"3 of {proposals} NTK weight proposals" in last
    assert f"blocks ['{weighting.driver.names[0]}']" in last  # forced one
    found = weighting.driver.rejections
    assert found["proposals"] == proposals and found["non_finite"] == 3
    assert set(found) == {"proposals", *REJECTIONS}


#: The solvers the rejection and isolation rules are tried on: the review
#: of proposals and the blocks' restarts act on traces, whatever the solver
#: (PINA's multi-model solvers optimise by hand).
SOLVER_KINDS = ["poisson", "physics-informed ensemble", "self-adaptive"]


@pytest.mark.parametrize("kind", SOLVER_KINDS)
def test_a_negative_average_is_counted_and_names_its_block(kind):
    # alpha = 1: the average is the last sample; the parameter-space sketch
    # is never negative by itself (and isolates no block), so the average
    # is negative at the forced samples only, whose proposals come a step
    # later (deferred samples)
    weighting = Forced({1, 4}, -5.0, block=1, alpha=1.0, estimator="parameter")
    logger, history, record = train(weighting, 7, kind)
    assert logger.last("ntk_rejected/negative") == 2
    assert logger.last("ntk_rejected/non_finite") == 0
    # the previous weights are kept at the rejected proposals' steps
    assert history.weights[2] == history.weights[1]
    assert history.weights[5] == history.weights[4]
    name = weighting.driver.names[1]
    messages = [str(w.message) for w in rejection_warnings(record)]
    assert messages and all(f"blocks ['{name}']" in m for m in messages)
    assert "2 of 7" in messages[-1]


def test_rejections_count_per_reason_and_are_checkpointed():
    weighting = Forced({0}, -5.0, block=1, alpha=1.0, estimator="parameter")
    solver = make_solver("poisson", weighting=weighting)
    trainer = make_trainer(solver, 3)
    trainer.train()
    statistics = next(
        c for c in trainer.callbacks if isinstance(c, NTKCallback)
    ).statistics
    state = statistics.state_dict()
    # the warm start's proposal and that of step 0's (deferred) sample
    counts = dict(zip(REJECTIONS, state["rejected"].tolist()))
    assert counts["negative"] == 2 and state["proposals"] == 3
    assert counts["non_finite"] == counts["all_zero"] == 0
    assert state["rejected_blocks"].tolist() == [False, True]
    assert bool(state["formed"])  # step 1's sample formed weights
    assert state["warned_rejections"] == 2  # at step 0, then at the end


@pytest.mark.parametrize("kind", SOLVER_KINDS)
def test_a_block_whose_average_turns_negative_is_restarted_on_its_own(kind):
    # a strongly negative sample of block 1 at step 2 makes its average
    # negative; the block is then restarted from sketches of its own
    weighting = Forced({2}, -1e6, block=1, alpha=0.5)
    logger, history, record = train(weighting, 6, kind)
    statistics = weighting.driver
    name = statistics.names[1]
    assert statistics.isolated_blocks == [name]
    assert not rejection_warnings(record)
    assert logger.last("ntk_rejected/negative") == 0
    # weights were formed at the step after the forced sample (deferred)
    assert all(t > 0 for t in statistics.traces.values())
    assert all(
        math.isfinite(v) and v > 0 for w in history.weights for v in w.values()
    )


def test_an_isolated_block_leaves_the_predictors_probe():
    kept = []

    class Kept(Forced):
        def complete_sample(self, residual_fn, params, prepared, generator):
            kept.append(prepared)
            return super().complete_sample(
                residual_fn, params, prepared, generator
            )

    weighting = Kept({1}, -1e6, block=1, alpha=0.5)
    train(weighting, 5)
    later = [p for p in kept if p["isolated"] is not None]
    assert later  # the samples after the restart isolate block 1
    for prepared in later:
        assert prepared["isolated"][0] == (False, True)
        assert torch.count_nonzero(prepared["probe"][1]) == 0
        assert torch.count_nonzero(prepared["probe"][0]) > 0
        assert prepared["isolated"][1][1] >= 0


@pytest.mark.parametrize("kind", ["poisson", "wave"])
def test_isolation_is_inert_where_no_average_turns_negative(kind):
    # the weights of the default are the same, bit for bit, with the
    # isolation switched off, wherever no average turns negative: it acts
    # on rejected samples only
    runs = []
    for isolating in (True, False):
        weighting = Forced(set(), 0.0, isolating=isolating, warmup_samples=32)
        logger, history, _ = train(weighting, 12, kind=kind)
        runs.append(history.weights)
    assert logger.last("ntk_rejected/negative") == 0  # without isolation
    assert runs[0] == runs[1]


# ------------------------------------------------------ the causal solver
def exact_reaction(x, t):
    h = torch.exp(-((x - torch.pi) ** 2) / (2 * (torch.pi / 4) ** 2))
    return h * torch.exp(5 * t) / (h * torch.exp(5 * t) + 1 - h)


def plain(tensor):
    return torch.Tensor.as_subclass(tensor, torch.Tensor)


def reaction_residual(input_, output_):
    u = plain(output_.extract(["u"]))
    u_t = plain(grad(output_, input_, components=["u"], d=["t"]))
    return u_t - 5 * u * (1 - u)


def edge_value(input_, output_):
    x, t = plain(input_.extract(["x"])), plain(input_.extract(["t"]))
    return plain(output_.extract(["u"])) - exact_reaction(x, t)


class Reaction(SpatialProblem, TimeDependentProblem):
    """u_t = 5 u (1 - u) on [0, 2 pi] x [0, 1], a Gaussian start, exact
    values on the edges (the reproduction of issue #54)."""

    output_variables = ["u"]
    spatial_domain = CartesianDomain({"x": [0, 2 * torch.pi]})
    temporal_domain = CartesianDomain({"t": [0, 1]})
    domains = {
        "D": CartesianDomain({"x": [0, 2 * torch.pi], "t": [0, 1]}),
        "t0": CartesianDomain({"x": [0, 2 * torch.pi], "t": 0}),
        "left": CartesianDomain({"x": 0, "t": [0, 1]}),
        "right": CartesianDomain({"x": 2 * torch.pi, "t": [0, 1]}),
    }
    conditions = {
        "pde": Condition(domain="D", equation=Equation(reaction_residual)),
        "initial": Condition(domain="t0", equation=Equation(edge_value)),
        "left": Condition(domain="left", equation=Equation(edge_value)),
        "right": Condition(domain="right", equation=Equation(edge_value)),
    }


def causal_reaction(weighting, points=None):
    lightning.seed_everything(0, verbose=False)
    problem = own_problem(Reaction)
    points = points or {"D": 1000, "t0": 200, "left": 50, "right": 50}
    for name, n in points.items():
        problem.discretise_domain(n, "random", domains=[name])
    # the reproduction's network: inputs scaled to [-1, 1], 3 x 128 tanh
    model = ScaledMLP([0.0, 0.0], [2 * torch.pi, 1.0], 1, 128, 3, 0, 1.0)
    return CausalPhysicsInformedSingleModelSolver(
        problem, model, weighting=weighting, regularized_conditions=["pde"]
    )


@pytest.mark.slow
def test_the_default_forms_weights_under_the_causal_solver():
    # With PINA's causal solver the PDE block holds ten time slices of the
    # interior points, each weighted in the loss by exp(-eps * the losses
    # of the slices up to it) (eps = 100). Before the kernel took those
    # weights, the slices' cross terms drowned the edges' sketches and the
    # weights stayed 1 with one warning; now the late slices, nearly
    # switched off in the loss, are nearly out of the kernel too, and the
    # PDE, whose loss is the smallest, gets the largest weight.
    weighting = SketchNTKWeighting(seed=0)
    solver = causal_reaction(weighting)
    logger, history = MemoryLogger(), WeightHistory()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        make_trainer(solver, 60, callbacks=[history], logger=logger).train()
    assert not rejection_warnings(record)
    assert logger.last("ntk_rejected/negative") == 0
    final = history.weights[-1]
    assert all(v != 1.0 for v in final.values())
    assert final["pde"] > 10 * max(
        final["initial"], final["left"], final["right"]
    )


def test_fresh_points_with_the_causal_solver():
    weighting = SketchNTKWeighting(seed=0, warmup_samples=4)
    points = {"D": 20, "t0": 8, "left": 4, "right": 4}
    solver = causal_reaction(weighting, points)
    resample = ResampleCallback(
        every_n_steps=1, counts={"pde": 30, "initial": 9}
    )
    history = WeightHistory()
    make_trainer(solver, 3, callbacks=[resample, history]).train()
    assert resample.draws == 3
    stored = solver.problem.conditions["pde"].data.input
    assert len(stored) == 30
    assert len(history.weights) == 3


# ------------------------------------------- the tutorial's own membrane
def membrane_exact(x, y):
    return torch.sin(torch.pi * x) * torch.sin(3.5 * torch.pi * y)


def helmholtz(input_, output_):
    x, y = input_.extract(["x"]), input_.extract(["y"])
    forcing = (1.0 - 13.25 * torch.pi**2) * membrane_exact(x, y)
    lap_u = laplacian(output_, input_, components=["u"], d=["x", "y"])
    return lap_u + output_ - forcing


def clamped(input_, output_):
    return output_


def free_edge(input_, output_):
    return grad(output_, input_, components=["u"], d=["y"])


class Membrane(SpatialProblem):
    """tutorials/your_problem's Helmholtz membrane, as a user writes it."""

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
        "free": Condition(domain="free", equation=Equation(free_edge)),
    }


@pytest.mark.slow
def test_the_tutorials_first_run_of_the_default_warns_of_nothing():
    # The tutorial's membrane, seed 0: at step 201 a sample of the free
    # edge (20 points of a first derivative beside 300 of a Laplacian)
    # pulled its average below zero; the proposals were rejected with a
    # warning on a user's first run. Now the edge is sketched on its own.
    lightning.seed_everything(0, verbose=False)
    problem = own_problem(Membrane)
    for domain, n in {"interior": 300, "clamped": 60, "free": 20}.items():
        problem.discretise_domain(n, "random", domains=[domain])
    model = FeedForward(2, 1, inner_size=64, n_layers=2, func=torch.nn.Tanh)
    weighting = SketchNTKWeighting()
    solver = PhysicsInformedSingleModelSolver(
        problem, model, weighting=weighting
    )
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        make_trainer(solver, 205, ntk=False, log_every_n_steps=0).train()
    assert [str(w.message) for w in record if "NTK" in str(w.message)] == []
    assert weighting.driver.isolated_blocks == ["free"]
    assert weighting.driver.rejections["negative"] == 0


def test_a_suite_setting_whose_default_never_weighted_now_does():
    # multiscale_1d (tuning half): two one-point boundary blocks beside 998
    # interior points, whose cross terms drown them from the warm start on:
    # before, every proposal was rejected and the run was the plain sum's
    # to the bit
    from benchmarks.suite import weightings as suite_runs
    from benchmarks.suite.weightings_setup import FULL

    settings = dict(FULL, steps=12, records=2)
    (job,) = suite_runs.plan_jobs(
        ["multiscale_1d"], lambda _: ["sketch_predictor"], settings, seeds=1
    )
    record = suite_runs.run_job(job)
    assert record["status"] == "ok", record["failure"]
    found = record["rejections"]
    assert found["isolated"] == ["left", "right"]
    assert found["negative"] == found["non_finite"] == 0
    # the warm start's proposal, then those of the samples of steps 0, 10
    assert found["proposals"] == 3
    assert any(w != 1.0 for w in record["final_weights"].values())


@pytest.mark.parametrize("statistic", ["trace", "rayleigh", "boundary"])
def test_an_isolated_sample_is_the_blocks_own_term(float64, statistic):
    # the sample of an isolated block against the brute-force Jacobian:
    # g_c^T J_c J_c^T g_c for the trace (its probe drawn again from the same
    # seed), n_c R^T K_cc R / |R|^2 exactly for the Rayleigh quotient
    from pina_ntk.integration.diagnostics import condition_calls
    from pina_ntk.integration.pina_adapter import trainable_parameters
    from pina_ntk.integration.recording import replay_residual_fn

    from reference import jacobian_blocks

    weighting = SketchNTKWeighting(statistic=statistic)
    solver = make_solver("poisson", weighting=weighting)
    make_trainer(solver, steps=1, ntk=False)  # the conditions get points
    calls = condition_calls(solver)
    names = [n for n, _, _ in calls]
    weighting.set_conditions(names, solver.problem)
    params = trainable_parameters(solver)
    residuals = replay_residual_fn(solver, calls, names)(params)
    jacobians = jacobian_blocks(solver)
    got = weighting.isolated_sample(
        params, residuals, torch.Generator().manual_seed(5), (True, True)
    )
    probe = weighting._probe(residuals, torch.Generator().manual_seed(5), None)
    for index, name in enumerate(names):
        rows = torch.as_tensor(jacobians[name])
        value = residuals[index].detach().reshape(-1)
        if weighting.rayleigh_blocks(residuals)[index]:
            along = rows.T @ value
            expected = len(value) * along @ along / (value @ value)
        else:
            along = rows.T @ probe[index].reshape(-1)
            expected = along @ along
        assert float(got[index]) == pytest.approx(float(expected), rel=1e-9)


@pytest.mark.parametrize("forced", [1, 4], ids=["before", "after"])
def test_a_resumed_run_isolates_as_the_uninterrupted_one(tmp_path, forced):
    # the checkpoint at step 3 falls after the isolation (forced at step 1,
    # isolated at step 2) or before it (forced at 4): the resumed run keeps
    # the isolated blocks, the counts and the weights of the straight one
    from lightning.pytorch.callbacks import ModelCheckpoint

    def run(steps, **options):
        weighting = Forced({forced}, -1e6, block=1, alpha=0.5, seed=5)
        solver = make_solver("poisson", weighting=weighting, seed=3)
        history, callbacks = WeightHistory(), []
        if options.pop("save", False):
            callbacks.append(ModelCheckpoint(dirpath=tmp_path, save_last=True))
            options["enable_checkpointing"] = True
        callbacks.append(history)
        ckpt = options.pop("ckpt_path", None)
        make_trainer(solver, steps, callbacks, **options).train(ckpt_path=ckpt)
        return history.weights, weighting.driver

    straight, driver = run(7)
    first, _ = run(3, save=True)
    resumed, again = run(7, ckpt_path=str(tmp_path / "last.ckpt"))
    isolated = [driver.names[1]]  # the forced block
    assert driver.isolated_blocks == again.isolated_blocks == isolated
    assert first == straight[:3] and resumed == straight[3:]
    assert again.rejections == driver.rejections
