"""The spaced-update safeguard (Corollary, eq. update-rule) on its own
(``pina_ntk.core.safeguard``); in training runs:
``tests/integration/test_safeguard_in_training.py``."""

import pytest
import torch

from pina_ntk.core.safeguard import SpacedUpdateSafeguard, weight_change_cost


def test_cost_is_largest_weight_change_times_residual_norm():
    cost = weight_change_cost(
        torch.tensor([1.0, 3.0]), torch.tensor([2.0, 1.5]), torch.tensor(4.0)
    )
    assert cost == pytest.approx(1.5 * 4.0)


def test_proposal_over_budget_is_rejected_and_sum_unchanged():
    guard = SpacedUpdateSafeguard(budget=lambda t: 1.0)
    guard.start(torch.tensor([1.0, 1.0]), torch.tensor(1.0))
    accept, _ = guard.review(
        torch.tensor([1.5, 1.0]), torch.ones(2), torch.tensor(1.0), t=0
    )
    assert bool(accept) and guard.total.item() == pytest.approx(0.5)
    accept, _ = guard.review(
        torch.tensor([2.0, 1.0]), torch.ones(2), torch.tensor(1.0), t=1
    )  # 0.5 + 1.0 > 1.0
    assert not bool(accept)
    assert guard.total.item() == pytest.approx(0.5)
    assert (guard.accepted.item(), guard.rejected.item()) == (1, 1)


def test_default_budget_is_scale_aware():
    guard = SpacedUpdateSafeguard()
    guard.start(torch.tensor([0.5, 2.0]), torch.tensor(3.0))
    assert float(guard.h(0)) == pytest.approx(6.0)
    assert float(guard.h(3)) == pytest.approx(12.0)


def test_decreasing_budget_is_rejected():
    values = iter([2.0, 1.0])
    guard = SpacedUpdateSafeguard(budget=lambda t: next(values))
    guard.start(torch.ones(1), torch.tensor(1.0))
    guard.review(torch.ones(1), torch.ones(1), torch.tensor(1.0), 0)
    with pytest.raises(ValueError, match="budget"):
        guard.review(torch.ones(1), torch.ones(1), torch.tensor(1.0), 1)


def test_budget_must_be_callable():
    with pytest.raises(ValueError, match="budget"):
        SpacedUpdateSafeguard(budget=3.0)
