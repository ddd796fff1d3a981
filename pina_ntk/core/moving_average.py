"""The kernel buffer of Algorithm 3: warm start, then a moving average."""

import math

import torch

from .checks import check_int, check_rate


def rate_per_sample(alpha, every):
    """
    The moving-average rate per sample that keeps ``alpha``'s meaning per
    optimisation step when one sample is drawn every ``every`` steps:
    ``1 - (1 - alpha)^every``.

    A sample then carries the weight that ``every`` consecutive per-step
    samples would carry together, so the average spans the same number of
    optimisation steps (about ``1/alpha``) whatever ``every`` is.

    :param float alpha: The rate per optimisation step, in ``(0, 1]``.
    :param int every: Optimisation steps between samples, ``>= 1``.
    :return: The rate per sample, in ``(0, 1]``; ``alpha`` when
        ``every == 1``.
    :rtype: float
    :raises ValueError: If ``alpha`` or ``every`` is out of range.

    :Example:
        >>> round(rate_per_sample(1e-3, 10), 5)
        0.00996
    """
    check_rate("alpha", alpha)
    check_int("every", every, 1)
    if alpha == 1.0 or every == 1:
        return float(alpha)
    # 1 - (1 - alpha)^every without cancellation for small alpha
    return -math.expm1(every * math.log1p(-alpha))


class MovingAverage:
    """
    ``K_0 = mean of N warm-start samples``; ``K_t = (1 - alpha) K_{t-1} +
    alpha K^(1)_t`` afterwards (Algorithm 3 of Hirsch & Pichi).

    Works for any tensor statistic: per-condition traces or a full kernel.
    Non-finite samples are not folded in (the caller decides what to report).

    :param float alpha: The rate in ``(0, 1]``; ``1`` keeps the last sample.

    :Example:
        >>> avg = MovingAverage(alpha=0.5)
        >>> avg.update(torch.stack([torch.tensor(1.0), torch.tensor(3.0)]))
        tensor(2.)
        >>> avg.update(torch.tensor(4.0)[None])
        tensor(3.)
    """

    def __init__(self, alpha):
        self.alpha = check_rate("alpha", alpha)
        self.value = None

    def update(self, samples):
        """
        Fold a stack of samples (leading dimension) into the buffer.

        The first call is the warm start (mean of the stack); later calls
        fold the samples in one at a time with rate ``alpha``. Samples with a
        non-finite entry are skipped.

        :param torch.Tensor samples: ``(k, *shape)``, ``k >= 1``.
        :return: The buffer after the update (NaN while no finite sample
            has been seen).
        :rtype: torch.Tensor
        """
        finite = torch.isfinite(samples.reshape(len(samples), -1)).all(dim=1)
        if self.value is None:
            # Mean over the finite samples, without a device-to-host sync:
            # if none is finite the buffer holds NaN until a finite sample
            # arrives (see below), and callers treat NaN as "no estimate".
            mask = finite.view(-1, *[1] * (samples.dim() - 1))
            total = torch.where(mask, samples, torch.zeros_like(samples))
            count = finite.sum()
            mean = total.sum(dim=0) / count.clamp(min=1)
            self.value = torch.where(count > 0, mean, torch.nan)
            return self.value
        for sample, ok in zip(samples, finite):
            # (1 - alpha) value + alpha sample in one operation, exact at
            # alpha = 1
            mixed = torch.lerp(self.value, sample, self.alpha)
            # a buffer still empty (NaN) restarts from the first finite sample
            mixed = torch.where(torch.isfinite(self.value), mixed, sample)
            self.value = torch.where(ok, mixed, self.value)
        return self.value

    def restart(self, mask, value):
        """
        Restart the entries that ``mask`` marks from ``value``, as a warm
        start of their own; the other entries keep their average.

        :param torch.Tensor mask: Bool, shaped like the buffer.
        :param torch.Tensor value: The new entries' values, same shape.
        :return: The buffer after the restart.
        :rtype: torch.Tensor

        :Example:
            >>> avg = MovingAverage(alpha=0.5)
            >>> avg.update(torch.tensor([[1.0, -2.0]]))
            tensor([ 1., -2.])
            >>> avg.restart(torch.tensor([False, True]), torch.tensor([9.0, 3.0]))
            tensor([1., 3.])
        """
        self.value = torch.where(mask, value.to(self.value), self.value)
        return self.value

    def state_dict(self):
        """:return: The buffer state. :rtype: dict"""
        return {"alpha": self.alpha, "value": self.value}

    def load_state_dict(self, state):
        """:param dict state: A state from :meth:`state_dict`."""
        self.alpha = float(state["alpha"])
        self.value = state["value"]


class KernelBuffer:
    """
    The kernel buffer of Algorithm 3 for the NTK weights: the moving average
    of ``mean diag(K_cc)`` per condition and, if asked, of the full kernel
    sketch, both with one rate.

    :param float rate: The rate per sample (see :func:`rate_per_sample`).
    :param bool full_kernel: Whether the full kernel is averaged too.

    :Example:
        >>> buffer = KernelBuffer(0.5, full_kernel=False)
        >>> buffer.update(torch.tensor([[1.0, 2.0]]))
        >>> buffer.traces(torch.tensor([3.0, 1.0]))
        tensor([3., 2.])
    """

    def __init__(self, rate, full_kernel):
        self.diag = MovingAverage(rate)
        self.full = MovingAverage(rate) if full_kernel else None

    def update(self, per_entry, kernels=None):
        """
        Fold in samples.

        :param torch.Tensor per_entry: ``(k, C)`` block traces per entry.
        :param torch.Tensor kernels: ``(k, n, n)`` kernel sketches, with
            ``full_kernel`` only.
        """
        self.diag.update(per_entry)
        if self.full is not None:
            self.full.update(kernels)

    def restart(self, blocks, per_entry):
        """
        Restart the per-entry traces of the blocks that ``blocks`` marks from
        ``per_entry``; the other blocks (and a full kernel) keep their
        average.

        :param torch.Tensor blocks: ``(C,)`` bool.
        :param torch.Tensor per_entry: ``(C,)`` new per-entry traces.
        """
        self.diag.restart(blocks, per_entry)

    def traces(self, sizes):
        """
        :param torch.Tensor sizes: Entry counts per condition.
        :return: The block traces ``Tr(K_cc)`` of the buffer.
        :rtype: torch.Tensor
        """
        return self.diag.value * sizes

    @property
    def per_entry(self):
        """:return: ``mean diag(K_cc)`` per condition. :rtype: torch.Tensor"""
        return self.diag.value

    @property
    def kernel(self):
        """:return: The full kernel sketch, or ``None``."""
        return None if self.full is None else self.full.value

    def state_dict(self):
        """:return: ``{"diag": state, "kernel": state or None}``."""
        full = None if self.full is None else self.full.state_dict()
        return {"diag": self.diag.state_dict(), "kernel": full}

    @classmethod
    def from_state(cls, state, device):
        """
        A buffer from :meth:`state_dict` on ``device``, or ``None`` when the
        state holds no buffer yet.

        :param dict state: With the keys ``"diag"`` and ``"kernel"``.
        :param device: Where the tensors go.
        :rtype: KernelBuffer
        """
        if state["diag"] is None:
            return None
        buffer = cls(state["diag"]["alpha"], state["kernel"] is not None)
        for average, saved in (
            (buffer.diag, state["diag"]),
            (buffer.full, state["kernel"]),
        ):
            if saved is not None:
                average.load_state_dict(
                    {
                        "alpha": saved["alpha"],
                        "value": saved["value"].to(device),
                    }
                )
        return buffer
