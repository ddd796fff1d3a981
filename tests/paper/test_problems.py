"""The paper's problems and the resampling callback."""

import copy
import logging
import math
import warnings

import lightning
import numpy as np
import pytest
import torch
from pina import LabelTensor
from pina.condition import DomainEquationCondition, InputEquationCondition
from pina.solver import PhysicsInformedSingleModelSolver

from pina_ntk import NTKCallback, SketchNTKWeighting, ntk_traces
from pina_ntk.paper.experiments.models import ScaledMLP, input_box
from pina_ntk.paper.experiments.training import make_trainer
from pina_ntk.paper.problems import QTensorProblem, WaveProblem, initial_q
from pina_ntk.integration.resampling import (
    ResampleCallback,
    discretise_conditions,
)

from reference import jacobian_rows, predictor_sample

logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
warnings.filterwarnings("ignore", message=".*val_dataloader.*")


def plain(tensor):
    return torch.Tensor.as_subclass(tensor, torch.Tensor)


def residuals(problem, points, output):
    return {
        name: plain(condition.equation.residual(points, output))
        for name, condition in problem.conditions.items()
    }


def labelled(values, labels):
    points = LabelTensor(values.to(torch.float64), labels)
    return points.requires_grad_(True)


def small_solver(problem, weighting=None):
    lower, upper = input_box(problem)
    model = ScaledMLP(lower, upper, len(problem.output_variables), 8, 2)
    return PhysicsInformedSingleModelSolver(problem, model, weighting=weighting)


# ------------------------------------------------------------------- wave
def test_wave_conditions_one_per_loss_block():
    problem = WaveProblem()
    assert list(problem.conditions) == [
        "pde",
        "initial_value",
        "initial_velocity",
        "left",
        "right",
    ]
    assert problem.input_variables == ["x", "t"]
    assert set(WaveProblem.PAPER_POINTS) == set(problem.conditions)


def test_wave_domains_lie_where_their_condition_applies():
    torch.manual_seed(0)
    problem = WaveProblem(final_time=2.0)
    problem.discretise_domain(50)
    pts = {k: plain(v) for k, v in problem.discretised_domains.items()}

    def column(name, var):
        labels = problem.discretised_domains[name].labels
        return pts[name][:, labels.index(var)]

    assert torch.all(column("initial_value", "t") == 0)
    assert torch.all(column("initial_velocity", "t") == 0)
    assert torch.all(column("left", "x") == 0)
    assert torch.all(column("right", "x") == 1)
    t = column("pde", "t")
    assert t.max() > 1.0 and t.max() <= 2.0


def test_wave_exact_solution_zeroes_every_residual():
    problem = WaveProblem()
    torch.manual_seed(1)
    for name in problem.conditions:
        problem.discretise_domain(40, domains=[name])
    for name, raw in problem.discretised_domains.items():
        points = labelled(plain(raw), raw.labels)
        residual = residuals(problem, points, problem.solution(points))[name]
        assert residual.abs().max() < 1e-10, name


def test_wave_residual_detects_a_wrong_wave_speed():
    points = labelled(torch.rand(40, 2), ["x", "t"])
    slow = WaveProblem(wave_speed=1.0)
    fast = WaveProblem(wave_speed=2.0)
    residual = residuals(fast, points, slow.solution(points))["pde"]
    assert residual.abs().max() > 1.0


def test_wave_solution_matches_the_papers_formula():
    points = labelled(torch.tensor([[0.25, 0.125], [0.5, 0.0]]), ["x", "t"])
    u = plain(WaveProblem().solution(points)).flatten()
    x, t = 0.25, 0.125
    expected = math.sin(math.pi * x) * math.cos(2 * math.pi * t) + 0.5 * (
        math.sin(4 * math.pi * x) * math.cos(8 * math.pi * t)
    )
    assert u[0].item() == pytest.approx(expected, abs=1e-12)
    assert u[1].item() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"wave_speed": 0.0}, "wave_speed"),
        ({"final_time": -1.0}, "final_time"),
        ({"wave_speed": "2"}, "wave_speed"),
    ],
)
def test_wave_rejects_bad_parameters(kwargs, name):
    with pytest.raises(ValueError, match=name):
        WaveProblem(**kwargs)


