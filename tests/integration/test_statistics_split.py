"""Splitting ``KernelStatistics`` into its parts (the step schedule, the
trace estimates, the weight proposals) changed no weight: fixed-seed
trainings driven by today's statistics and by the statistics as they were
before the split (``pre_split_statistics.py``) give bitwise the same
weights at every step and the same checkpoint state.

Each run covers a different path: the default's deferred predictor
samples, the safeguard and the moving average; samples taken before the
backward pass with the full kernel, the gradient band and the ramp;
exact traces under L-BFGS (one weighting per optimisation step); an
inverse problem's unknowns; a block restarted on its own after its
average turned negative.
"""

import lightning
import pytest
import torch
from pina.optim import TorchOptimizer
from pina.solver import PhysicsInformedSingleModelSolver

import pre_split_statistics
from pina_ntk import NTKWeighting, SketchNTKWeighting
from pina_ntk.integration import callback

from helpers import (
    WeightHistory,
    inverse_line_problem,
    make_solver,
    make_trainer,
    mlp,
    ntk_callback,
)


class NegativeAt(SketchNTKWeighting):
    """A sketch whose sample of the second block is ``-1e6`` at step 2: its
    average turns negative and the block restarts on its own."""

    def complete_sample(self, residual_fn, params, prepared, generator):
        traces, kernel = super().complete_sample(
            residual_fn, params, prepared, generator
        )
        if self.driver.step == 2:
            traces = traces.clone()
            traces[1] = -1e6
        return traces, kernel


def lbfgs():
    return TorchOptimizer(torch.optim.LBFGS, lr=0.1, max_iter=3, history_size=4)


def inverse_solver(weighting):
    lightning.seed_everything(0, verbose=False)
    return PhysicsInformedSingleModelSolver(
        inverse_line_problem(), mlp(1, 1, width=8), weighting=weighting
    )


#: name: (a fresh solver, steps)
RUNS = {
    "default": (
        lambda: make_solver(
            "poisson", SketchNTKWeighting(warmup_samples=4, alpha=0.1)
        ),
        25,
    ),
    "before_backward": (
        lambda: make_solver(
            "poisson",
            SketchNTKWeighting(
                warmup_samples=3,
                sample_every_n_steps=3,
                sample_after_backward=False,
                full_kernel=True,
                gradient_band=4,
                ramp_steps=10,
                alpha=0.2,
            ),
        ),
        20,
    ),
    "exact_lbfgs": (
        lambda: make_solver(
            "wave",
            NTKWeighting(update_every_n_steps=2, statistic="boundary"),
            optimizer=lbfgs(),
        ),
        8,
    ),
    "inverse": (
        lambda: inverse_solver(
            SketchNTKWeighting(warmup_samples=3, sample_every_n_steps=2)
        ),
        12,
    ),
    "negative_restart": (
        lambda: make_solver(
            "poisson",
            NegativeAt(warmup_samples=2, sample_every_n_steps=1, alpha=0.5),
        ),
        6,
    ),
}


def train(run, driver, monkeypatch):
    """The weights of every step and the final state of ``run`` trained
    with ``driver`` as the statistics' class."""
    build, steps = RUNS[run]
    with monkeypatch.context() as patch:
        patch.setattr(callback, "KernelStatistics", driver)
        solver = build()
        history = WeightHistory()
        trainer = make_trainer(solver, steps, callbacks=[history])
        trainer.train()
    statistics = ntk_callback(trainer).statistics
    assert type(statistics) is driver
    return history.weights, statistics


def same(first, second):
    """Bitwise equality of two states (tensors, tuples, dicts, numbers)."""
    if isinstance(first, dict):
        return first.keys() == second.keys() and all(
            same(first[k], second[k]) for k in first
        )
    if torch.is_tensor(first):
        return (
            torch.is_tensor(second)
            and first.dtype == second.dtype
            and torch.equal(first, second)
        )
    if isinstance(first, (list, tuple)):
        return len(first) == len(second) and all(
            same(a, b) for a, b in zip(first, second)
        )
    return first == second


@pytest.mark.parametrize("run", list(RUNS))
def test_the_split_statistics_give_bitwise_the_same_weights(run, monkeypatch):
    before, old = train(run, pre_split_statistics.KernelStatistics, monkeypatch)
    after, new = train(run, callback.KernelStatistics, monkeypatch)
    assert len(after) == RUNS[run][1]
    assert after == before  # floats of float32 weights: bitwise
    assert same(new.state_dict(), old.state_dict())
    assert new.log_values().keys() == old.log_values().keys()
    assert all(
        torch.equal(new.log_values()[k], old.log_values()[k])
        for k in new.log_values()
    )
    if run == "negative_restart":
        assert new.isolated_blocks == old.isolated_blocks != []
