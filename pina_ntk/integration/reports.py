"""What a run's weight updates report: rejected proposals (by reason),
zero traces, clamped weights, blocks sketched on their own and the cost of
exact updates.

:class:`RunReports` counts on the device (no synchronisation on the
training path) and turns the counts into messages when asked;
:class:`~pina_ntk.NTKCallback` asks at logging steps and at the end of
training, and warns through Lightning. A rejected estimate is warned of at
the first logging step after it (step 0 for the first refresh), naming the
reasons, the blocks and the share of proposals rejected so far, and again
at the end of training if more were rejected since.
"""

import time

import torch

#: A training step (forward, backward, optimiser) costs about this many
#: times its forward pass: 2.1x on PINA's wave problem with a 3x100 tanh
#: net, 3.3x with 3x500 (CPU). Step 0's forward pass also pays one-off
#: costs, so the estimate rather underestimates the share of refreshes.
STEP_PER_FORWARD = 2.5

#: Why a proposal of weights did not become the weights, in the order the
#: reasons are checked (one reason per proposal): a sample or the averaged
#: estimate was not finite, an averaged block trace was negative, every
#: trace was zero, or the spaced-update safeguard kept the previous weights.
REJECTIONS = ("non_finite", "negative", "all_zero", "safeguard")
#: The reasons that mean the estimate itself was unusable (warned of).
ESTIMATE_REJECTIONS = REJECTIONS[:3]


