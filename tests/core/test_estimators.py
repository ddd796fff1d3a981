"""The NTK estimators on plain tensors and residual functions
(``pina_ntk.core.estimators``): exact block traces, probes and their
balanced scales, the kernel sketches and their variances, finite-difference
steps. On PINA solvers' residuals: ``tests/integration/test_ntk_traces.py``."""

import math

import numpy as np
import pytest
import torch

from pina_ntk.core.estimators import (
    auto_step_size,
    balanced_probe_scales,
    displace,
    exact_block_traces,
    flatten_parameters,
    kernel_probe_product,
    predictor_block_traces,
    sample_probe,
    sketch_variances,
    symmetrised_kernel_sketch,
)
from pina_ntk.core.weights import ntk_weights

from reference import hutchinson_variances


def test_unused_and_frozen_parameters_contribute_zero():
    theta = torch.tensor([1.0, 2.0], requires_grad=True)
    unused = torch.tensor([5.0], requires_grad=True)
    frozen = torch.tensor([3.0])  # requires_grad=False: not a kernel parameter
    blocks = [theta * torch.tensor([3.0, 4.0]) * frozen, theta.sum()[None]]
    traces = exact_block_traces(blocks, [theta, unused])
    assert torch.allclose(traces, torch.tensor([9.0 * 25.0, 2.0]))
    constant = [torch.ones(3)]  # depends on no parameter at all
    assert exact_block_traces(constant, [theta]).item() == 0.0


def test_zero_residual_entries_are_harmless():
    theta = torch.tensor([0.0, 1.0], requires_grad=True)
    fn = lambda p: [p["theta"] * torch.tensor([1.0, 0.0])]  # noqa: E731
    params = {"theta": theta}
    g = [torch.tensor([1.0, -1.0])]
    kg = kernel_probe_product(fn, params, g, step_size=0.5)
    assert torch.allclose(kg[0], torch.tensor([1.0, 0.0]))


@pytest.mark.parametrize("scales", [None, (3.0, 0.5)])
def test_symmetrised_kernel_sketch_is_unbiased(float64, scales):
    torch.manual_seed(0)
    J = torch.randn(5, 3)
    K = J @ J.T
    fn = lambda p: [J[:2] @ p["theta"], J[2:] @ p["theta"]]  # noqa: E731
    params = {"theta": torch.zeros(3, requires_grad=True)}
    gen = torch.Generator().manual_seed(0)
    total, samples = torch.zeros(5, 5), 4000
    sq = torch.zeros(5, 5)
    if scales is not None:
        scales = torch.tensor(scales)
    for _ in range(samples):
        g = sample_probe(
            [torch.zeros(2), torch.zeros(3)], generator=gen, scales=scales
        )
        kg = kernel_probe_product(fn, params, g, step_size=1.0)
        sketch = symmetrised_kernel_sketch(g, kg, scales)
        total += sketch
        sq += sketch**2
    mean = total / samples
    standard_error = ((sq / samples - mean**2) / samples).sqrt()
    assert torch.all((mean - K).abs() <= 4.5 * standard_error + 1e-12)
    assert torch.allclose(sketch, sketch.T)


def test_balanced_probe_scales_are_square_roots_of_the_weights():
    traces = torch.tensor([400.0, 4.0, 30.0])
    sizes = torch.tensor([4, 1, 3])
    expected = ntk_weights(traces, sizes).sqrt()
    assert torch.allclose(balanced_probe_scales(traces, sizes), expected)
    # equal mean diagonals: no scaling
    uniform = balanced_probe_scales(
        torch.tensor([8.0, 2.0]), torch.tensor([4, 1])
    )
    assert torch.allclose(uniform, torch.ones(2))
    # an unusable estimate gets 1, the others are formed without it
    bad = torch.tensor([400.0, float("nan"), 30.0])
    got = balanced_probe_scales(bad, sizes)
    keep = torch.tensor([0, 2])
    assert got[1] == 1.0
    assert torch.allclose(
        got[keep], ntk_weights(traces[keep], sizes[keep]).sqrt()
    )
    assert torch.equal(
        balanced_probe_scales(torch.tensor([-1.0, 0.0]), torch.tensor([1, 1])),
        torch.ones(2),
    )


@pytest.mark.parametrize("scales", [None, (0.5, 4.0, 1.5)])
def test_sketch_variances_match_the_quadratic_form_variances(float64, scales):
    torch.manual_seed(2)
    J = (
        torch.randn(9, 6)
        * torch.tensor([5.0] * 3 + [1.0] * 4 + [0.2] * 2)[:, None]
    )
    K = J @ J.T
    slices = {"a": slice(0, 3), "b": slice(3, 7), "c": slice(7, 9)}
    named = None if scales is None else dict(zip(slices, scales))
    expected = hutchinson_variances(K.numpy(), slices, "gaussian", named)
    if scales is not None:
        scales = torch.tensor(scales)
    predictor, parameter = sketch_variances(K, [3, 4, 2], scales)
    assert predictor.tolist() == pytest.approx(list(expected.values()))
    own = [2.0 * float((K[s, s] ** 2).sum()) for s in slices.values()]
    assert parameter.tolist() == pytest.approx(own)


