"""The spaced-update safeguard (Corollary, eq. update-rule) on its own
(``pina_ntk.core.safeguard``); in training runs:
``tests/integration/test_safeguard_in_training.py``."""

import math
import re

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


def test_proposal_landing_exactly_on_the_budget_is_accepted():
    # the rule is S(t) + cost <= h(t): equality is allowed (binary fractions,
    # so the sums are exact)
    guard = SpacedUpdateSafeguard(budget=lambda t: 1.0)
    guard.start(torch.ones(2), torch.tensor(1.0))
    for t in range(2):
        accept, cost = guard.review(
            torch.tensor([1.0, 1.5]), torch.ones(2), torch.tensor(1.0), t
        )
        assert bool(accept) and cost.item() == 0.5
    assert guard.total.item() == 1.0


@pytest.mark.parametrize("change", [0.0, 0.5, -0.25])
def test_rejected_proposal_leaves_the_sum_unchanged(change):
    # a sum already over the budget (a checkpoint resumed with a smaller
    # budget): every proposal is rejected, even one that changes nothing or
    # lowers the weights, and the sum stays as it was
    guard = SpacedUpdateSafeguard()
    guard.load_state_dict(
        {
            "total": torch.tensor(2.0),
            "scale": torch.tensor(1.0),
            "accepted": torch.tensor(0),
            "rejected": torch.tensor(0),
            "last_h": -math.inf,
        }
    )
    proposed = torch.full((2,), 1.0 + change)
    accept, _ = guard.review(proposed, torch.ones(2), torch.tensor(1.0), 0)
    assert not bool(accept) and guard.total.item() == 2.0


@pytest.mark.parametrize("residual_sq_norm", [math.inf, math.nan])
def test_a_rejected_non_finite_cost_keeps_the_sum_usable(residual_sq_norm):
    # an overflowed residual norm makes the cost infinite (or NaN): the
    # proposal is rejected, the sum stays 0, and a later small proposal is
    # still accepted (a NaN sum would reject every proposal from then on)
    guard = SpacedUpdateSafeguard(budget=lambda t: 1.0)
    guard.start(torch.ones(1), torch.tensor(1.0))
    accept, _ = guard.review(
        torch.tensor([2.0]), torch.ones(1), torch.tensor(residual_sq_norm), 0
    )
    assert not bool(accept) and guard.total.item() == 0.0
    accept, cost = guard.review(
        torch.tensor([1.5]), torch.ones(1), torch.tensor(1.0), 1
    )
    assert bool(accept) and guard.total.item() == cost.item() == 0.5


def test_budget_is_called_with_the_step_index():
    steps = []

    def budget(t):
        steps.append(t)
        return 0.25 * (1 + t)

    guard = SpacedUpdateSafeguard(budget=budget)
    guard.start(torch.ones(1), torch.tensor(1.0))
    decisions = [
        bool(guard.review(torch.tensor([1.5]), torch.ones(1), 1.0, t)[0])
        for t in (0, 1, 2, 3)
    ]
    assert steps == [0, 1, 2, 3]
    # h = 0.25, 0.5, 0.75, 1.0 against S + 0.5: accepted at t = 1 and 3
    assert decisions == [False, True, False, True]


def test_counters_and_sum_over_several_reviews():
    guard = SpacedUpdateSafeguard(budget=lambda t: 2.0)
    guard.start(torch.ones(2, dtype=torch.float64), torch.tensor(1.0))
    # the running sum is kept in the weights' dtype, the counters as integers
    assert guard.total.dtype == torch.float64 and guard.total.item() == 0.0
    assert guard.accepted.dtype == torch.long == guard.rejected.dtype
    changes = [0.5, 0.75, 1.0, -0.25, 0.5]  # the third is over the budget
    for t, change in enumerate(changes):
        # every weight moves by the change, so a negative change lowers S
        proposed = torch.full((2,), 1.0 + change, dtype=torch.float64)
        guard.review(proposed, torch.ones(2), torch.tensor(1.0), t)
    assert guard.total.item() == 0.5 + 0.75 - 0.25 + 0.5
    assert guard.accepted.dtype == torch.long == guard.rejected.dtype
    assert (guard.accepted.item(), guard.rejected.item()) == (4, 1)


def test_state_lives_on_the_weights_device():
    # "meta" stands in for an accelerator (it needs no hardware): the sum and
    # the counters must not be created on the CPU
    guard = SpacedUpdateSafeguard(budget=lambda t: 1.0)
    guard.start(torch.ones(2, device="meta"), torch.ones((), device="meta"))
    for value in (guard.total, guard.accepted, guard.rejected, guard.scale):
        assert value.device.type == "meta"


