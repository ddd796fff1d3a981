"""Exact traces, predictor sketch and parameter-space sketch of the NTK."""

import math

import numpy as np
import pytest
import torch

from pina_ntk import ntk_traces
from pina_ntk.integration.diagnostics import condition_calls
from pina_ntk.core.estimators import (
    auto_step_size,
    balanced_probe_scales,
    displace,
    exact_block_traces,
    flatten_parameters,
    kernel_probe_product,
    parameter_space_block_traces,
    parameter_probe,
    predictor_block_traces,
    sample_probe,
    sketch_variances,
    symmetrised_kernel_sketch,
)
from pina_ntk.integration.recording import replay_residual_fn
from pina_ntk.integration.pina_adapter import trainable_parameters
from pina_ntk.core.weights import ntk_weights

from conftest import make_solver, make_trainer
from reference import block_traces, jacobian_blocks, kernel


@pytest.fixture
def float64():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def ready_solver(kind, n=12, width=16, seed=0, weighting=None):
    """A solver whose conditions hold their points (Trainer created)."""
    solver = make_solver(kind, weighting=weighting, n=n, width=width, seed=seed)
    make_trainer(solver, steps=1, ntk=False)
    return solver


def residual_setup(solver):
    calls = condition_calls(solver)
    names = [name for name, _, _ in calls]
    fn = replay_residual_fn(solver, calls, names)
    params = trainable_parameters(solver)
    return names, fn, params


def fitted_slope(x, y):
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


# ------------------------------------------------------------------ exact
@pytest.mark.parametrize("kind", ["poisson", "wave", "supervised"])
def test_exact_traces_match_independent_loop(kind):
    solver = ready_solver(kind)
    expected = block_traces(jacobian_blocks(solver))
    for chunk_size in (1, 7):
        got = ntk_traces(solver, method="exact", chunk_size=chunk_size)
        assert set(got) == set(expected)
        for name, value in expected.items():
            assert float(got[name]) == pytest.approx(value, rel=1e-6)


def test_wave_initial_condition_counts_both_columns():
    solver = ready_solver("wave")
    blocks = jacobian_blocks(solver)
    # AcousticWaveProblem lumps the initial value and velocity in one
    # two-column SystemEquation: every point contributes two entries.
    n_points = len(solver.problem.conditions["t0"].input)
    assert blocks["t0"].shape[0] == 2 * n_points


def test_exact_traces_inside_training_step_are_at_theta_t():
    from pina_ntk import NTKWeighting

    solver = ready_solver("poisson", weighting=NTKWeighting(safeguard=None))
    expected = block_traces(jacobian_blocks(solver))  # at theta_0
    trainer = make_trainer(solver, steps=1)
    trainer.train()
    callback = trainer.callbacks[-1]
    for name, value in expected.items():
        assert callback.traces[name] == pytest.approx(value, rel=1e-5)


def test_unused_and_frozen_parameters_contribute_zero():
    theta = torch.tensor([1.0, 2.0], requires_grad=True)
    unused = torch.tensor([5.0], requires_grad=True)
    frozen = torch.tensor([3.0])  # requires_grad=False: not a kernel parameter
    blocks = [theta * torch.tensor([3.0, 4.0]) * frozen, theta.sum()[None]]
    traces = exact_block_traces(blocks, [theta, unused])
    assert torch.allclose(traces, torch.tensor([9.0 * 25.0, 2.0]))
    constant = [torch.ones(3)]  # depends on no parameter at all
    assert exact_block_traces(constant, [theta]).item() == 0.0


def test_derivative_only_condition_ignores_output_bias(float64):
    # The Poisson interior residual does not depend on the output bias; the
    # exact traces must treat it as zero rather than fail.
    solver = ready_solver("poisson")
    names, fn, params = residual_setup(solver)
    residuals = fn(params)
    traces = exact_block_traces(residuals, list(params.values()))
    assert torch.isfinite(traces).all() and (traces > 0).all()


