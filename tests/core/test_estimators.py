"""The NTK estimators on plain tensors and residual functions
(``pina_ntk.core.estimators``): exact block traces, probes and their
balanced scales, the kernel sketches and their variances, finite-difference
steps. On PINA solvers' residuals: ``tests/integration/test_ntk_traces.py``."""

import math

import numpy as np
import pytest
import torch

from pina_ntk.core.estimators import (
    PointCouplingError,
    auto_step_size,
    balanced_probe_scales,
    chunked_block_traces,
    displace,
    exact_block_traces,
    flatten_parameters,
    kernel_probe_product,
    parameter_probe,
    parameter_space_block_traces,
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
    # small positive traces are as usable as any: mean diagonal 0.13, so
    # weights 0.13 / 0.25 = 0.52 and 0.13 / 0.01 = 13
    small = balanced_probe_scales(
        torch.tensor([0.25, 0.01], dtype=torch.float64), torch.tensor([1, 1])
    )
    assert small.tolist() == pytest.approx(
        [math.sqrt(0.52), math.sqrt(13.0)], rel=1e-12
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


def _two_layer_blocks(w, b, x):
    """A nonlinear residual with a block of 5 entries, one without any
    parameter and a 2 x 3 block of ``w`` alone."""
    return [
        torch.tanh(x @ w + b).pow(2).sum(dim=1),
        torch.ones(2, 2, dtype=w.dtype),
        torch.sin(w).T * torch.arange(1.0, 4.0, dtype=w.dtype),
    ]


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7])
def test_exact_block_traces_match_the_jacobian_for_every_chunk_size(
    chunk_size,
):
    gen = torch.Generator().manual_seed(1)
    opts = dict(generator=gen, dtype=torch.float64)
    x = torch.randn(5, 3, **opts)
    w = torch.randn(3, 2, **opts).requires_grad_()
    b = torch.randn(2, **opts).requires_grad_()
    unused = torch.randn(4, **opts).requires_grad_()
    blocks = _two_layer_blocks(w, b, x)
    traces = exact_block_traces(blocks, [w, b, unused], chunk_size)
    # the reference: Tr(K_cc) is the squared Frobenius norm of the block's
    # Jacobian, here from torch.func.jacrev (one Jacobian per block)
    expected = []
    for index in range(3):
        jacobians = torch.func.jacrev(
            lambda w, b: _two_layer_blocks(w, b, x)[index].reshape(-1),
            argnums=(0, 1),
        )(w.detach(), b.detach())
        expected.append(sum(float(j.pow(2).sum()) for j in jacobians))
    assert expected[1] == 0.0 and min(expected[0], expected[2]) > 0.0
    # float64 sums of a few dozen squares: agreement to rounding
    assert traces.tolist() == pytest.approx(expected, rel=1e-12)
    # the residuals' graph is retained for the training step's backward
    torch.autograd.grad(blocks[0].sum() + blocks[2].sum(), [w, b])


def _point_residuals(w, b, x):
    """A residual of two outputs per point, each point's from its own row of
    ``x``: its chunks of points are independent."""
    hidden = torch.tanh(x @ w + b)
    return torch.stack([hidden.pow(2).sum(1), hidden[:, 0] * x[:, 1]], 1)