def device_clock(device):
    """
    Seconds on a clock that waits for ``device``'s queued work.

    :param torch.device device: The solver's device.
    :rtype: float
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


class RunReports:
    """
    Counters of a run's weight updates and the warnings they give, once.

    The counts are part of the run's checkpoint
    (:meth:`~pina_ntk.integration.kernel_statistics.KernelStatistics.state_dict`).
    """

    def __init__(self):
        #: 0-d long: proposals of weights formed (one per refresh's sample).
        self.proposals = None
        #: (len(REJECTIONS),) long: proposals rejected, per reason.
        self.rejected = None
        #: (C,) bool: blocks whose estimate was non-finite or negative in a
        #: rejected proposal.
        self.rejected_blocks = None
        #: 0-d bool: a proposal has had usable traces (weights were formed).
        self.formed = None
        #: (C,) bool: the blocks of a sample since the last proposal that
        #: were not finite (the sample was not folded in).
        self.dropped = None
        #: Estimate rejections already warned of.
        self.warned_rejections = 0
        self._isolated_message = None
        #: (C,) counts of weight updates whose weight a bound clamped.
        self.bound_hits = None
        self.warned_bounds = False
        #: (C,) bool: a condition's trace was exactly zero.
        self.zero_trace = None
        self.warned_zero_trace = False
        # the cost check of the first refresh of each fit
        self._cost_checked = False
        self._step_start = None
        self._cost_message = None

    # ------------------------------------------------------------ counting
    def note_samples(self, per_entry):
        """
        Note samples as they are folded in: one with a non-finite entry is
        not folded in, and the next proposal counts as rejected for it.

        :param torch.Tensor per_entry: ``(k, C)`` samples.
        """
        dropped = ~torch.isfinite(per_entry).all(dim=0)
        self.dropped = (
            dropped if self.dropped is None else self.dropped | dropped
        )

    def count_proposal(self, traces, ok, accepted):
        """
        Count one proposal of weights and, if it did not become the
        weights, its reason (:data:`REJECTIONS`), without synchronising.

        :param torch.Tensor traces: The ``(C,)`` traces it was formed from.
        :param torch.Tensor ok: 0-d bool, whether the traces were usable
            (:func:`~pina_ntk.core.weights.usable_traces`).
        :param torch.Tensor accepted: 0-d bool, whether the safeguard (if
            any) accepted it.
        """
        failed = ~torch.isfinite(traces)
        if self.dropped is not None:
            failed = failed | self.dropped
        self.dropped = None
        non_finite = failed.any()
        negative = ~non_finite & (traces < 0).any()
        all_zero = ~ok & ~non_finite & ~negative
        guarded = ok & ~non_finite & ~accepted
        reasons = torch.stack([non_finite, negative, all_zero, guarded])
        blocks = failed | ((traces < 0) & ~ok)
        if self.proposals is None:
            self.proposals = torch.zeros((), dtype=torch.long, device=ok.device)
            self.rejected = torch.zeros_like(reasons, dtype=torch.long)
            self.rejected_blocks = torch.zeros_like(blocks)
            self.formed = torch.zeros_like(ok)
        self.proposals = self.proposals + 1
        self.rejected = self.rejected + reasons.to(torch.long)
        self.rejected_blocks = self.rejected_blocks | blocks
        self.formed = self.formed | ok

    def rejection_counts(self):
        """
        The rejected proposals per reason, as logged
        (``ntk_rejected/<reason>``), and the proposals (``ntk_proposals``).

        :return: ``{name: 0-d float tensor}``; empty before the first
            proposal.
        :rtype: dict
        """
        if self.proposals is None:
            return {}
        counts = self.rejected.to(torch.float32)
        values = {
            f"ntk_rejected/{reason}": count
            for reason, count in zip(REJECTIONS, counts.unbind())
        }
        values["ntk_proposals"] = self.proposals.to(torch.float32)
        return values

    def count(self, weights, traces, ok, weight_bounds):
        """
        Count the conditions whose weight a bound clamped, and flag the ones
        whose trace is exactly zero (no device synchronisation).

        :param torch.Tensor weights: The ``(C,)`` weights formed.
        :param torch.Tensor traces: The ``(C,)`` traces behind them.
        :param torch.Tensor ok: 0-d bool, whether the weights were usable.
        :param tuple weight_bounds: ``(lower, upper)``.
        """
        lower, upper = weight_bounds
        hits = ok & ((weights <= lower) | (weights >= upper))
        zero = ok & (traces == 0)
        if self.bound_hits is None:
            self.bound_hits = torch.zeros_like(hits, dtype=torch.long)
            self.zero_trace = torch.zeros_like(zero)
        # a zero trace takes a fixed weight: not a bound binding
        self.bound_hits = self.bound_hits + (hits & ~zero).to(torch.long)
        self.zero_trace = self.zero_trace | zero

    # --------------------------------------------------------- refresh cost
    def start_fit(self):
        """Check the cost of this fit's first refresh."""
        self._cost_checked = False

    def start_step(self, device):
        """:param torch.device device: Where the step runs."""
        self._step_start = None
        if not self._cost_checked:
            self._step_start = device_clock(device)

    @property
    def times_refresh(self):
        """:return: Whether the next refresh is timed. :rtype: bool"""
        return self._step_start is not None

    def check_refresh_cost(self, weighting, entries, refresh_start, end):
        """
        Keep the weighting's warning if refreshes would take most of the
        training time (the weighting judges).

        :param weighting: The :class:`~pina_ntk.integration.contract.KernelRule`.
        :param int entries: Residual entries of the step.
        :param float refresh_start: Clock at the start of the refresh.
        :param float end: Clock at its end.
        """
        self._cost_checked = True
        step_seconds = STEP_PER_FORWARD * (refresh_start - self._step_start)
        self._step_start = None
        self._cost_message = weighting.refresh_cost_warning(
            entries, end - refresh_start, step_seconds
        )

    # ------------------------------------------------------------- reports
    def bound_hit_counts(self, names):
        """:return: ``{condition: clamped updates}``. :rtype: dict"""
        if self.bound_hits is None:
            return {}
        return dict(zip(names, self.bound_hits.tolist()))

    def rejection_message(self, names, final):
        """
        The warning of the estimate rejections (:data:`ESTIMATE_REJECTIONS`)
        not warned of yet, or ``None``: the first ones, and at the end of
        training those since the last warning. Reads tensors from the
        device.

        :param list names: The condition names, in block order.
        :param bool final: Whether training has ended.
        :rtype: str
        """
        if self.proposals is None:
            return None
        counts = dict(zip(REJECTIONS, self.rejected.tolist()))
        estimate = sum(counts[r] for r in ESTIMATE_REJECTIONS)
        if estimate <= self.warned_rejections or (
            self.warned_rejections and not final
        ):
            return None
        self.warned_rejections = estimate
        proposals = int(self.proposals)
        blocks = [n for n, b in zip(names, self.rejected_blocks.tolist()) if b]
        reasons = ", ".join(
            f"{counts[r]} {r.replace('_', ' ')}"
            for r in ESTIMATE_REJECTIONS
            if counts[r]
        )
        if blocks:
            reasons += f"; blocks {blocks}"
        message = REJECTED.format(
            estimate, proposals, estimate / proposals, reasons
        )
        return message if bool(self.formed) else NO_WEIGHTS + message

    def note_isolated(self, names):
        """
        Keep the message that the blocks ``names`` are sketched on their
        own from now on (given as information, not as a warning).

        :param list names: The conditions newly isolated.
        """
        self._isolated_message = ISOLATED.format(names)

    def take_messages(self, names, weight_bounds, final=False):
        """
        The warnings not given yet: each once per run (the cost warning once
        per fit), estimate rejections at the first logging step after the
        first one (:meth:`rejection_message`). Reads tensors from the
        device: call on logging steps.

        :param list names: The condition names, in block order.
        :param tuple weight_bounds: ``(lower, upper)``, for the message.
        :param bool final: Whether training has ended.
        :return: ``[(message, warning category), ...]``; the category is
            ``None`` for information.
        :rtype: list
        """
        messages = []
        if self._cost_message is not None:
            messages.append((self._cost_message, UserWarning))
            self._cost_message = None
        if self._isolated_message is not None:
            messages.append((self._isolated_message, None))
            self._isolated_message = None
        rejection = self.rejection_message(names, final)
        if rejection is not None:
            messages.append((rejection, RuntimeWarning))
        if not self.warned_zero_trace and self.zero_trace is not None:
            zero = [n for n, z in zip(names, self.zero_trace.tolist()) if z]
            if zero:
                self.warned_zero_trace = True
                messages.append((ZERO_TRACE.format(zero), RuntimeWarning))
        hits = self.bound_hit_counts(names)
        if not self.warned_bounds and any(hits.values()):
            self.warned_bounds = True
            clamped = {name: count for name, count in hits.items() if count}
            message = BOUNDS.format(weight_bounds, clamped)
            messages.append((message, RuntimeWarning))
        return messages


