"""The ramp of the weights (issue #76): from a uniform kernel diagonal's
weights to the NTK weights, geometrically, over ``ramp_steps`` steps."""

import math

import pytest
import torch

from pina_ntk.core.weights import ramp_fraction, ramped_weights


@pytest.mark.parametrize(
    "step, steps, expected",
    [
        (0, 300, 0.0),
        (30, 300, 0.1),
        (299, 300, 299 / 300),
        (300, 300, 1.0),
        (10_000, 300, 1.0),
        (0, 0, 1.0),
        (7, 0, 1.0),
    ],
)
def test_ramp_fraction(step, steps, expected):
    assert ramp_fraction(step, steps) == pytest.approx(expected)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_no_ramp_leaves_the_weights_bit_for_bit(reduction):
    """At the ramp's end the weights are the NTK weights themselves, not
    ``u_c (w_c / u_c)``, which differs in the last bit with ``sum``'s
    ``u_c = 1 / n_c`` (here for ``n_c = 3`` and ``7``)."""
    weights = torch.tensor([3.0, 0.2, 1.5])
    sizes = torch.tensor([10, 3, 7])
    out = ramped_weights(weights, sizes, reduction, 1.0)
    assert torch.equal(out, weights)


def test_the_ramp_computes_in_the_weights_precision():
    """Integer sizes and float64 weights: the uniform weights ``1 / n_c``
    are formed in float64 too (in float32, ``1/3`` is off by ``1e-8``)."""
    weights = torch.tensor([0.3, 0.02, 1.5], dtype=torch.float64)
    sizes = torch.tensor([10, 3, 7])
    out = ramped_weights(weights, sizes, "sum", 0.5)
    uniform = 1 / torch.tensor([10.0, 3.0, 7.0], dtype=torch.float64)
    expected = uniform * (weights / uniform).sqrt()
    assert out.dtype == torch.float64
    assert torch.allclose(out, expected, rtol=1e-14, atol=0)


def test_the_start_is_no_weighting_with_the_mean_reduction():
    weights = torch.tensor([50.0, 0.1])
    out = ramped_weights(weights, torch.tensor([720, 80]), "mean", 0.0)
    assert torch.allclose(out, torch.ones(2))


def test_the_start_weighs_every_entry_alike_with_the_sum_reduction():
    """``sum``: a uniform diagonal's weight of ``c`` is ``1 / n_c``, the same
    effective weight for every entry (not ``1``)."""
    sizes = torch.tensor([720.0, 80.0])
    out = ramped_weights(torch.tensor([0.05, 0.01]), sizes, "sum", 0.0)
    assert torch.allclose(out, 1 / sizes)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_halfway_the_excess_over_uniform_is_a_square_root(reduction):
    """With ``u_c`` a uniform diagonal's weight (``1``; ``1 / n_c`` with
    ``sum``), halfway each ``w_c / u_c`` is the square root of the NTK
    weight's, and so is the ratio of two conditions'; a quarter of the way,
    the fourth root."""
    sizes = torch.tensor([720.0, 80.0, 40.0], dtype=torch.float64)
    uniform = torch.ones(3, dtype=torch.float64)
    if reduction == "sum":
        uniform = 1 / sizes
    excess = torch.tensor([40.0, 0.1, 2.0], dtype=torch.float64)
    weights = uniform * excess
    for fraction in (0.5, 0.25):
        out = ramped_weights(weights, sizes, reduction, fraction) / uniform
        assert torch.allclose(out, excess**fraction)
        for i, j in ((0, 1), (0, 2), (1, 2)):
            expected = (excess[i] / excess[j]).item() ** fraction
            assert (out[i] / out[j]).item() == pytest.approx(expected)


def test_a_value_by_hand():
    """``mean``: ``1 * (4 / 1)^0.5 = 2`` and ``(0.25)^0.5 = 0.5``; a
    weight of 1 stays 1 at any fraction."""
    out = ramped_weights(
        torch.tensor([4.0, 0.25, 1.0]), torch.tensor([3, 1, 5]), "mean", 0.5
    )
    assert torch.allclose(out, torch.tensor([2.0, 0.5, 1.0]))
    assert math.isclose(float(out[0] * out[1]), 1.0, rel_tol=1e-6)