@pytest.mark.parametrize(
    "values,message",
    [
        ([2.0, 1.0], "got h(1) = 1.0 after 2.0"),
        ([2.0, math.nan], "got h(1) = nan after 2.0"),
        ([math.inf], "got h(0) = inf after -inf"),
    ],
)
def test_decreasing_or_non_finite_budget_is_rejected(values, message):
    values = iter(values)
    guard = SpacedUpdateSafeguard(budget=lambda t: next(values))
    guard.start(torch.ones(1), torch.tensor(1.0))
    expected = "^budget must be a finite, non-decreasing function of t; "
    with pytest.raises(ValueError, match=expected + re.escape(message)):
        for t in range(2):
            guard.review(torch.ones(1), torch.ones(1), torch.tensor(1.0), t)


def test_budget_must_be_callable():
    with pytest.raises(
        ValueError,
        match=r"^budget must be a callable h\(t\) -> float or None, got float",
    ):
        SpacedUpdateSafeguard(budget=3.0)


def test_reset_forgets_everything():
    guard = SpacedUpdateSafeguard(budget=lambda t: 5.0)
    guard.start(torch.ones(2), torch.tensor(3.0))
    guard.review(torch.full((2,), 2.0), torch.ones(2), torch.tensor(1.0), 0)
    guard.reset()
    assert guard.state_dict() == {
        "total": None,
        "scale": None,
        "accepted": None,
        "rejected": None,
        "last_h": -math.inf,
    }
    # a budget below the forgotten h(0) = 5 is fine again
    guard.budget = lambda t: 1.0
    guard.start(torch.ones(2), torch.tensor(3.0))
    guard.review(torch.ones(2), torch.ones(2), torch.tensor(1.0), 0)


def test_state_dict_round_trip_restores_every_field():
    state = {
        "total": torch.tensor(0.75),
        "scale": torch.tensor(2.0),
        "accepted": torch.tensor(3),
        "rejected": torch.tensor(1),
        "last_h": 1.5,
    }
    guard = SpacedUpdateSafeguard()
    guard.load_state_dict(dict(state))
    saved = guard.state_dict()
    assert set(saved) == set(state)
    for key, value in state.items():
        assert saved[key] is value, key
    # each field acts: the default budget uses the scale, h(3) = 2 * 2 = 4,
    # and the sum, 0.75 + 3.25 = 4 <= 4 but 0.75 + 3.5 > 4
    proposed = torch.tensor([1.0, 4.25])
    accept, _ = guard.review(proposed, torch.ones(2), torch.tensor(1.0), 3)
    assert bool(accept) and guard.total.item() == 4.0
    assert (guard.accepted.item(), guard.rejected.item()) == (4, 1)
    guard.load_state_dict(dict(state))
    accept, _ = guard.review(proposed + 0.25, torch.ones(2), 1.0, 3)
    assert not bool(accept) and guard.total.item() == 0.75
    assert (guard.accepted.item(), guard.rejected.item()) == (3, 2)
    # and the last budget value: a user budget below it is refused
    guard = SpacedUpdateSafeguard(budget=lambda t: 1.0)
    guard.load_state_dict(dict(state))
    with pytest.raises(ValueError, match="^budget must be a finite"):
        guard.h(4)


def test_restored_safeguard_takes_the_same_decisions():
    generator = torch.Generator().manual_seed(0)
    steps = [
        (
            torch.rand(3, generator=generator) * 4,
            4 * torch.rand((), generator=generator),
        )
        for _ in range(12)
    ]

    def run(guard, start, stop):
        current = torch.ones(3)
        decisions = []
        for t in range(start, stop):
            proposed, residual = steps[t]
            accept, _ = guard.review(proposed, current, residual, t)
            decisions.append(bool(accept))
        return decisions

    original = SpacedUpdateSafeguard()
    original.start(torch.tensor([0.5, 1.0, 2.0]), torch.tensor(1.5))
    run(original, 0, 6)
    restored = SpacedUpdateSafeguard()
    restored.load_state_dict(original.state_dict())
    later = run(original, 6, 12)
    assert run(restored, 6, 12) == later
    # both outcomes occur after the restore, so the comparison sees the
    # restored sum and scale at work
    assert len(set(later)) == 2
    assert torch.equal(restored.total, original.total)
    assert torch.equal(restored.accepted, original.accepted)
    assert torch.equal(restored.rejected, original.rejected)
