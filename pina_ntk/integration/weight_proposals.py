"""From trace estimates to the weights a run trains with.

:class:`WeightProposals` forms a proposal of weights from the averaged
traces (:func:`~pina_ntk.core.weights.guarded_weights`, then the options
that reshape it: ``gradient_band``, ``ramp_steps``, ``unknowns``) and lets
the spaced-update safeguard review it against the weights in use. It keeps
the weights and the traces behind them.
"""

import torch

from ..core.gradient_band import gradient_band_factors
from ..core.weights import (
    entry_weights,
    guarded_weights,
    observations_first,
    ramp_fraction,
    ramped_weights,
)
from .trace_estimates import to_device


class WeightProposals:
    """
    The weights of one run and the review of each proposal.

    :param weighting: The
        :class:`~pina_ntk.integration.contract.KernelRule` whose options
        (bounds, band, ramp, unknowns, safeguard) apply.
    :param str reduction: The solver's loss reduction, ``"mean"`` or
        ``"sum"``.
    :param callable global_sum: ``tensor -> tensor`` summed over the
        processes of a distributed run.
    :param reports: The run's
        :class:`~pina_ntk.integration.reports.RunReports`, which count each
        proposal, its clamped weights and its reason if it was not used.
    """

    def __init__(self, weighting, reduction, global_sum, reports):
        self.weighting = weighting
        self.reduction = reduction
        self.global_sum = global_sum
        self.reports = reports
        #: ``(C,)`` weights of the reduced condition losses, or ``None``
        #: before the first proposal.
        self.weights = None
        #: ``(C,)`` trace estimates behind :attr:`weights`.
        self.traces = None

    def propose(self, traces, residuals, sizes, step, gradients, roles):
        """
        Form weights from ``traces`` and make them the weights unless the
        safeguard rejects them.

        :param torch.Tensor traces: ``(C,)`` averaged trace estimates.
        :param residuals: The flat blocks of ``R(theta_t)``; the safeguard
            reads their values only.
        :type residuals: list[torch.Tensor]
        :param torch.Tensor sizes: Entry counts summed over the processes.
        :param int step: The optimisation step.
        :param gradients: ``(C,)`` averaged squared gradient norms
            (``gradient_band``), or ``None``.
        :type gradients: torch.Tensor or None
        :param tuple roles: ``(entered, observed)`` bools of an inverse
            problem's conditions (``unknowns="observations_first"``).
        """
        with torch.no_grad():
            weighting = self.weighting
            previous = self.weights
            if previous is None:
                previous = torch.ones_like(traces)
            weights, ok = guarded_weights(
                traces, sizes, previous, self.reduction, weighting.weight_bounds
            )
            if gradients is not None:
                # previous weights (kept on unusable traces) carry their factor
                factors = gradient_band_factors(
                    weights, gradients, weighting.gradient_band
                )
                banded = (weights * factors).clamp(*weighting.weight_bounds)
                weights = torch.where(ok, banded, weights)
            fraction = ramp_fraction(step, weighting.ramp_steps)
            if fraction < 1.0:
                # previous weights (kept on unusable traces) were ramped already
                ramped = ramped_weights(
                    weights, sizes, self.reduction, fraction
                )
                ramped = ramped.clamp(*weighting.weight_bounds)
                weights = torch.where(ok, ramped, weights)
            if weighting.unknowns == "observations_first":
                weights = observations_first(weights, *roles)
            self.reports.count(weights, traces, ok, weighting.weight_bounds)
            accept = torch.ones_like(ok)
            guard = weighting.safeguard
            if guard is not None:
                # in the traces' precision: under mixed precision a step between
                # refreshes passes the step's own (half-precision) residual
                flat = [r.to(traces.dtype) for r in residuals]
                residual_sq = self.global_sum(
                    sum(torch.dot(r, r) for r in flat)
                )
                proposed = entry_weights(weights, sizes, self.reduction)
                if self.weights is None:
                    guard.start(proposed, residual_sq)
                else:
                    current = entry_weights(previous, sizes, self.reduction)
                    accept, _ = guard.review(
                        proposed, current, residual_sq, step - 1
                    )
                    weights = torch.where(accept, weights, previous)
            self.reports.count_proposal(traces, ok, accept)
            self.weights = weights.detach()
            self.traces = traces.detach()

    def state_dict(self):
        """:return: The weights and traces. :rtype: dict"""
        return {"weights": self.weights, "traces": self.traces}

    def load_state_dict(self, state, device):
        """
        Restore a state from :meth:`state_dict` onto ``device``.

        :param dict state: The state.
        :param device: The solver's device.
        """
        self.weights = to_device(state["weights"], device)
        self.traces = to_device(state["traces"], device)
