"""What a run's weight updates report once: unusable estimates, zero
traces, clamped weights and the cost of exact updates.

:class:`RunReports` counts on the device (no synchronisation on the
training path) and turns the counts into messages when asked, each at most
once per run; :class:`~pina_ntk.NTKCallback` asks at logging steps and
warns through Lightning.
"""

import time

import torch

#: A training step (forward, backward, optimiser) costs about this many
#: times its forward pass: 2.1x on PINA's wave problem with a 3x100 tanh
#: net, 3.3x with 3x500 (CPU). Step 0's forward pass also pays one-off
#: costs, so the estimate rather underestimates the share of refreshes.
STEP_PER_FORWARD = 2.5


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
        #: 0-d bool: an estimate was unusable (weights kept).
        self.invalid = None
        self.warned_invalid = False
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
    def flag_invalid(self, ok):
        """:param torch.Tensor ok: 0-d bool, ``False`` if unusable."""
        self.invalid = ~ok if self.invalid is None else self.invalid | ~ok

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

    def take_messages(self, names, weight_bounds):
        """
        The warnings not given yet, each once per run (the cost warning once
        per fit). Reads tensors from the device: call on logging steps.

        :param list names: The condition names, in block order.
        :param tuple weight_bounds: ``(lower, upper)``, for the message.
        :return: ``[(message, warning category), ...]``.
        :rtype: list
        """
        messages = []
        if self._cost_message is not None:
            messages.append((self._cost_message, UserWarning))
            self._cost_message = None
        if not self.warned_invalid and self.invalid is not None:
            if bool(self.invalid):
                self.warned_invalid = True
                messages.append((INVALID, RuntimeWarning))
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


INVALID = (
    "An NTK trace estimate was non-finite or negative (or all were zero); "
    "the previous weights were kept. Warning once; check ntk_trace/* in the "
    "logs (a larger warmup_samples, a smaller alpha or, for blocks whose "
    "trace is far below the others', estimator='parameter' steadies the "
    "sketch)."
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
