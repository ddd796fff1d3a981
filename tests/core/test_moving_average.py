"""The moving average of the kernel statistics and its rate per sample
(``pina_ntk.core.moving_average``)."""

import math

import pytest
import torch

from pina_ntk.core.moving_average import (
    KernelBuffer,
    MovingAverage,
    rate_per_sample,
)

nan = float("nan")


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


def test_warm_start_averages_the_finite_samples_only():
    # three samples of shape (2,): the mask over samples must line up with
    # the leading dimension, not with the entries of one sample
    avg = MovingAverage(alpha=0.5)
    value = avg.update(torch.tensor([[1.0, 2.0], [nan, 5.0], [3.0, 8.0]]))
    assert torch.equal(value, torch.tensor([2.0, 5.0]))
    # the same for a stack of kernels (k, n, n) with k != n
    kernels = torch.tensor(
        [[[1.0, 2.0], [3.0, 4.0]], [[5.0, nan], [7.0, 8.0]], [[3.0] * 2] * 2]
    )
    avg = MovingAverage(alpha=0.5)
    assert torch.equal(
        avg.update(kernels), torch.tensor([[2.0, 2.5], [3.0, 3.5]])
    )


def test_warm_start_with_one_finite_sample_is_that_sample():
    avg = MovingAverage(alpha=0.5)
    value = avg.update(torch.tensor([[nan, 1.0], [6.0, 4.0]]))
    assert torch.equal(value, torch.tensor([6.0, 4.0]))
    avg = MovingAverage(alpha=0.5)
    assert torch.equal(avg.update(torch.tensor([[3.0]])), torch.tensor([3.0]))


def test_warm_start_without_finite_sample_waits_for_one():
    avg = MovingAverage(alpha=0.25)
    value = avg.update(torch.tensor([[nan, 1.0], [2.0, float("inf")]]))
    assert torch.isnan(value).all()  # no estimate yet
    # the first finite sample restarts the buffer, later ones are averaged
    value = avg.update(torch.tensor([[4.0, 8.0], [8.0, 0.0]]))
    assert torch.equal(value, torch.tensor([5.0, 6.0]))  # 0.75 * s1 + 0.25 s2


@pytest.mark.parametrize("alpha", [0.0, -0.5, 1.5, True])
def test_moving_average_alpha(alpha):
    with pytest.raises(
        ValueError, match=r"^alpha must be a number in \(0, 1\]"
    ):
        MovingAverage(alpha=alpha)


@pytest.mark.parametrize(
    "alpha,every,message",
    [
        (0.0, 2, r"^alpha must be a number in \(0, 1\]"),
        (1.5, 2, r"^alpha must be a number in \(0, 1\]"),
        (0.1, 0, "^every must be an integer >= 1"),
        (0.1, 1.5, "^every must be an integer >= 1"),
    ],
)
def test_rate_per_sample_arguments(alpha, every, message):
    with pytest.raises(ValueError, match=message):
        rate_per_sample(alpha, every)


def test_moving_average_state_round_trip():
    avg = MovingAverage(alpha=0.5)
    avg.load_state_dict({"alpha": 1, "value": torch.tensor([2.0, 4.0])})
    assert type(avg.alpha) is float and avg.alpha == 1.0
    state = avg.state_dict()
    assert set(state) == {"alpha", "value"} and state["alpha"] == 1.0
    assert torch.equal(state["value"], torch.tensor([2.0, 4.0]))
    # the loaded rate 1 keeps the last sample: the loaded alpha is used
    assert torch.equal(
        avg.update(torch.tensor([[6.0, 0.0]])), torch.tensor([6.0, 0.0])
    )


@pytest.mark.parametrize("full_kernel", [False, True])
def test_kernel_buffer_averages_traces_and_kernel(full_kernel):
    buffer = KernelBuffer(0.25, full_kernel=full_kernel)
    kernels = torch.tensor([[[1.0, 2.0], [2.0, 5.0]], [[3.0, 0.0], [0.0, 1.0]]])
    buffer.update(torch.tensor([[1.0, 4.0], [3.0, 2.0]]), kernels)
    buffer.update(torch.tensor([[6.0, 7.0]]), 2 * kernels[:1])
    # warm start (2, 3), then 0.75 * (2, 3) + 0.25 * (6, 7)
    per_entry = torch.tensor([3.0, 4.0])
    assert torch.equal(buffer.per_entry, per_entry)
    # Tr(K_cc) = n_c mean diag(K_cc)
    sizes = torch.tensor([2.0, 5.0])
    assert torch.equal(buffer.traces(sizes), per_entry * sizes)
    if full_kernel:
        warm = torch.tensor([[2.0, 1.0], [1.0, 3.0]])
        assert torch.equal(buffer.kernel, 0.75 * warm + 0.25 * 2 * kernels[0])
    else:
        assert buffer.kernel is None
        assert buffer.state_dict()["kernel"] is None


