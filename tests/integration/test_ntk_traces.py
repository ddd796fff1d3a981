"""Exact traces, predictor sketch and parameter-space sketch of the NTK of
PINA solvers' residuals (``ntk_traces`` and the estimators on replayed
residuals); the estimators on plain tensors: ``tests/core/test_estimators.py``.
"""

import math

import numpy as np
import pytest
import torch

from pina_ntk import ntk_traces
from pina_ntk.integration.diagnostics import condition_calls
from pina_ntk.core.estimators import (
    balanced_probe_scales,
    exact_block_traces,
    flatten_parameters,
    kernel_probe_product,
    parameter_space_block_traces,
    parameter_probe,
    predictor_block_traces,
    sample_probe,
)
from pina_ntk.integration.recording import replay_residual_fn
from pina_ntk.integration.pina_adapter import trainable_parameters

from helpers import make_solver, make_trainer, ntk_callback
from reference import (
    block_traces,
    hutchinson_variances,
    jacobian_blocks,
    kernel,
)


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
    callback = ntk_callback(trainer)
    for name, value in expected.items():
        assert callback.statistics.traces[name] == pytest.approx(
            value, rel=1e-5
        )


def test_derivative_only_condition_ignores_output_bias(float64):
    # The Poisson interior residual does not depend on the output bias; the
    # exact traces must treat it as zero rather than fail.
    solver = ready_solver("poisson")
    names, fn, params = residual_setup(solver)
    residuals = fn(params)
    bias = solver.model.model[-1].bias
    interior = residuals[names.index("D")]
    # the case in question: the bias is not in the interior block's graph
    assert torch.autograd.grad(
        interior.sum(), bias, retain_graph=True, allow_unused=True
    ) == (None,)
    expected = block_traces(jacobian_blocks(solver))  # unused: zero rows
    for chunk_size in (1, 7):  # the loop and the batched passes
        traces = exact_block_traces(
            residuals, list(params.values()), chunk_size
        )
        for name, trace in zip(names, traces.tolist()):
            # float64 on both sides: only summation order differs
            assert trace == pytest.approx(expected[name], rel=1e-12)


# --------------------------------------------------------------- sketches
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


@pytest.mark.slow
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
        return ntk_callback(trainer).statistics.weights

    whole, chunked = weights(None), weights(7)
    for name in whole:
        assert chunked[name] == pytest.approx(whole[name], rel=1e-3)


def test_exact_traces_leave_torchs_global_generator_alone():
    # only the sketch draws a probe seed from the global generator
    solver = make_solver("poisson")
    make_trainer(solver, steps=1, ntk=False)
    state = torch.get_rng_state()
    ntk_traces(solver, method="exact")
    assert torch.equal(state, torch.get_rng_state())
    ntk_traces(solver, method="sketch", samples=2)
    assert not torch.equal(state, torch.get_rng_state())