# --------------------------------------------------------------- Q-tensor
def test_qtensor_conditions_and_outputs():
    problem = QTensorProblem()
    assert list(problem.conditions) == [
        "pde",
        "initial",
        "left",
        "right",
        "bottom",
        "top",
    ]
    assert problem.output_variables == ["q1", "q2"]
    assert problem.input_variables == ["x", "y", "t"]


def test_qtensor_initial_condition_is_the_papers_and_vanishes_on_the_boundary():
    x = torch.tensor([0.3, -1.2, 2.0, 0.7], dtype=torch.float64)
    y = torch.tensor([0.5, 1.9, 0.4, -2.0], dtype=torch.float64)
    q1, q2 = initial_q(x, y)
    f = (2 - x) * (2 + x) * (2 - y) * (2 + y)
    g = torch.sin(torch.pi * x) * torch.sin(torch.pi * y)
    norm = torch.sqrt(1 + f**2 + g**2)
    d = torch.stack([f / norm, g / norm], -1)
    q = d[:, :, None] * d[:, None, :] - 0.5 * (d**2).sum(-1)[
        :, None, None
    ] * (torch.eye(2, dtype=torch.float64))
    assert torch.allclose(q1, q[:, 0, 0]) and torch.allclose(q2, q[:, 0, 1])
    assert torch.allclose(q[:, 1, 1], -q[:, 0, 0])
    assert q1[2:].abs().max() < 1e-12 and q2[2:].abs().max() < 1e-12


def test_qtensor_pde_residual_matches_a_hand_computation():
    elasticity, a, c = 0.3, -0.7, 1.5
    problem = QTensorProblem(elasticity=elasticity, a=a, c=c)
    torch.manual_seed(2)
    points = labelled(4 * torch.rand(30, 3) - 2, ["x", "y", "t"])
    x, y, t = (plain(points.extract([v])) for v in "xyt")
    q1 = torch.sin(x) * torch.exp(t)
    q2 = x * y * t
    output = LabelTensor(torch.cat([q1, q2], -1), ["q1", "q2"])
    # q_t - L Δq + (a + 2c |q|^2) q, derivatives by hand
    bulk = a + 2 * c * (q1**2 + q2**2)
    expected1 = q1 + elasticity * q1 + bulk * q1
    expected2 = x * y + bulk * q2
    residual = residuals(problem, points, output)["pde"]
    assert torch.allclose(residual, torch.cat([expected1, expected2], -1))


def test_qtensor_spatially_constant_solution_of_the_bulk_ode():
    # u = |q|^2 solves u' = -2a u - 4c u^2 (a Bernoulli equation)
    a, c, u0 = -0.2, 1.0, 0.04
    alpha, beta = -2 * a, 4 * c
    problem = QTensorProblem(a=a, c=c)
    points = labelled(torch.rand(20, 3) * 2, ["x", "y", "t"])
    t = plain(points.extract(["t"]))
    growth = torch.exp(alpha * t)
    u = alpha * u0 * growth / (alpha + beta * u0 * (growth - 1))
    angle = 0.4
    direction = [[math.cos(angle), math.sin(angle)]]
    q = torch.sqrt(u) * torch.tensor(direction, dtype=torch.float64)
    output = LabelTensor(q, ["q1", "q2"])
    residual = residuals(problem, points, output)["pde"]
    assert residual.abs().max() < 1e-12


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"elasticity": 0.0}, "elasticity"),
        ({"c": -1.0}, "c"),
        ({"a": float("nan")}, "a"),
        ({"half_width": 0}, "half_width"),
        ({"final_time": True}, "final_time"),
    ],
)
def test_qtensor_rejects_bad_parameters(kwargs, name):
    with pytest.raises(ValueError, match=name):
        QTensorProblem(**kwargs)


