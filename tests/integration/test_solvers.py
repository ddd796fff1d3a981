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
    weights = ntk_callback(trainer).weights
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
    original = NTKCallback.weights_for_step

    def spy(self, losses):
        recorder_calls.append([n for n, _, _ in self._recorder.calls])
        return original(self, losses)

    NTKCallback.weights_for_step = spy
    try:
        trainer.train()
    finally:
        NTKCallback.weights_for_step = original
    # the causal solver evaluates its interior residual once per time slice
    assert recorder_calls[0].count("D") == 4