@pytest.mark.parametrize("points", [1, 2, 3, 7])
def test_chunked_block_traces_match_the_jacobian_for_every_chunk(points):
    gen = torch.Generator().manual_seed(2)
    opts = dict(generator=gen, dtype=torch.float64)
    xs = [torch.randn(5, 3, **opts), torch.randn(4, 3, **opts)]
    w = torch.randn(3, 2, **opts).requires_grad_()
    b = torch.randn(2, **opts).requires_grad_()
    unused = torch.randn(4, **opts).requires_grad_()

    def chunks():  # blocks 0 and 2 in chunks of points; block 1 has none
        for block, x in ((0, xs[0]), (2, xs[1])):
            for start in range(0, len(x), points):
                yield block, _point_residuals(w, b, x[start : start + points])

    traces = chunked_block_traces(chunks(), 3, [w, b, unused])
    # the reference: the squared Frobenius norm of each block's Jacobian on
    # all its points at once, from torch.func.jacrev
    expected = []
    for x in xs:
        jacobians = torch.func.jacrev(
            lambda w, b: _point_residuals(w, b, x).reshape(-1),
            argnums=(0, 1),
        )(w.detach(), b.detach())
        expected.append(sum(float(j.pow(2).sum()) for j in jacobians))
    assert traces.tolist() == pytest.approx(
        [expected[0], 0.0, expected[1]], rel=1e-12
    )


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_chunked_block_traces_take_one_batched_pass_per_chunk(device):
    theta = torch.ones(5, dtype=torch.float64, device=device)
    theta.requires_grad_()
    factors = torch.arange(6, dtype=torch.float64, device=device)
    seen = []

    def chunks():
        for start in (0, 3):
            chunk = theta[:3] ** 2 * factors[start : start + 3]
            chunk.register_hook(lambda grad: seen.append(grad.shape))
            yield 0, chunk
        yield 1, torch.ones(2, dtype=torch.float64, device=device)

    traces = chunked_block_traces(chunks(), 2, [theta])
    assert len(seen) == 2  # one pass per chunk, none for the constant
    assert traces.shape == (2,) and traces.device == theta.device
    if device != "meta":
        # d R / d theta_j = 2 theta_j f = 2 f: sum of 4 f^2 over f < 6
        assert traces.tolist() == pytest.approx([4.0 * 55.0, 0.0])


def test_chunks_are_checked_against_the_whole_residual():
    theta = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    whole = torch.tensor([3.0, -4.0, 5.0], dtype=torch.float64)
    tolerance = math.sqrt(torch.finfo(torch.float64).eps) * 4.0

    def traces(first, reference=(whole,)):
        chunk = theta[0] * first  # the first chunk, two entries
        return chunked_block_traces(
            [(0, chunk), (0, theta[1] * whole[2:])], 1, [theta], reference
        )

    leading = whole[:2]
    # within sqrt(eps) of the leading entries' largest magnitude (4): the
    # rounding of a different batch size, accepted
    near = leading + torch.tensor([0.5, -0.5]) * tolerance
    assert traces(near).item() == pytest.approx(25.0 + 25.0)
    for off in (2.0, -2.0):
        with pytest.raises(PointCouplingError, match="chunk of points"):
            traces(leading + torch.tensor([0.0, off]) * tolerance)
    # a chunk as long as its block was not split: nothing to compare
    chunked_block_traces([(0, theta[0] * 2 * whole)], 1, [theta], [whole])
    # non-finite values are left to the weights' guards, not called coupled
    nan = torch.tensor([float("nan"), 1.0], dtype=torch.float64)
    assert torch.isnan(traces(nan + leading)).item()
    # without a reference nothing is compared
    assert traces(leading + 1.0, reference=None).item() > 0.0


