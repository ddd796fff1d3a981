"""One training step of the kernel statistics: what it draws, when, and
when its weights are formed.

:class:`StepSchedule` runs the steps of
:class:`~pina_ntk.integration.kernel_statistics.KernelStatistics`: a
refresh every ``weighting.refresh_every_n_steps`` steps (the warm start
first), with its probes seeded by ``(seed, rank, step)``; a deferred
sample prepared before the backward pass and completed after it; the
condition losses' gradients tapped at a refresh step (``gradient_band``);
one weighting per optimisation step, however often a closure optimiser
evaluates the loss. Between refreshes the weights stay fixed, except that a
sample completed after a backward pass, and the gradients of a refresh
step, enter them at the next step whether a refresh is due then or not.
"""

import contextlib
import hashlib

import torch

from ..core.gradient_band import ConditionGradientTap
from .reports import device_clock


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


class StepSchedule:
    """
    The step-by-step work of a run's
    :class:`~pina_ntk.integration.kernel_statistics.KernelStatistics`.

    It keeps what lives for one step (the step's residuals, a prepared
    sample, the gradient tap) and reads and advances the run's state
    (``step``, ``refreshes``, the probe stream, the estimates and the
    weights) through ``run``.

    :param run: The
        :class:`~pina_ntk.integration.kernel_statistics.KernelStatistics`
        whose steps these are.
    """

    def __init__(self, run):
        self.run = run
        #: The inputs of the last step (the ``full_kernel`` check), or
        #: ``None``.
        self.points = None
        self._residuals = None  # StepResiduals of the running step
        # (prepared sample, parameters, global sizes) awaiting the backward
        self._pending = None
        # ConditionGradientTap of the running step (gradient_band, due)
        self._tap = None
        self._rank = 0  # of the running step's process
        # the running step's weights are formed: a closure optimiser's later
        # evaluations of the loss (L-BFGS's line search) reuse them
        self._step_weights_formed = False
        # (entered, observed) bools of an inverse problem's conditions
        # (weighting.unknowns "observations_first"), read at a fit's first
        # step; None until then
        self._inverse_roles = None

    def begin_step(self, rank, residuals):
        """
        Open a training step: seed its probes and take its residuals.

        Probes depend only on ``(seed, rank, step)``: independent across
        ranks, and identical after a resume without saving generator states.

        :param int rank: The global rank of the process.
        :param residuals: The step's
            :class:`~pina_ntk.integration.contract.StepResiduals`.
        """
        self.run.reports.start_step(residuals.device)
        self._residuals = residuals
        self._step_weights_formed = False
        self._rank = rank
        self.run.in_training_step = True
        if not self.is_due():
            return  # no probe is drawn, no gradient tapped
        self.run.generator.manual_seed(
            probe_seed(self.run.seed, rank, self.run.step)
        )
        if self.run.weighting.band_applies():
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
        self.run.check_names(names)
        if self._step_weights_formed:
            return self.run.weight_tensors
        self._step_weights_formed = True
        residuals = self._residuals
        if self._inverse_roles is None:
            self._inverse_roles = residuals.inverse_roles(names)
        if self.is_due():
            params = residuals.parameters()
            timed = self.run.reports.times_refresh
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
                self.run.reports.check_refresh_cost(
                    self.run.weighting, entries, start, end
                )
            if self.run.weighting.full_kernel:
                self.check_fixed_points(residuals.inputs())
        elif self.run.estimates.stale:
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
        return self.run.weight_tensors

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
            self.run.estimates.fold_gradients(tap.rows(self.run.names))
        if self._pending is None:
            return
        prepared, params, sizes = self._pending
        self._pending = None
        residuals = self._residuals
        with full_precision(residuals.device.type):
            self.run.estimates.complete(
                residuals.residual_fn(self.run.names),
                params,
                prepared,
                self.run.generator,
                sizes,
            )

    def end_step(self):
        """Close the step: drop what is pending, count the step."""
        self.close()
        self.run.step += 1

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
        self.run.in_training_step = False

    @property
    def needs_residuals(self):
        """
        Whether the next step reads its residuals: a refresh is due, or a
        deferred sample waits to enter the weights. Other steps use the
        last weights as they are, so their residuals need not be recorded.

        :rtype: bool
        """
        return self.is_due() or self.run.estimates.stale

    def is_due(self):
        """:return: Whether the weighting refreshes at this step. :rtype: bool"""
        return self.run.weighting.is_due(self.run.step)

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
        weighting, estimates = self.run.weighting, self.run.estimates
        # Under data parallelism each rank holds a share of every condition's
        # points. Block traces only involve diagonal kernel entries, so the
        # sums over ranks of local traces and entry counts are exactly those
        # of the union of the points; every rank then forms the same weights.
        # (Rayleigh statistics couple the points: their sum over ranks is the
        # entry-weighted mean of the ranks' quotients, see docs/weights.md.)
        sizes = self.run.global_sum(self.run.local_sizes(residuals))
        deferred = weighting.sample_after_backward
        if estimates.per_entry is None or not deferred:
            # R(theta) comes from the training step and only displaced
            # evaluations run here, next to its graph: values, chunked.
            chunked = residual_fn(weighting.evaluation_chunk_size)
            estimates.draw(
                chunked, params, residuals, self.run.generator, sizes
            )
        self.run.refreshes += 1
        if estimates.stale:
            # A deferred rule's refresh folds nothing in (its sample enters
            # at the next step): forming the weights would review the same
            # proposal again. Each proposal is formed and reviewed once.
            # Formed before a deferred sample is prepared: a block isolated
            # now is sketched on its own in that sample already.
            self._update_weights(residuals, sizes)
        if deferred:
            prepared = estimates.prepare(
                params, residuals, self.run.generator, sizes
            )
            self._pending = (prepared, params, sizes)

    def update_weights(self, residuals):
        """
        Form the weights again from the averages, without a new sample: at
        a step between refreshes that follows a deferred sample.

        :param residuals: The step's ``R(theta_t)`` blocks (the safeguard
            reads their values only), in the order of :meth:`check_names`.
        :type residuals: list[torch.Tensor]
        """
        sizes = self.run.global_sum(self.run.local_sizes(residuals))
        self._update_weights(residuals, sizes)

    def check_fixed_points(self, points):
        """
        Require the same points as at the last step (``full_kernel=True``).

        :param torch.Tensor points: This step's inputs, flattened.
        :raises ValueError: If they changed.
        """
        if self.points is not None and not (
            points.shape == self.points.shape
            and torch.equal(points, self.points)
        ):
            raise ValueError(
                "full_kernel=True needs the same points at every step, but "
                "they changed (resampling or several batches per epoch). Use "
                "full_kernel=False, which keeps per-condition traces only."
            )
        self.points = points

    def _update_weights(self, residuals, sizes):
        """Weights from the averaged estimates, through the safeguard;
        ``residuals`` are the flat blocks of ``R(theta_t)``."""
        with torch.no_grad():
            traces = self.run.estimates.traces(
                sizes, lambda new: self._isolated_statistics(residuals, new)
            )
            self.run.proposals.propose(
                traces,
                residuals,
                sizes,
                self.run.step,
                self.run.estimates.gradient_norms,
                self._inverse_roles,
            )

    def _isolated_statistics(self, residuals, new):
        """
        The statistics of the blocks ``new`` marks, each sketched on its
        own, averaged over ``warmup_samples`` samples at the step's
        parameters: the restart of blocks whose averaged estimate turned
        negative. Each sample takes one reverse pass through the step's
        retained graph, which is alive here; the probes come from a stream
        of their own.
        """
        params = self._residuals.parameters()
        seed = probe_seed(self.run.seed, self._rank, self.run.step, "isolated")
        self.run.generator.manual_seed(seed)
        self.run.reports.note_isolated(
            [n for n, b in zip(self.run.names, new) if b]
        )
        with torch.enable_grad():
            return torch.stack(
                [
                    self.run.weighting.isolated_sample(
                        params, residuals, self.run.generator, new
                    )
                    for _ in range(self.run.weighting.warmup_samples)
                ]
            ).mean(dim=0)
