"""The band rule of pina_ntk.core.gradient_band against hand computations."""

import math

import pytest
import torch

from pina_ntk.core.gradient_band import (
    check_band,
    ConditionGradientTap,
    gradient_band_factors,
)


def test_factors_by_hand():
    # u = log(w ||g||) = log(1 * 4), log(1 * 1): mean log 2, so the factors
    # are 2 / 4 and 2 / 1
    factors = gradient_band_factors(
        torch.tensor([1.0, 1.0]), torch.tensor([16.0, 1.0]), 10.0
    )
    torch.testing.assert_close(factors, torch.tensor([0.5, 2.0]))
    # the band clamps each factor to [1/b, b]
    factors = gradient_band_factors(
        torch.tensor([1.0, 1.0]), torch.tensor([16.0, 1.0]), 1.5
    )
    torch.testing.assert_close(factors, torch.tensor([1 / 1.5, 1.5]))
    # weighted gradients already equal: no change
    factors = gradient_band_factors(
        torch.tensor([1.0, 2.0, 0.5]), torch.tensor([4.0, 1.0, 16.0]), 10.0
    )
    torch.testing.assert_close(factors, torch.ones(3))


def test_band_one_keeps_the_ntk_weights():
    weights = torch.tensor([0.8, 52.0, 3.0])
    squared = torch.tensor([1e-2, 3e-7, 5.0])
    factors = gradient_band_factors(weights, squared, 1.0)
    assert torch.equal(factors, torch.ones(3))


def test_wide_band_gives_the_self_adaptive_ratios():
    # PINA's SelfAdaptiveWeighting: w_c = sum_d ||g_d|| / ||g_c||; without a
    # band the factors turn any positive weights into these, up to one
    # common factor
    generator = torch.Generator().manual_seed(0)
    weights = torch.rand(4, generator=generator, dtype=torch.float64) * 100
    norms = torch.rand(4, generator=generator, dtype=torch.float64) + 1e-3
    banded = weights * gradient_band_factors(weights, norms**2, 1e12)
    self_adaptive = norms.sum() / norms
    ratio = banded / self_adaptive
    torch.testing.assert_close(ratio, ratio[0].expand(4))
    # and the common factor is the one that equalises the weighted gradient
    # norms at their geometric mean: w'_c ||g_c|| = (prod_d w_d ||g_d||)^(1/4)
    # (the ratio check above holds for any common factor, so it would not
    # see a mean taken over the wrong quantity)
    products = [w * n for w, n in zip(weights.tolist(), norms.tolist())]
    geometric = math.prod(products) ** (1 / len(products))
    torch.testing.assert_close(
        banded * norms, torch.full((4,), geometric, dtype=torch.float64)
    )


def test_zero_and_non_finite_gradients_keep_the_ntk_weight():
    # a loss driven to exactly zero has a zero gradient: no information, so
    # its factor is 1 and the others are balanced among themselves
    weights = torch.tensor([1.0, 1.0, 5.0, 2.0])
    squared = torch.tensor([16.0, 1.0, 0.0, float("nan")])
    factors = gradient_band_factors(weights, squared, 10.0)
    torch.testing.assert_close(factors, torch.tensor([0.5, 2.0, 1.0, 1.0]))
    # no usable gradient at all
    factors = gradient_band_factors(weights, torch.zeros(4), 10.0)
    assert torch.equal(factors, torch.ones(4))


def test_one_usable_gradient_is_its_own_mean():
    # one usable condition (u_0 = log(2 * 4)) next to a zero gradient: the
    # mean is over that one condition, so both factors are 1; a mean that
    # divided by two (or counted the zero gradient) would give the first
    # factor 8^(-1/2), inside the band
    factors = gradient_band_factors(
        torch.tensor([2.0, 3.0]), torch.tensor([16.0, 0.0]), 10.0
    )
    torch.testing.assert_close(factors, torch.ones(2))


def test_factors_stay_in_the_band_for_extreme_gradients():
    weights = torch.tensor([1e-6, 1.0, 1e6])
    squared = torch.tensor([1e-38, 1.0, 1e38])
    factors = gradient_band_factors(weights, squared, 4.0)
    # by hand: u = log(w) + log(||g||) = (-6 - 19, 0, 6 + 19) log(10), mean
    # 0, so phi = exp(clamp(-u, -log 4, log 4)) = (4, 1, 1/4): the extremes
    # meet the band's edges exactly and the middle condition is untouched
    torch.testing.assert_close(factors, torch.tensor([4.0, 1.0, 0.25]))


