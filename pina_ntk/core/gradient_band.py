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

import functools
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


class ConditionGradientTap:
    """
    Each condition's loss gradient, read off the training step's own
    backward pass instead of one more backward pass per condition.

    Every evaluation of condition ``c`` runs through views of the parameters
    of its own (:meth:`aliases`, identity maps: the step computes what it
    would without them). A hook on a view receives that evaluation's share
    of the training gradient, ``m_c dL_c/dtheta`` with ``m_c`` the
    derivative of the training loss with respect to the condition loss
    ``L_c`` (its weight, times any loss scale or accumulation factor), which
    a hook on ``L_c`` receives (:meth:`watch_losses`). :meth:`rows` divides
    the two: ``dL_c/dtheta``, what a backward pass of ``L_c`` alone would
    give, up to rounding. This holds when the training loss depends on the
    views of ``c`` only through ``L_c``, as in PINA's weighted sum. The
    views take gradients only after :meth:`watch_losses`: backward passes
    through the step's graph before it (the weighting's own, inside the
    loss aggregation) are not the training gradient.

    :param dict params: ``{name: parameter}``, in the rows' order.

    :Example:
        >>> theta = torch.tensor([1.0, 2.0], requires_grad=True)
        >>> tap = ConditionGradientTap({"theta": theta})
        >>> views = tap.aliases("a")["theta"]
        >>> loss = (views**2).sum()
        >>> tap.watch_losses({"a": loss})
        >>> (3.0 * loss).backward()
        >>> tap.rows(["a"])
        tensor([[2., 4.]])
    """

    def __init__(self, params):
        self._params = dict(params)
        self._gradients = {}  # condition -> [summed gradient or None]
        self._multipliers = {}  # condition -> dLoss/dL_c
        self._watching = False  # from watch_losses on

    def aliases(self, condition):
        """
        Views of the parameters for one evaluation of ``condition``; their
        gradients are summed into the condition's row.

        :param str condition: The condition evaluated.
        :return: ``{name: view}``, the tap's parameter names.
        :rtype: dict
        """
        sums = self._gradients.setdefault(condition, [None] * len(self._params))
        views = {}
        for index, (name, parameter) in enumerate(self._params.items()):
            view = parameter.view_as(parameter)
            view.register_hook(functools.partial(self._add, sums, index))
            views[name] = view
        return views

    def watch_losses(self, losses):
        """
        From now on, sum the gradients reaching the views, and record
        ``dLoss/dL_c`` for each condition loss: call it just before the
        training loss's backward pass.

        :param dict losses: ``{condition: 0-d loss with its graph}``.
        """
        self._watching = True
        for condition, loss in losses.items():
            if loss.requires_grad:
                loss.register_hook(
                    functools.partial(_set, self._multipliers, condition)
                )

    def rows(self, names):
        """
        The gradients of the condition losses, after the backward pass.

        :param list names: The conditions, in row order.
        :return: ``(C, P)`` with ``P`` the number of parameter entries,
            detached, in the dtype of the first parameter; zeros for a
            condition (or parameter) the backward pass did not reach, and
            not finite where the training gradient was not (a loss scaler's
            overflow step).
        :rtype: torch.Tensor
        """
        params = list(self._params.values())
        like = params[0]
        rows = []
        for name in names:
            sums = self._gradients.get(name, [None] * len(params))
            flat = [
                (
                    torch.zeros(p.numel(), dtype=like.dtype, device=like.device)
                    if g is None
                    else g.reshape(-1).to(like.dtype)
                )
                for g, p in zip(sums, params)
            ]
            row = torch.cat(flat)
            multiplier = self._multipliers.get(name)
            if multiplier is not None:
                row = row / multiplier.to(like.dtype)
            rows.append(row)
        return torch.stack(rows).detach()

    def _add(self, sums, index, gradient):
        """Hook: add a view's gradient to its condition's sum."""
        if not self._watching:
            return
        # a tensor subclass (PINA's LabelTensor) passes its class on to the
        # gradients: plain tensors from here on
        gradient = torch.Tensor.as_subclass(gradient, torch.Tensor).detach()
        previous = sums[index]
        sums[index] = gradient if previous is None else previous + gradient


def _set(multipliers, condition, gradient):
    """Hook: keep ``dLoss/dL_c``."""
    multipliers[condition] = torch.Tensor.as_subclass(
        gradient, torch.Tensor
    ).detach()
