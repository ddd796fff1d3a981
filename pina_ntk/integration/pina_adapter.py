"""The one place where pina-ntk touches PINA's internals.

Every private field of PINA that pina-ntk reads or writes, every method it
patches and every data container it opens is handled by one function or
class here, so a change in PINA is mended in one place; the rest of the
package uses these and PINA's public API (``tests/core/test_layers.py``
checks it). What is touched, and why:

* ``solver._reduction``: the user's loss reduction (PINA sets the loss
  module's own to ``"none"``);
* ``solver._params``: the dict of an inverse problem's unknown parameters
  that PINA passes to every residual; :func:`unknowns_replaced` swaps its
  entries while recorded residuals are evaluated again (PINA clamps the
  unknowns in place between a step's loss and its backward pass);
* ``weighting._solver``: PINA writes it when it attaches a weighting to a
  solver; :class:`SolverAttachedWeighting` turns the write into a hook;
* ``solver._active_model_idx``: the member of an ensemble solver whose
  residual ``condition.evaluate`` computes; a recorded call keeps its
  member (:func:`member_evaluate`) and a replay sets it again;
* ``solver.configure_callbacks``: PINA's solvers do not define it;
  :func:`offer_callback` gives one to a solver instance;
* ``condition.evaluate``: wrapped on condition instances while a callback
  records residuals (:func:`wrap_evaluate`, :func:`unwrap_evaluate`);
* ``condition.data`` and its ``data`` dict: a condition's stored points
  (:func:`condition_data`, :func:`condition_points`,
  :func:`store_condition_points`);
* the factors PINA's solvers put on the squared residual inside a
  condition's loss: ``solver._loss_fn``, the causal solver's ``eps`` and
  ``regularized_conditions``, the RBA solver's attention buffers
  (``weight_buffers``) and the autoregressive solver's ``_running_avg``
  (:func:`residual_loss_scales`).
"""

import contextlib
from collections.abc import Sequence

import torch
from lightning.pytorch.utilities import rank_zero_warn
from pina.condition import InputTargetCondition
from pina.solver import (
    AutoregressiveEnsembleSolver,
    AutoregressiveSingleModelSolver,
    CausalPhysicsInformedSingleModelSolver,
    CompetitivePhysicsInformedSolver,
    EnsembleSolver,
    RBAPhysicsInformedSingleModelSolver,
    SelfAdaptivePhysicsInformedSolver,
    SingleModelSolver,
)
from pina.weighting import BaseWeighting

from ..core.weights import REDUCTIONS
from .contract import KernelRule

#: Lightning precisions that keep the parameters in half precision.
HALF_PRECISION = ("bf16-true", "16-true")


# ----------------------------------------------------------------- solvers
def solver_reduction(solver):
    """
    The reduction of the solver's loss (``"mean"``, ``"sum"``, ...).

    PINA keeps the user's reduction in ``solver._reduction`` and sets the
    loss module's own reduction to ``"none"`` (it reduces per condition).

    :param solver: A PINA solver.
    :rtype: str
    """
    return solver._reduction


def trainable_parameters(solver):
    """
    The solver's module parameters that the kernel is taken with respect
    to: those of the models that minimise the loss.

    Every model of a single-model or an ensemble solver minimises it; the
    self-adaptive solver's pointwise weights and the competitive solver's
    discriminator maximise it, and are left out. The unknown parameters of
    a PINA ``InverseProblem`` are not module parameters
    (:func:`unknown_parameters`).

    :param solver: A PINA solver.
    :return: ``{name: parameter}`` in ``named_parameters`` order.
    :rtype: dict
    """
    minimisers = None
    if isinstance(
        solver,
        (SelfAdaptivePhysicsInformedSolver, CompetitivePhysicsInformedSolver),
    ):
        minimisers = {id(p) for p in solver.model.parameters()}
    return {
        n: p
        for n, p in solver.named_parameters()
        if p.requires_grad and (minimisers is None or id(p) in minimisers)
    }


def ensemble_size(solver):
    """
    The number of models of an ensemble solver, whose condition loss is the
    mean of its members' losses; 1 for every other solver.

    :param solver: A PINA solver.
    :rtype: int
    """
    return solver.num_models if isinstance(solver, EnsembleSolver) else 1


class _MemberEvaluate:
    """A condition's ``evaluate`` bound to one member of an ensemble."""

    def __init__(self, evaluate, member):
        self.evaluate = evaluate
        self.member = member

    def __call__(self, batch, solver):
        previous = getattr(solver, "_active_model_idx", None)
        solver._active_model_idx = self.member
        try:
            return self.evaluate(batch, solver)
        finally:
            solver._active_model_idx = previous


