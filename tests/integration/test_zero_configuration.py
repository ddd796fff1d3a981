"""The weighting is the whole set-up: its NTKCallback comes by itself,
through Lightning's configure_callbacks, unless one is passed."""

import csv

import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger

from pina_ntk import NTKCallback, NTKWeighting, SketchNTKWeighting

from conftest import WeightHistory, make_solver, make_trainer

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
    assert solver.weighting.driver is callback
    assert callback.step == 4
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
    assert ntk_callbacks(trainer) == [callback] and callback.step == 6


def test_an_explicit_callback_is_used_instead_never_twice():
    explicit = NTKCallback(log_every_n_steps=2)
    solver = make_solver("wave", weighting=SketchNTKWeighting(warmup_samples=2))
    trainer = make_trainer(solver, steps=3, callbacks=[explicit], ntk=False)
    trainer.train()
    assert ntk_callbacks(trainer) == [explicit]
    assert solver.weighting.driver is explicit


def run(weighting, steps, tmp_path=None, ckpt_path=None, save=False):
    solver = make_solver("wave", weighting=weighting, seed=3)
    history = WeightHistory()
    callbacks = [history]
    kwargs = {}
    if save:
        callbacks.append(
            ModelCheckpoint(dirpath=tmp_path, save_last=True, every_n_epochs=1)
        )
        kwargs["enable_checkpointing"] = True
    trainer = make_trainer(
        solver, steps=steps, callbacks=callbacks, ntk=False, **kwargs
    )
    trainer.train(ckpt_path=ckpt_path)
    return history, solver


@pytest.mark.parametrize("name", sorted(WEIGHTINGS))
def test_the_automatic_callback_saves_and_restores_its_state(tmp_path, name):
    straight, solver_a = run(WEIGHTINGS[name](), steps=6)
    run(WEIGHTINGS[name](), steps=3, tmp_path=tmp_path, save=True)
    checkpoint = torch.load(tmp_path / "last.ckpt", weights_only=False)
    assert checkpoint["callbacks"]["NTKCallback"]["step"] == 3
    resumed, solver_b = run(
        WEIGHTINGS[name](), steps=6, ckpt_path=str(tmp_path / "last.ckpt")
    )
    assert resumed.weights == straight.weights[3:]  # bitwise equal floats
    for p, q in zip(solver_a.parameters(), solver_b.parameters()):
        assert torch.equal(p, q)


def test_a_weighting_shared_by_two_solvers_is_still_refused():
    weighting = NTKWeighting()
    first = make_solver("poisson", weighting=weighting)
    make_solver("poisson", weighting=weighting)  # PINA re-binds the weighting
    trainer = make_trainer(first, steps=1, ntk=False)
    with pytest.raises(ValueError, match="one weighting instance per solver"):
        trainer.train()
