"""A gradient-norm factor kept in a band around the NTK weights.

PINA's ``SelfAdaptiveWeighting`` weights condition ``c`` by
``sum_d ||g_d|| / ||g_c||``, with ``g_c`` the gradient of its reduced loss
``L_c``: it equalises the conditions' gradient norms. With the ``mean``
reduction ``g_c = (2/n_c) J_c^T R_c``, so ``||g_c||^2 = (4/n_c) L_c rho_c``
(``rho_c`` the Rayleigh quotient of ``K_cc`` along ``R_c``): the rule keeps
pushing a condition whose loss shrinks, and its weight runs away when a loss
is driven to zero. The NTK weight ``Tr(K)/Tr(K_cc)`` does not depend on the
residual at all.

The band rule multiplies the NTK weights ``w_c`` by the factor that would
equalise the norms of the *weighted* gradients ``w_c ||g_c||``, kept within
``[1/b, b]``::

    u_c     = log(w_c ||g_c||)
    phi_c   = exp(clamp(mean_d u_d - u_c, -log b, log b))
    w'_c    = phi_c w_c

``b = 1`` gives the NTK weights; ``b -> inf`` gives the self-adaptive
weights up to one common factor. The weightings apply it to stationary
problems only, see ``docs/weights.md``. A condition whose gradient is
exactly zero (or not finite) carries no information: its factor is ``1``
and the mean is taken over the others. The factor depends on the ratios of
the gradient norms only, so the loss reduction (``mean`` or ``sum``) does
not change it.
"""

import math

import torch

from .checks import check_positive

#: Moving-average rate per optimisation step of the squared gradient norms:
#: the average spans about 100 steps, the spacing of PINA's self-adaptive
#: weights in the weightings benchmark, so the factor follows the losses'
#: progress while the NTK weights (rate ``1e-3``) stay steady.
GRADIENT_ALPHA = 1e-2


def check_band(band):
    """
    Require a band factor ``b >= 1`` (the ``gradient_band`` argument), or
    ``None`` for none.

    :param band: The factor.
    :return: The factor as a float, or ``None``.
    :rtype: float | None
    :raises ValueError: If it is not a number ``>= 1`` or ``None``.
    """
    if band is None:
        return None
    band = check_positive("gradient_band", band)
    if band < 1.0:
        raise ValueError(
            f"gradient_band must be a number >= 1 or None, got {band!r}."
        )
    return float(band)


def gradient_band_factors(weights, gradient_sq_norms, band):
    """
    The factors ``phi_c`` of the band rule (see the module notes).

    :param torch.Tensor weights: The NTK weights ``w_c > 0``, ``(C,)``.
    :param torch.Tensor gradient_sq_norms: ``||g_c||^2`` (or a moving
        average of it) per condition, ``(C,)``.
    :param float band: The band ``b >= 1``.
    :return: ``phi_c`` in ``[1/b, b]``, ``(C,)``; ``1`` where the gradient
        norm is zero or not finite.
    :rtype: torch.Tensor

    :Example:
        >>> gradient_band_factors(
        ...     torch.tensor([1.0, 1.0]), torch.tensor([4.0, 1.0]), 10.0)
        tensor([0.7071, 1.4142])
    """
    usable = torch.isfinite(gradient_sq_norms) & (gradient_sq_norms > 0)
    safe = torch.where(usable, gradient_sq_norms, 1.0)
    weighted = weights.log() + 0.5 * safe.log()
    count = usable.sum().clamp(min=1)
    mean = torch.where(usable, weighted, 0.0).sum() / count
    limit = math.log(band)
    factors = (mean - weighted).clamp(-limit, limit).exp()
    return torch.where(usable, factors, torch.ones_like(factors))


def condition_gradients(losses, params):
    """
    The gradient of each condition loss with respect to ``params``, as the
    rows of one matrix: one backward pass per condition, each through that
    condition's part of the graph only (which stays alive for the training
    step's backward). Rows rather than norms, so that a data-parallel run can
    average the ranks' gradients before it takes their norms.

    :param losses: The condition losses, 0-d tensors with their graph.
    :type losses: list[torch.Tensor]
    :param list params: The parameters.
    :return: ``(C, P)`` with ``P`` the number of parameter entries, detached,
        in the dtype of the first parameter; zeros where a loss does not
        depend on a parameter.
    :rtype: torch.Tensor
    """
    like = params[0]
    rows = []
    for loss in losses:
        grads = torch.autograd.grad(
            loss, params, retain_graph=True, allow_unused=True
        )
        flat = [
            (
                torch.zeros(p.numel(), dtype=like.dtype, device=like.device)
                if g is None
                # a tensor subclass's loss (PINA's LabelTensor) passes its class
                # on to the gradients: plain tensors from here on
                else torch.Tensor.as_subclass(g, torch.Tensor).reshape(-1)
            )
            for g, p in zip(grads, params)
        ]
        rows.append(torch.cat(flat).to(like.dtype))
    return torch.stack(rows).detach()
