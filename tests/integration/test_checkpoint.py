"""Stop, checkpoint, resume: the resumed run continues bitwise like the
uninterrupted one (docs/reproducibility.md), with an explicit NTKCallback
or the one the solver adds by itself."""

import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from pina_ntk import NTKWeighting, SketchNTKWeighting

from helpers import WeightHistory, make_solver, make_trainer, ntk_callback


def run_with_history(
    weighting,
    steps,
    tmp_path=None,
    ckpt_path=None,
    save=False,
    auto=False,
    kind="wave",
):
    """Train the ``kind`` problem ``steps`` steps, with an explicit NTKCallback
    or (``auto``) the one the solver adds by itself; optionally saving a
    checkpoint every epoch into ``tmp_path`` or resuming from ``ckpt_path``."""
    solver = make_solver(kind, weighting=weighting, seed=3)
    history = WeightHistory()
    callbacks = [history]
    kwargs = {}
    if save:
        callbacks.append(
            ModelCheckpoint(dirpath=tmp_path, save_last=True, every_n_epochs=1)
        )
        kwargs["enable_checkpointing"] = True
    trainer = make_trainer(
        solver, steps=steps, callbacks=callbacks, ntk=not auto, **kwargs
    )
    trainer.train(ckpt_path=ckpt_path)
    return history, solver, trainer


def sketch(**options):
    """A sketched weighting with the common options of these runs."""
    return lambda: SketchNTKWeighting(
        alpha=0.3, warmup_samples=3, seed=5, **options
    )


def exact(**options):
    """An exact weighting with ``options``."""
    return lambda: NTKWeighting(**options)


@pytest.mark.parametrize(
    "weighting,auto",
    [
        (exact(update_every_n_steps=2), False),
        (exact(update_every_n_steps=3), False),
        (sketch(sample_every_n_steps=1), False),
        (sketch(sample_every_n_steps=1, estimator="parameter"), False),
        (sketch(sample_every_n_steps=1, full_kernel=True), False),
        (
            sketch(
                sample_every_n_steps=1, full_kernel=True, balanced_probe=False
            ),
            False,
        ),
        (sketch(sample_every_n_steps=2), False),
        (sketch(sample_every_n_steps=2, estimator="parameter"), False),
        (sketch(sample_every_n_steps=3), False),
        (exact(update_every_n_steps=2, alpha=0.5), False),
        (exact(update_every_n_steps=2, statistic="rayleigh"), False),
        (sketch(sample_every_n_steps=1, statistic="rayleigh"), False),
        (
            sketch(
                sample_every_n_steps=2,
                estimator="parameter",
                statistic="rayleigh",
            ),
            False,
        ),
        (exact(update_every_n_steps=2, statistic="boundary"), False),
        (sketch(sample_every_n_steps=1, statistic="boundary"), False),
        (
            sketch(
                sample_every_n_steps=2,
                estimator="parameter",
                statistic={"t0": "rayleigh"},
            ),
            False,
        ),
        # the callback the solver adds by itself (no NTKCallback passed)
        (exact(update_every_n_steps=2), True),
        (sketch(), True),
    ],
    ids=[
        "exact",
        "exact-due-at-resume",
        "predictor",
        "parameter",
        "full-kernel",
        "plain-probe",
        # resumed at step 3, after the deferred sample of step 2 was folded
        # in and before the weights took it in
        "predictor-between-samples",
        "parameter-between-samples",
        "predictor-sample-due-at-resume",
        "exact-smoothed",
        "exact-rayleigh",
        "predictor-rayleigh",
        "parameter-rayleigh-between-samples",
        "exact-boundary",
        "predictor-boundary",
        "parameter-mapping-between-samples",
        "exact-automatic-callback",
        "sketch-automatic-callback",
    ],
)
def test_checkpoint_resume_continues_with_identical_weights(
    tmp_path, weighting, auto
):
    # The checkpoint is written by a run with max_epochs=3 and resumed with
    # max_epochs=6, at step 3: between two exact updates (every 2 steps),
    # at an exact update (every 3 steps), at a sketch sample (every step).
    straight, solver_a, trainer_a = run_with_history(
        weighting(), steps=6, auto=auto
    )
    first, _, _ = run_with_history(
        weighting(), steps=3, tmp_path=tmp_path, save=True, auto=auto
    )
    checkpoint = torch.load(tmp_path / "last.ckpt", weights_only=False)
    assert checkpoint["callbacks"]["NTKCallback"]["step"] == 3
    resumed, solver_b, trainer_b = run_with_history(
        weighting(),
        steps=6,
        ckpt_path=str(tmp_path / "last.ckpt"),
        auto=auto,
    )
    assert first.weights == straight.weights[:3]
    assert resumed.weights == straight.weights[3:]  # bitwise equal floats
    for p, q in zip(solver_a.parameters(), solver_b.parameters()):
        assert torch.equal(p, q)
    a, b = ntk_callback(trainer_a), ntk_callback(trainer_b)
    assert a.statistics.step == b.statistics.step == 6
    assert a.statistics.traces == b.statistics.traces
    guard_a, guard_b = (
        solver_a.weighting.safeguard,
        solver_b.weighting.safeguard,
    )
    assert torch.equal(guard_a.total, guard_b.total)
    assert a.state_dict()["seed"] == b.state_dict()["seed"]  # probe stream
    assert torch.equal(
        a.statistics.trace_buffer, b.statistics.trace_buffer
    )  # kernel buffer
    if a.statistics.kernel is not None:
        assert torch.equal(a.statistics.kernel, b.statistics.kernel)


@pytest.mark.parametrize(
    "weighting",
    [
        exact(update_every_n_steps=3, gradient_band=2.0),
        sketch(sample_every_n_steps=2, gradient_band=4.0),
    ],
    ids=["exact-band-due-at-resume", "predictor-band-between-samples"],
)
def test_checkpoint_resume_with_a_gradient_band(tmp_path, weighting):
    # the band acts on stationary problems: Poisson; the averaged gradient
    # norms travel in the checkpoint
    straight, solver_a, _ = run_with_history(weighting(), 6, kind="poisson")
    first, _, _ = run_with_history(
        weighting(), 3, tmp_path=tmp_path, save=True, kind="poisson"
    )
    checkpoint = torch.load(tmp_path / "last.ckpt", weights_only=False)
    assert checkpoint["callbacks"]["NTKCallback"]["gradients"] is not None
    resumed, solver_b, _ = run_with_history(
        weighting(), 6, ckpt_path=str(tmp_path / "last.ckpt"), kind="poisson"
    )
    assert first.weights == straight.weights[:3]
    assert resumed.weights == straight.weights[3:]  # bitwise equal floats
    for p, q in zip(solver_a.parameters(), solver_b.parameters()):
        assert torch.equal(p, q)
