"""Residual functions of plain parameter vectors and modules.

The estimators of :mod:`pina_ntk.core.estimators` take a *residual function*
``residual_fn(params) -> list of residual blocks`` with ``params`` a
dictionary ``{name: tensor}``. This module builds such functions from

* a function ``R(theta)`` of one parameter vector
  (:func:`vector_residual_fn`, the dictionary key is ``"theta"``), and
* an :class:`torch.nn.Module` and a function of its forward pass
  (:func:`module_residual_fn`, evaluated with
  :func:`torch.func.functional_call`, so the module is never modified),

and computes the exact kernel ``K = J J^T`` of a residual function
(:func:`residual_jacobian`, :func:`exact_kernel`) for problems small enough
to afford one backward pass per residual entry.
"""

import torch
from torch.func import functional_call

from .estimators import entry_gradients

#: The dictionary key of the parameter vector in :func:`vector_residual_fn`.
THETA = "theta"


def as_blocks(residual):
    """
    A residual as a list of blocks.

    :param residual: One tensor (one block) or a list/tuple of tensors.
    :type residual: torch.Tensor | list[torch.Tensor] | tuple[torch.Tensor]
    :return: The blocks, as a new list.
    :rtype: list[torch.Tensor]
    :raises TypeError: If ``residual`` is neither a tensor nor a non-empty
        sequence of tensors.

    :Example:
        >>> [b.shape for b in as_blocks(torch.zeros(3))]
        [torch.Size([3])]
    """
    if torch.is_tensor(residual):
        return [residual]
    if isinstance(residual, (list, tuple)) and residual:
        if all(torch.is_tensor(block) for block in residual):
            return list(residual)
    raise TypeError(
        "A residual function must return a tensor or a non-empty list of "
        f"tensors, got {type(residual).__name__}."
    )


def vector_residual_fn(fn):
    """
    Turn ``R(theta) -> blocks`` into the dictionary form of the estimators.

    :param callable fn: Maps a parameter vector ``theta`` (any shape) to one
        residual tensor or to a list of residual blocks, one per loss term.
        It must be differentiable with torch's autograd.
    :return: ``residual_fn(params)`` reading ``params["theta"]`` and
        returning a list of blocks.
    :rtype: callable
    :raises TypeError: If ``fn`` is not callable.

    :Example:
        >>> x = torch.linspace(-1.0, 1.0, 5)
        >>> residual_fn = vector_residual_fn(lambda th: th[0] ** 2 * x - 1.0)
        >>> residual_fn({"theta": torch.tensor([2.0])})[0]
        tensor([-5., -3., -1.,  1.,  3.])
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}.")

    def residual_fn(params):
        if THETA not in params:
            raise KeyError(
                "A residual function from vector_residual_fn reads the "
                f"parameter vector params[{THETA!r}]; got keys "
                f"{sorted(params)}."
            )
        return as_blocks(fn(params[THETA]))

    return residual_fn


def module_residual_fn(module, fn):
    """
    A residual function of a module's parameters.

    ``fn`` receives a callable with the module's call signature that
    evaluates the module with the parameters passed to the residual function
    (through :func:`torch.func.functional_call`; parameters and buffers not
    in ``params`` are the module's own), and returns the residual blocks.
    ``dict(module.named_parameters())`` is a valid ``params``.

    :param torch.nn.Module module: The model.
    :param callable fn: ``fn(model) -> tensor or list of blocks``, where
        ``model(*args, **kwargs)`` is the module's forward pass.
    :return: ``residual_fn(params)`` returning a list of blocks.
    :rtype: callable
    :raises TypeError: If ``module`` is not a module or ``fn`` not callable.

    :Example:
        >>> net = torch.nn.Linear(1, 1)
        >>> x, y = torch.rand(8, 1), torch.rand(8, 1)
        >>> residual_fn = module_residual_fn(net, lambda model: model(x) - y)
        >>> kernel = exact_kernel(residual_fn, dict(net.named_parameters()))
        >>> kernel.shape
        torch.Size([8, 8])
    """
    if not isinstance(module, torch.nn.Module):
        raise TypeError(
            f"module must be a torch.nn.Module, got {type(module).__name__}."
        )
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}.")

    def residual_fn(params):
        def model(*args, **kwargs):
            return functional_call(module, params, args, kwargs, strict=False)

        return as_blocks(fn(model))

    return residual_fn


def residual_jacobian(residuals, params):
    """
    The Jacobian ``J`` of the flattened residual, one backward pass per row.

    Row ``i`` is ``grad_theta R_i`` flattened over all parameters in the
    order of ``params`` (:func:`~pina_ntk.core.estimators.entry_gradients`); a
    parameter a residual does not depend on gives zeros.

    :param residuals: Residual blocks computed from ``params`` with autograd.
        Their graph is retained.
    :type residuals: list[torch.Tensor]
    :param params: The parameters, as a list or a ``{name: tensor}`` dict.
    :type params: list[torch.Tensor] | dict
    :return: ``J`` of shape ``(n, p)``, ``n`` residual entries and ``p``
        parameter entries.
    :rtype: torch.Tensor

    :Example:
        >>> theta = torch.tensor([1.0, 2.0], requires_grad=True)
        >>> residual_jacobian([theta**2], [theta])
        tensor([[2., 0.],
                [0., 4.]])
    """
    params = list(params.values()) if isinstance(params, dict) else params
    flat = torch.cat([block.reshape(-1) for block in residuals])
    width = sum(p.numel() for p in params)
    rows = flat.new_zeros(flat.numel(), width)
    if flat.grad_fn is None:  # independent of every parameter
        return rows
    for i, grads in enumerate(entry_gradients(flat, params)):
        rows[i] = torch.cat([g.reshape(-1) for g in grads]).detach()
    return rows


def exact_kernel(residual_fn, params):
    """
    The exact neural tangent kernel ``K = J J^T`` of a residual function.

    Costs one forward pass and one backward pass per residual entry, so it is
    meant for small problems (tests, diagnostics, the paper's experiments).
    Rows and columns follow the flattened residual blocks in order.

    :param callable residual_fn: ``params -> list of residual blocks``
        (for example from :func:`vector_residual_fn`).
    :param dict params: ``{name: tensor}``; left untouched (the kernel is
        taken at detached copies that require gradients).
    :return: The symmetric ``n × n`` kernel, detached.
    :rtype: torch.Tensor

    :Example:
        >>> x = torch.tensor([0.0, 1.0, 2.0])
        >>> residual_fn = vector_residual_fn(lambda th: th[0] * x + th[1])
        >>> exact_kernel(residual_fn, {"theta": torch.tensor([1.0, 0.0])})
        tensor([[1., 1., 1.],
                [1., 2., 3.],
                [1., 3., 5.]])
    """
    leaves = {
        name: value.detach().requires_grad_(True)
        for name, value in params.items()
    }
    with torch.enable_grad():
        residuals = as_blocks(residual_fn(leaves))
        jacobian = residual_jacobian(residuals, leaves)
    return jacobian @ jacobian.T
