"""The kernel buffer of Algorithm 3: warm start, then a moving average."""

import torch

from .checks import check_rate


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

    def state_dict(self):
        """:return: The buffer state. :rtype: dict"""
        return {"alpha": self.alpha, "value": self.value}

    def load_state_dict(self, state):
        """:param dict state: A state from :meth:`state_dict`."""
        self.alpha = float(state["alpha"])
        self.value = state["value"]
