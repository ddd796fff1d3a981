"""The one place where pina-ntk reads PINA's internals.

Each private field of PINA that pina-ntk needs is read by exactly one
function here, so a change in PINA is mended in one place; the rest of the
package uses these functions and PINA's public API. :func:`offer_callback`
is the one place that gives a PINA solver something it lacks (Lightning's
``configure_callbacks``).
"""

from collections.abc import Sequence

import torch
from pina.solver import SingleModelSolver

from ..core.weights import REDUCTIONS


def solver_reduction(solver):
    """
    The reduction of the solver's loss (``"mean"``, ``"sum"``, ...).

    PINA keeps the user's reduction in ``solver._reduction`` and sets the
    loss module's own reduction to ``"none"`` (it reduces per condition).

    :param solver: A PINA solver.
    :rtype: str
    """
    return solver._reduction


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


def refinement_conditions(refinement):
    """
    The conditions a PINA refinement callback updates.

    :param refinement: A :class:`pina.callback.BaseRefinement` after its
        ``on_train_start``.
    :return: The condition names.
    :rtype: list[str]
    """
    return refinement._condition_to_update


def as_plain_tensor(tensor):
    """
    A residual as a plain :class:`torch.Tensor` (drops PINA labels).

    :param torch.Tensor tensor: A tensor or ``LabelTensor``.
    :return: The same data and autograd history, as a plain tensor.
    :rtype: torch.Tensor
    """
    return torch.Tensor.as_subclass(tensor, torch.Tensor)


def trainable_parameters(solver):
    """
    The parameters the kernel is taken with respect to.

    These are the solver's module parameters with ``requires_grad=True``.
    The unknown parameters of a PINA ``InverseProblem`` are not module
    parameters and do not enter the kernel: the NTK describes the network.

    :param solver: A PINA solver.
    :return: ``{name: parameter}`` in ``named_parameters`` order.
    :rtype: dict
    """
    return {n: p for n, p in solver.named_parameters() if p.requires_grad}


def check_kernel_solver(solver, owner):
    """
    Require a solver whose residual kernel is defined: one model, and a
    loss reduced by ``mean`` or ``sum``.

    :param solver: The Lightning module a callback is attached to.
    :param str owner: The name of the class asking, for the message.
    :raises ValueError: If the solver does not qualify.
    """
    if not isinstance(solver, SingleModelSolver):
        raise ValueError(
            f"{owner} needs a single-model PINA solver (e.g. "
            "PhysicsInformedSingleModelSolver); got "
            f"{type(solver).__name__}."
        )
    reduction = solver_reduction(solver)
    if reduction not in REDUCTIONS:
        raise ValueError(
            f"{owner} needs a loss with reduction 'mean' or 'sum'; got "
            f"{reduction!r}."
        )