def member_evaluate(solver, evaluate, member=None):
    """
    ``evaluate`` bound to a member of an ensemble solver, so that calling
    it again evaluates that member's residual.

    PINA's ensemble solvers evaluate each condition once per member, with
    the member set in ``solver._active_model_idx`` (and every member's
    output stacked when none is set).

    :param solver: A PINA solver.
    :param callable evaluate: A condition's ``evaluate``.
    :param int member: The member; ``None`` (default): the one active now,
        inside PINA's loop over the members.
    :return: ``evaluate`` itself for a solver that is not an ensemble.
    :rtype: callable
    """
    if not isinstance(solver, EnsembleSolver):
        return evaluate
    if member is None:
        member = solver._active_model_idx
    return _MemberEvaluate(evaluate, member)


#: Prefix of an inverse problem's unknowns among the kernel's parameters.
UNKNOWN_PREFIX = "unknown_parameters."


def unknown_parameters(solver):
    """
    The unknown parameters of an inverse problem, as the solver passes
    them to the residuals, or ``{}`` for a forward problem.

    :param solver: A PINA solver.
    :return: ``{UNKNOWN_PREFIX + name: parameter}`` of those requiring
        gradients.
    :rtype: dict
    """
    # PINA sets it for every solver: None for a forward problem
    unknowns = solver._params or {}
    return {
        UNKNOWN_PREFIX + name: value
        for name, value in unknowns.items()
        if value.requires_grad
    }


@contextlib.contextmanager
def unknowns_replaced(solver, values):
    """
    Evaluate residuals with some unknown parameters replaced.

    PINA hands every residual the dict ``solver._params`` (the problem's
    ``unknown_parameters``); its entries are swapped for the duration and
    restored after, even on an exception.

    :param solver: A PINA solver of an inverse problem.
    :param dict values: ``{UNKNOWN_PREFIX + name: tensor}``.
    """
    if not values:
        yield
        return
    store = solver._params
    saved = dict(store)
    try:
        for key, value in values.items():
            store[key[len(UNKNOWN_PREFIX) :]] = value
        yield
    finally:
        store.update(saved)


def is_observation(solver, name):
    """
    Whether a condition holds observations: input-target data, such as
    the measurements an inverse problem's unknowns are identified from.

    :param solver: A PINA solver.
    :param str name: The condition.
    :rtype: bool
    """
    return isinstance(solver.problem.conditions[name], InputTargetCondition)


#: The solvers whose kernel is derived (``docs/estimators.md``), besides
#: every single-model solver.
MULTI_MODEL_SOLVERS = (
    EnsembleSolver,
    SelfAdaptivePhysicsInformedSolver,
    CompetitivePhysicsInformedSolver,
)


def check_kernel_solver(solver, owner, multi_model=True):
    """
    Require a solver whose residual kernel is defined: a single-model
    solver, one of PINA's ensemble solvers, its self-adaptive or its
    competitive solver, and a loss reduced by ``mean`` or ``sum``.

    :param solver: The Lightning module a callback is attached to.
    :param str owner: The name of the class asking, for the message.
    :param bool multi_model: Whether the multi-model solvers qualify.
        Default ``True``.
    :raises ValueError: If the solver does not qualify.
    """
    if not multi_model and not isinstance(solver, SingleModelSolver):
        raise ValueError(
            f"{owner} needs a single-model PINA solver (e.g. "
            "PhysicsInformedSingleModelSolver); got "
            f"{type(solver).__name__}."
        )
    if not isinstance(solver, (SingleModelSolver, *MULTI_MODEL_SOLVERS)):
        raise ValueError(
            f"{owner} needs a PINA solver whose kernel is derived: a "
            "single-model solver (e.g. PhysicsInformedSingleModelSolver), "
            "an ensemble solver, SelfAdaptivePhysicsInformedSolver or "
            f"CompetitivePhysicsInformedSolver; got {type(solver).__name__}."
        )
    reduction = solver_reduction(solver)
    if reduction not in REDUCTIONS:
        raise ValueError(
            f"{owner} needs a loss with reduction 'mean' or 'sum'; got "
            f"{reduction!r}."
        )


