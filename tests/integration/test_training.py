"""NTK weights in training runs: which condition gets the larger weight,
mean and sum reductions, mini-batches, validation steps."""

import pytest
import torch

from pina_ntk import NTKCallback, NTKWeighting, SketchNTKWeighting

from helpers import (
    MemoryLogger,
    WeightHistory,
    make_solver,
    make_trainer,
    ntk_callback,
)


def test_larger_kernel_trace_gets_smaller_weight():
    # NTK weights balance convergence rates: the condition whose residual
    # moves fastest (largest mean kernel diagonal) is weighted least, the
    # opposite of PINA's gradient-norm NeuralTangentKernelWeighting.
    solver = make_solver("wave", weighting=NTKWeighting())
    trainer = make_trainer(solver, steps=1)
    trainer.train()
    weights = ntk_callback(trainer).statistics.weights
    traces = ntk_callback(trainer).statistics.traces
    columns = {"D": 1, "boundary": 1, "t0": 2}
    mean_diag = {
        c: traces[c] / (len(solver.problem.conditions[c].input) * columns[c])
        for c in traces
    }
    order = sorted(mean_diag, key=mean_diag.get)
    assert sorted(weights, key=weights.get, reverse=True) == order
    assert len(set(round(v, 6) for v in weights.values())) == 3


def test_mean_and_sum_reductions_give_the_same_training_run():
    runs = {}
    for reduction in ("mean", "sum"):
        solver = make_solver(
            "wave",
            weighting=NTKWeighting(safeguard=None),
            loss=torch.nn.MSELoss(reduction=reduction),
        )
        history = WeightHistory()
        trainer = make_trainer(solver, steps=4, callbacks=[history])
        trainer.train()
        sizes = {
            name: float(solver.problem.conditions[name].input.shape[0])
            for name in history.weights[0]
        }
        runs[reduction] = (history, solver, sizes)
    mean_hist, mean_solver, sizes = runs["mean"]
    sum_hist, sum_solver, _ = runs["sum"]
    columns = {"D": 1, "boundary": 1, "t0": 2}  # residual entries per point
    for w_mean, w_sum in zip(mean_hist.weights, sum_hist.weights):
        for name in w_mean:
            n_c = sizes[name] * columns[name]
            # effective per-entry weights agree: w/n_c (mean) and w (sum)
            assert w_mean[name] / n_c == pytest.approx(w_sum[name], rel=1e-5)
    for p, q in zip(mean_solver.parameters(), sum_solver.parameters()):
        assert torch.allclose(p, q, rtol=1e-4, atol=1e-6)


def test_batches_update_once_per_optimisation_step():
    # 20 points in batches of 10: several optimisation steps per epoch, each
    # with its own sample and weights (not one per epoch); parameter-space
    # samples are never negative: every sample enters the weights
    weighting = SketchNTKWeighting(
        sample_every_n_steps=1, warmup_samples=2, estimator="parameter"
    )
    solver = make_solver("poisson", weighting=weighting, n=20)
    history, logger = WeightHistory(), MemoryLogger()
    callbacks = [NTKCallback(log_every_n_steps=1), history]
    trainer = make_trainer(
        solver,
        steps=2,
        callbacks=callbacks,
        ntk=False,
        batch_size=10,
        logger=logger,
    )
    trainer.train()
    steps = trainer.global_step  # the optimiser's count, not a hook's
    assert steps > 2  # more than one batch per epoch
    assert len(history.weights) == steps
    assert ntk_callback(trainer).statistics.step == steps
    # the refresh counter of every step: one more sample per step
    refreshes = logger.series("ntk_refreshes")
    assert refreshes == [(t, float(t + 1)) for t in range(steps)]
    # and each step's traces and weights take its sample in
    traces = [value for _, value in logger.series("ntk_trace/D")]
    assert len(set(traces)) == steps
    for before, after in zip(history.weights, history.weights[1:]):
        assert before != after


def test_validation_uses_training_weights():
    # PINA aggregates the validation losses with the weighting too: they get
    # the weights of the last training step (ones in the sanity check before
    # the first), and validation neither refreshes nor counts a step.
    solver = make_solver("poisson", weighting=NTKWeighting(), n=20)
    weighting = solver.weighting
    update_weights = weighting.update_weights
    given = []  # (stage, weights) of every update_weights call

    def spy(losses):
        weights = update_weights(losses)
        state = solver.trainer
        stage = (
            "train"
            if state.training
            else "sanity" if state.sanity_checking else "validation"
        )
        given.append((stage, {k: float(v) for k, v in weights.items()}))
        return weights

    weighting.update_weights = spy  # PINA's aggregate calls it per batch
    history = WeightHistory()
    trainer = make_trainer(
        solver,
        steps=3,
        callbacks=[history],
        train_size=0.7,
        val_size=0.3,
        num_sanity_val_steps=1,
    )
    trainer.train()
    assert [stage for stage, _ in given] == ["sanity"] + [
        "train",
        "validation",
    ] * 3
    assert set(given[0][1].values()) == {1.0}
    for step in range(3):
        trained, validated = given[1 + 2 * step][1], given[2 + 2 * step][1]
        assert trained == history.weights[step]
        assert validated == history.weights[step]
    assert history.weights[0] != history.weights[2]  # the check can fail
    assert ntk_callback(trainer).statistics.step == 3
