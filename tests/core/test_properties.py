"""Property-based tests of the weight formula and the safeguard."""

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pina_ntk.core.moving_average import rate_per_sample
from pina_ntk.core.safeguard import SpacedUpdateSafeguard
from pina_ntk.core.weights import entry_weights, guarded_weights, ntk_weights

BOUNDS = (1e-6, 1e6)

positive = st.floats(1e-6, 1e6, allow_nan=False, allow_infinity=False)
blocks = st.integers(1, 6).flatmap(
    lambda c: st.tuples(
        st.lists(positive, min_size=c, max_size=c),
        st.lists(st.integers(1, 500), min_size=c, max_size=c),
    )
)


def as_tensors(traces, sizes):
    return (
        torch.tensor(traces, dtype=torch.float64),
        torch.tensor(sizes, dtype=torch.float64),
    )


@settings(max_examples=200, deadline=None)
@given(blocks, st.sampled_from(["mean", "sum"]))
def test_weights_positive_finite_and_within_bounds(data, reduction):
    traces, sizes = as_tensors(*data)
    weights, ok = guarded_weights(
        traces, sizes, torch.ones_like(traces), reduction, BOUNDS
    )
    assert bool(ok)
    assert torch.isfinite(weights).all()
    assert (weights >= BOUNDS[0]).all() and (weights <= BOUNDS[1]).all()


@settings(max_examples=200, deadline=None)
@given(blocks, st.floats(1e-4, 1e4), st.sampled_from(["mean", "sum"]))
def test_weights_invariant_to_scaling_all_residuals(data, scale, reduction):
    traces, sizes = as_tensors(*data)
    # residuals scaled by s scale every block trace by s^2
    a = ntk_weights(traces, sizes, reduction)
    b = ntk_weights(traces * scale**2, sizes, reduction)
    assert torch.allclose(a, b, rtol=1e-9)


@settings(max_examples=200, deadline=None)
@given(blocks, st.randoms(use_true_random=False))
def test_permuting_conditions_permutes_weights(data, rng):
    traces, sizes = as_tensors(*data)
    order = list(range(len(traces)))
    rng.shuffle(order)
    perm = torch.tensor(order)
    a = ntk_weights(traces, sizes)[perm]
    b = ntk_weights(traces[perm], sizes[perm])
    assert torch.allclose(a, b, rtol=1e-12)


@settings(max_examples=200, deadline=None)
@given(blocks)
def test_per_entry_weights_are_the_papers_lambda_over_n(data):
    traces, sizes = as_tensors(*data)
    lam = traces.sum() / traces
    for reduction in ("mean", "sum"):
        w = entry_weights(
            ntk_weights(traces, sizes, reduction), sizes, reduction
        )
        assert torch.allclose(w, lam / sizes.sum(), rtol=1e-9)


steps = st.lists(
    st.tuples(
        st.lists(st.floats(0.0, 10.0), min_size=3, max_size=3),
        st.floats(0.0, 100.0),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(steps, st.floats(0.0, 50.0), st.floats(0.1, 1.0))
def test_safeguard_sum_never_exceeds_budget(sequence, scale, power):
    h = lambda t: scale * (1.0 + t) ** (power * 0.99)  # noqa: E731
    guard = SpacedUpdateSafeguard(budget=h)
    current = torch.ones(3, dtype=torch.float64)
    guard.start(current, torch.tensor(1.0, dtype=torch.float64))
    for t, (proposal, residual_sq) in enumerate(sequence):
        proposed = torch.tensor(proposal, dtype=torch.float64)
        accept, _ = guard.review(
            proposed, current, torch.tensor(residual_sq, dtype=torch.float64), t
        )
        if bool(accept):
            current = proposed
        assert guard.total.item() <= h(t) + 1e-9 * max(1.0, h(t))
    assert guard.accepted.item() + guard.rejected.item() == len(sequence)
    assert math.isfinite(guard.total.item())


@settings(max_examples=50, deadline=None)
@given(
    alpha=st.floats(1e-9, 1.0),
    every=st.integers(1, 10_000),
)
def test_rate_per_sample_spans_the_same_steps(alpha, every):
    # k per-step fold-ins of one value leave (1 - alpha)^k of the old
    # buffer: the same as one fold-in at the rate per sample
    rate = rate_per_sample(alpha, every)
    assert 0.0 < rate <= 1.0
    assert math.isclose(
        1.0 - rate, (1.0 - alpha) ** every, rel_tol=1e-9, abs_tol=1e-15
    )
    assert rate >= alpha  # a sample every k steps weighs at least one step's
    if every == 1:
        assert rate == alpha
