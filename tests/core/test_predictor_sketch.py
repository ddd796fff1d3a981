"""The predictor step of the NTK sketch (Algorithm 2), piece by piece: the
probe, the predictor direction ``v = J^T g``, the displacement ``theta +
dt v`` and its automatic step, the kernel-probe product ``K g`` by finite
differences along ``v`` and its block traces ``g_c · (K g)_c``.

Expected values come from hand computation or from the Jacobian built entry
by entry with plain autograd (of a residual linear in the parameters, so the
finite difference is exact up to rounding)."""

import math

import pytest
import torch

from pina_ntk.core.estimators import (
    auto_step_size,
    displace,
    flatten_parameters,
    isolated_block_traces,
    kernel_probe_product,
    predictor_block_traces,
    predictor_direction,
    sample_probe,
)

SHAPES = [(40, 25), (3,), ()]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rademacher_probe_entries_are_signs_of_mean_zero(dtype):
    like = [torch.zeros(shape, dtype=dtype) for shape in SHAPES]
    gen = torch.Generator().manual_seed(0)
    probe = sample_probe(like, kind="rademacher", generator=gen)
    assert [(g.shape, g.dtype) for g in probe] == [
        (b.shape, dtype) for b in like
    ]
    entries = flatten_parameters(probe)
    assert set(entries.tolist()) == {-1.0, 1.0}
    # 1004 independent signs: their mean has standard deviation 1/sqrt(1004)
    # = 0.032; 5 standard deviations make a false failure very unlikely.
    assert abs(entries.mean().item()) < 5 / math.sqrt(entries.numel())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gaussian_probe_has_the_blocks_shapes_and_unit_variance(dtype):
    like = [torch.zeros(shape, dtype=dtype) for shape in SHAPES]
    gen = torch.Generator().manual_seed(1)
    probe = sample_probe(like, generator=gen)
    assert [(g.shape, g.dtype) for g in probe] == [
        (b.shape, dtype) for b in like
    ]
    entries = flatten_parameters(probe).double()
    n = entries.numel()
    # mean ~ N(0, 1/n); the sample variance has standard deviation sqrt(2/n)
    assert abs(entries.mean().item()) < 5 / math.sqrt(n)
    assert abs(entries.var().item() - 1.0) < 5 * math.sqrt(2 / n)


@pytest.mark.parametrize("kind", ["gaussian", "rademacher"])
def test_probe_is_reproducible_from_its_generator_alone(kind):
    like = [torch.zeros(4, 3), torch.zeros(5)]
    global_state = torch.get_rng_state()
    first = sample_probe(like, kind, torch.Generator().manual_seed(7))
    second = sample_probe(like, kind, torch.Generator().manual_seed(7))
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    # a given generator leaves the global random stream alone
    assert torch.equal(torch.get_rng_state(), global_state)


@pytest.mark.parametrize("kind", ["gaussian", "rademacher"])
def test_probe_is_created_on_the_residuals_device_not_the_default(kind):
    # With "meta" (available on every machine) as the default device, a
    # probe for CPU residuals must still be on the CPU: it follows the
    # blocks, as residuals on a GPU need a GPU probe whatever the default.
    like = [torch.zeros(3), torch.zeros(2, 2)]
    gen = torch.Generator().manual_seed(0)
    scales = torch.tensor([2.0, 0.5])
    previous = torch.get_default_device()
    torch.set_default_device("meta")
    try:
        probes = [sample_probe(like, kind, gen, s) for s in (None, scales)]
    finally:
        torch.set_default_device(previous)
    for probe in probes:
        assert [g.device.type for g in probe] == ["cpu", "cpu"]


@pytest.mark.parametrize("kind", ["gaussian", "rademacher"])
def test_scaled_probe_multiplies_each_block_and_keeps_its_dtype(kind):
    # A scalar loss term (a 0-d block) in float32 with float64 scales: the
    # probe stays in the residual's dtype, as for any other block shape.
    like = [torch.zeros((), dtype=torch.float32)]
    scales = torch.tensor([0.25], dtype=torch.float64)
    plain = sample_probe(like, kind, torch.Generator().manual_seed(3))
    scaled = sample_probe(like, kind, torch.Generator().manual_seed(3), scales)
    assert scaled[0].dtype == torch.float32 and scaled[0].shape == ()
    assert scaled[0].item() == 0.25 * plain[0].item()  # 0.25: exact in binary


