"""PINA's single-model physics-informed solvers with NTK weights: the
causal, gradient-enhanced and RBA variants, and the causal solver's time
slices in the kernel."""

import math

import pytest
from pina.solver import (
    CausalPhysicsInformedSingleModelSolver,
    GradientPhysicsInformedSingleModelSolver,
    PhysicsInformedSingleModelSolver,
    RBAPhysicsInformedSingleModelSolver,
)

from pina_ntk import NTKCallback, NTKWeighting, SketchNTKWeighting
from pina_ntk.integration.recording import ResidualRecorder

from helpers import make_problem, make_trainer, mlp, ntk_callback


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
