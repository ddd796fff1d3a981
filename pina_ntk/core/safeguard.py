"""The spaced-update safeguard (Corollary *Controlled Gradients via Spaced
Updates*, eq. ``update-rule`` of Hirsch & Pichi).

With ``Lambda_t`` the diagonal matrix of effective per-entry weights, a
proposed ``Lambda~`` is accepted at step ``t + 1`` only if

    S(t) + lambda_max(Lambda~ - Lambda_t) ||R(theta_{t+1})||^2 <= h(t),

where ``S(t)`` sums the same quantity over the accepted changes so far and
``h`` is non-decreasing with ``h(T) = o(T)``. Then the time-averaged squared
gradient of the weighted loss still tends to zero. ``Lambda`` is diagonal and
constant on each condition, so ``lambda_max(Lambda~ - Lambda)`` is the largest
change of a per-entry weight over the conditions.
"""

import math

import torch


def weight_change_cost(proposed, current, residual_sq_norm):
    """
    ``lambda_max(Lambda~ - Lambda) ||R||^2`` for diagonal per-entry weights.

    :param torch.Tensor proposed: Proposed per-entry weights per condition.
    :param torch.Tensor current: Current per-entry weights per condition.
    :param torch.Tensor residual_sq_norm: ``||R(theta_{t+1})||^2``.
    :return: The increment of ``S`` if the proposal is accepted (may be
        negative when every weight decreases).
    :rtype: torch.Tensor
    """
    return (proposed - current).max() * residual_sq_norm


class SpacedUpdateSafeguard:
    """
    Accept or reject weight updates so that ``S(t) <= h(t)`` at every step.

    :param budget: The function ``h``: called with the step index ``t``
        (an int ``>= 0``) and returning a float; it must be non-decreasing and
        ``o(t)``. ``None`` (default) uses the scale-aware
        ``h(t) = s * sqrt(1 + t)`` with ``s = lambda_max(Lambda_0)
        ||R(theta_0)||^2``, i.e. twice the largest initial weighted squared
        residual: early updates that change a weight by about its own size
        fit in the budget, and the budget's growth then forces updates to
        become sparse or small as training proceeds.
    :type budget: callable | None
    :raises ValueError: If ``budget`` is neither callable nor ``None``.

    :Example:
        >>> guard = SpacedUpdateSafeguard(budget=lambda t: 10.0 * (1 + t) ** 0.5)
        >>> weights = NTKWeighting(safeguard=guard)  # doctest: +SKIP
    """

    def __init__(self, budget=None):
        if budget is not None and not callable(budget):
            raise ValueError(
                "budget must be a callable h(t) -> float or None, "
                f"got {type(budget).__name__}."
            )
        self.budget = budget
        self.reset()

    def reset(self):
        """Forget the running sum, counters and scale."""
        self.total = None  # S(t), a 0-d tensor once started
        self.scale = None
        self.accepted = None
        self.rejected = None
        self._last_h = -math.inf

    def start(self, entry_weights, residual_sq_norm):
        """
        Record the initial weights' scale; ``S(0) = 0``.

        :param torch.Tensor entry_weights: ``diag(Lambda_0)`` per condition.
        :param torch.Tensor residual_sq_norm: ``||R(theta_0)||^2``.
        """
        zero = torch.zeros(
            (), dtype=entry_weights.dtype, device=entry_weights.device
        )
        self.total = zero
        self.accepted = zero.to(torch.long)
        self.rejected = zero.to(torch.long)
        self.scale = (entry_weights.max() * residual_sq_norm).detach()

    def h(self, t):
        """
        The budget ``h(t)``.

        :param int t: The step index, ``>= 0``.
        :return: The budget (a float, or a 0-d tensor for the default).
        :raises ValueError: If a user budget decreases or is not finite.
        """
        if self.budget is None:
            return self.scale * math.sqrt(1.0 + t)
        value = float(self.budget(t))
        if not math.isfinite(value) or value < self._last_h:
            raise ValueError(
                "budget must be a finite, non-decreasing function of t; "
                f"got h({t}) = {value} after {self._last_h}."
            )
        self._last_h = value
        return value

    def review(self, proposed, current, residual_sq_norm, t):
        """
        Apply the rule at step ``t + 1`` and return the weights to use.

        :param torch.Tensor proposed: Proposed per-entry weights per condition.
        :param torch.Tensor current: Current per-entry weights per condition.
        :param torch.Tensor residual_sq_norm: ``||R(theta_{t+1})||^2``.
        :param int t: The index of the previous step.
        :return: ``(accept, cost)``: 0-d tensors, computed without a
            device-to-host synchronisation.
        :rtype: tuple[torch.Tensor, torch.Tensor]
        """
        cost = weight_change_cost(proposed, current, residual_sq_norm)
        accept = self.total + cost <= self.h(t)
        # zeros, not 0 * cost: a rejected infinite cost (an overflowed
        # residual) would add 0 * inf = NaN, and a NaN sum rejects every
        # later proposal
        self.total = self.total + torch.where(
            accept, cost, torch.zeros_like(cost)
        )
        self.accepted = self.accepted + accept.to(torch.long)
        self.rejected = self.rejected + (~accept).to(torch.long)
        return accept, cost

    def state_dict(self):
        """:return: The safeguard's state. :rtype: dict"""
        return {
            "total": self.total,
            "scale": self.scale,
            "accepted": self.accepted,
            "rejected": self.rejected,
            "last_h": self._last_h,
        }

    def load_state_dict(self, state):
        """:param dict state: A state from :meth:`state_dict`."""
        self.total = state["total"]
        self.scale = state["scale"]
        self.accepted = state["accepted"]
        self.rejected = state["rejected"]
        self._last_h = state["last_h"]
