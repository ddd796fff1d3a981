"""The adapter to PINA's internals, one function at a time, without a
training run: the set-up checks and their messages (what a user reads when
a run is refused), the callback offered through ``configure_callbacks``,
the wrapping of ``condition.evaluate`` and a condition's stored points."""

import warnings
from types import SimpleNamespace

import lightning
import pytest
import torch

from pina_ntk import NTKWeighting, SketchNTKWeighting
from pina_ntk.integration.pina_adapter import (
    check_kernel_solver,
    check_kernel_training,
    condition_data,
    member_evaluate,
    offer_callback,
    residual_loss_scales,
    store_condition_points,
    trainable_parameters,
    wrap_evaluate,
)
from pina_ntk.integration.recording import ResidualRecorder

from helpers import make_solver, multi_model_solver

WEIGHTING_MESSAGE = (
    "NTKCallback drives pina_ntk weightings only: build the solver with "
    "weighting=pina_ntk.NTKWeighting(...) or "
    "weighting=pina_ntk.SketchNTKWeighting(...); got {}."
)


def single_process(precision="32-true"):
    """The two fields of a ``Trainer`` the set-up checks read."""
    return SimpleNamespace(precision=precision, world_size=1)


def refused(call, *args, **kwargs):
    """:return: The message of the ``ValueError`` that ``call`` raises."""
    with pytest.raises(ValueError) as error:
        call(*args, **kwargs)
    return str(error.value)


@pytest.mark.parametrize(
    "solver, kind",
    [
        (SimpleNamespace(), "NoneType"),  # no weighting at all
        (SimpleNamespace(weighting=object()), "object"),
    ],
)
def test_a_foreign_weighting_is_refused_naming_both_weightings(solver, kind):
    # the message says how to fix the set-up and names what was found
    message = refused(check_kernel_training, single_process(), solver)
    assert message == WEIGHTING_MESSAGE.format(kind)


def test_a_solver_whose_kernel_is_not_derived_is_refused_by_name():
    # the check of the solver runs for NTKCallback, and says so
    solver = SimpleNamespace(weighting=NTKWeighting())
    message = refused(check_kernel_training, single_process(), solver)
    assert message == (
        "NTKCallback needs a PINA solver whose kernel is derived: a "
        "single-model solver (e.g. PhysicsInformedSingleModelSolver), an "
        "ensemble solver, SelfAdaptivePhysicsInformedSolver or "
        "CompetitivePhysicsInformedSolver; got SimpleNamespace."
    )


def test_the_diagnostics_callback_refuses_a_multi_model_solver_by_name():
    # its time averages are those of the plain residual's loss
    solver = multi_model_solver("physics-informed ensemble", NTKWeighting())
    message = refused(
        check_kernel_solver, solver, "SomeCaller", multi_model=False
    )
    assert message == (
        "SomeCaller needs a single-model PINA solver (e.g. "
        "PhysicsInformedSingleModelSolver); got PhysicsInformedEnsembleSolver."
    )
    check_kernel_solver(solver, "SomeCaller")  # accepted by the weightings'


def test_only_the_minimising_models_are_kernel_parameters():
    # the self-adaptive weights and the discriminator maximise the loss
    for kind in ("self-adaptive", "competitive"):
        solver = multi_model_solver(kind, NTKWeighting())
        kernel = trainable_parameters(solver)
        model = list(solver.model.parameters())
        assert [id(p) for p in kernel.values()] == [id(p) for p in model]
        # named as functional_call reaches them from the solver
        assert all(name.startswith("_pina_models.0.") for name in kernel)
    ensemble = multi_model_solver("physics-informed ensemble", NTKWeighting())
    assert list(trainable_parameters(ensemble).values()) == list(
        ensemble.parameters()
    )


def test_a_loss_without_mean_or_sum_reduction_is_refused_by_name():
    loss = torch.nn.MSELoss(reduction="none")
    solver = make_solver("poisson", weighting=NTKWeighting(), loss=loss)
    message = refused(check_kernel_solver, solver, "SomeCaller")
    assert message == (
        "SomeCaller needs a loss with reduction 'mean' or 'sum'; got 'none'."
    )


def test_a_weighting_attached_to_another_solver_is_refused():
    weighting = NTKWeighting()
    first = make_solver("poisson", weighting=weighting)
    make_solver("poisson", weighting=weighting)  # PINA re-binds it
    message = refused(check_kernel_training, single_process(), first)
    assert message == (
        "This weighting object is attached to another solver: create one "
        "weighting instance per solver."
    )


