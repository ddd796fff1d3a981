"""Set-up checks: what NTKCallback refuses before or while training, with a
message that says how to fix it."""

import pytest
from pina.solver import (
    AutoregressiveEnsembleSolver,
    CompetitivePhysicsInformedSolver,
    PhysicsInformedEnsembleSolver,
    SelfAdaptivePhysicsInformedSolver,
    SupervisedEnsembleSolver,
)
from pina.weighting import ScalarWeighting

from pina_ntk import NTKWeighting, SketchNTKWeighting

from helpers import make_problem, make_solver, make_trainer, mlp, series_problem


def test_callback_without_ntk_weighting_is_rejected():
    solver = make_solver("poisson", weighting=ScalarWeighting(weights=1.0))
    trainer = make_trainer(solver, steps=1)
    with pytest.raises(ValueError, match="weighting=pina_ntk.NTKWeighting"):
        trainer.train()


def multi_model_solver(kind, weighting):
    """Each of PINA's five multi-model solvers, on a small problem."""
    if kind == "supervised-ensemble":
        problem = make_problem("supervised")
        return SupervisedEnsembleSolver(
            problem, [mlp(2, 1), mlp(2, 1)], weighting=weighting
        )
    if kind == "autoregressive-ensemble":
        return AutoregressiveEnsembleSolver(
            series_problem(), [mlp(2, 2), mlp(2, 2)], weighting=weighting
        )
    problem = make_problem("poisson")
    if kind == "physics-informed-ensemble":
        return PhysicsInformedEnsembleSolver(
            problem, [mlp(2, 1), mlp(2, 1)], weighting=weighting
        )
    if kind == "self-adaptive":
        return SelfAdaptivePhysicsInformedSolver(
            problem, mlp(2, 1), weighting=weighting
        )
    return CompetitivePhysicsInformedSolver(
        problem, mlp(2, 1), weighting=weighting
    )


@pytest.mark.parametrize(
    "kind",
    [
        "physics-informed-ensemble",
        "supervised-ensemble",
        "autoregressive-ensemble",
        "self-adaptive",
        "competitive",
    ],
)
def test_every_multi_model_solver_is_refused_by_name(kind):
    solver = multi_model_solver(kind, NTKWeighting())
    trainer = make_trainer(solver, steps=1)
    with pytest.raises(ValueError) as error:
        trainer.train()
    assert str(error.value).startswith(
        "NTKCallback needs a single-model PINA solver"
    )
    assert type(solver).__name__ in str(error.value)


def test_weighting_shared_by_two_solvers_is_rejected():
    # with the callback the solver adds by itself (an explicit one goes
    # through the same check in NTKCallback.setup)
    weighting = NTKWeighting()
    first = make_solver("poisson", weighting=weighting)
    make_solver("poisson", weighting=weighting)  # PINA re-binds the weighting
    trainer = make_trainer(first, steps=1, ntk=False)
    with pytest.raises(ValueError, match="one weighting instance per solver"):
        trainer.train()


def test_full_kernel_refuses_changing_points():
    solver = make_solver(
        "poisson",
        weighting=SketchNTKWeighting(sample_every_n_steps=1, full_kernel=True),
        n=20,
    )
    trainer = make_trainer(solver, steps=2, batch_size=10)
    with pytest.raises(
        ValueError, match="full_kernel=True needs the same points"
    ):
        trainer.train()