def test_block_traces_by_hand_with_and_without_scales():
    probe = [torch.tensor([1.0, 2.0]), torch.tensor([[3.0]])]
    product = [torch.tensor([4.0, 5.0]), torch.tensor([[6.0]])]
    traces = predictor_block_traces(probe, product)
    assert traces.tolist() == [1 * 4 + 2 * 5, 3 * 6]
    # a balanced probe v_c = s_c g_c is divided by s_c^2; the scales' dtype
    # does not leak into the float32 traces
    scales = torch.tensor([2.0, 3.0], dtype=torch.float64)
    scaled = predictor_block_traces(probe, product, scales)
    assert scaled.dtype == torch.float32
    assert scaled.tolist() == [14 / 4, 18 / 9]


def _linear_problem(dtype=torch.float64):
    """``R = [w x + b (2x3), c * u (1), constant (2)]`` with an unused
    parameter ``z``: linear in the parameters, so ``J`` is exact."""
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, generator=gen, dtype=dtype)
    params = {
        "w": torch.randn(2, 2, generator=gen, dtype=dtype),
        "b": torch.randn(2, 1, generator=gen, dtype=dtype),
        "u": torch.randn((), generator=gen, dtype=dtype),
        "z": torch.randn(3, generator=gen, dtype=dtype),
    }

    def residual_fn(p):
        return [p["w"] @ x + p["b"], 3.0 * p["u"][None]]

    return residual_fn, params


def _jacobian(residual_fn, params):
    """``J`` by brute force: one row per residual entry (one autograd pass
    each), parameters in ``params`` order."""
    tracked = [p.clone().requires_grad_() for p in params.values()]
    entries = torch.cat(
        [r.reshape(-1) for r in residual_fn(dict(zip(params, tracked)))]
    )
    rows = []
    for entry in entries:
        grads = torch.autograd.grad(
            entry, tracked, retain_graph=True, materialize_grads=True
        )
        rows.append(torch.cat([g.reshape(-1) for g in grads]))
    return torch.stack(rows)


def test_predictor_direction_is_the_jacobian_transposed_times_the_probe():
    residual_fn, params = _linear_problem()
    jac = _jacobian(residual_fn, params)
    probe = [
        torch.tensor([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]], dtype=torch.float64),
        torch.tensor([2.0], dtype=torch.float64),
    ]
    tracked = {k: v.clone().requires_grad_() for k, v in params.items()}
    residuals = residual_fn(tracked)
    direction = predictor_direction(residuals, list(tracked.values()), probe)
    expected = jac.T @ flatten_parameters(probe)
    assert [d.shape for d in direction] == [p.shape for p in params.values()]
    assert torch.allclose(flatten_parameters(direction), expected)
    # the unused parameter z gets an explicit zero direction, not None
    assert torch.equal(direction[3], torch.zeros(3, dtype=torch.float64))
    # the residual graph is kept for the training step's own backward pass
    residuals[0].sum().backward()


def test_predictor_direction_of_constant_residuals_is_zero():
    params = [torch.ones(2, 2, requires_grad=True), torch.ones(3)]
    residuals = [torch.ones(4), torch.zeros(())]  # no autograd graph
    probe = [torch.ones(4), torch.ones(())]
    direction = predictor_direction(residuals, params, probe)
    assert [d.shape for d in direction] == [(2, 2), (3,)]
    assert all(torch.equal(d, torch.zeros_like(d)) for d in direction)


def test_displace_without_theta_flattens_the_parameters_itself():
    params = {"w": torch.ones(2, 2), "b": torch.tensor([5.0, 6.0])}
    moved = displace(params, torch.arange(6.0), 2.0)
    assert moved["w"].tolist() == [[1.0, 3.0], [5.0, 7.0]]
    assert moved["b"].tolist() == [13.0, 16.0]
    assert params["b"].tolist() == [5.0, 6.0]  # untouched