def test_kernel_buffer_from_state_restores_both_averages_on_device():
    diag = torch.tensor([1.5, 2.5])
    kernel = torch.tensor([[1.0, 0.5], [0.5, 2.0]])
    state = {
        "diag": {"alpha": 0.125, "value": diag},
        "kernel": {"alpha": 0.125, "value": kernel},
    }
    buffer = KernelBuffer.from_state(state, torch.device("cpu"))
    assert buffer.diag.alpha == 0.125 and buffer.full.alpha == 0.125
    assert torch.equal(buffer.per_entry, diag)
    assert torch.equal(buffer.kernel, kernel)
    saved = buffer.state_dict()
    assert set(saved) == {"diag", "kernel"}
    assert saved["diag"]["alpha"] == 0.125 and saved["kernel"]["alpha"] == 0.125
    assert torch.equal(saved["diag"]["value"], diag)
    assert torch.equal(saved["kernel"]["value"], kernel)
    # the restored buffer goes on averaging with the saved rate
    buffer.update(torch.tensor([[9.5, 2.5]]), torch.zeros(1, 2, 2))
    assert torch.equal(buffer.per_entry, torch.tensor([2.5, 2.5]))
    assert torch.equal(buffer.kernel, 0.875 * kernel)
    # the tensors go to the requested device ("meta" stands in for an
    # accelerator: it needs no hardware)
    meta = KernelBuffer.from_state(state, torch.device("meta"))
    assert meta.per_entry.device.type == "meta"
    assert meta.kernel.device.type == "meta"


def test_kernel_buffer_from_state_without_kernel_or_buffer():
    state = {"diag": {"alpha": 0.5, "value": torch.tensor([1.0])}}
    buffer = KernelBuffer.from_state({**state, "kernel": None}, "cpu")
    assert buffer.kernel is None and torch.equal(
        buffer.per_entry, torch.tensor([1.0])
    )
    # a checkpoint taken before the first sample holds no buffer
    assert (
        KernelBuffer.from_state({"diag": None, "kernel": None}, "cpu") is None
    )


def test_restart_replaces_the_marked_entries_and_keeps_averaging():
    average = MovingAverage(alpha=0.25)
    average.update(torch.tensor([[4.0, -8.0, 2.0]]))
    average.restart(
        torch.tensor([False, True, False]), torch.tensor([0, 6.0, 0])
    )
    assert average.value.tolist() == [4.0, 6.0, 2.0]
    # later samples fold into the restarted entry at the same rate
    average.update(torch.tensor([[0.0, 2.0, 2.0]]))
    assert average.value.tolist() == [3.0, 5.0, 2.0]


def test_buffer_restart_touches_the_per_entry_traces_only():
    buffer = KernelBuffer(0.5, full_kernel=False)
    buffer.update(torch.tensor([[1.0, -1.0]]))
    buffer.restart(torch.tensor([False, True]), torch.tensor([7.0, 3.0]))
    assert buffer.traces(torch.tensor([2.0, 10.0])).tolist() == [2.0, 30.0]


def test_restart_keeps_the_buffers_dtype():
    average = MovingAverage(alpha=0.5)
    average.update(torch.tensor([[1.0, 2.0]]))
    restarted = torch.tensor([0.0, 0.1], dtype=torch.float64)
    average.restart(torch.tensor([False, True]), restarted)
    assert average.value.dtype == torch.float32
    assert average.value.tolist() == [1.0, torch.tensor(0.1).item()]


@pytest.mark.parametrize("alpha", [0.061, 0.118, 0.5, 1e-3])
def test_a_sample_every_step_keeps_alpha_exactly(alpha):
    # the documented shortcut: alpha itself, not 1 - exp(log(1 - alpha)),
    # which differs in the last bit for some alpha (0.061: checked)
    assert rate_per_sample(alpha, 1) == alpha
    assert -math.expm1(math.log1p(-0.061)) != 0.061


@pytest.mark.parametrize("every", [2, 10])
def test_a_full_rate_keeps_only_the_last_sample_at_any_spacing(every):
    # alpha = 1 leaves (1 - 1)^every = 0 of the old buffer: the rate per
    # sample is 1, with no logarithm of zero on the way
    assert rate_per_sample(1.0, every) == 1.0