# --------------------------------------------------------------- sketches
def hutchinson_variances(K, slices, probe, scales=None):
    """Exact variance of ``g_c^T (K g)_c`` for each block; with ``scales``
    (``{name: s_c}``) of ``v_c^T (K v)_c / s_c^2``, ``v = S g``."""
    diag = np.ones(K.shape[0])
    for name, sl in slices.items():
        diag[sl] = 1.0 if scales is None else scales[name]
    out = {}
    for name, sl in slices.items():
        proj = np.zeros_like(K)
        proj[sl, :] = (diag[:, None] * K * diag[None, :])[sl, :] / diag[sl][
            0
        ] ** 2
        sym = 0.5 * (proj + proj.T)
        frob = float((sym**2).sum())
        if probe == "gaussian":
            out[name] = 2.0 * frob
        else:
            out[name] = 2.0 * (frob - float((np.diag(sym) ** 2).sum()))
    return out


@pytest.mark.parametrize(
    "estimator,probe,balanced",
    [
        ("predictor", "gaussian", False),
        ("predictor", "rademacher", False),
        ("predictor", "gaussian", True),
        ("parameter", None, False),
    ],
)
def test_sketch_mean_matches_exact_within_its_standard_error(
    float64, estimator, probe, balanced
):
    solver = ready_solver("wave", n=10, width=12)
    blocks = jacobian_blocks(solver)
    K, slices = kernel(blocks)
    exact = block_traces(blocks)
    if balanced:
        # each sample's scales come from the mean of the earlier ones (none
        # for the first); on this problem they stay near the exact scales,
        # so bound every sample's variance by the larger of the plain and
        # the exactly balanced one
        sizes = torch.tensor([s.stop - s.start for s in slices.values()])
        scales = balanced_probe_scales(
            torch.tensor(list(exact.values())), sizes
        )
        plain = hutchinson_variances(K, slices, probe)
        even = hutchinson_variances(
            K, slices, probe, dict(zip(slices, scales.tolist()))
        )
        variances = {n: max(plain[n], even[n]) for n in slices}
    elif estimator == "predictor":
        variances = hutchinson_variances(K, slices, probe)
    else:  # ||J_c z||^2 with z ~ N(0, I): variance 2 ||K_cc||_F^2
        variances = {
            n: 2.0 * float((K[s, s] ** 2).sum()) for n, s in slices.items()
        }
    samples = 400
    got = ntk_traces(
        solver,
        method="sketch",
        samples=samples,
        estimator=estimator,
        probe=probe or "gaussian",
        balanced_probe=balanced,
        seed=1234,
    )
    for name, value in exact.items():
        standard_error = math.sqrt(variances[name] / samples)
        assert standard_error < 0.25 * value  # the check is not vacuous
        assert (
            abs(float(got[name]) - value) <= 4.0 * standard_error + 1e-8 * value
        )


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


@pytest.mark.parametrize("difference,order", [("forward", 1), ("central", 2)])
def test_discretisation_error_order(float64, difference, order):
    solver = ready_solver("wave", n=8, width=12)
    names, fn, params = residual_setup(solver)
    jac = np.concatenate(list(jacobian_blocks(solver).values()))
    residuals = fn(params)
    gen = torch.Generator().manual_seed(7)
    probes = [sample_probe(residuals, generator=gen) for _ in range(4)]
    theta_norm = math.sqrt(
        sum(float(p.detach().pow(2).sum()) for p in params.values())
    )
    v_norm = float(np.linalg.norm(jac.T @ torch.cat(probes[0]).numpy()))
    base = theta_norm / v_norm
    steps = [base * s for s in (3e-2, 1e-2, 3e-3, 1e-3)]
    errors = []
    for dt in steps:
        err = 0.0
        for g in probes:
            kg = kernel_probe_product(fn, params, g, dt, difference, residuals)
            g_flat = torch.cat(g).numpy()
            exact = jac @ (jac.T @ g_flat)
            err += float(np.abs(torch.cat(kg).detach().numpy() - exact).sum())
        errors.append(err)
    slope = fitted_slope(steps, errors)
    assert order - 0.2 <= slope <= order + 0.2


@pytest.mark.parametrize("difference,order", [("forward", 1), ("central", 2)])
def test_parameter_space_discretisation_error_order(float64, difference, order):
    solver = ready_solver("poisson", n=8, width=12)
    names, fn, params = residual_setup(solver)
    jac = jacobian_blocks(solver)
    residuals = fn(params)
    errors, steps = [], [3e-2, 1e-2, 3e-3, 1e-3]
    for eps in steps:
        gen = torch.Generator().manual_seed(3)  # same z for every eps
        traces = parameter_space_block_traces(
            fn, params, eps, difference, gen, residuals
        )
        gen = torch.Generator().manual_seed(3)
        z = parameter_probe(flatten_parameters(params.values()), gen).numpy()
        exact = [float(((rows @ z) ** 2).sum()) for rows in jac.values()]
        errors.append(float(np.abs(traces.numpy() - exact).sum()))
    slope = fitted_slope(steps, errors)
    assert order - 0.25 <= slope <= order + 0.25