@pytest.mark.parametrize("precision", ["bf16-true", "16-true"])
def test_half_precision_parameters_are_refused_to_finite_differences(
    precision,
):
    solver = make_solver("poisson", weighting=SketchNTKWeighting())
    message = refused(check_kernel_training, single_process(precision), solver)
    assert message == (
        f"SketchNTKWeighting cannot run with Trainer(precision='{precision}'):"
        " its finite differences need full-precision parameters. Use "
        "precision='bf16-mixed' or '16-mixed' (the sketch then runs in full "
        "precision) or '32-true'."
    )


def test_half_precision_parameters_are_fine_without_finite_differences():
    # the exact traces take no finite difference: nothing to refuse
    solver = make_solver("poisson", weighting=NTKWeighting())
    trainer = single_process("bf16-true")
    assert check_kernel_training(trainer, solver) is solver.weighting


@pytest.mark.parametrize("world_size", [2, 3])
def test_the_full_kernel_is_refused_from_two_processes_on(world_size):
    # every process holds only its share of the points, from two on
    weighting = SketchNTKWeighting(full_kernel=True)
    solver = make_solver("poisson", weighting=weighting)
    trainer = SimpleNamespace(precision="32-true", world_size=world_size)
    message = refused(check_kernel_training, trainer, solver)
    assert message == (
        "full_kernel=True is not available in distributed training: each "
        "process only sees its share of the points. Use full_kernel=False "
        "(per-condition traces are all-reduced)."
    )
    single = check_kernel_training(single_process(), solver)
    assert single is weighting


def test_a_loss_other_than_squares_is_warned_about_once_by_name():
    # the weights assume squared residuals; another loss runs, with a warning
    weighting = NTKWeighting()
    solver = make_solver("poisson", weighting=weighting, loss=torch.nn.L1Loss())
    with pytest.warns(UserWarning) as caught:
        assert check_kernel_training(single_process(), solver) is weighting
    assert [str(w.message) for w in caught] == [
        "NTK weights assume a squared-residual loss (torch.nn.MSELoss); the "
        "solver uses L1Loss."
    ]
    squares = make_solver("poisson", weighting=NTKWeighting())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_kernel_training(single_process(), squares)


class Offering:
    """A solver whose class's ``configure_callbacks`` returns ``returned``,
    fitted by a trainer holding ``held``."""

    def __init__(self, returned, held=()):
        self.returned = returned
        self.trainer = SimpleNamespace(callbacks=list(held))

    def configure_callbacks(self):
        return self.returned


class Offered(lightning.Callback):
    pass


@pytest.mark.parametrize("as_sequence", [True, False])
def test_the_offered_callback_joins_the_solvers_own(as_sequence):
    # Lightning accepts one callback or a sequence from configure_callbacks;
    # either way the class's own callbacks are kept, the offered one added
    own = lightning.Callback()
    solver = Offering([own] if as_sequence else own)
    offer_callback(solver, Offered)
    first, second = solver.configure_callbacks()
    assert first is own and type(second) is Offered


def test_no_callback_is_offered_beside_one_of_its_kind():
    # never two: the user's (with options) in the trainer, or the class's
    held = Offered()
    solver = Offering(None, held=[held])
    offer_callback(solver, Offered)
    assert solver.configure_callbacks() == []
    returned = Offered()
    solver = Offering([returned])
    offer_callback(solver, Offered)
    assert solver.configure_callbacks() == [returned]


class Condition:
    def evaluate(self, batch, solver):
        return ("own", batch)


def test_wrapping_keeps_its_own_wrappers_and_replaces_the_others():
    # re-run at every batch: a wrapper the recorder already owns is kept as
    # it is (the same object); a condition PINA replaced, or one wrapped by
    # another recorder or under another name, gets a wrapper of the
    # condition's own method (never a wrapper of a wrapper)
    solver = make_solver("poisson", weighting=NTKWeighting())
    recorder, other = ResidualRecorder(solver), ResidualRecorder(solver)
    kept, fresh, foreign, renamed = (Condition() for _ in range(4))
    problem = SimpleNamespace(
        conditions={"a": kept, "b": fresh, "c": foreign, "d": renamed}
    )
    kept.evaluate = recorder("a", kept.evaluate)
    foreign.evaluate = other("c", foreign.evaluate)
    renamed.evaluate = recorder("x", renamed.evaluate)
    before = kept.__dict__["evaluate"]
    wrap_evaluate(problem, recorder)
    assert kept.__dict__["evaluate"] is before
    for name, condition in problem.conditions.items():
        wrapper = condition.__dict__["evaluate"]
        assert recorder.owns(wrapper, name)
        assert wrapper(1, None) == ("own", 1)  # not recording: the own call
        assert wrapper.original.__self__ is condition


