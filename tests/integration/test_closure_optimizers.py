"""Closure optimisers (``torch.optim.LBFGS``) through PINA's real training
loop: from the first step, after PINA's ``SwitchOptimizer`` (and a switch
back), and with ``batch_size``.

L-BFGS evaluates the loss several times in one optimisation step (its line
search). Within a step the weights are fixed, so the line search sees one
objective; at most one sample is taken; the step counter, the moving
average and the safeguard count optimisation steps. Each of these is
compared with the same run under Adam, which evaluates the loss once per
step: the two runs differ in their parameters, never in their schedule.
"""

import math
from collections import defaultdict

import pytest
import torch
from pina.callback import SwitchOptimizer
from pina.optim import TorchOptimizer
from pina.solver import PhysicsInformedEnsembleSolver

from pina_ntk import NTKWeighting, SketchNTKWeighting

from helpers import make_problem, make_solver, make_trainer, mlp, ntk_callback

STEPS = 6


def lbfgs():
    """A real L-BFGS: three iterations, so several loss evaluations, per
    optimisation step."""
    return TorchOptimizer(torch.optim.LBFGS, lr=0.1, max_iter=3, history_size=4)


def adam():
    return TorchOptimizer(torch.optim.Adam, lr=1e-3)


WEIGHTINGS = {
    "sketch": lambda: SketchNTKWeighting(
        warmup_samples=2, sample_every_n_steps=2
    ),
    "exact": lambda: NTKWeighting(update_every_n_steps=2),
}


class EvaluationLog:
    """
    What each loss evaluation of a run saw: the weighting's
    ``update_weights`` and ``prepare_sample`` are wrapped on the instance
    (PINA's ``aggregate`` and the statistics call them there), each call
    filed under the statistics' step.
    """

    def __init__(self, weighting):
        self.weights = defaultdict(list)  # step -> [{condition: weight}]
        self.samples = defaultdict(int)  # step -> prepared samples
        update_weights = weighting.update_weights
        prepare_sample = weighting.prepare_sample

        def logged_update_weights(losses):
            weights = update_weights(losses)
            step = weighting.driver.step
            self.weights[step].append({k: float(v) for k, v in weights.items()})
            return weights

        def logged_prepare_sample(*args, **kwargs):
            self.samples[weighting.driver.step] += 1
            return prepare_sample(*args, **kwargs)

        weighting.update_weights = logged_update_weights
        weighting.prepare_sample = logged_prepare_sample

    @property
    def evaluations(self):
        return sum(len(rows) for rows in self.weights.values())


def run(kind, optimizer=None, steps=STEPS, callbacks=(), **trainer_options):
    """Train the small Poisson problem; return the solver, the trainer and
    the evaluation log."""
    weighting = WEIGHTINGS[kind]()
    solver = make_solver("poisson", weighting, n=10, optimizer=optimizer)
    log = EvaluationLog(weighting)
    trainer = make_trainer(
        solver, steps, callbacks=list(callbacks), **trainer_options
    )
    trainer.train()
    return solver, trainer, log


def schedule(trainer, log):
    """What must not depend on the optimiser: the step counter, samples per
    step, proposals and the safeguard's reviews."""
    statistics = ntk_callback(trainer).statistics
    guard = statistics.weighting.safeguard
    return {
        "step": statistics.step,
        "optimizer steps": trainer.global_step,
        "samples": dict(log.samples),
        "refreshes": statistics.refreshes,
        "proposals": statistics.rejections["proposals"],
        "reviews": int(guard.accepted + guard.rejected),
        "weighted steps": sorted(log.weights),
    }


def assert_one_objective_per_step(log):
    for step, rows in log.weights.items():
        assert all(row == rows[0] for row in rows), f"step {step}: {rows}"
        assert all(math.isfinite(w) and w > 0 for w in rows[0].values())


@pytest.mark.parametrize("kind", list(WEIGHTINGS))
def test_lbfgs_from_the_first_step_keeps_one_objective_per_step(kind):
    _, trainer, log = run(kind, optimizer=lbfgs())
    _, reference_trainer, reference = run(kind)
    # L-BFGS evaluated the loss more than once per step ...
    assert log.evaluations > 2 * STEPS
    assert all(len(rows) == 1 for rows in reference.weights.values())
    # ... with the same weights each time, and the schedule of Adam's run
    assert_one_objective_per_step(log)
    assert schedule(trainer, log) == schedule(reference_trainer, reference)
    assert schedule(trainer, log)["step"] == STEPS


@pytest.mark.parametrize("kind", list(WEIGHTINGS))
def test_adam_then_lbfgs_then_adam_again(kind):
    # PINA's standard recipe and a switch back, in one fit
    switches = [
        SwitchOptimizer(new_optimizers=lbfgs(), epoch_switch=2),
        SwitchOptimizer(new_optimizers=adam(), epoch_switch=4),
    ]
    _, trainer, log = run(kind, callbacks=switches)
    _, reference_trainer, reference = run(kind)
    per_step = {step: len(rows) for step, rows in log.weights.items()}
    assert [per_step[s] > 1 for s in range(STEPS)] == [
        False, False, True, True, False, False
    ]  # fmt: skip
    assert_one_objective_per_step(log)
    assert schedule(trainer, log) == schedule(reference_trainer, reference)


@pytest.mark.parametrize("kind", list(WEIGHTINGS))
def test_lbfgs_with_batches(kind):
    # 10 interior and 10 boundary points in batches of 5 of each: two
    # optimisation steps per epoch, each with every condition
    _, trainer, log = run(kind, optimizer=lbfgs(), steps=3, batch_size=5)
    _, reference_trainer, reference = run(kind, steps=3, batch_size=5)
    assert trainer.global_step == 6
    assert log.evaluations > 12
    assert_one_objective_per_step(log)
    assert schedule(trainer, log) == schedule(reference_trainer, reference)


@pytest.mark.parametrize("weighting", [None, "sketch", "exact"])
def test_pinas_multi_model_solvers_take_no_closure_optimiser(weighting):
    # PINA's ensemble, self-adaptive and competitive solvers optimise by
    # hand and call optimizer.step() without a closure: torch's L-BFGS
    # refuses that with or without a weighting, so the guide lists L-BFGS
    # as unavailable there (the error is PINA's and torch's, not ours)
    solver = PhysicsInformedEnsembleSolver(
        make_problem("poisson", n=8),
        [mlp(2, 1), mlp(2, 1)],
        optimizers=[lbfgs(), lbfgs()],
        weighting=None if weighting is None else WEIGHTINGS[weighting](),
    )
    trainer = make_trainer(solver, 1, ntk=weighting is not None)
    with pytest.raises(TypeError, match="missing 1 required positional"):
        trainer.train()