def test_auto_step_size_scales_with_parameters_of_norm_above_one():
    # ||theta|| = 1.5 lies between the floor 1 and 2: the displacement is
    # tau * 1.5, with tau = sqrt(eps) for forward differences.
    dtype = torch.float64
    step = auto_step_size(
        torch.tensor(1.5, dtype=dtype),
        torch.tensor(4.0, dtype=dtype),
        "forward",
        dtype,
    )
    tau = math.sqrt(torch.finfo(dtype).eps)
    assert step.item() == pytest.approx(tau * 1.5 / 4.0, rel=1e-12)


class _Recorder:
    """A residual function that records the flat parameters it is called
    with, so a test can see the finite-difference evaluation points."""

    def __init__(self, residual_fn):
        self.residual_fn = residual_fn
        self.points = []

    def __call__(self, params):
        self.points.append(flatten_parameters(params.values()))
        return self.residual_fn(params)


@pytest.mark.parametrize(
    "difference,power,signs",
    [
        (None, 1 / 2, [1.0]),
        ("forward", 1 / 2, [1.0]),
        ("central", 1 / 3, [1.0, -1.0]),
    ],
)
def test_auto_step_kernel_probe_product_is_k_times_the_probe(
    difference, power, signs
):
    # Default dtype float32, computation in float64: the step must come from
    # the probe's dtype. One residual block only, the plainest valid input.
    residual_fn, params = _linear_problem()

    def one_block(p):
        return residual_fn(p)[:1]

    recorder = _Recorder(one_block)
    probe = [torch.tensor([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]]).double()]
    tracked = {k: v.clone().requires_grad_() for k, v in params.items()}
    kwargs = {} if difference is None else {"difference": difference}
    product = kernel_probe_product(recorder, tracked, probe, **kwargs)

    jac = _jacobian(one_block, params)
    g = flatten_parameters(probe)
    # R is linear: the quotient is exact up to rounding, eps |R| / dt with
    # dt ~ eps^power, far below the tolerance 1e-6.
    assert torch.allclose(
        flatten_parameters(product), jac @ (jac.T @ g), rtol=1e-6, atol=1e-9
    )
    assert product[0].shape == (2, 3)

    # R(theta) first (no residuals given), then theta + dt v (and theta - dt
    # v for central differences) with ||dt v|| = tau max(||theta||, 1).
    theta = flatten_parameters(params.values())
    assert len(recorder.points) == 1 + len(signs)
    assert torch.equal(recorder.points[0], theta)
    v = jac.T @ g
    theta_norm = torch.linalg.vector_norm(theta).item()
    tau = torch.finfo(torch.float64).eps ** power
    for sign, point in zip(signs, recorder.points[1:]):
        moved = point - theta
        assert torch.linalg.vector_norm(moved).item() == pytest.approx(
            tau * max(theta_norm, 1.0), rel=1e-6
        )
        cosine = torch.dot(moved, v) / (
            torch.linalg.vector_norm(moved) * torch.linalg.vector_norm(v)
        )
        assert cosine.item() == pytest.approx(sign, abs=1e-6)


def test_given_step_displaces_by_exactly_that_multiple_of_the_direction():
    residual_fn, params = _linear_problem()
    recorder = _Recorder(residual_fn)
    probe = [torch.ones(2, 3).double(), torch.tensor([2.0]).double()]
    residuals = residual_fn(params)  # values suffice with a direction
    direction = [torch.full(p.shape, 0.5).double() for p in params.values()]
    product = kernel_probe_product(
        recorder, params, probe, 0.25, "central", residuals, direction
    )
    theta = flatten_parameters(params.values())
    assert len(recorder.points) == 2
    assert torch.allclose(recorder.points[0], theta + 0.125)
    assert torch.allclose(recorder.points[1], theta - 0.125)
    # (R(theta + dt v) - R(theta - dt v)) / (2 dt) = J v for a linear R
    jac = _jacobian(residual_fn, params)
    expected = jac @ flatten_parameters(direction)
    assert torch.allclose(flatten_parameters(product), expected)


