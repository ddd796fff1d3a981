"""The weight formula and its guards (``pina_ntk.core.weights``)."""

import pytest
import torch

from pina_ntk.core.weights import entry_weights, guarded_weights, ntk_weights


def test_uniform_diagonal_gives_all_ones():
    sizes = torch.tensor([100.0, 30.0, 7.0])
    traces = 2.5 * sizes  # every diagonal entry of K equals 2.5
    assert torch.allclose(ntk_weights(traces, sizes), torch.ones(3))


def test_paper_lambda_up_to_global_constant():
    sizes = torch.tensor([4.0, 1.0, 5.0])
    traces = torch.tensor([8.0, 3.0, 0.5])
    paper = traces.sum() / traces  # lambda_c = Tr K / Tr K_cc
    for reduction in ("mean", "sum"):
        per_entry = entry_weights(
            ntk_weights(traces, sizes, reduction), sizes, reduction
        )
        assert torch.allclose(per_entry, paper / sizes.sum())


def test_scaling_all_residuals_leaves_weights_unchanged():
    sizes = torch.tensor([10.0, 3.0])
    traces = torch.tensor([7.0, 0.2])
    for scale in (1e-3, 1.0, 1e4):
        # residuals scaled by s scale the Jacobian by s and the traces by s^2
        scaled = ntk_weights(traces * scale**2, sizes)
        assert torch.allclose(scaled, ntk_weights(traces, sizes), rtol=1e-5)


def test_unknown_reduction_is_rejected():
    with pytest.raises(ValueError, match="reduction"):
        ntk_weights(torch.ones(2), torch.ones(2), reduction="none")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0], ids=str)
def test_unusable_traces_keep_previous_weights(bad):
    previous = torch.tensor([0.5, 2.0])
    traces = torch.tensor([1.0, bad])
    weights, ok = guarded_weights(traces, torch.tensor([1.0, 1.0]), previous)
    assert not ok
    assert torch.equal(weights, previous)


def test_all_zero_traces_keep_previous_weights():
    previous = torch.tensor([0.5, 2.0])
    weights, ok = guarded_weights(torch.zeros(2), torch.ones(2), previous)
    assert not ok
    assert torch.equal(weights, previous)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_a_zero_trace_takes_the_uniform_kernels_weight(reduction):
    # a residual no parameter moves: Tr(K_cc) = 0, Tr(K)/Tr(K_cc) infinite
    traces = torch.tensor([4.0, 0.0, 1.0])
    sizes = torch.tensor([2.0, 3.0, 1.0])
    weights, ok = guarded_weights(traces, sizes, torch.ones(3), reduction)
    assert ok
    uniform = ntk_weights(sizes, sizes, reduction)  # 1, or 1/n_c with sum
    assert weights[1] == uniform[1]
    # the others: mean diag(K) over all six entries (the zero block adds
    # nothing to Tr(K)) over their own mean diagonal
    mean_diag = 5.0 / 6.0
    expected = torch.tensor([mean_diag / 2.0, mean_diag / 1.0])
    if reduction == "sum":
        expected = expected / torch.tensor([2.0, 1.0])
    assert torch.allclose(weights[[0, 2]], expected)


def test_weights_are_clamped_to_bounds():
    traces = torch.tensor([1e-12, 1.0, 1e12])
    weights, ok = guarded_weights(
        traces, torch.ones(3), torch.ones(3), bounds=(1e-3, 1e3)
    )
    assert ok
    assert weights.min() >= 1e-3 and weights.max() <= 1e3
    assert weights[0] == 1e3  # clamped: the unclamped weight is ~3e11
    assert weights[2] == pytest.approx(1.0 / 3.0)  # within bounds: untouched
