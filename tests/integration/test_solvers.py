"""PINA's single-model physics-informed solvers with NTK weights: the
causal, gradient-enhanced and RBA variants, and the causal solver's time
slices in the kernel."""

import math

import pytest
import torch
from pina.solver import (
    CausalPhysicsInformedSingleModelSolver,
    GradientPhysicsInformedSingleModelSolver,
    PhysicsInformedSingleModelSolver,
    RBAPhysicsInformedSingleModelSolver,
)

from pina_ntk import (
    NTKCallback,
    NTKWeighting,
    SketchNTKWeighting,
    ntk_traces,
)
from pina_ntk.integration.recording import ResidualRecorder

from helpers import (
    WeightHistory,
    make_problem,
    make_trainer,
    mlp,
    ntk_callback,
)
from reference import block_traces, jacobian_blocks


@pytest.mark.parametrize(
    "solver_cls,kind",
    [
        (CausalPhysicsInformedSingleModelSolver, "wave"),
        (GradientPhysicsInformedSingleModelSolver, "poisson"),
        (PhysicsInformedSingleModelSolver, "poisson"),
        (RBAPhysicsInformedSingleModelSolver, "poisson"),
    ],
)
@pytest.mark.parametrize("every", [1, 2])
def test_physics_informed_solver_variants(solver_cls, kind, every):
    problem = make_problem(kind)
    model = mlp(len(problem.input_variables), len(problem.output_variables))
    extra = {}
    if solver_cls is CausalPhysicsInformedSingleModelSolver:
        extra["regularized_conditions"] = ["D"]
    solver = solver_cls(
        problem,
        model,
        weighting=SketchNTKWeighting(
            sample_every_n_steps=every, warmup_samples=2
        ),
        **extra,
    )
    trainer = make_trainer(solver, steps=3)
    trainer.train()
    weights = ntk_callback(trainer).statistics.weights
    assert set(weights) == set(problem.conditions)
    assert all(math.isfinite(w) and w > 0 for w in weights.values())
    assert ntk_callback(trainer).statistics.refreshes == (
        3 if every == 1 else 2
    )


def test_the_gradient_enhanced_kernel_is_the_condition_residuals():
    # The kernel is that of the residual R_c each condition's evaluate
    # returns (what pina-ntk records), taken at theta_0: the gradient
    # penalty of the gradient-enhanced solver is not part of it (the
    # solvers whose loss weighs the residual entries:
    # test_solver_kernels.py); outside training, ntk_traces takes every
    # solver's plain residual
    problem = make_problem("poisson")
    torch.manual_seed(0)
    solver_cls = GradientPhysicsInformedSingleModelSolver
    solver = solver_cls(
        problem, mlp(2, 1), weighting=NTKWeighting(safeguard=None)
    )
    make_trainer(solver, steps=1, ntk=False)  # the conditions get points
    blocks = jacobian_blocks(solver)  # brute force at theta_0
    traces = block_traces(blocks)
    sizes = {name: len(rows) for name, rows in blocks.items()}
    # w_c = mean diag(K) / mean diag(K_cc) (mean reduction)
    mean_diag = sum(traces.values()) / sum(sizes.values())
    expected = {c: mean_diag / (traces[c] / sizes[c]) for c in traces}
    history = WeightHistory()
    trainer = make_trainer(solver, steps=1, callbacks=[history])
    trainer.train()
    used = ntk_callback(trainer).statistics.traces
    # float32 traces against float64 sums of the same float32 gradients
    for name, value in traces.items():
        assert used[name] == pytest.approx(value, rel=1e-5)
        assert history.weights[0][name] == pytest.approx(
            expected[name], rel=1e-5
        )
    # outside training: the same kernel at the parameters reached
    after = block_traces(jacobian_blocks(solver))
    for name, value in ntk_traces(solver).items():
        assert float(value) == pytest.approx(after[name], rel=1e-5)


def test_causal_solver_kernel_covers_every_time_slice():
    problem = make_problem("wave")
    model = mlp(2, 1)
    solver = CausalPhysicsInformedSingleModelSolver(
        problem,
        model,
        weighting=NTKWeighting(),
        n_steps=4,
        regularized_conditions=["D"],
    )
    trainer = make_trainer(solver, steps=1)
    recorder_calls = []
    original = ResidualRecorder.blocks

    def spy(self, names):
        # the due step takes the recorded residuals: what was recorded then
        recorder_calls.append([n for n, _, _ in self.calls])
        return original(self, names)

    ResidualRecorder.blocks = spy
    try:
        trainer.train()
    finally:
        ResidualRecorder.blocks = original
    # the causal solver evaluates its interior residual once per time slice
    assert recorder_calls[0].count("D") == 4