def test_balanced_sketch_is_unbiased_and_tames_a_small_block(float64):
    # A linear residual (K g exact at any step size) with one block 30 times
    # the scale of the other, as a second-order PDE residual beside its
    # boundary conditions: with a plain probe the cross terms g_1^T K_12 g_2
    # swamp the small block's sketch; a balanced probe evens them out.
    torch.manual_seed(0)
    J = torch.randn(25, 12)
    J[:20] *= 30.0
    fn = lambda p: [J[:20] @ p["theta"], J[20:] @ p["theta"]]  # noqa: E731
    params = {"theta": torch.zeros(12, requires_grad=True)}
    K = (J @ J.T).numpy()
    slices = {"big": slice(0, 20), "small": slice(20, 25)}
    exact = torch.tensor([float(np.trace(K[s, s])) for s in slices.values()])
    scales = balanced_probe_scales(exact, torch.tensor([20, 5]))
    plain = hutchinson_variances(K, slices, "gaussian")
    balanced = hutchinson_variances(
        K, slices, "gaussian", dict(zip(slices, scales.tolist()))
    )
    assert balanced["small"] < 0.01 * plain["small"]  # worth having
    residuals = fn(params)
    gen = torch.Generator().manual_seed(99)
    samples = 400
    draws = []
    for _ in range(samples):
        v = sample_probe(residuals, generator=gen, scales=scales)
        kv = kernel_probe_product(fn, params, v, 1.0, "forward", residuals)
        draws.append(predictor_block_traces(v, kv, scales))
    draws = torch.stack(draws)
    for index, name in enumerate(slices):
        standard_error = math.sqrt(balanced[name] / samples)
        assert standard_error < 0.25 * exact[index]  # the check is not vacuous
        mean = float(draws[:, index].mean())
        assert abs(mean - exact[index]) <= 4.0 * standard_error
        # the sample variance matches the exact one (the spread of a sample
        # variance of Gaussian quadratic forms at 400 draws: a 40% band)
        variance = float(draws[:, index].var())
        assert variance == pytest.approx(balanced[name], rel=0.4)


@pytest.mark.parametrize(
    "difference,power", [("forward", 1 / 2), ("central", 1 / 3)]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_auto_step_size_displaces_by_a_relative_epsilon(
    difference, power, dtype
):
    gen = torch.Generator().manual_seed(4)
    params = {
        "w": torch.randn(30, 20, generator=gen, dtype=dtype),
        "b": torch.randn(20, generator=gen, dtype=dtype),
    }
    direction = [
        torch.randn(p.shape, generator=gen, dtype=dtype)
        for p in params.values()
    ]
    theta_norm = torch.linalg.vector_norm(flatten_parameters(params.values()))
    dir_norm = torch.linalg.vector_norm(flatten_parameters(direction))
    step = auto_step_size(theta_norm, dir_norm, difference, dtype)
    theta = math.sqrt(sum(float(p.pow(2).sum()) for p in params.values()))
    moved = math.sqrt(sum(float((step * d).pow(2).sum()) for d in direction))
    tau = torch.finfo(dtype).eps ** power
    assert moved == pytest.approx(tau * max(theta, 1.0), rel=1e-5)
    # parameters of norm below 1 are displaced by tau, not tau * ||theta||
    small = torch.tensor(0.25, dtype=dtype)
    one = torch.tensor(1.0, dtype=dtype)
    assert torch.equal(
        auto_step_size(small, dir_norm, difference, dtype),
        auto_step_size(one, dir_norm, difference, dtype),
    )
    # a zero direction gives a finite step, not a division by zero
    zero = torch.tensor(0.0, dtype=dtype)
    assert torch.isfinite(auto_step_size(theta_norm, zero, difference, dtype))


def test_displacement_keeps_each_parameters_shape_and_dtype():
    params = {
        "w": torch.ones(2, 3, dtype=torch.float32),
        "b": torch.ones(3, dtype=torch.float64),
    }
    theta = flatten_parameters(params.values())
    moved = displace(params, torch.arange(9.0, dtype=theta.dtype), 0.5, theta)
    assert [(v.shape, v.dtype) for v in moved.values()] == [
        (p.shape, p.dtype) for p in params.values()
    ]
    assert moved["w"].flatten().tolist() == [1.0, 1.5, 2.0, 2.5, 3.0, 3.5]
    assert moved["b"].tolist() == [4.0, 4.5, 5.0]
    assert torch.equal(params["w"], torch.ones(2, 3))  # untouched


def test_probe_kind():
    with pytest.raises(ValueError, match="probe"):
        sample_probe([torch.zeros(2)], kind="sobol")
