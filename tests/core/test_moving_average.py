"""The moving average of the kernel statistics and its rate per sample
(``pina_ntk.core.moving_average``)."""

import pytest
import torch

from pina_ntk.core.moving_average import MovingAverage, rate_per_sample


def test_moving_average_warm_start_and_rate():
    avg = MovingAverage(alpha=0.25)
    first = avg.update(torch.tensor([[1.0, 2.0], [3.0, 6.0]]))
    assert torch.equal(first, torch.tensor([2.0, 4.0]))
    second = avg.update(torch.tensor([[6.0, 8.0]]))
    assert torch.allclose(
        second, 0.75 * first + 0.25 * torch.tensor([6.0, 8.0])
    )
    skipped = avg.update(torch.tensor([[float("nan"), 1.0]]))
    assert torch.equal(skipped, second)  # a non-finite sample is not folded in


def test_moving_average_alpha():
    with pytest.raises(ValueError, match="alpha"):
        MovingAverage(alpha=0.0)


@pytest.mark.parametrize(
    "alpha,every,argument",
    [(0.0, 2, "alpha"), (0.1, 0, "every"), (0.1, 1.5, "every")],
)
def test_rate_per_sample_arguments(alpha, every, argument):
    with pytest.raises(ValueError, match=argument):
        rate_per_sample(alpha, every)
