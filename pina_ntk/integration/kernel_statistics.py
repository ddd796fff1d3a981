"""The kernel statistics of one training run, as one state object.

:class:`KernelStatistics` turns the residual blocks of each optimisation step
into condition weights: it draws the weighting's samples when due (the warm
start first), folds them into the moving-average buffer (Algorithm 3), forms
the weights, passes them through the spaced-update safeguard and keeps
everything a resume needs. It knows torch and :mod:`pina_ntk.core` only:
:class:`~pina_ntk.NTKCallback` feeds it the step's residual blocks, a residual
function and the distributed sum, and checkpoints its
:meth:`KernelStatistics.state_dict`.

One step, in order::

    begin_step(rank)                   seed the step's probe stream
    check_names(names)                 the same conditions at every step
    refresh(blocks, params, fn)        if is_due(): sample -> buffer ->
                                       safeguard -> weights
    update_weights(blocks)             else, if weights_stale: buffer ->
                                       safeguard -> weights
    weight_tensor                      the step's weights, due or not
    complete_deferred(fn)              after the backward pass, if pending
    end_step()                         drop what is left, step += 1

Refreshes come every ``weighting.refresh_every_n_steps`` steps; between
them the weights stay fixed, except that a sample completed after a
backward pass (deferred) enters the weights at the next step whether a
refresh is due then or not.
"""

import hashlib

import torch

from ..core.estimators import balanced_probe_scales
from ..core.moving_average import MovingAverage
from ..core.weights import entry_weights, guarded_weights


def probe_seed(seed, rank, step):
    """
    The seed of the probes drawn by process ``rank`` at ``step``.

    A BLAKE2b hash of the three integers: well mixed (neighbouring steps and
    ranks get unrelated streams, also in the low 32 bits that seed torch's
    CPU generator) and cheap enough to run at every step.

    :param int seed: The run's base seed.
    :param int rank: The global rank of the process.
    :param int step: The optimisation step.
    :return: A 63-bit seed.
    :rtype: int
    """
    digest = hashlib.blake2b(
        f"{seed},{rank},{step}".encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "little") >> 1


def to_device(value, device):
    """
    ``value`` moved to ``device`` if it is a tensor, unchanged otherwise.

    :param value: Anything; tensors are moved.
    :param device: The target device.
    :return: The moved tensor or ``value`` itself.
    """
    return value.to(device) if torch.is_tensor(value) else value


def local_sum(tensor):
    """The sum over the processes of a single-process run: ``tensor``."""
    return tensor