def test_condition_data_reads_no_points_from_a_condition_without_them():
    # before a Trainer stores points, PINA's conditions hold data=None; a
    # condition with data of a kind PINA's managers do not make (no keys)
    # or no data attribute at all reads as holding no points either
    assert condition_data(SimpleNamespace(data=None)) is None
    assert condition_data(SimpleNamespace(data=object())) is None
    assert condition_data(SimpleNamespace()) is None
    manager = SimpleNamespace(
        keys=["input"], data={"input": torch.ones(2), "spare": 0}
    )
    assert condition_data(SimpleNamespace(data=manager)) == {
        "input": manager.data["input"]
    }


def test_stored_points_replace_the_input_in_both_places_pina_reads():
    # PINA's tensor data manager builds batches from its data dict: the new
    # points must be there under "input", and nothing else may change
    old, new = torch.zeros(3, 2), torch.ones(4, 2)
    target = torch.zeros(3, 1)
    manager = SimpleNamespace(input=old, data={"input": old, "target": target})
    solver = SimpleNamespace(
        problem=SimpleNamespace(conditions={"D": SimpleNamespace(data=manager)})
    )
    store_condition_points(solver, "D", new)
    assert manager.input is new
    assert manager.data == {"input": new, "target": target}


def test_a_member_bound_evaluate_sets_its_member_and_restores_pinas():
    solver = multi_model_solver("physics-informed ensemble", NTKWeighting())
    seen = []

    def evaluate(batch, owner):
        seen.append(owner._active_model_idx)
        return batch

    solver._active_model_idx = 1  # as inside PINA's loop over the members
    bound = member_evaluate(solver, evaluate, member=0)
    assert bound("batch", solver) == "batch"
    assert seen == [0] and solver._active_model_idx == 1
    assert member_evaluate(solver, evaluate)("batch", solver) == "batch"
    assert seen == [0, 1]  # the member active when it was bound
    single = make_solver("poisson", NTKWeighting())
    assert member_evaluate(single, evaluate) is evaluate


def test_the_self_adaptive_factors_take_the_rows_of_the_batch():
    # PINA reads the pointwise weights of batch b of size n at rows
    # (b n, ..., b n + n - 1) modulo the points
    solver = multi_model_solver("self-adaptive", NTKWeighting(), n=10)
    for weight in solver.weights.parameters():
        weight.data = torch.linspace(-2.0, 2.0, 10).reshape(10, 1)
    residual = torch.ones(4, 1)
    calls = [("D", None, {}), ("boundary", None, {})]
    scales = residual_loss_scales(solver, calls, [residual, residual], 2)
    rows = torch.tensor([8, 9, 0, 1])
    expected = torch.sigmoid(torch.linspace(-2.0, 2.0, 10))[rows].sqrt()
    for scale, per_point in scales:
        assert per_point
        assert torch.allclose(scale.reshape(-1), expected)


def test_an_autoregressive_ensembles_calls_take_the_means_pina_updated():
    # two members after an earlier step of the epoch: PINA's mean of each
    # unrolling step's loss is updated after each member's call, and that
    # call is weighted by exp(-eps * cumsum) of the update
    eps = 0.5
    solver = multi_model_solver(
        "autoregressive ensemble", NTKWeighting(), eps=eps
    )
    before, count = torch.tensor([[[0.4]], [[0.2]]]), 3
    residuals = [torch.full((2, 5, 2), 0.5), torch.full((2, 5, 2), 1.0)]
    losses = [torch.full((2, 1, 1), 0.25), torch.full((2, 1, 1), 1.0)]
    first = before + (losses[0] - before) / (count + 1)
    second = first + (losses[1] - first) / (count + 2)
    solver._running_avg["long"] = second.clone()
    solver._step_count["long"] = count + 2
    calls = [("long", None, {}), ("long", None, {})]
    scales = residual_loss_scales(solver, calls, residuals, 0)
    for (scale, per_point), mean in zip(scales, (first, second)):
        expected = torch.exp(-eps * torch.cumsum(mean, dim=0)).sqrt()
        assert not per_point
        assert torch.allclose(scale, expected)