def check_kernel_training(trainer, solver):
    """
    Require a training set-up the NTK weights can be computed in, and
    return the solver's weighting.

    :param trainer: The Lightning trainer.
    :param solver: The Lightning module (a PINA solver).
    :return: The solver's weighting.
    :rtype: KernelRule
    :raises ValueError: If the weighting is not a pina-ntk weighting or
        belongs to another solver, the solver does not qualify
        (:func:`check_kernel_solver`), the precision keeps half-precision
        parameters for a weighting taking finite differences, or
        ``full_kernel=True`` meets distributed training.
    """
    weighting = getattr(solver, "weighting", None)
    if not isinstance(weighting, KernelRule):
        raise ValueError(
            "NTKCallback drives pina_ntk weightings only: build the solver "
            "with weighting=pina_ntk.NTKWeighting(...) or "
            "weighting=pina_ntk.SketchNTKWeighting(...); got "
            f"{type(weighting).__name__}."
        )
    check_kernel_solver(solver, "NTKCallback")
    if weighting.solver is not solver:
        raise ValueError(
            "This weighting object is attached to another solver: create "
            "one weighting instance per solver."
        )
    if weighting.needs_full_precision and trainer.precision in HALF_PRECISION:
        raise ValueError(
            f"{type(weighting).__name__} cannot run with Trainer("
            f"precision={trainer.precision!r}): its finite differences "
            "need full-precision parameters. Use precision='bf16-mixed' "
            "or '16-mixed' (the sketch then runs in full precision) or "
            "'32-true'."
        )
    if weighting.full_kernel and trainer.world_size > 1:
        raise ValueError(
            "full_kernel=True is not available in distributed training: "
            "each process only sees its share of the points. Use "
            "full_kernel=False (per-condition traces are all-reduced)."
        )
    if not isinstance(solver.loss, torch.nn.MSELoss):
        rank_zero_warn(
            "NTK weights assume a squared-residual loss (torch.nn.MSELoss);"
            f" the solver uses {type(solver.loss).__name__}."
        )
    return weighting


def residual_loss_scales(solver, calls, residuals, batch_index):
    """
    The factors by which a solver's condition loss weighs each recorded
    residual entry, as square roots: the residual of the loss it minimises.

    PINA's physics-informed and supervised solvers minimise
    ``reduce(loss_fn(r, 0))`` of each condition's residual ``r``; five
    solvers put a factor ``f`` inside, ``reduce(f * loss_fn(r, 0))``, with
    ``f`` out of the autograd graph of the kernel's parameters:

    * causal, on its regularised conditions: ``f[t] = exp(-eps *
      cumsum_{s <= t} loss_fn(r[s], 0))`` over the ``n_steps`` time slices
      (one recorded call each, in time order), entry by entry;
    * RBA, on its regularised conditions: the attention weight of each
      point, read from its buffer after this step's update, at the rows
      PINA reads for batch ``batch_index``;
    * self-adaptive: ``func(w)`` of its pointwise weights ``w`` (a sigmoid
      by default) at the same rows; ``w`` is maximised, not a kernel
      parameter;
    * autoregressive (single-model or ensemble), with ``eps != 0``:
      ``f[t] = exp(-eps * cumsum(m))`` of the running averages ``m`` of its
      unrolling steps' losses, as PINA updates them call by call (an
      ensemble updates them once per member);
    * competitive: the residual itself is ``r * d`` with ``d`` the
      discriminator's output at the points (``f = d**2``, taken with its
      sign here: the kernel is the same); the discriminator maximises the
      loss and is not a kernel parameter.

    The kernel of the loss is then that of ``sqrt(f) * r``. The
    gradient-enhanced solver's penalty adds terms in the input derivatives
    of ``r``, not a factor: it is not covered (``docs/guide.md``, *Which
    residual the kernel is taken of*).

    :param solver: The PINA solver.
    :param calls: The recorded ``(condition, evaluate, data)`` calls, in
        call order.
    :type calls: list[tuple]
    :param residuals: The recorded residuals, in call order.
    :type residuals: list[torch.Tensor]
    :param int batch_index: The training batch's index in its epoch.
    :return: Per call, ``(scale, per_point)``: ``scale`` broadcasts to the
        call's residual (``None``: 1) and ``per_point`` says whether its
        leading dimension runs over the call's points (then a chunk of
        points takes the matching rows).
    :rtype: list[tuple]
    """
    with torch.no_grad():
        owners = [name for name, _, _ in calls]
        scales = [(None, False)] * len(residuals)
        if isinstance(solver, CausalPhysicsInformedSingleModelSolver):
            for name in solver.regularized_conditions:
                if isinstance(
                    solver.problem.conditions[name], InputTargetCondition
                ):
                    continue
                indices = [i for i, owner in enumerate(owners) if owner == name]
                losses = torch.stack(
                    [_entry_losses(solver, residuals[i]) for i in indices]
                )
                factors = torch.exp(-solver.eps * torch.cumsum(losses, dim=0))
                for i, factor in zip(indices, factors):
                    scales[i] = (factor.sqrt(), True)
        elif isinstance(solver, RBAPhysicsInformedSingleModelSolver):
            for i, (owner, residual) in enumerate(zip(owners, residuals)):
                if owner in solver.regularized_conditions:
                    buffer = getattr(solver, solver.weight_buffers[owner])
                    rows = _cyclic_rows(residual, buffer, batch_index)
                    scales[i] = (buffer[rows].sqrt(), True)
        elif isinstance(solver, SelfAdaptivePhysicsInformedSolver):
            for i, (owner, residual) in enumerate(zip(owners, residuals)):
                weights = solver.weights.func(getattr(solver.weights, owner))
                rows = _cyclic_rows(residual, weights, batch_index)
                scales[i] = (weights[rows].sqrt(), True)
        elif isinstance(solver, CompetitivePhysicsInformedSolver):
            variables = solver.problem.input_variables
            for i, (_, _, data) in enumerate(calls):
                bets = solver.discriminator(data["input"][variables])
                scales[i] = (bets, True)
        elif isinstance(solver, AutoregressiveSingleModelSolver) and solver.eps:
            for i, owner in enumerate(owners):
                averages = solver._running_avg[owner]
                factors = torch.exp(-solver.eps * torch.cumsum(averages, dim=0))
                scales[i] = (factors.sqrt(), False)
        elif isinstance(solver, AutoregressiveEnsembleSolver) and solver.eps:
            found = _member_running_averages(solver, owners, residuals)
            for i, averages in found.items():
                factors = torch.exp(-solver.eps * torch.cumsum(averages, dim=0))
                scales[i] = (factors.sqrt(), False)
        return [
            (None if s is None else as_plain_tensor(s).detach().clone(), p)
            for s, p in scales
        ]


