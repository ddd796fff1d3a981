"""The spaced-update safeguard (Corollary, eq. update-rule)."""

import math

import lightning
import pytest
import torch

from pina_ntk import NTKWeighting, SketchNTKWeighting, SpacedUpdateSafeguard
from pina_ntk.core.safeguard import weight_change_cost

from conftest import WeightHistory, make_solver, make_trainer, ntk_callback


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


class BudgetCheck(lightning.Callback):
    """Asserts S(t) <= h(t) after every step; runs after NTKCallback."""

    def __init__(self):
        self.steps = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, idx):
        guard = pl_module.weighting.safeguard
        step = ntk_callback(trainer).step  # already advanced to t + 1
        assert guard.total.item() <= guard.h(max(step - 2, 0)) + 1e-12
        self.steps += 1


@pytest.mark.parametrize(
    "weighting,scale",
    [
        (lambda g: NTKWeighting(safeguard=g), 0.005),
        (
            lambda g: SketchNTKWeighting(
                sample_every_n_steps=1,
                alpha=0.5,
                warmup_samples=2,
                safeguard=g,
                seed=0,
            ),
            0.3,
        ),
    ],
    ids=["exact", "sketch"],
)
def test_budget_holds_at_every_step_of_a_training_run(weighting, scale):
    # Budgets well below what these runs spend unguarded (S(24) = 0.08 for
    # exact, 8.2 for sketch) so that both outcomes occur.
    guard = SpacedUpdateSafeguard(budget=lambda t: scale * math.sqrt(1 + t))
    solver = make_solver("wave", weighting=weighting(guard))
    check = BudgetCheck()
    trainer = make_trainer(solver, steps=25)
    trainer.callbacks.append(check)
    trainer.train()
    assert check.steps == 25
    assert guard.accepted.item() > 0 and guard.rejected.item() > 0


def test_no_safeguard_reproduces_unguarded_run():
    def run(safeguard):
        torch.manual_seed(0)
        solver = make_solver(
            "poisson", weighting=NTKWeighting(safeguard=safeguard)
        )
        history = WeightHistory()
        make_trainer(solver, steps=6, callbacks=[history]).train()
        return history.weights, list(solver.parameters())

    free_weights, free_params = run(None)
    # a budget that can never bind: every proposal is accepted
    open_weights, open_params = run(SpacedUpdateSafeguard(lambda t: 1e300))
    assert free_weights == open_weights
    for p, q in zip(free_params, open_params):
        assert torch.equal(p, q)
    # and the weights did change along the run, so the comparison means something
    assert free_weights[0] != free_weights[-1]
