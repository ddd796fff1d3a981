"""One solver through several Trainers, with the real ``pina.Trainer``.

The rule (``docs/guide.md``, *One solver, several Trainers*): a later
Trainer's callback takes the weighting over, and its statistics continue as
in one run (weights, moving average, safeguard, step counter, rejection
counts); ``ckpt_path`` restores what the checkpoint holds instead; two
Trainers driving one weighting at the same time are refused.
"""

import lightning
import pytest
import torch
from pina.optim import TorchOptimizer

from pina_ntk import NTKCallback, NTKWeighting, SketchNTKWeighting

from helpers import make_solver, make_trainer, ntk_callback

FIRST, LATER = 8, 7


def sketch():
    return SketchNTKWeighting(warmup_samples=2, sample_every_n_steps=2)


def solver_with(weighting):
    # SGD keeps no state of its own: a new Trainer's new optimiser steps as
    # the old one would have, so one run and two runs train the same
    return make_solver(
        "poisson",
        weighting,
        n=10,
        optimizer=TorchOptimizer(torch.optim.SGD, lr=1e-3),
    )


def statistics_of(solver):
    """Every statistic a run carries, as plain values."""
    statistics = solver.weighting.driver
    guard = solver.weighting.safeguard
    return {
        "step": statistics.step,
        "refreshes": statistics.refreshes,
        "weights": statistics.weights,
        "traces": statistics.traces,
        "buffer": statistics.trace_buffer.tolist(),
        "safeguard": [
            float(guard.total), int(guard.accepted), int(guard.rejected)
        ],
        "rejections": statistics.rejections,
        "seed": statistics.seed,
    }  # fmt: skip


def assert_same_statistics(actual, expected):
    # bitwise: the same points in the same order (shuffle=False), the same
    # probes, the same stateless optimiser
    assert actual == expected


@pytest.mark.parametrize("weighting", [sketch, NTKWeighting])
def test_a_later_trainer_continues_the_statistics_as_one_run(weighting):
    lightning.seed_everything(0, verbose=False)
    one = solver_with(weighting())
    make_trainer(one, FIRST + LATER, shuffle=False).train()
    lightning.seed_everything(0, verbose=False)
    two = solver_with(weighting())
    first = make_trainer(two, FIRST, shuffle=False)
    first.train()
    assert two.weighting.driver.step == FIRST
    # the second Trainer brings a callback of its own (PINA's solvers add
    # one through configure_callbacks when none is passed)
    # its epochs count from 0; the weighting's steps go on
    later = make_trainer(two, LATER, ntk=False, shuffle=False)
    later.train()
    assert ntk_callback(later) is not ntk_callback(first)
    assert ntk_callback(later).statistics is ntk_callback(first).statistics
    assert_same_statistics(statistics_of(two), statistics_of(one))


def test_a_later_trainer_from_epoch_zero_counts_on():
    # a plain second Trainer (its epochs from 0): the weighting's step
    # counter goes on, it is not the trainer's
    solver = solver_with(sketch())
    make_trainer(solver, FIRST).train()
    proposals = solver.weighting.driver.rejections["proposals"]
    make_trainer(solver, LATER, ntk=False).train()
    statistics = solver.weighting.driver
    assert statistics.step == FIRST + LATER
    # no second warm start: samples at steps 8, 10, 12, 14 only
    assert statistics.refreshes == FIRST // 2 + 4
    assert statistics.rejections["proposals"] > proposals


def test_ckpt_path_restores_what_the_checkpoint_holds(tmp_path):
    solver = solver_with(sketch())
    checkpoint = lightning.pytorch.callbacks.ModelCheckpoint(
        dirpath=tmp_path, save_last=True
    )
    make_trainer(
        solver, FIRST, callbacks=[checkpoint], enable_checkpointing=True
    ).train()
    saved = statistics_of(solver)
    make_trainer(solver, 3, ntk=False).train()  # moves on to step 11
    assert solver.weighting.driver.step == FIRST + 3
    # PINA's restore pattern: Trainer(solver=...).train(ckpt_path=...)
    restored = []

    class Restored(lightning.Callback):
        def on_train_batch_start(self, trainer, pl_module, *args):
            if not restored:
                restored.append(statistics_of(pl_module))

    trainer = make_trainer(
        solver, FIRST + LATER, callbacks=[Restored()], ntk=False
    )
    trainer.train(ckpt_path=str(tmp_path / "last.ckpt"))
    # the first step after the restore starts from the checkpoint's state
    assert_same_statistics(restored[0], saved)
    assert solver.weighting.driver.step == FIRST + LATER


def test_a_callback_set_up_while_another_drives_is_refused():
    # what a second Trainer's fit would do first while the first one's runs
    solver = solver_with(NTKWeighting())
    failures = []

    class SetsUpAnother(lightning.Callback):
        def on_train_batch_start(self, trainer, pl_module, *args):
            if not failures:
                with pytest.raises(ValueError) as error:
                    NTKCallback().setup(trainer, pl_module, "fit")
                failures.append(str(error.value))

    make_trainer(solver, 2, callbacks=[SetsUpAnother()]).train()
    assert "Trainer is still running" in failures[0]
    assert "run one Trainer at a time" in failures[0]
    # the refused callback left the weighting to the running one; after it,
    # a later Trainer takes it over
    assert solver.weighting.driver.step == 2
    make_trainer(solver, 1, ntk=False).train()
    assert solver.weighting.driver.step == 3


def test_a_failed_fit_releases_the_weighting():
    # Lightning skips teardown when a fit raises; on_exception releases
    solver = solver_with(NTKWeighting())

    class Fails(lightning.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, index):
            if trainer.global_step == 1:
                raise KeyError("stop here")

    with pytest.raises(KeyError, match="stop here"):
        make_trainer(solver, 3, callbacks=[Fails()]).train()
    make_trainer(solver, 1).train()
    assert solver.weighting.driver.step == 2