def _cyclic_rows(residual, buffer, batch_index):
    """The rows of a per-point ``buffer`` PINA reads for batch
    ``batch_index`` (RBA and self-adaptive solvers): the batch's points,
    counted cyclically from ``batch_index`` times their number."""
    count, total = residual.shape[0], buffer.shape[0]
    start = (batch_index * count) % total
    return (torch.arange(start, start + count) % total).to(buffer.device)


def _member_running_averages(solver, owners, residuals):
    """``{call index: running averages}`` each of an autoregressive
    ensemble's calls was weighted by: PINA updates a condition's average
    after each member's call and weights that call by the update, so the
    step's averages are read back from the present ones call by call,
    latest first (``m_{k-1} = (n_k m_k - l_k) / (n_k - 1)``)."""
    found = {}
    for owner in dict.fromkeys(owners):
        average = solver._running_avg[owner].clone()
        count = solver._step_count[owner]
        indices = [i for i, name in enumerate(owners) if name == owner]
        # the first call of an epoch leaves count 1: nothing before it
        for i in reversed(indices):
            found[i] = average
            losses = _entry_losses(solver, residuals[i])
            dims = tuple(range(1, losses.dim()))
            step = losses.mean(dim=dims, keepdim=True)
            average = (count * average - step) / max(count - 1, 1)
            count -= 1
    return found


def residual_points_dim(solver):
    """
    The dimension of a condition's residual that runs over its points (the
    leading dimension of its input): the autoregressive solver stacks its
    unrolling steps first (``[steps, trajectories, ...]``), every other
    solver returns the points first.

    :param solver: The PINA solver.
    :rtype: int
    """
    autoregressive = (
        AutoregressiveSingleModelSolver,
        AutoregressiveEnsembleSolver,
    )
    return 1 if isinstance(solver, autoregressive) else 0


def _entry_losses(solver, residual):
    """``loss_fn(r, 0)`` entry by entry, as the solver's loss takes it."""
    residual = as_plain_tensor(residual)
    return as_plain_tensor(
        solver._loss_fn(residual, torch.zeros_like(residual))
    )


# -------------------------------------------------------------- weightings
class SolverAttachedWeighting(BaseWeighting):
    """
    A PINA weighting that is told when PINA attaches it to a solver.

    PINA attaches a weighting by writing its private ``_solver`` field
    (``BaseSolver._init_weighting_and_loss``); this class turns that write
    into a call of :meth:`attached`, and PINA's public ``solver`` property
    reads the field back as before.
    """

    @property
    def _solver(self):
        return self.__dict__.get("_attached_solver")

    @_solver.setter
    def _solver(self, solver):
        self.__dict__["_attached_solver"] = solver
        if solver is not None:
            self.attached(solver)

    def attached(self, solver):
        """
        Called when PINA attaches this weighting to ``solver``.

        :param solver: The PINA solver.
        """


