"""The spaced-update safeguard (Corollary, eq. update-rule) in training
runs; the rule on its own: ``tests/core/test_safeguard.py``."""

import math

import lightning
import pytest
import torch

from pina_ntk import NTKWeighting, SketchNTKWeighting, SpacedUpdateSafeguard

from helpers import WeightHistory, make_solver, make_trainer, ntk_callback


class BudgetCheck(lightning.Callback):
    """Asserts S(t) <= h(t) after every step; runs after NTKCallback."""

    def __init__(self):
        self.steps = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, idx):
        guard = pl_module.weighting.safeguard
        step = ntk_callback(
            trainer
        ).statistics.step  # already advanced to t + 1
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