def test_problem_instances_do_not_share_conditions():
    first, second = WaveProblem(), WaveProblem(wave_speed=1.0)
    first.discretise_domain(5)
    first.move_discretisation_into_conditions()
    assert first.conditions is not second.conditions
    assert isinstance(first.conditions["pde"], InputEquationCondition)
    assert isinstance(second.conditions["pde"], DomainEquationCondition)


# ------------------------------------------------------------- resampling
class _Inputs(lightning.pytorch.callbacks.Callback):
    """Copies each step's inputs (after the resampling callback ran)."""

    def __init__(self):
        self.inputs = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, idx):
        self.inputs.append(
            {
                name: (plain(d["input"]).detach().clone(), d["input"].labels)
                for name, d in batch
            }
        )


def test_resampling_draws_fresh_points_with_per_condition_counts():
    lightning.seed_everything(3, verbose=False)
    problem = WaveProblem()
    problem.discretise_domain(7)
    counts = {"pde": 30, "initial_value": 11, "left": 5}
    recorder = _Inputs()
    solver = small_solver(problem)
    make_trainer(
        solver, 6, [ResampleCallback(every_n_steps=2, counts=counts), recorder]
    ).train()
    steps = recorder.inputs
    for name, n in counts.items():
        sizes = {len(step[name][0]) for step in steps}
        assert sizes == {n}, name
        for first, second in ((0, 1), (2, 3), (4, 5)):
            assert torch.equal(steps[first][name][0], steps[second][name][0])
        for before, after in ((1, 2), (3, 4)):
            assert not torch.equal(
                steps[before][name][0], steps[after][name][0]
            )
    # conditions without a count keep their discretisation
    for name in ("initial_velocity", "right"):
        assert all(len(step[name][0]) == 7 for step in steps)
        assert all(torch.equal(s[name][0], steps[0][name][0]) for s in steps)
    # the points lie on their domains
    left, labels = steps[-1]["left"]
    assert torch.all(left[:, labels.index("x")] == 0)
    pde, labels = steps[-1]["pde"]
    assert pde.min() >= 0 and pde.max() <= 1


def test_resampling_stores_points_in_conditions_for_diagnostics():
    lightning.seed_everything(4, verbose=False)
    problem = QTensorProblem()
    discretise_conditions(problem, {name: 4 for name in problem.conditions})
    recorder = _Inputs()
    solver = small_solver(problem)
    callback = ResampleCallback(counts={"pde": 9, "top": 3})
    make_trainer(solver, 3, [callback, recorder]).train()
    assert callback.draws == 3
    stored = problem.conditions["pde"].data.data["input"]
    assert torch.equal(plain(stored), recorder.inputs[-1]["pde"][0])
    traces = ntk_traces(solver)
    assert set(traces) == set(problem.conditions)


def test_resampling_with_default_counts_keeps_discretisation_sizes():
    lightning.seed_everything(5, verbose=False)
    problem = WaveProblem()
    discretise_conditions(problem, {name: 6 for name in problem.conditions})
    recorder = _Inputs()
    make_trainer(
        small_solver(problem), 2, [ResampleCallback(), recorder]
    ).train()
    first, second = recorder.inputs
    for name in problem.conditions:
        assert len(second[name][0]) == 6
        assert not torch.equal(first[name][0], second[name][0])


