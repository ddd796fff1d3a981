"""``KernelStatistics`` as it was before it was split into its parts
(``pina_ntk/integration/kernel_statistics.py`` at the commit before the
split, imports made absolute): the reference of
``test_statistics_split.py``, which trains with it and with today's
driver and requires bitwise the same weights and state.

"""

import contextlib
import hashlib

import torch

from pina_ntk.core.estimators import balanced_probe_scales
from pina_ntk.core.gradient_band import (
    GRADIENT_ALPHA,
    ConditionGradientTap,
    gradient_band_factors,
)
from pina_ntk.core.moving_average import (
    KernelBuffer,
    MovingAverage,
    rate_per_sample,
)
from pina_ntk.core.weights import (
    entry_weights,
    guarded_weights,
    observations_first,
    ramp_fraction,
    ramped_weights,
)
from pina_ntk.integration.reports import RunReports, device_clock


def probe_seed(seed, rank, step, stream=""):
    """
    The seed of the probes drawn by process ``rank`` at ``step``.

    A BLAKE2b hash of the three integers: well mixed (neighbouring steps and
    ranks get unrelated streams, also in the low 32 bits that seed torch's
    CPU generator) and cheap enough to run at every step.

    :param int seed: The run's base seed.
    :param int rank: The global rank of the process.
    :param int step: The optimisation step.
    :param str stream: A name for another stream of the same step
        (``""``: the step's samples).
    :return: A 63-bit seed.
    :rtype: int
    """
    key = f"{seed},{rank},{step}" + (f",{stream}" if stream else "")
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
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
    of one weighting over one training run: the weighting's
    :class:`~pina_ntk.integration.contract.WeightDriver`.

    :param weighting: The
        :class:`~pina_ntk.integration.contract.KernelRule` whose options
        and sampling rule are used.
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
        #: Refreshes (exact updates or samples; the warm start counts once).
        self.refreshes = 0
        #: Whether a training step is running (read by the weighting).
        self.in_training_step = False
        #: The :class:`~pina_ntk.NTKCallback` driving these statistics now
        #: (:meth:`acquire`); ``None`` between fits.
        self.holder = None
        #: Counters and one-time warnings of the weight updates.
        self.reports = RunReports()
        self._residuals = None  # StepResiduals of the running step
        self._weights = None  # (C,) weights of the reduced condition losses
        self._traces = None  # (C,) trace estimates behind the weights
        self._buffer = None  # KernelBuffer, from the first sample on
        self._points = None  # inputs of the last step (full-kernel check)
        # ((entry counts, dtype, device), counts tensor) of this process
        self._counts = None
        # (prepared sample, parameters, global sizes) awaiting the backward
        self._pending = None
        # something was folded in after the last weights were formed
        self._weights_stale = False
        # MovingAverage of the squared loss-gradient norms (gradient_band)
        self._gradients = None
        # ConditionGradientTap of the running step (gradient_band, due)
        self._tap = None
        # blocks sketched on their own (a tuple of bools), after a negative
        # averaged estimate; None while there is none
        self._isolated = None
        self._rank = 0  # of the running step's process
        # the running step's weights are formed: a closure optimiser's later
        # evaluations of the loss (L-BFGS's line search) reuse them
        self._step_weights_formed = False
        # (entered, observed) bools of an inverse problem's conditions
        # (weighting.unknowns "observations_first"), read at a fit's first
        # step; None until then
        self._inverse_roles = None

    # ------------------------------------------------------------ the run
    def acquire(self, holder):
        """
        Let ``holder`` (an :class:`~pina_ntk.NTKCallback`) drive these
        statistics until it calls :meth:`release`.

        A later Trainer's callback takes over the statistics of an earlier
        one whose fit has returned, and they continue as in one run: one
        solver trained by several Trainers in turn keeps its step counter,
        moving average, safeguard and counts.

        :param holder: The callback.
        :raises ValueError: If another callback drives them now (two
            ``NTKCallback`` in one Trainer, or a Trainer started while
            another one's fit, validation or test is running).
        """
        if self.holder is not None and self.holder is not holder:
            raise ValueError(
                "This weighting is driven by another NTKCallback whose "
                "Trainer is still running (two NTKCallbacks in one Trainer, "
                "or a second Trainer started inside the first one's fit). "
                "Pass at most one NTKCallback per Trainer and run one "
                "Trainer at a time: a later Trainer takes the weighting over "
                "once the earlier one's fit, validate or test has returned. "
                "To train two solvers side by side, give each its own "
                "weighting."
            )
        self.holder = holder

    def release(self, holder):
        """
        End ``holder``'s drive (its fit, validation or test returned or
        failed); a later callback may :meth:`acquire` the statistics.

        :param holder: The callback passed to :meth:`acquire`.
        """
        if self.holder is holder:
            self.holder = None

    def start(self, device):
        """
        Create the probe stream on ``device`` for a fit.

        Its base seed is the weighting's ``seed``; ``None`` draws one from
        torch's global generator (``lightning.seed_everything`` fixes it).
        A later fit of the same statistics (another Trainer) keeps the seed
        and moves the state to ``device``; a state restored afterwards
        brings its own.

        :param device: The solver's device.
        """
        if self.seed is None:
            seed = self.weighting.seed
            if seed is None:
                seed = int(torch.randint(0, 2**62, (1,)).item())
            self.seed = seed
        elif self._weights is not None and self._weights.device != device:
            self.load_state_dict(self.state_dict(), device)
        # reseeded at every due step: nothing of it is carried over
        self.generator = torch.Generator(device=device)
        self.reports.start_fit()

    def begin_step(self, rank, residuals):
        """
        Open a training step: seed its probes and take its residuals.

        Probes depend only on ``(seed, rank, step)``: independent across
        ranks, and identical after a resume without saving generator states.

        :param int rank: The global rank of the process.
        :param residuals: The step's
            :class:`~pina_ntk.integration.contract.StepResiduals`.
        """
        self.reports.start_step(residuals.device)
        self._residuals = residuals
        self._step_weights_formed = False
        self._rank = rank
        self.in_training_step = True
        if not self.is_due():
            return  # no probe is drawn, no gradient tapped
        self.generator.manual_seed(probe_seed(self.seed, rank, self.step))
        if self.weighting.band_applies():
            # before the forward pass: its evaluations run through the tap
            self._tap = ConditionGradientTap(residuals.parameters())
            residuals.tap_gradients(self._tap)

    def weights_for_step(self, losses):
        """
        The condition weights of the running training step.

        Called by the weighting from inside PINA's loss aggregation, after
        every condition's residual has been computed. A closure optimiser
        (L-BFGS) evaluates the loss several times in one optimisation step:
        the weights are formed at the first evaluation and reused by the
        later ones, so its line search sees one objective, at most one
        sample is drawn and the step counts once.

        :param dict losses: ``{condition: scalar loss}``.
        :return: ``{condition: 0-d weight tensor}``.
        :rtype: dict
        :raises RuntimeError: If the conditions differ from earlier steps'.
        """
        names = list(losses)
        self.check_names(names)
        if self._step_weights_formed:
            return self.weight_tensors
        self._step_weights_formed = True
        residuals = self._residuals
        if self._inverse_roles is None:
            self._inverse_roles = residuals.inverse_roles(names)
        if self.is_due():
            params = residuals.parameters()
            timed = self.reports.times_refresh
            start = device_clock(residuals.device) if timed else None
            with full_precision(residuals.device.type) as mixed:
                # Under mixed precision the step's residual was computed in
                # half precision, too coarse for finite differences and
                # exact traces: take it again, in full precision (one more
                # residual evaluation).
                if mixed:
                    blocks = residuals.residual_fn(names)(params)
                else:
                    blocks = residuals.blocks(names)
                self.refresh(
                    blocks,
                    params,
                    lambda chunk: residuals.residual_fn(names, chunk),
                )
            if timed:
                entries = sum(b.numel() for b in blocks)
                end = device_clock(residuals.device)
                self.reports.check_refresh_cost(
                    self.weighting, entries, start, end
                )
            if self.weighting.full_kernel:
                self.check_fixed_points(residuals.inputs())
        elif self._weights_stale:
            # between refreshes, after a deferred sample: the weights take it
            # in now (the safeguard reads the step's residual values; a
            # block restarted on its own differentiates them, so they are
            # taken with their graph)
            blocks = residuals.blocks(names)
            with torch.no_grad():
                self.update_weights(blocks)
        if self._tap is not None:
            # after the refresh's own backward passes: the next one through
            # the step's graph is the training loss's
            self._tap.watch_losses(losses)
        return self.weight_tensors

    def complete_deferred(self):
        """
        Complete what waits for the backward pass: fold in the condition
        losses' gradients it yielded (``gradient_band``, at a refresh step),
        and complete a sample prepared before it, at the step's parameters
        ``theta_t`` (the optimiser has not stepped yet). Every point is
        evaluated at once: no training graph is alive now. Both enter the
        weights at the next step.
        """
        if self._tap is not None:
            tap, self._tap = self._tap, None
            self._residuals.tap_gradients(None)
            self.fold_gradients(tap.rows(self.names))
        if self._pending is None:
            return
        prepared, params, sizes = self._pending
        self._pending = None
        residuals = self._residuals
        with full_precision(residuals.device.type):
            sample = self.weighting.complete_sample(
                residuals.residual_fn(self.names),
                params,
                prepared,
                self.generator,
            )
        self._fold_in([sample], sizes)

    def end_step(self):
        """Close the step: drop what is pending, count the step."""
        self.close()
        self.step += 1

    def close(self):
        """
        Leave the step without counting it: drop the residuals and a
        prepared sample that was not completed (its step had no backward
        pass, and the parameters may have moved since).
        """
        self._pending = None
        self._tap = None
        self._residuals = None
        self._step_weights_formed = False
        self.in_training_step = False

    # ------------------------------------------------------- the statistics
    @property
    def needs_residuals(self):
        """
        Whether the next step reads its residuals: a refresh is due, or a
        deferred sample waits to enter the weights. Other steps use the
        last weights as they are, so their residuals need not be recorded.

        :rtype: bool
        """
        return self.is_due() or self._weights_stale

    def check_names(self, names):
        """
        Require the conditions of the first step, in its order.

        :param list names: This step's condition names, in block order.
        :raises RuntimeError: If they differ from the first step's.
        """
        if self.names is None:
            self.names = list(names)
            self.weighting.set_conditions(self.names, self._problem())
        elif list(names) != self.names:
            raise RuntimeError(
                "NTK weights compare all conditions within one optimisation "
                f"step, but this batch holds {list(names)} and an earlier one "
                f"{self.names}. Use pina.Trainer(batching_mode="
                "'common_batch_size') (the default) so that every batch "
                "contains every condition."
            )

    def _problem(self):
        """The problem of the weighting's solver (``None`` before PINA has
        attached the weighting to one)."""
        solver = self.weighting.solver
        return None if solver is None else solver.problem

    def is_due(self):
        """:return: Whether the weighting refreshes at this step. :rtype: bool"""
        return self.weighting.is_due(self.step)

    def refresh(self, residuals, params, residual_fn):
        """
        Refresh the statistics and the weights at a due step: draw the
        samples (the warm start first), fold them in, form the weights and
        pass them through the safeguard. A deferred sample is only prepared
        here; the weights are formed again only if something entered since
        they were last formed.

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
        # (Rayleigh statistics couple the points: their sum over ranks is the
        # entry-weighted mean of the ranks' quotients, see docs/weights.md.)
        sizes = self.global_sum(self.local_sizes(residuals))
        deferred = weighting.sample_after_backward
        if self._buffer is None or not deferred:
            # R(theta) comes from the training step and only displaced
            # evaluations run here, next to its graph: values, chunked.
            chunked = residual_fn(weighting.evaluation_chunk_size)
            if self._buffer is None:
                samples = weighting.warm_start(
                    chunked, params, residuals, self.generator
                )
            else:
                scales = self.probe_scales(sizes)
                samples = [
                    weighting.sample(
                        chunked,
                        params,
                        residuals,
                        self.generator,
                        scales,
                        self._isolated,
                    )
                ]
            self._fold_in(samples, sizes)
        self.refreshes += 1
        if self._weights_stale:
            # A deferred rule's refresh folds nothing in (its sample enters
            # at the next step): forming the weights would review the same
            # proposal again. Each proposal is formed and reviewed once.
            # Formed before a deferred sample is prepared: a block isolated
            # now is sketched on its own in that sample already.
            self._update_weights(residuals, sizes)
        if deferred:
            prepared = weighting.prepare_sample(
                params,
                residuals,
                self.generator,
                self.probe_scales(sizes),
                self._isolated,
            )
            self._pending = (prepared, params, sizes)

    def fold_gradients(self, local):
        """
        Fold the squared norms of the condition losses' gradients into
        their moving average (``gradient_band`` only): rate
        :data:`~pina_ntk.core.gradient_band.GRADIENT_ALPHA` per step. A
        sample with a non-finite norm (a loss scaler's overflow step) is
        not folded in. The weights are stale until formed again.

        Under data parallelism each rank differentiates its own share of
        the points, and DDP averages the ranks' gradients: so are these,
        before their norms are taken, and every rank forms the factors of
        the global gradient (those of one process on all the points).

        :param torch.Tensor local: ``(C, P)``, this process's gradients of
            the condition losses, in the order of :meth:`check_names`.
        """
        # one all-reduce: the gradients and the number of ranks
        ones = local.new_ones(local.shape[0], 1)
        total = self.global_sum(torch.cat([local, ones], dim=1))
        squared = (total[:, :-1] / total[:, -1:]).pow(2).sum(1)
        if self._gradients is None:
            rate = rate_per_sample(
                GRADIENT_ALPHA, self.weighting.refresh_every_n_steps
            )
            self._gradients = MovingAverage(rate)
        self._gradients.update(squared.unsqueeze(0))
        self._weights_stale = True

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
        return balanced_probe_scales(self._buffer.traces(sizes), sizes)

    def _fold_in(self, samples, sizes):
        """Fold samples into the moving-average buffers (Algorithm 3);
        ``sizes`` are the entry counts summed over the processes. The
        weights are stale until formed again."""
        weighting = self.weighting
        if self._buffer is None:
            # alpha is a rate per optimisation step; a sample every n steps
            # is folded in with the rate of n steps
            rate = rate_per_sample(
                weighting.alpha, weighting.refresh_every_n_steps
            )
            self._buffer = KernelBuffer(rate, weighting.full_kernel)
        local = torch.stack([t for t, _ in samples])
        per_entry = self.global_sum(local) / sizes
        kernels = None
        if weighting.full_kernel:
            kernels = torch.stack([k for _, k in samples])
        self._buffer.update(per_entry, kernels)
        self.reports.note_samples(per_entry)
        self._weights_stale = True

    @torch.no_grad()
    def _update_weights(self, residuals, sizes):
        """Weights from the kernel buffer, through the safeguard;
        ``residuals`` are the flat blocks of ``R(theta_t)``."""
        weighting = self.weighting
        traces = self._buffer.traces(sizes)
        if weighting.isolates_blocks:
            traces = self._restart_negative(traces, residuals, sizes)
        self._weights_stale = False
        previous = self._weights
        if previous is None:
            previous = torch.ones_like(traces)
        weights, ok = guarded_weights(
            traces, sizes, previous, self.reduction, weighting.weight_bounds
        )
        if self._gradients is not None:
            # previous weights (kept on unusable traces) carry their factor
            factors = gradient_band_factors(
                weights, self._gradients.value, weighting.gradient_band
            )
            banded = (weights * factors).clamp(*weighting.weight_bounds)
            weights = torch.where(ok, banded, weights)
        fraction = ramp_fraction(self.step, weighting.ramp_steps)
        if fraction < 1.0:
            # previous weights (kept on unusable traces) were ramped already
            ramped = ramped_weights(weights, sizes, self.reduction, fraction)
            ramped = ramped.clamp(*weighting.weight_bounds)
            weights = torch.where(ok, ramped, weights)
        if weighting.unknowns == "observations_first":
            weights = observations_first(weights, *self._inverse_roles)
        self.reports.count(weights, traces, ok, weighting.weight_bounds)
        accept = torch.ones_like(ok)
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
        self.reports.count_proposal(traces, ok, accept)
        self._weights = weights.detach()
        self._traces = traces.detach()

    def _restart_negative(self, traces, residuals, sizes):
        """
        Restart each block whose averaged estimate ``traces`` is negative
        from ``warmup_samples`` samples of the block on its own, and sketch
        it so from now on; return the traces after the restart.

        The predictor's block sketches carry cross terms that average to
        zero but can drown a block whose trace is far below another's; a
        negative average means they have (a block's own term is never
        negative). Restarting from the block's own terms, at the step's
        parameters, takes one reverse pass per sample through the step's
        retained graph, which is alive here. Reads the traces on the host:
        one synchronisation per proposal.
        """
        negative = (traces < 0).tolist()
        isolated = self._isolated or (False,) * len(negative)
        new = tuple(n and not i for n, i in zip(negative, isolated))
        if not any(new):
            return traces
        self._isolated = tuple(n or i for n, i in zip(new, isolated))
        params = self._residuals.parameters()
        seed = probe_seed(self.seed, self._rank, self.step, "isolated")
        self.generator.manual_seed(seed)
        with torch.enable_grad():
            local = torch.stack(
                [
                    self.weighting.isolated_sample(
                        params, residuals, self.generator, new
                    )
                    for _ in range(self.weighting.warmup_samples)
                ]
            ).mean(dim=0)
        per_entry = self.global_sum(local.to(traces)) / sizes
        mask = torch.tensor(new, device=traces.device)
        self._buffer.restart(mask, per_entry)
        self.reports.note_isolated([n for n, b in zip(self.names, new) if b])
        return self._buffer.traces(sizes)

    # ------------------------------------------------------------ reading
    @property
    def weight_tensors(self):
        """
        The current weights as PINA uses them: ``{condition: 0-d tensor}``
        (empty before the first step, restored ones after a resume).

        :rtype: dict
        """
        if self._weights is None:
            return {}
        return dict(zip(self.names, self._weights))

    @property
    def weights(self):
        """:return: The current weights ``{condition: float}``. :rtype: dict"""
        if self._weights is None:
            return {}
        return dict(zip(self.names, self._weights.tolist()))

    @property
    def traces(self):
        """:return: The trace estimates behind the weights. :rtype: dict"""
        if self._traces is None:
            return {}
        return dict(zip(self.names, self._traces.tolist()))

    @property
    def isolated_blocks(self):
        """
        The conditions sketched on their own since their averaged estimate
        turned negative (see :meth:`_restart_negative`).

        :return: Condition names, in block order; empty if none.
        :rtype: list
        """
        if self._isolated is None:
            return []
        return [n for n, b in zip(self.names, self._isolated) if b]

    @property
    def rejections(self):
        """
        The proposals of weights so far and those not used, by reason
        (:data:`~pina_ntk.integration.reports.REJECTIONS`), as logged.

        :return: ``{"proposals": n, reason: count, ...}``; empty before the
            first proposal.
        :rtype: dict
        """
        counts = self.reports.rejection_counts()
        return {
            k.removeprefix("ntk_rejected/").removeprefix("ntk_"): int(v)
            for k, v in counts.items()
        }

    @property
    def bound_hits(self):
        """
        How many weight updates clamped each condition's weight to
        ``weight_bounds``.

        :return: ``{condition: count}``; empty before the first weights.
        :rtype: dict
        """
        return self.reports.bound_hit_counts(self.names)

    @property
    def trace_buffer(self):
        """
        The moving average of ``mean diag(K_cc)`` per condition.

        :return: A ``(C,)`` tensor, or ``None`` before the first sample.
        :rtype: torch.Tensor
        """
        return None if self._buffer is None else self._buffer.per_entry

    @property
    def kernel(self):
        """
        The moving-average kernel sketch (``full_kernel=True`` only).

        :return: An ``n × n`` tensor, rows ordered by condition, or ``None``.
        :rtype: torch.Tensor
        """
        return None if self._buffer is None else self._buffer.kernel

    def log_values(self):
        """
        The values to log: ``ntk_weight/<condition>``,
        ``ntk_trace/<condition>``, ``ntk_bound_hits/<condition>``,
        ``ntk_refreshes`` (exact updates or samples so far),
        ``ntk_proposals`` and ``ntk_rejected/<reason>`` (proposals of
        weights formed, and those not used, by reason:
        :data:`~pina_ntk.integration.reports.REJECTIONS`) and, with a
        started safeguard,
        ``ntk_safeguard/accepted``, ``ntk_safeguard/rejected``,
        ``ntk_safeguard/sum``.

        :return: ``{name: 0-d tensor}``; empty before the first weights.
        :rtype: dict
        """
        if self._weights is None:
            return {}
        values = {}
        hits = self.reports.bound_hits
        for index, name in enumerate(self.names):
            values[f"ntk_weight/{name}"] = self._weights[index]
            values[f"ntk_trace/{name}"] = self._traces[index]
            if hits is not None:
                values[f"ntk_bound_hits/{name}"] = hits[index].to(torch.float32)
        values["ntk_refreshes"] = torch.tensor(float(self.refreshes))
        values.update(self.reports.rejection_counts())
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
        reports = self.reports
        return {
            "step": self.step,
            "names": self.names,
            "weights": self._weights,
            "traces": self._traces,
            **(
                {"diag": None, "kernel": None}
                if self._buffer is None
                else self._buffer.state_dict()
            ),
            "points": self._points,
            "safeguard": None if guard is None else guard.state_dict(),
            "seed": self.seed,
            "proposals": reports.proposals,
            "rejected": reports.rejected,
            "rejected_blocks": reports.rejected_blocks,
            "formed": reports.formed,
            "dropped": reports.dropped,
            "warned_rejections": reports.warned_rejections,
            "isolated": self._isolated,
            "bound_hits": reports.bound_hits,
            "zero_trace": reports.zero_trace,
            "weights_stale": self._weights_stale,
            "refreshes": self.refreshes,
            "gradients": (
                None
                if self._gradients is None
                else self._gradients.state_dict()
            ),
        }

    def load_state_dict(self, state, device):
        """
        Restore a state from :meth:`state_dict` onto ``device``.

        :param dict state: The state.
        :param device: The solver's device.
        """
        self.step = state["step"]
        self.names = state["names"]
        if self.names is not None:
            self.weighting.set_conditions(self.names, self._problem())
        self._weights = to_device(state["weights"], device)
        self._traces = to_device(state["traces"], device)
        self._points = to_device(state["points"], device)
        self._weights_stale = state["weights_stale"]
        self.refreshes = state["refreshes"]
        self._buffer = KernelBuffer.from_state(state, device)
        self._gradients = None
        gradients = state.get("gradients")  # absent before gradient_band
        if gradients is not None:
            self._gradients = MovingAverage(gradients["alpha"])
            self._gradients.load_state_dict(
                {**gradients, "value": to_device(gradients["value"], device)}
            )
        reports = self.reports
        for key in ("proposals", "rejected", "rejected_blocks", "formed"):
            setattr(reports, key, to_device(state[key], device))
        reports.dropped = to_device(state["dropped"], device)
        reports.warned_rejections = state["warned_rejections"]
        isolated = state["isolated"]
        self._isolated = None if isolated is None else tuple(isolated)
        reports.bound_hits = to_device(state["bound_hits"], device)
        reports.zero_trace = to_device(state["zero_trace"], device)
        guard = self.weighting.safeguard
        if guard is not None and state["safeguard"] is not None:
            guard.load_state_dict(
                {k: to_device(v, device) for k, v in state["safeguard"].items()}
            )
        self.seed = state["seed"]


@contextlib.contextmanager
def full_precision(device_type):
    """
    Run the enclosed code without autocast on ``device_type``.

    :param str device_type: ``"cpu"``, ``"cuda"``, ...
    :return: A context whose value says whether autocast was on.
    """
    mixed = torch.is_autocast_enabled(device_type)
    with torch.autocast(device_type, enabled=False):
        yield mixed