# ------------------------------------------------ blocks sketched on their own
def _nonlinear_blocks(theta):
    """Three residual blocks of one parameter vector, nonlinear in it: a
    large block (entries scaled by 30) beside two small ones."""
    x = torch.linspace(-1.0, 1.0, 7, dtype=theta.dtype)
    large = 30.0 * torch.tanh(theta[0] * x + theta[1]) * theta[2]
    small = torch.sin(theta[1] * x[:3]) + theta[3] ** 2
    constant = torch.ones(2, dtype=theta.dtype)  # no parameter moves it
    return [large, small, constant]


def test_isolated_block_traces_are_the_blocks_own_quadratic_forms(float64):
    theta = torch.tensor([0.3, -0.7, 1.1, 0.5], requires_grad=True)
    blocks = _nonlinear_blocks(theta)
    jacobian = torch.autograd.functional.jacobian(
        lambda t: torch.cat(_nonlinear_blocks(t)), theta.detach()
    )
    kernel = jacobian @ jacobian.T
    probe = sample_probe(blocks, generator=torch.Generator().manual_seed(1))
    scales = torch.tensor([0.5, 4.0, 2.0])
    scaled = [s * g for s, g in zip(scales, probe)]
    got = isolated_block_traces(
        blocks, [theta], scaled, (True, True, False), scales
    )
    # g_c^T K_cc g_c with the unscaled probe, from the dense Jacobian
    own = [
        probe[0] @ kernel[:7, :7] @ probe[0],
        probe[1] @ kernel[7:10, 7:10] @ probe[1],
    ]
    torch.testing.assert_close(got[:2], torch.stack(own), rtol=1e-12, atol=0)
    assert got[2] == 0  # not marked
    # the predictor's sketch of the same probe adds the cross terms
    full = torch.cat(probe) @ kernel
    with_cross = [(probe[0] * full[:7]).sum(), (probe[1] * full[7:10]).sum()]
    assert not torch.allclose(torch.stack(with_cross), got[:2])
    # a block no parameter moves is zero even when marked
    assert (
        isolated_block_traces(blocks, [theta], probe, (False,) * 2 + (True,))[2]
        == 0
    )


def test_isolated_block_traces_are_never_negative_where_the_sketch_is():
    # a large block beside a small one: with many probes the predictor's
    # sketch of the small block goes negative, its own term never does
    theta = torch.tensor([0.3, -0.7, 1.1, 0.5], requires_grad=True)
    blocks = _nonlinear_blocks(theta)[:2]
    params = [theta]
    gen = torch.Generator().manual_seed(0)
    negative = 0
    for _ in range(200):
        probe = sample_probe(blocks, generator=gen)
        direction = predictor_direction(blocks, params, probe)
        jvp = torch.func.jvp(
            lambda t: torch.cat(_nonlinear_blocks(t)[:2]),
            (theta.detach(),),
            (direction[0],),
        )[1]
        sketch = (probe[1] * jvp[7:]).sum()
        negative += int(sketch < 0)
        own = isolated_block_traces(blocks, params, probe, (False, True))
        assert own[1] >= 0
    assert negative > 0  # the set-up does drown the small block


def test_isolated_block_traces_count_only_the_parameters_a_block_uses():
    theta = torch.tensor([2.0], requires_grad=True)
    phi = torch.tensor([3.0], requires_grad=True)
    outside = torch.tensor([5.0], requires_grad=True)  # not a parameter
    blocks = [theta * phi, 4.0 * theta, 2.0 * outside]
    probe = [torch.ones(1)] * 3
    got = isolated_block_traces(blocks, [theta, phi], probe, (True,) * 3)
    # gradients (phi, theta) = (3, 2): 13; (4, unused): 16; none at all: 0
    assert got.tolist() == [13.0, 16.0, 0.0]


def test_isolated_block_traces_keep_the_blocks_dtype_under_other_scales():
    theta = torch.tensor([1.0, 2.0], requires_grad=True)
    blocks = [theta * torch.tensor([3.0, 4.0])]
    probe = [torch.tensor([0.5, 0.5])]  # v = s g with s = 0.5, g = 1
    scales = torch.tensor([0.5], dtype=torch.float64)
    got = isolated_block_traces(blocks, [theta], probe, (True,), scales)
    # (0.25 * 9 + 0.25 * 16) / 0.5^2 = 25, in the blocks' float32
    assert got.dtype == torch.float32 and got.tolist() == [25.0]