def offer_callback(solver, callback_type):
    """
    Make ``solver`` contribute a ``callback_type()`` to every ``Trainer`` that
    fits it, through Lightning's ``LightningModule.configure_callbacks``,
    unless the trainer holds a ``callback_type`` already (the user's, with
    options, is then used; never two).

    PINA's solvers do not define ``configure_callbacks``; the solver
    instance gets one that returns what its class's returns plus the
    callback. Lightning calls it once per ``fit``, before restoring a
    checkpoint, so the callback's state is restored as usual.

    :param solver: A PINA solver.
    :param type callback_type: The callback class, built without arguments.
    """
    configure_class_callbacks = solver.configure_callbacks

    def configure_callbacks():
        callbacks = configure_class_callbacks() or []
        if not isinstance(callbacks, Sequence):
            callbacks = [callbacks]
        callbacks = list(callbacks)
        present = list(solver.trainer.callbacks) + callbacks
        if not any(isinstance(c, callback_type) for c in present):
            callbacks.append(callback_type())
        return callbacks

    solver.configure_callbacks = configure_callbacks


# -------------------------------------------------------------- conditions
def class_evaluate(condition):
    """
    The condition's own ``evaluate`` method, looked up on its class so that
    a wrapper stored on the instance (:func:`wrap_evaluate`) is bypassed.

    :param condition: A PINA condition.
    :rtype: callable
    """
    return type(condition).evaluate.__get__(condition)


def wrap_evaluate(problem, wrap):
    """
    Store ``wrap(name, evaluate)`` on each condition of ``problem`` in place
    of its ``evaluate``, where ``evaluate`` is the condition's own method.

    PINA calls ``condition.evaluate(batch, solver)`` for every condition of
    every training batch; a wrapper stored on the instance sees those calls.
    Cheap enough to re-run at every batch: PINA may replace condition
    objects (a new ``Trainer``, refinement callbacks), and problems of one
    class share their conditions. A wrapper that ``wrap`` accepts as its
    own (``wrap.owns(wrapper, name)``) is kept.

    :param problem: The PINA problem.
    :param wrap: ``(name, evaluate) -> callable``, with a method
        ``owns(wrapper, name) -> bool``.
    """
    for name, condition in problem.conditions.items():
        current = condition.__dict__.get("evaluate")
        if current is not None and wrap.owns(current, name):
            continue
        condition.evaluate = wrap(name, class_evaluate(condition))


def unwrap_evaluate(problem, wrapper_type):
    """
    Remove the ``wrapper_type`` wrappers of :func:`wrap_evaluate`,
    restoring the conditions' own methods.

    :param problem: The PINA problem.
    :param type wrapper_type: The wrappers' class.
    """
    for condition in problem.conditions.values():
        if isinstance(condition.__dict__.get("evaluate"), wrapper_type):
            del condition.evaluate


def condition_data(condition):
    """
    The points and data a condition stores, as a plain dict.

    :param condition: A PINA condition after ``pina.Trainer`` set-up.
    :return: ``{key: tensor}`` (``"input"``, maybe ``"target"``), or
        ``None`` if the condition holds no points yet.
    :rtype: dict
    """
    data = getattr(condition, "data", None)
    if data is None or not hasattr(data, "keys"):
        return None
    return {key: data.data[key] for key in data.keys}


def condition_points(solver, name):
    """
    The input points stored in condition ``name``.

    :param solver: The PINA solver.
    :param str name: The condition.
    :rtype: LabelTensor
    """
    return solver.problem.conditions[name].data.input


def store_condition_points(solver, name, points):
    """
    Make ``points`` the stored input points of condition ``name``.

    PINA's tensor data manager keeps its tensors both as attributes and in
    its ``data`` dict (read when batches are built); both are updated.

    :param solver: The PINA solver.
    :param str name: The condition.
    :param LabelTensor points: The new points.
    """
    data = solver.problem.conditions[name].data
    data.input = points
    if isinstance(getattr(data, "data", None), dict):
        data.data["input"] = points


def as_plain_tensor(tensor):
    """
    A residual as a plain :class:`torch.Tensor` (drops PINA labels).

    :param torch.Tensor tensor: A tensor or ``LabelTensor``.
    :return: The same data and autograd history, as a plain tensor.
    :rtype: torch.Tensor
    """
    return torch.Tensor.as_subclass(tensor, torch.Tensor)