class _KeptSamples(SketchNTKWeighting):
    """The sketch, keeping each sample's probe, scales and estimate."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.samples = []

    def complete_sample(self, residual_fn, params, prepared, generator):
        traces, kernel = super().complete_sample(
            residual_fn, params, prepared, generator
        )
        self.samples.append(
            (prepared["probe"], prepared["scales"], traces.clone())
        )
        return traces, kernel


def test_resampling_works_with_sketched_ntk_weights(float64):
    lightning.seed_everything(6, verbose=False)
    problem = WaveProblem()
    discretise_conditions(problem, {name: 5 for name in problem.conditions})
    ntk, recorder = NTKCallback(), _Inputs()
    weighting = _KeptSamples(warmup_samples=8)
    solver = small_solver(problem, weighting)
    theta_0 = copy.deepcopy(solver.model.state_dict())
    callbacks = [ResampleCallback(counts={"pde": 12}), recorder, ntk]
    make_trainer(solver, 1, callbacks).train()
    [step] = recorder.inputs
    assert len(step["pde"][0]) == 12  # the fresh points, not the 5
    # Brute-force Jacobian at theta_0 on the step's points, rows in the
    # batch's order (the order of the probe's entries).
    solver.model.load_state_dict(theta_0)
    params = [p for p in solver.parameters() if p.requires_grad]
    names = ntk.statistics.names
    blocks = []
    for name in names:
        values, labels = step[name]
        points = LabelTensor(values, labels).requires_grad_(True)
        condition = problem.conditions[name]
        blocks.append(
            jacobian_rows(condition.evaluate({"input": points}, solver), params)
        )
    # the warm start, then the step's deferred sample (all at theta_0)
    assert len(weighting.samples) == 9
    expected = []
    for probe, scales, got in weighting.samples:
        expected.append(predictor_sample(blocks, probe, scales))
        # float64 forward differences: errors near sqrt(eps) ~ 1.5e-8 of the
        # sample's largest block, which the cross terms carry into each
        np.testing.assert_allclose(
            got.numpy(),
            expected[-1],
            rtol=1e-6,
            atol=1e-6 * abs(expected[-1]).max(),
        )
    # the weights of step 0, w_c = mean diag(K) / mean diag(K_cc), from the
    # mean of the warm start (a time-dependent problem: no gradient band)
    traces = np.mean(expected[:8], axis=0)
    # usable estimates (else the weights stay at one): so with this seed
    # and eight samples (four leave a negative mean for one condition)
    assert (traces > 0).all()
    sizes = np.array([len(rows) for rows in blocks])
    weights = traces.sum() / sizes.sum() / (traces / sizes)
    got = [ntk.statistics.weights[name] for name in names]
    # the traces' differencing errors (~1e-8 relative) pass to the weights
    np.testing.assert_allclose(got, weights, rtol=1e-6)


def test_full_kernel_refuses_resampled_points():
    lightning.seed_everything(7, verbose=False)
    problem = WaveProblem()
    discretise_conditions(problem, {name: 5 for name in problem.conditions})
    solver = small_solver(problem, SketchNTKWeighting(full_kernel=True))
    # the default spacing samples at steps 0 and 10: fresh points by then
    trainer = make_trainer(solver, 12, [ResampleCallback(), NTKCallback()])
    with pytest.raises(ValueError, match="full_kernel"):
        trainer.train()


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"every_n_steps": 0}, "every_n_steps"),
        ({"every_n_steps": 1.5}, "every_n_steps"),
        ({"counts": {"pde": 0}}, "counts"),
        ({"counts": {}}, "counts"),
        ({"counts": [("pde", 3)]}, "counts"),
        ({"counts": {1: 3}}, "counts"),
    ],
)
def test_resampling_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ResampleCallback(**kwargs)


def test_resampling_rejects_unknown_conditions_at_train_start():
    problem = WaveProblem()
    problem.discretise_domain(4)
    trainer = make_trainer(
        small_solver(problem), 1, [ResampleCallback(counts={"bottom": 3})]
    )
    with pytest.raises(ValueError, match="bottom"):
        trainer.train()


def test_discretise_conditions_uses_each_count():
    problem = QTensorProblem()
    discretise_conditions(problem, QTensorProblem.PAPER_POINTS)
    sizes = {k: len(v) for k, v in problem.discretised_domains.items()}
    assert sizes == QTensorProblem.PAPER_POINTS
    with pytest.raises(ValueError, match="counts"):
        discretise_conditions(problem, {"middle": 3})
