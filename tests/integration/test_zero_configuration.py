"""The weighting is the whole set-up: its NTKCallback comes by itself,
through Lightning's configure_callbacks, unless one is passed. (Resuming
with it: ``test_checkpoint.py``; a weighting shared by two solvers:
``test_setup_checks.py``.)"""

import csv

import pytest
from lightning.pytorch.loggers import CSVLogger

from pina_ntk import NTKCallback, NTKWeighting, SketchNTKWeighting

from helpers import make_solver, make_trainer

WEIGHTINGS = {
    "exact": lambda: NTKWeighting(update_every_n_steps=2),
    "sketch": lambda: SketchNTKWeighting(alpha=0.3, warmup_samples=3, seed=5),
}


def ntk_callbacks(trainer):
    return [c for c in trainer.callbacks if isinstance(c, NTKCallback)]


@pytest.mark.parametrize("name", sorted(WEIGHTINGS))
def test_a_plain_trainer_gets_one_callback_that_logs(tmp_path, name):
    solver = make_solver("wave", weighting=WEIGHTINGS[name]())
    logger = CSVLogger(tmp_path)
    trainer = make_trainer(solver, steps=4, ntk=False, logger=logger)
    trainer.train()
    (callback,) = ntk_callbacks(trainer)
    assert solver.weighting.driver is callback.statistics
    assert callback.statistics.step == 4
    with open(f"{logger.log_dir}/metrics.csv") as handle:
        rows = list(csv.DictReader(handle))
    # the default interval: PINA's full-batch Trainer sets
    # log_every_n_steps=0, so Lightning's 50 applies (steps 0, 50, ...)
    for condition in solver.problem.conditions:
        logged = [r[f"ntk_weight/{condition}"] for r in rows]
        assert len([v for v in logged if v]) == len(range(0, 4, 50))
    # a second fit on the same trainer reuses it
    trainer.fit_loop.max_epochs = 6
    trainer.train()
    assert (
        ntk_callbacks(trainer) == [callback] and callback.statistics.step == 6
    )


def test_an_explicit_callback_is_used_instead_never_twice():
    explicit = NTKCallback(log_every_n_steps=2)
    solver = make_solver("wave", weighting=SketchNTKWeighting(warmup_samples=2))
    trainer = make_trainer(solver, steps=3, callbacks=[explicit], ntk=False)
    trainer.train()
    assert ntk_callbacks(trainer) == [explicit]
    assert solver.weighting.driver is explicit.statistics


def test_a_solver_that_never_offers_the_callback_says_how_to_fix_it():
    # The callback comes through configure_callbacks; a solver whose
    # configure_callbacks offers nothing leaves the weighting without it.
    solver = make_solver(
        "poisson", weighting=SketchNTKWeighting(sample_every_n_steps=1)
    )
    solver.configure_callbacks = list
    trainer = make_trainer(solver, steps=1, ntk=False)
    with pytest.raises(
        RuntimeError, match=r"callbacks=\[pina_ntk.NTKCallback\(\)\]"
    ):
        trainer.train()