def tapped_losses(tap):
    """Condition losses built through the tap's views, as a training step
    would: ``a`` in two evaluations, ``b`` without ``theta``, ``c`` constant
    (no graph)."""
    first = tap.aliases("a")
    second = tap.aliases("a")
    only = tap.aliases("b")
    theta, other = first["theta"], first["other"]
    losses = {
        # L_a = (theta_0 + 2 theta_1)^2 + other^2 theta_0, over two calls
        "a": (theta[0] + 2 * theta[1]) ** 2
        + second["other"][0] ** 2 * second["theta"][0],
        # L_b = 2 other: gradient (0, 0; 2)
        "b": 2.0 * only["other"][0],
        "c": torch.tensor(0.5),
    }
    return losses


def test_tapped_gradients_by_hand():
    # at theta = (1, 2), other = 3: dL_a = (2*5 + 9, 2*5*2; 2*3*1)
    theta = torch.tensor([1.0, 2.0], requires_grad=True)
    other = torch.tensor([3.0], requires_grad=True)
    params = {"theta": theta, "other": other}
    tap = ConditionGradientTap(params)
    losses = tapped_losses(tap)
    # a backward pass through the views before watch_losses (the
    # weighting's own, inside the loss aggregation) is not summed
    torch.autograd.grad(losses["a"], [theta], retain_graph=True)
    tap.watch_losses(losses)
    # a weighted sum, scaled as a loss scaler would: the rows divide by
    # dLoss/dL_c, so neither the weights nor the scale remain
    weights = {"a": 0.25, "b": 3.0, "c": 7.0}
    total = 64.0 * sum(weights[c] * losses[c] for c in losses)
    total.backward()
    rows = tap.rows(["b", "a", "c"])
    expected = torch.tensor(
        [[0.0, 0.0, 2.0], [19.0, 20.0, 6.0], [0.0, 0.0, 0.0]]
    )
    torch.testing.assert_close(rows, expected)
    assert not rows.requires_grad
    # the parameters' own gradient is the training gradient, as without views
    torch.testing.assert_close(
        theta.grad, 64.0 * 0.25 * torch.tensor([19.0, 20.0])
    )
    torch.testing.assert_close(
        other.grad, 64.0 * torch.tensor([0.25 * 6.0 + 3.0 * 2.0])
    )


def test_tapped_gradients_take_the_first_parameters_dtype():
    first = torch.tensor([1.0, 2.0], requires_grad=True)
    second = torch.tensor([3.0], dtype=torch.float64, requires_grad=True)
    params = {"first": first, "second": second}
    tap = ConditionGradientTap(params)
    views = tap.aliases("a")
    loss = (views["first"] ** 2).sum() + views["second"][0].float()
    tap.watch_losses({"a": loss})
    (2.0 * loss).backward()
    rows = tap.rows(["a", "unseen"])
    assert rows.dtype == torch.float32
    expected = torch.tensor([[2.0, 4.0, 1.0], [0.0, 0.0, 0.0]])
    torch.testing.assert_close(rows, expected)


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_an_unreached_condition_gives_zeros_like_the_parameters(device):
    # a condition no evaluation reached: a row of zeros in the parameters'
    # dtype and on their device (``meta`` stands in for an accelerator: a
    # row made on the CPU would show), not the default dtype and the CPU
    like = dict(dtype=torch.float64, device=device, requires_grad=True)
    params = {"first": torch.zeros(2, **like), "second": torch.zeros(1, **like)}
    rows = ConditionGradientTap(params).rows(["unseen"])
    assert rows.shape == (1, 3)
    assert rows.dtype == torch.float64
    assert rows.device == params["first"].device
    if device == "cpu":
        assert rows.eq(0).all()


def test_an_overflowed_backward_pass_gives_non_finite_rows():
    # a loss scaler's overflow step: the gradients reaching the views are
    # not finite, and the rows must say so (they are then not averaged)
    theta = torch.tensor([1.0, 2.0], requires_grad=True)
    tap = ConditionGradientTap({"theta": theta})
    loss = (tap.aliases("a")["theta"] ** 2).sum()
    tap.watch_losses({"a": loss})
    (loss * torch.tensor(math.inf)).backward()
    assert not torch.isfinite(tap.rows(["a"])).all()


@pytest.mark.parametrize("band", [0.5, 0, -2.0, math.inf, "2", True])
def test_band_argument(band):
    # the message names the argument first, whichever check refuses it
    with pytest.raises(ValueError, match="^gradient_band must be"):
        check_band(band)


def test_band_argument_accepts_numbers_and_none():
    assert check_band(None) is None
    assert check_band(1) == 1.0
    assert check_band(4.0) == 4.0