class KernelStatistics:
    """
    Warm start, moving-average buffers, probe scales, safeguard and weights
    of one weighting over one training run.

    :param weighting: The
        :class:`~pina_ntk.integration.kernel_weighting.KernelWeighting`
        whose options and sampling rule are used.
    :param str reduction: The solver's loss reduction, ``"mean"`` or
        ``"sum"``.
    :param callable global_sum: ``tensor -> tensor`` summed over the
        processes of a distributed run, without modifying its argument.
        Default: the identity (one process).
    """

    def __init__(self, weighting, reduction, global_sum=local_sum):
        self.weighting = weighting
        self.reduction = reduction
        self.global_sum = global_sum
        #: The optimisation step, from 0.
        self.step = 0
        #: Condition names in block order (set at the first step).
        self.names = None
        self.seed = None
        self.generator = None
        self._weights = None  # (C,) weights of the reduced condition losses
        self._traces = None  # (C,) trace estimates behind the weights
        self._diag = None  # MovingAverage of mean diag(K_cc) per condition
        self._kernel = None  # MovingAverage of the full kernel sketch
        self._points = None  # inputs of the last step (full-kernel check)
        self._invalid = None  # 0-d bool: an estimate was unusable
        self._warned_invalid = False
        # (C,) counts of weight updates (refreshes, and the updates that take
        # in a deferred sample between them) whose weight the bounds clamped
        self._bound_hits = None
        self._warned_bounds = False
        # (C,) bool: a condition's trace was exactly zero (constant residual)
        self._zero_trace = None
        self._warned_zero_trace = False
        # ((entry counts, dtype, device), counts tensor) of this process
        self._counts = None
        # (prepared sample, parameters, global sizes) awaiting the backward
        self._pending = None
        # a deferred sample was folded in after the last weights were formed
        self._weights_stale = False
        #: Refreshes (exact updates or samples; the warm start counts once).
        self.refreshes = 0

    # ------------------------------------------------------------ the run
    def start(self, device, seed=None):
        """
        Create the probe stream on ``device``.

        :param device: The solver's device.
        :param int seed: The run's base seed; ``None`` draws one from
            torch's global generator (``lightning.seed_everything`` fixes
            it). A state restored afterwards brings its own.
        """
        if seed is None:
            seed = int(torch.randint(0, 2**62, (1,)).item())
        self.seed = seed
        self.generator = torch.Generator(device=device)

    def begin_step(self, rank):
        """
        Seed the probes of this step.

        Probes depend only on ``(seed, rank, step)``: independent across
        ranks, and identical after a resume without saving generator states.

        :param int rank: The global rank of the process.
        """
        self.generator.manual_seed(probe_seed(self.seed, rank, self.step))

    def check_names(self, names):
        """
        Require the conditions of the first step, in its order.

        :param list names: This step's condition names, in block order.
        :raises RuntimeError: If they differ from the first step's.
        """
        if self.names is None:
            self.names = list(names)
        elif list(names) != self.names:
            raise RuntimeError(
                "NTK weights compare all conditions within one optimisation "
                f"step, but this batch holds {list(names)} and an earlier one "
                f"{self.names}. Use pina.Trainer(batching_mode="
                "'common_batch_size') (the default) so that every batch "
                "contains every condition."
            )

    def is_due(self):
        """
        Whether the weighting refreshes the statistics at this step.

        :rtype: bool
        """
        return self.weighting.is_due(self.step)

    @property
    def weights_stale(self):
        """
        Whether a deferred sample was folded in after the last weights were
        formed (they are then formed again at this step, see
        :meth:`update_weights`).

        :rtype: bool
        """
        return self._weights_stale

    def refresh(self, residuals, params, residual_fn):
        """
        Refresh the statistics and the weights at a due step: draw the
        samples (the warm start first), fold them in, form the weights and
        pass them through the safeguard.

        :param residuals: The step's ``R(theta_t)`` blocks, with their graph,
            in the order of :meth:`check_names`.
        :type residuals: list[torch.Tensor]
        :param dict params: ``{name: parameter}`` of the kernel.
        :param callable residual_fn: ``chunk_size -> (params -> blocks)``;
            ``chunk_size=None`` evaluates every point at once.
        """
        weighting = self.weighting
        # Under data parallelism each rank holds a share of every condition's
        # points. Block traces only involve diagonal kernel entries, so the
        # sums over ranks of local traces and entry counts are exactly those
        # of the union of the points; every rank then forms the same weights.
        sizes = self.global_sum(self.local_sizes(residuals))
        deferred = weighting.sample_after_backward
        if self._diag is None or not deferred:
            # R(theta) comes from the training step and only displaced
            # evaluations run here, next to its graph: values, chunked.
            chunked = residual_fn(weighting.evaluation_chunk_size)
            if self._diag is None:
                samples = weighting.warm_start(
                    chunked, params, residuals, self.generator
                )
            else:
                scales = self.probe_scales(sizes)
                samples = [
                    weighting.sample(
                        chunked, params, residuals, self.generator, scales
                    )
                ]
            self._fold_in(samples, sizes)
        if deferred:
            prepared = weighting.prepare_sample(
                params, residuals, self.generator, self.probe_scales(sizes)
            )
            self._pending = (prepared, params, sizes)
        self.refreshes += 1
        self._update_weights(residuals, sizes)

    def update_weights(self, residuals):
        """
        Form the weights again from the buffer, without a new sample: at a
        step between refreshes that follows a deferred sample.

        :param residuals: The step's ``R(theta_t)`` blocks (the safeguard
            reads their values only), in the order of :meth:`check_names`.
        :type residuals: list[torch.Tensor]
        """
        sizes = self.global_sum(self.local_sizes(residuals))
        self._update_weights(residuals, sizes)

    @property
    def has_pending(self):
        """:return: Whether a prepared sample awaits completion. :rtype: bool"""
        return self._pending is not None

    def complete_deferred(self, residual_fn):
        """
        Complete a sample prepared before the backward pass, at the step's
        parameters ``theta_t`` (the optimiser has not stepped yet).

        :param callable residual_fn: ``params -> blocks``, every point at
            once (no training graph is alive now).
        """
        if self._pending is None:
            return
        prepared, params, sizes = self._pending
        self._pending = None
        sample = self.weighting.complete_sample(
            residual_fn, params, prepared, self.generator
        )
        self._fold_in([sample], sizes)
        self._weights_stale = True

    def end_step(self):
        """Close the step: drop what is pending, count the step."""
        self.drop_pending()
        self.step += 1

    def drop_pending(self):
        """
        Forget a prepared sample that was not completed: its step had no
        backward pass (skipped, or training stopped inside it), and the
        parameters may have moved since.
        """
        self._pending = None

    def check_fixed_points(self, points):
        """
        Require the same points as at the last step (``full_kernel=True``).

        :param torch.Tensor points: This step's inputs, flattened.
        :raises ValueError: If they changed.
        """
        if self._points is not None and not (
            points.shape == self._points.shape
            and torch.equal(points, self._points)
        ):
            raise ValueError(
                "full_kernel=True needs the same points at every step, but "
                "they changed (resampling or several batches per epoch). Use "
                "full_kernel=False, which keeps per-condition traces only."
            )
        self._points = points

    # ------------------------------------------------------------ helpers
    def local_sizes(self, residuals):
        """
        Entry counts of this process's blocks, rebuilt only when they
        change: building the tensor on a GPU is a host-to-device copy,
        which would synchronise every step.

        :param residuals: The blocks.
        :type residuals: list[torch.Tensor]
        :return: The counts, in the blocks' dtype and device.
        :rtype: torch.Tensor
        """
        like = residuals[0]
        key = (tuple(r.numel() for r in residuals), like.dtype, like.device)
        if self._counts is None or self._counts[0] != key:
            sizes = torch.tensor(key[0], dtype=like.dtype, device=like.device)
            self._counts = (key, sizes)
        return self._counts[1]

    def probe_scales(self, sizes):
        """
        The predictor probe's scales from the moving average (``None``
        without a balanced probe); fixed before the probe is drawn, so each
        sample stays unbiased.

        :param torch.Tensor sizes: Entry counts summed over the processes.
        :rtype: torch.Tensor
        """
        if not self.weighting.uses_probe_scales:
            return None
        return balanced_probe_scales(self._diag.value * sizes, sizes)

    def _fold_in(self, samples, sizes):
        """Fold samples into the moving-average buffers (Algorithm 3);
        ``sizes`` are the entry counts summed over the processes."""
        weighting = self.weighting
        if self._diag is None:
            # alpha is a rate per optimisation step; a sample every n steps
            # is folded in with the rate of n steps
            rate = weighting.rate_per_refresh
            self._diag = MovingAverage(rate)
            if weighting.full_kernel:
                self._kernel = MovingAverage(rate)
        local = torch.stack([t for t, _ in samples])
        per_entry = self.global_sum(local) / sizes
        self._diag.update(per_entry)
        self._flag_invalid(torch.isfinite(per_entry).all())
        if weighting.full_kernel:
            self._kernel.update(torch.stack([k for _, k in samples]))

    def _flag_invalid(self, ok):
        self._invalid = ~ok if self._invalid is None else self._invalid | ~ok

    @torch.no_grad()
    def _update_weights(self, residuals, sizes):
        """Weights from the kernel buffer, through the safeguard;
        ``residuals`` are the flat blocks of ``R(theta_t)``."""
        weighting = self.weighting
        traces = self._diag.value * sizes
        self._weights_stale = False
        previous = self._weights
        if previous is None:
            previous = torch.ones_like(traces)
        weights, ok = guarded_weights(
            traces, sizes, previous, self.reduction, weighting.weight_bounds
        )
        self._flag_invalid(ok)
        self._count_bounds_and_zeros(weights, traces, ok)
        guard = weighting.safeguard
        if guard is not None:
            # in the buffer's precision: under mixed precision a step between
            # refreshes passes the step's own (half-precision) residual
            flat = [r.to(traces.dtype) for r in residuals]
            local_sq = sum(torch.dot(r, r) for r in flat)
            residual_sq = self.global_sum(local_sq)
            proposed = entry_weights(weights, sizes, self.reduction)
            if self._weights is None:
                guard.start(proposed, residual_sq)
            else:
                current = entry_weights(previous, sizes, self.reduction)
                accept, _ = guard.review(
                    proposed, current, residual_sq, self.step - 1
                )
                weights = torch.where(accept, weights, previous)
        self._weights = weights.detach()
        self._traces = traces.detach()

    def _count_bounds_and_zeros(self, weights, traces, ok):
        """Count the conditions whose weight a bound clamped, and flag the
        ones whose trace is exactly zero (no device synchronisation)."""
        lower, upper = self.weighting.weight_bounds
        hits = ok & ((weights <= lower) | (weights >= upper))
        zero = ok & (traces == 0)
        if self._bound_hits is None:
            self._bound_hits = torch.zeros_like(hits, dtype=torch.long)
            self._zero_trace = torch.zeros_like(zero)
        # a zero trace takes a fixed weight: not a bound binding
        self._bound_hits = self._bound_hits + (hits & ~zero).to(torch.long)
        self._zero_trace = self._zero_trace | zero

    def take_bound_report(self):
        """
        The conditions whose weight the bounds clamped so far, once.

        Reads tensors from the device: call it on logging steps only.

        :return: ``{condition: refreshes clamped}``, empty when there is
            nothing (new) to report.
        :rtype: dict
        """
        if self._warned_bounds or self._bound_hits is None:
            return {}
        hits = self.bound_hits
        if not any(hits.values()):
            return {}
        self._warned_bounds = True
        return {name: count for name, count in hits.items() if count}

    def take_zero_trace_report(self):
        """
        The conditions whose trace was exactly zero, once.

        :return: Their names; empty when there is nothing (new) to report.
        :rtype: list
        """
        if self._warned_zero_trace or self._zero_trace is None:
            return []
        names = [n for n, z in zip(self.names, self._zero_trace.tolist()) if z]
        if names:
            self._warned_zero_trace = True
        return names

    def take_invalid_report(self):
        """
        Whether an unusable estimate is still to be reported; ``True`` once.

        Reading the flag synchronises with the device: call it on logging
        steps only.

        :rtype: bool
        """
        if self._warned_invalid or self._invalid is None:
            return False
        if bool(self._invalid):
            self._warned_invalid = True
            return True
        return False

    # ------------------------------------------------------------ reading
    @property
    def weights(self):
        """:return: The current weights ``{condition: float}``. :rtype: dict"""
        if self._weights is None:
            return {}
        return dict(zip(self.names, self._weights.tolist()))

    @property
    def weight_tensor(self):
        """:return: The current ``(C,)`` weights, or ``None``."""
        return self._weights

    @property
    def traces(self):
        """:return: The trace estimates behind the weights. :rtype: dict"""
        if self._traces is None:
            return {}
        return dict(zip(self.names, self._traces.tolist()))

    @property
    def bound_hits(self):
        """
        How many weight refreshes clamped each condition's weight to
        ``weight_bounds``.

        :return: ``{condition: count}``; empty before the first weights.
        :rtype: dict
        """
        if self._bound_hits is None:
            return {}
        return dict(zip(self.names, self._bound_hits.tolist()))

    @property
    def trace_buffer(self):
        """
        The moving average of ``mean diag(K_cc)`` per condition.

        :return: A ``(C,)`` tensor, or ``None`` before the first sample.
        :rtype: torch.Tensor
        """
        return None if self._diag is None else self._diag.value

    @property
    def kernel(self):
        """
        The moving-average kernel sketch (``full_kernel=True`` only).

        :return: An ``n × n`` tensor, rows ordered by condition, or ``None``.
        :rtype: torch.Tensor
        """
        return None if self._kernel is None else self._kernel.value

    def log_values(self):
        """
        The values to log: ``ntk_weight/<condition>``,
        ``ntk_trace/<condition>``, ``ntk_bound_hits/<condition>``,
        ``ntk_refreshes`` (exact updates or samples so far) and, with a
        started safeguard,
        ``ntk_safeguard/accepted``, ``ntk_safeguard/rejected``,
        ``ntk_safeguard/sum``.

        :return: ``{name: 0-d tensor}``; empty before the first weights.
        :rtype: dict
        """
        if self._weights is None:
            return {}
        values = {}
        for index, name in enumerate(self.names):
            values[f"ntk_weight/{name}"] = self._weights[index]
            values[f"ntk_trace/{name}"] = self._traces[index]
            if self._bound_hits is not None:
                hits = self._bound_hits[index].to(torch.float32)
                values[f"ntk_bound_hits/{name}"] = hits
        values["ntk_refreshes"] = torch.tensor(float(self.refreshes))
        guard = self.weighting.safeguard
        if guard is not None and guard.total is not None:
            values["ntk_safeguard/accepted"] = guard.accepted.to(torch.float32)
            values["ntk_safeguard/rejected"] = guard.rejected.to(torch.float32)
            values["ntk_safeguard/sum"] = guard.total
        return values

    # ---------------------------------------------------------- checkpoint
    def state_dict(self):
        """:return: Everything needed to resume identically. :rtype: dict"""
        guard = self.weighting.safeguard
        return {
            "step": self.step,
            "names": self.names,
            "weights": self._weights,
            "traces": self._traces,
            "diag": None if self._diag is None else self._diag.state_dict(),
            "kernel": (
                None if self._kernel is None else self._kernel.state_dict()
            ),
            "points": self._points,
            "safeguard": None if guard is None else guard.state_dict(),
            "seed": self.seed,
            "invalid": self._invalid,
            "warned_invalid": self._warned_invalid,
            "bound_hits": self._bound_hits,
            "zero_trace": self._zero_trace,
            "weights_stale": self._weights_stale,
            "refreshes": self.refreshes,
        }

    def load_state_dict(self, state, device):
        """
        Restore a state from :meth:`state_dict` onto ``device``.

        :param dict state: The state.
        :param device: The solver's device.
        """
        self.step = state["step"]
        self.names = state["names"]
        self._weights = to_device(state["weights"], device)
        self._traces = to_device(state["traces"], device)
        self._points = to_device(state["points"], device)
        self._invalid = to_device(state["invalid"], device)
        self._warned_invalid = state["warned_invalid"]
        # absent from checkpoints written before pina-ntk counted them
        self._bound_hits = to_device(state.get("bound_hits"), device)
        self._zero_trace = to_device(state.get("zero_trace"), device)
        # absent from checkpoints written before spaced refreshes
        self._weights_stale = state.get("weights_stale", False)
        self.refreshes = state.get("refreshes", 0)
        self._diag = _restore_average(state["diag"], device)
        self._kernel = _restore_average(state["kernel"], device)
        guard = self.weighting.safeguard
        if guard is not None and state["safeguard"] is not None:
            guard.load_state_dict(
                {k: to_device(v, device) for k, v in state["safeguard"].items()}
            )
        self.seed = state["seed"]


def _restore_average(saved, device):
    """A :class:`MovingAverage` from its state on ``device``, or ``None``."""
    if saved is None:
        return None
    average = MovingAverage(saved["alpha"])
    average.load_state_dict(
        {"alpha": saved["alpha"], "value": to_device(saved["value"], device)}
    )
    return average