def test_monte_carlo_error_decays_like_one_over_n(float64):
    solver = ready_solver("wave", n=8, width=12)
    names, fn, params = residual_setup(solver)
    exact = sum(block_traces(jacobian_blocks(solver)).values())
    residuals = fn(params)
    gen = torch.Generator().manual_seed(11)
    repetitions, largest = 40, 32
    samples = []
    for _ in range(repetitions * largest):
        g = sample_probe(residuals, generator=gen)
        kg = kernel_probe_product(fn, params, g, "auto", "forward", residuals)
        samples.append(float(predictor_block_traces(g, kg).sum()))
    samples = np.array(samples)
    sizes = [1, 2, 4, 8, 16, 32]
    mse = []
    for n in sizes:
        means = samples[: repetitions * n].reshape(repetitions, n).mean(axis=1)
        mse.append(float(((means - exact) ** 2).mean()))
    slope = fitted_slope(sizes, mse)
    assert -1.25 <= slope <= -0.75


def test_predictor_never_modifies_parameters_or_their_grads():
    solver = ready_solver("poisson")
    names, fn, params = residual_setup(solver)
    before = {k: v.detach().clone() for k, v in params.items()}
    residuals = fn(params)
    g = sample_probe(residuals, generator=torch.Generator().manual_seed(0))
    kernel_probe_product(fn, params, g, "auto", "central", residuals)
    parameter_space_block_traces(fn, params, residuals=residuals)
    for k, v in params.items():
        assert torch.equal(v, before[k])
        assert v.grad is None
    # the training graph is still intact: a backward pass works
    sum(r.pow(2).sum() for r in residuals).backward()


def test_zero_residual_entries_are_harmless():
    theta = torch.tensor([0.0, 1.0], requires_grad=True)
    fn = lambda p: [p["theta"] * torch.tensor([1.0, 0.0])]  # noqa: E731
    params = {"theta": theta}
    g = [torch.tensor([1.0, -1.0])]
    kg = kernel_probe_product(fn, params, g, step_size=0.5)
    assert torch.allclose(kg[0], torch.tensor([1.0, 0.0]))


@pytest.mark.parametrize("kind", ["wave", "supervised"])
def test_chunked_replay_gives_the_same_values_without_graph(kind):
    solver = ready_solver(kind, n=13)
    calls = condition_calls(solver)
    names = [name for name, _, _ in calls]
    params = trainable_parameters(solver)
    whole = replay_residual_fn(solver, calls, names)(params)
    chunked = replay_residual_fn(solver, calls, names, chunk_size=4)(params)
    for a, b in zip(whole, chunked):
        assert b.grad_fn is None and not b.requires_grad
        assert a.shape == b.shape
        assert torch.allclose(a.detach(), b, rtol=1e-5, atol=1e-6)


def test_chunk_size_does_not_change_the_sketch():
    def weights(chunk):
        from pina_ntk import SketchNTKWeighting

        solver = make_solver(
            "wave",
            n=20,
            weighting=SketchNTKWeighting(
                warmup_samples=3, seed=1, evaluation_chunk_size=chunk
            ),
        )
        trainer = make_trainer(solver, steps=3)
        trainer.train()
        return trainer.callbacks[-1].weights

    whole, chunked = weights(None), weights(7)
    for name in whole:
        assert chunked[name] == pytest.approx(whole[name], rel=1e-3)


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


def test_exact_traces_leave_torchs_global_generator_alone():
    # only the sketch draws a probe seed from the global generator
    solver = make_solver("poisson")
    make_trainer(solver, steps=1, ntk=False)
    state = torch.get_rng_state()
    ntk_traces(solver, method="exact")
    assert torch.equal(state, torch.get_rng_state())
    ntk_traces(solver, method="sketch", samples=2)
    assert not torch.equal(state, torch.get_rng_state())