REJECTED = (
    "{} of {} NTK weight proposals so far ({:.0%}) had unusable trace "
    "estimates ({}), and each time the previous weights were "
    "kept. The counts are logged as ntk_rejected/<reason>; check "
    "ntk_trace/* in the logs (a larger warmup_samples, or "
    "estimator='parameter', steadies the sketch)."
)
ISOLATED = (
    "The predictor sketch's averaged trace of {} turned negative: the cross "
    "terms of larger blocks drown it. These blocks were restarted from "
    "warmup_samples sketches of each block on its own (g_c^T K_cc g_c, never "
    "negative; one reverse pass through the block's graph per sample) and "
    "are sketched so from now on."
)
NO_WEIGHTS = (
    "The NTK weighting has formed no weights yet: the weights are 1, and "
    "training is unweighted until an estimate is usable. "
)
ZERO_TRACE = (
    "The NTK trace of {} is exactly zero: no trainable parameter moves their "
    "residual, so training cannot reduce their loss. They get the weight of "
    "a uniform kernel (1 with the mean reduction) and the other weights are "
    "formed without them. Warning once."
)
BOUNDS = (
    "NTK weights were clamped to weight_bounds={} (weight updates per "
    "condition: {}): the traces differ by more than the bounds allow, so "
    "those weights are not Tr(K)/Tr(K_cc). Widen weight_bounds if that is "
    "intended; the count is logged as ntk_bound_hits/<condition>. Warning "
    "once."
)
