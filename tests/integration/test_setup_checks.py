"""Set-up checks: what NTKCallback refuses before or while training, with a
message that says how to fix it."""

import pytest
from pina.condition import DomainEquationCondition, InputEquationCondition
from pina.solver import MultiModelSolver
from pina.weighting import ScalarWeighting

from pina_ntk import NTKWeighting, SketchNTKWeighting

from helpers import make_problem, make_solver, make_trainer, mlp


def test_callback_without_ntk_weighting_is_rejected():
    solver = make_solver("poisson", weighting=ScalarWeighting(weights=1.0))
    trainer = make_trainer(solver, steps=1)
    with pytest.raises(ValueError, match="weighting=pina_ntk.NTKWeighting"):
        trainer.train()


class TwoModelSolver(MultiModelSolver):
    """A user's multi-model solver on PINA's base class (every model's
    output stacked): its kernel is not derived."""

    accepted_conditions_types = (
        DomainEquationCondition,
        InputEquationCondition,
    )


def test_a_multi_model_solver_without_a_derived_kernel_is_refused():
    # PINA's five multi-model solvers are accepted
    # (test_pina_workflows.py); any other is refused by name
    solver = TwoModelSolver(
        make_problem("poisson"),
        [mlp(2, 1), mlp(2, 1)],
        weighting=NTKWeighting(),
    )
    trainer = make_trainer(solver, steps=1)
    with pytest.raises(ValueError) as error:
        trainer.train()
    message = str(error.value)
    assert message.startswith("NTKCallback needs a PINA solver whose kernel")
    assert "TwoModelSolver" in message


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