def _devices():
    # "meta" stands in for an accelerator where there is none: a device
    # other than the CPU, on which shapes, dtypes and autograd run but no
    # values are computed
    return ["cpu", "meta"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize(
    "chunk_size,passes", [(None, 5), (1, 5), (2, 3), (5, 1)]
)
def test_exact_block_traces_take_one_reverse_pass_per_chunk(
    device, chunk_size, passes
):
    # By default one reverse pass per entry (the faster choice on PINA's
    # derivative graphs); chunk_size > 1 batches the passes of a chunk, also
    # with a parameter the residual does not use. A chunk that silently
    # fell back to the loop would give the same traces at several times the
    # cost, so count the passes through the block.
    theta = torch.ones(5, dtype=torch.float64, device=device)
    theta.requires_grad_()
    unused = torch.ones(2, dtype=torch.float64, device=device)
    unused.requires_grad_()
    block = theta**2 * torch.arange(5, dtype=torch.float64, device=device)
    seen = []
    block.register_hook(lambda grad: seen.append(grad.shape))
    options = {} if chunk_size is None else {"chunk_size": chunk_size}
    traces = exact_block_traces([block], [theta, unused], **options)
    assert len(seen) == passes
    assert traces.device == theta.device
    if device != "meta":
        # d R_i / d theta_i = 2 i theta_i = 2 i: sum of 4 i^2 over i < 5
        assert traces.item() == pytest.approx(4.0 * 30.0, rel=1e-12)


def test_probe_and_scales_live_on_the_parameters_and_traces_device():
    theta = torch.zeros(7, dtype=torch.float64, device="meta")
    z = parameter_probe(theta)
    assert (z.shape, z.dtype, z.device) == (
        theta.shape,
        theta.dtype,
        theta.device,
    )
    traces = torch.ones(3, dtype=torch.float64, device="meta")
    sizes = torch.tensor([4, 1, 3])  # entry counts, host-side
    assert balanced_probe_scales(traces, sizes).device == traces.device


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_parameter_probe_draws_from_its_generator_only(dtype):
    theta = torch.zeros(6, dtype=dtype)
    torch.manual_seed(123)  # the global generator must play no part
    first = parameter_probe(theta, torch.Generator().manual_seed(5))
    torch.manual_seed(321)
    again = parameter_probe(theta, torch.Generator().manual_seed(5))
    assert torch.equal(first, again)
    assert first.dtype == dtype and first.shape == theta.shape
    # z ~ N(0, I_p): the generator's standard normal draws
    reference = torch.randn(
        6, generator=torch.Generator().manual_seed(5), dtype=dtype
    )
    assert torch.equal(first, reference)


def _quadratic_problem(theta):
    """``R_c(theta) = A_c theta + (theta . theta) c_c`` over the parameters
    ``a`` (2 entries) and ``b`` (3 entries), in a block of 3 entries and a
    2 x 2 block; with the hand-derived displacement quotients."""
    gen = torch.Generator().manual_seed(8)
    A = torch.randn(7, 5, generator=gen, dtype=torch.float64)
    c = torch.randn(7, generator=gen, dtype=torch.float64)
    seen = []

    def fn(params):
        flat = torch.cat([params["a"], params["b"]])
        seen.append(flat.detach().clone())
        r = A @ flat + flat.dot(flat) * c
        return [r[:3], r[3:].reshape(2, 2)]

    params = {"a": theta[:2].clone(), "b": theta[2:].clone()}

    def quotients(z, step, difference):
        # (R(theta + h z) - R(theta)) / h = A z + (2 theta.z + h z.z) c;
        # the central quotient's even terms cancel: A z + 2 (theta.z) c
        curvature = 2.0 * float(theta @ z)
        if difference == "forward":
            curvature += step * float(z @ z)
        moved = (A @ z + curvature * c).numpy()
        return [float((moved[:3] ** 2).sum()), float((moved[3:] ** 2).sum())]

    return fn, params, quotients, seen


@pytest.mark.parametrize("difference", [None, "forward", "central"])
def test_parameter_space_sketch_is_the_displacement_quotient(difference):
    theta = torch.tensor([0.5, -1.0, 0.25, 2.0, -0.75], dtype=torch.float64)
    fn, params, quotients, _ = _quadratic_problem(theta)
    options = {} if difference is None else {"difference": difference}
    torch.manual_seed(0)  # z must come from the generator, not from here
    traces = parameter_space_block_traces(
        fn, params, 0.5, generator=torch.Generator().manual_seed(3), **options
    )
    z = torch.randn(
        5, generator=torch.Generator().manual_seed(3), dtype=torch.float64
    )
    # the default difference is the forward one; a step of 0.5 makes its
    # O(h) bias (and any other power of h) plainly visible
    expected = quotients(z, 0.5, difference or "forward")
    assert traces.tolist() == pytest.approx(expected, rel=1e-10)
    if difference == "central":
        assert expected != pytest.approx(quotients(z, 0.5, "forward"))
    # R(theta) given instead of evaluated: the same quotient
    residuals = [r.detach() for r in fn(params)]
    again = parameter_space_block_traces(
        fn,
        params,
        0.5,
        generator=torch.Generator().manual_seed(3),
        residuals=residuals,
        **options,
    )
    assert again.tolist() == pytest.approx(expected, rel=1e-10)
    assert torch.equal(params["a"], theta[:2])  # untouched


@pytest.mark.parametrize(
    "difference,power", [("forward", 1 / 2), ("central", 1 / 3)]
)
def test_parameter_space_auto_step_is_relative_epsilon_over_root_p(
    difference, power
):
    # At theta = 0 the displaced parameters are exactly eps z, so the step
    # can be read off the residual function's arguments: ||theta|| < 1
    # counts as 1, E||z||^2 = p = 5, so eps = tau / sqrt(5) for every z.
    theta = torch.zeros(5, dtype=torch.float64)
    fn, params, quotients, seen = _quadratic_problem(theta)
    traces = parameter_space_block_traces(
        fn,
        params,
        difference=difference,
        generator=torch.Generator().manual_seed(3),
    )
    z = torch.randn(
        5, generator=torch.Generator().manual_seed(3), dtype=torch.float64
    )
    eps = torch.finfo(torch.float64).eps ** power / math.sqrt(5.0)
    # (abs=0: the displacements are ~1e-8, below approx's default abs)
    assert seen[0].tolist() == pytest.approx(
        (eps * z).tolist(), rel=1e-13, abs=0.0
    )
    if difference == "central":
        assert seen[1].tolist() == pytest.approx(
            (-eps * z).tolist(), rel=1e-13, abs=0.0
        )
    # the traces' sketch ||A_c z||^2 (theta = 0): exactly for the central
    # quotient of a quadratic, to within the forward quotient's relative bias
    # ~ eps (z.z) |c| / |A z|, about 1e-8 here
    assert traces.tolist() == pytest.approx(
        quotients(z, 0.0, "central"), rel=1e-6
    )


def test_variances_and_sketch_keep_the_kernels_precision_with_float32_scales():
    # Scales from a float32 run used on a float64 kernel: 1/3 is not exact
    # in float32, and squaring it or a ratio of it in float32 would lose 1e-8
    # relative; the float64 results must be exact to rounding.
    scales = torch.tensor([1.0 / 3.0, 1.0], dtype=torch.float32)
    third = float(scales[0])  # the float32 value, exactly, as a float
    kernel = torch.tensor(
        [[4.0, 1.0, 2.0], [1.0, 3.0, 0.5], [2.0, 0.5, 5.0]],
        dtype=torch.float64,
    )
    predictor, parameter = sketch_variances(kernel, [1, 2], scales)
    # F = [[16, 1 + 4], [5, 9 + 0.25 + 0.25 + 25]]:
    # F_cc + sum_d (s_d / s_c)^2 F_cd
    expected = [16.0 + 16.0 + 5.0 / third**2, 34.5 + third**2 * 5.0 + 34.5]
    assert predictor.tolist() == pytest.approx(expected, rel=1e-13)
    assert parameter.tolist() == pytest.approx([32.0, 69.0], rel=1e-13)
    # one block, scaled: u = g / s^2, the sketch (Kg u^T + u Kg^T) / 2
    g = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    kg = torch.tensor([3.0, 1.0, -1.0], dtype=torch.float64)
    sketch = symmetrised_kernel_sketch([g], [kg], scales[:1])
    u = [v / third**2 for v in g.tolist()]
    hand = [
        [(kg[i].item() * u[j] + u[i] * kg[j].item()) / 2 for j in range(3)]
        for i in range(3)
    ]
    for row, hand_row in zip(sketch.tolist(), hand):
        assert row == pytest.approx(hand_row, rel=1e-13)


def test_a_chunk_check_names_the_coupling_and_accepts_exact_zeros():
    theta = torch.tensor([1.0, 2.0], requires_grad=True)
    whole = torch.tensor([3.0, -4.0, 5.0])
    message = (
        "a residual evaluated on a chunk of points differs from the same "
        "points' residual in the whole batch"
    )
    with pytest.raises(PointCouplingError, match=message):
        chunked_block_traces(
            [(0, theta[0] * (whole[:2] + 1.0))], 1, [theta], [whole]
        )
    # a block that is zero everywhere: no tolerance at all, and equal
    zeros = torch.zeros(3)
    found = chunked_block_traces(
        [(0, theta[0] * zeros[:2]), (0, theta[1] * zeros[2:])],
        1,
        [theta],
        [zeros],
    )
    assert found.tolist() == [0.0]


def test_chunked_traces_of_blocks_without_chunks_or_parameters():
    theta = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    x = torch.tensor([3.0, 4.0], dtype=torch.float64)
    # no chunk at all: zeros, in the parameters' dtype
    none = chunked_block_traces(iter([]), 2, [theta])
    assert none.dtype == torch.float64 and none.tolist() == [0.0, 0.0]
    # a block's chunk that no parameter moves, after one that they do:
    # (1 + 9) + 0; the second block has no chunk: 0
    chunks = [(0, theta[0] + theta[1] * x[:1]), (0, torch.ones(1))]
    assert chunked_block_traces(chunks, 2, [theta]).tolist() == [10.0, 0.0]
