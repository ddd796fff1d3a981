"""The weight formula and its guards (``pina_ntk.core.weights``)."""

import os
import subprocess
import sys

import pytest
import torch

from pina_ntk.core.weights import (
    entry_weights,
    guarded_weights,
    ntk_weights,
    observations_first,
)


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


@pytest.mark.parametrize("function", [ntk_weights, entry_weights])
def test_unknown_reduction_is_rejected(function):
    with pytest.raises(
        ValueError, match=r"^reduction must be one of \('mean', 'sum'\)"
    ):
        function(torch.ones(2), torch.ones(2), reduction="none")


def test_entry_weights_default_to_the_mean_reduction():
    # with "mean" the reduced loss of c is (1/n_c) sum R_i^2: w_c / n_c
    weights = torch.tensor([2.0, 3.0, 0.5])
    sizes = torch.tensor([4, 1, 5])
    assert torch.equal(
        entry_weights(weights, sizes), torch.tensor([0.5, 3.0, 0.1])
    )
    assert torch.equal(entry_weights(weights, sizes, "sum"), weights)


def test_weights_keep_the_dtype_of_the_traces():
    # entry counts may come as float64 or int64 tensors; the weights follow
    # the traces (and the previous weights are cast to them)
    traces = torch.tensor([4.0, 1.0, 0.0])
    for sizes in (
        torch.tensor([2.0, 1.0, 3.0], dtype=torch.float64),
        torch.tensor([2, 1, 3]),
    ):
        assert ntk_weights(traces, sizes).dtype == torch.float32
        weights, ok = guarded_weights(
            traces, sizes, torch.ones(3, dtype=torch.float64)
        )
        assert ok and weights.dtype == torch.float32
        weights, ok = guarded_weights(
            torch.zeros(3), sizes, torch.ones(3, dtype=torch.float64)
        )
        assert not ok and weights.dtype == torch.float32
        for reduction in ("mean", "sum"):
            per_entry = entry_weights(weights, sizes, reduction)
            assert per_entry.dtype == torch.float32


def test_no_nan_reaches_the_gradient_of_the_traces():
    # zero and unusable traces are replaced before the division, so that the
    # unselected branch of torch.where cannot put 0 * inf = NaN into the
    # gradient (the traces may carry a graph)
    sizes = torch.tensor([2.0, 3.0, 1.0])
    for values in ([4.0, 0.0, 1.0], [4.0, float("nan"), 1.0], [0.0] * 3):
        traces = torch.tensor(values, requires_grad=True)
        weights, _ = guarded_weights(traces, sizes, torch.ones(3))
        weights.sum().backward()
        assert torch.isfinite(traces.grad).all(), values


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


def test_observations_first_caps_the_conditions_the_unknowns_enter():
    # PDE (unknowns), boundary, two observation sets
    weights = torch.tensor([1500.0, 7.0, 0.9, 1.2])
    entered = (True, False, False, False)
    observed = (False, False, True, True)
    capped = observations_first(weights, entered, observed)
    # the largest observation weight, 1.2; the boundary keeps its 7
    assert capped.tolist() == pytest.approx([1.2, 7.0, 0.9, 1.2])
    # a weight below the cap stays
    low = torch.tensor([0.5, 7.0, 0.9, 1.2])
    assert observations_first(low, entered, observed).tolist() == (
        pytest.approx(low.tolist())
    )


def test_observations_first_changes_nothing_without_unknowns_or_data():
    weights = torch.tensor([1500.0, 0.9])
    none, first, second = (False, False), (True, False), (False, True)
    assert observations_first(weights, none, second).equal(weights)
    assert observations_first(weights, first, none).equal(weights)


def test_observations_first_keeps_the_weights_device():
    """The flags are put on the weights' device: on another device than
    the CPU (here ``meta``, which stands for a GPU on this machine),
    ``torch.where`` refuses a condition left on the CPU. A ``meta`` tensor
    holds no values, so selecting by a mask needs torch's flag that
    assumes every entry set; this test checks the device, the ones above
    the values. It runs in a fresh interpreter, where torch's
    configuration is its own and not what earlier tests left."""
    code = (
        "import torch, torch.fx.experimental._config as c\n"
        "c.meta_nonzero_assume_all_nonzero = True\n"
        "from pina_ntk.core.weights import observations_first\n"
        "w = torch.tensor([1500.0, 0.9, 0.8], device='meta')\n"
        "out = observations_first(w, (True, False, False), (False, True, False))\n"
        "print(out.device, tuple(out.shape))\n"
    )
    # on the CPU, in this process (where mutation testing sees the call)
    weights = torch.tensor([1500.0, 0.9, 0.8])
    capped = observations_first(
        weights, (True, False, False), (False, True, False)
    )
    assert capped.device == weights.device
    assert capped.tolist() == pytest.approx([0.9, 0.9, 0.8])
    # the package this process imports, wherever it is imported from
    path = os.pathsep.join(sys.path)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["meta", "(3,)"]
