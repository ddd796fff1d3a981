"""The averaged estimates of one run: block traces and loss gradients.

:class:`TraceEstimates` holds what the samples of a run have built up: the
moving average of the block statistics (Algorithm 3, with the full kernel
sketch under ``full_kernel``), the blocks sketched on their own after their
averaged estimate turned negative, and, under ``gradient_band``, the moving
average of the condition losses' squared gradient norms. It draws the
weighting's samples when the driver
(:class:`~pina_ntk.integration.kernel_statistics.KernelStatistics`) says a
refresh is due and folds them in; it does not decide when.
"""

import torch

from ..core.estimators import balanced_probe_scales
from ..core.gradient_band import GRADIENT_ALPHA
from ..core.moving_average import KernelBuffer, MovingAverage, rate_per_sample


def to_device(value, device):
    """
    ``value`` moved to ``device`` if it is a tensor, unchanged otherwise.

    :param value: Anything; tensors are moved.
    :param device: The target device.
    :return: The moved tensor or ``value`` itself.
    """
    return value.to(device) if torch.is_tensor(value) else value


class TraceEstimates:
    """
    The moving averages of one weighting's samples over a run, with the
    blocks sketched on their own.

    :param weighting: The
        :class:`~pina_ntk.integration.contract.KernelRule` whose samples
        are averaged.
    :param callable global_sum: ``tensor -> tensor`` summed over the
        processes of a distributed run.
    :param reports: The run's
        :class:`~pina_ntk.integration.reports.RunReports`, told of every
        folded sample.
    """

    def __init__(self, weighting, global_sum, reports):
        self.weighting = weighting
        self.global_sum = global_sum
        self.reports = reports
        #: Whether something was folded in after the weights were last
        #: formed from these estimates (:meth:`traces`).
        self.stale = False
        self._buffer = None  # KernelBuffer, from the first sample on
        # blocks sketched on their own (a tuple of bools), after a negative
        # averaged estimate; None while there is none
        self._isolated = None
        # MovingAverage of the squared loss-gradient norms (gradient_band)
        self._gradients = None
        # ((entry counts, dtype, device), counts tensor) of this process
        self._counts = None

    # ------------------------------------------------------------ samples
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

    def draw(self, residual_fn, params, residuals, generator, sizes):
        """
        Draw the samples of a refresh, the warm start first, and fold them
        in.

        :param callable residual_fn: ``params -> blocks`` at displaced
            parameters (chunked).
        :param dict params: ``{name: parameter}`` of the kernel.
        :param residuals: The step's ``R(theta_t)`` blocks, with their graph.
        :type residuals: list[torch.Tensor]
        :param torch.Generator generator: The step's probe stream.
        :param torch.Tensor sizes: Entry counts summed over the processes.
        """
        weighting = self.weighting
        if self._buffer is None:
            samples = weighting.warm_start(
                residual_fn, params, residuals, generator
            )
        else:
            scales = self.probe_scales(sizes)
            samples = [
                weighting.sample(
                    residual_fn,
                    params,
                    residuals,
                    generator,
                    scales,
                    self._isolated,
                )
            ]
        self.fold_in(samples, sizes)

    def prepare(self, params, residuals, generator, sizes):
        """
        The part of a deferred sample that needs the step's graph.

        :return: What :meth:`complete` takes after the backward pass.
        """
        return self.weighting.prepare_sample(
            params,
            residuals,
            generator,
            self.probe_scales(sizes),
            self._isolated,
        )

    def complete(self, residual_fn, params, prepared, generator, sizes):
        """Complete a sample :meth:`prepare` began, and fold it in."""
        sample = self.weighting.complete_sample(
            residual_fn, params, prepared, generator
        )
        self.fold_in([sample], sizes)

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

    def fold_in(self, samples, sizes):
        """
        Fold samples into the moving-average buffers (Algorithm 3).

        :param list samples: ``(block statistics, kernel or None)`` of this
            process.
        :param torch.Tensor sizes: Entry counts summed over the processes.
        """
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
        self.stale = True

    def fold_gradients(self, local):
        """
        Fold the squared norms of the condition losses' gradients into
        their moving average (``gradient_band`` only): rate
        :data:`~pina_ntk.core.gradient_band.GRADIENT_ALPHA` per step. A
        sample with a non-finite norm (a loss scaler's overflow step) is
        not folded in.

        Under data parallelism each rank differentiates its own share of
        the points, and DDP averages the ranks' gradients: so are these,
        before their norms are taken, and every rank forms the factors of
        the global gradient (those of one process on all the points).

        :param torch.Tensor local: ``(C, P)``, this process's gradients of
            the condition losses, in block order.
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
        self.stale = True

    # ------------------------------------------------------------ reading
    def traces(self, sizes, restart):
        """
        The averaged trace estimates, taken for new weights: with block
        isolation, each block whose average is negative restarts first
        (``restart``). The estimates are no longer stale.

        :param torch.Tensor sizes: Entry counts summed over the processes.
        :param callable restart: ``new blocks (bools) -> (C,) statistics``
            of those blocks sketched on their own, averaged, local.
        :return: ``(C,)`` trace estimates.
        :rtype: torch.Tensor
        """
        traces = self._buffer.traces(sizes)
        self.stale = False
        if not self.weighting.isolates_blocks:
            return traces
        return self._restart_negative(traces, sizes, restart)

    def _restart_negative(self, traces, sizes, restart):
        """
        Restart each block whose averaged estimate is negative from
        ``warmup_samples`` samples of the block on its own, and sketch it
        so from now on; return the traces after the restart.

        The predictor's block sketches carry cross terms that average to
        zero but can drown a block whose trace is far below another's; a
        negative average means they have (a block's own term is never
        negative). Reads the traces on the host: one synchronisation per
        proposal.
        """
        negative = (traces < 0).tolist()
        isolated = self._isolated or (False,) * len(negative)
        new = tuple(n and not i for n, i in zip(negative, isolated))
        if not any(new):
            return traces
        self._isolated = tuple(n or i for n, i in zip(new, isolated))
        per_entry = self.global_sum(restart(new).to(traces)) / sizes
        mask = torch.tensor(new, device=traces.device)
        self._buffer.restart(mask, per_entry)
        return self._buffer.traces(sizes)

    @property
    def gradient_norms(self):
        """
        :return: The averaged squared gradient norms, ``(C,)``, or
            ``None`` without ``gradient_band`` samples.
        :rtype: torch.Tensor
        """
        return None if self._gradients is None else self._gradients.value

    @property
    def isolated(self):
        """
        :return: The blocks sketched on their own (bools in block order),
            or ``None`` while there is none.
        :rtype: tuple
        """
        return self._isolated

    @property
    def per_entry(self):
        """
        :return: The moving average of ``mean diag(K_cc)`` per condition,
            or ``None`` before the first sample.
        :rtype: torch.Tensor
        """
        return None if self._buffer is None else self._buffer.per_entry

    @property
    def kernel(self):
        """
        :return: The moving-average kernel sketch (``full_kernel``), or
            ``None``.
        :rtype: torch.Tensor
        """
        return None if self._buffer is None else self._buffer.kernel

    # ---------------------------------------------------------- checkpoint
    def state_dict(self):
        """
        :return: The buffers, the isolated blocks, the gradient average and
            whether they are stale.
        :rtype: dict
        """
        return {
            **(
                {"diag": None, "kernel": None}
                if self._buffer is None
                else self._buffer.state_dict()
            ),
            "isolated": self._isolated,
            "weights_stale": self.stale,
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
        self._buffer = KernelBuffer.from_state(state, device)
        isolated = state["isolated"]
        self._isolated = None if isolated is None else tuple(isolated)
        self.stale = state["weights_stale"]
        self._gradients = None
        gradients = state.get("gradients")  # absent before gradient_band
        if gradients is not None:
            self._gradients = MovingAverage(gradients["alpha"])
            self._gradients.load_state_dict(
                {**gradients, "value": to_device(gradients["value"], device)}
            )
