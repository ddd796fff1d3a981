"""Spaced refreshes: a sketch sample (or exact update) every k steps."""

import math

import lightning
import pytest
import torch

from pina_ntk import NTKWeighting, SketchNTKWeighting
from pina_ntk.core.moving_average import rate_per_sample
from pina_ntk.integration.kernel_statistics import KernelStatistics
from pina_ntk.integration.recording import ResidualRecorder

from helpers import (
    WeightHistory,
    float32_exact,
    make_solver,
    make_trainer,
    ntk_callback,
)


class SpySketch(SketchNTKWeighting):
    """Records the step of every prepared sample and every completed one."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.prepared_at, self.samples = [], []

    def prepare_sample(
        self, params, residuals, generator, scales=None, isolated=None
    ):
        self.prepared_at.append(self.driver.step)
        return super().prepare_sample(
            params, residuals, generator, scales, isolated
        )

    def complete_sample(self, residual_fn, params, prepared, generator):
        traces, kernel = super().complete_sample(
            residual_fn, params, prepared, generator
        )
        sizes = torch.tensor(
            [r.numel() for r in prepared["residuals"]], dtype=traces.dtype
        )
        self.samples.append((self.driver.step, traces / sizes))
        return traces, kernel


def train(weighting, steps=8, kind="wave", **solver_options):
    solver = make_solver(kind, weighting=weighting, **solver_options)
    history = WeightHistory()
    trainer = make_trainer(solver, steps=steps, callbacks=[history])
    trainer.train()
    return history.weights, trainer


@pytest.mark.parametrize("deferred", [True, False])
@pytest.mark.parametrize("estimator", ["predictor", "parameter"])
def test_samples_are_drawn_every_k_steps(estimator, deferred):
    weighting = SpySketch(
        alpha=0.2,
        warmup_samples=3,
        estimator=estimator,
        sample_every_n_steps=3,
        sample_after_backward=deferred,
        seed=1,
    )
    train(weighting, steps=8)
    # the warm start's 3 samples at step 0, then one sample at steps 0 (if
    # deferred), 3 and 6
    expected = [0, 0, 0] + ([0] if deferred else []) + [3, 6]
    assert [step for step, _ in weighting.samples] == expected
    assert ntk_callback_refreshes(weighting) == 3


def ntk_callback_refreshes(weighting):
    return weighting.driver.refreshes


@pytest.mark.parametrize("deferred", [True, False])
def test_weights_change_only_when_a_sample_enters(deferred):
    # parameter-space samples are never negative: every sample is usable
    weighting = SketchNTKWeighting(
        alpha=0.5,
        warmup_samples=2,
        estimator="parameter",
        sample_every_n_steps=3,
        sample_after_backward=deferred,
        safeguard=None,
        seed=2,
    )
    weights, _ = train(weighting, steps=9)
    # a deferred sample of step t enters the weights of step t + 1; a
    # same-step sample those of step t itself
    entering = {1, 4, 7} if deferred else {3, 6}
    for step in range(1, 9):
        if step in entering:
            assert weights[step] != weights[step - 1], step
        else:
            assert weights[step] == weights[step - 1], step


@pytest.mark.parametrize("deferred", [True, False])
def test_the_safeguard_reviews_each_proposal_once(deferred):
    # weights are formed (and reviewed) only when new traces enter: the warm
    # start's at step 0 (the safeguard starts there), then one sample per
    # period. A deferred sample's refresh step brings nothing new, so it
    # forms no weights; reviewing its unchanged proposal again would count
    # extra reviews at steps 3 and 6.
    weighting = SketchNTKWeighting(
        warmup_samples=2,
        estimator="parameter",
        sample_every_n_steps=3,
        sample_after_backward=deferred,
        safeguard=lambda t: 1e30,  # never binds
        seed=3,
    )
    train(weighting, steps=8)
    entering = [1, 4, 7] if deferred else [3, 6]
    guard = weighting.safeguard
    assert guard.accepted.item() == len(entering)
    assert guard.rejected.item() == 0


@pytest.mark.parametrize("deferred", [True, False])
def test_residuals_are_recorded_only_at_steps_that_read_them(
    monkeypatch, deferred
):
    # between refreshes the weights stay as they are and the step's residuals
    # are not recorded; a deferred sample's next step reads them (the
    # safeguard). The weights are bitwise those of recording every step.
    recorded = []
    start = ResidualRecorder.start

    def spy(recorder, batch_index):
        recorded.append(recorder.solver.trainer.global_step)
        start(recorder, batch_index)

    def run():
        lightning.seed_everything(0, verbose=False)
        weighting = SketchNTKWeighting(
            warmup_samples=2,
            sample_every_n_steps=4,
            sample_after_backward=deferred,
            seed=0,
        )
        weights, _ = train(weighting, steps=9)
        return weights

    monkeypatch.setattr(ResidualRecorder, "start", spy)
    weights = run()
    assert recorded == ([0, 1, 4, 5, 8] if deferred else [0, 4, 8])
    monkeypatch.setattr(KernelStatistics, "needs_residuals", True)
    recorded.clear()
    assert run() == weights and recorded == list(range(9))


@pytest.mark.parametrize("every", [1, 2, 5])
def test_alpha_is_a_rate_per_optimisation_step(every):
    alpha = 0.2
    weighting = SpySketch(
        alpha=alpha,
        warmup_samples=2,
        estimator="parameter",
        sample_every_n_steps=every,
        safeguard=None,
        seed=4,
    )
    _, trainer = train(weighting, steps=11)
    statistics = ntk_callback(trainer).statistics
    rate = 1.0 - (1.0 - alpha) ** every
    assert statistics.state_dict()["diag"]["alpha"] == pytest.approx(rate)
    # the buffer is the warm start's mean followed by one fold-in per sample
    samples = [s for _, s in weighting.samples]
    buffer = torch.stack(samples[:2]).mean(dim=0)
    for sample in samples[2:]:
        buffer = (1 - rate) * buffer + rate * sample
    assert torch.allclose(statistics.trace_buffer, buffer, rtol=1e-6)
    assert len(samples) == 2 + math.ceil(11 / every)


class SpyExact(NTKWeighting):
    """Records the step and the mean diagonals ``Tr(K_cc) / n_c`` of every
    exact update."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.samples = []

    def sample(
        self,
        residual_fn,
        params,
        residuals,
        generator,
        scales=None,
        isolated=None,
    ):
        traces, kernel = super().sample(
            residual_fn, params, residuals, generator, scales, isolated
        )
        sizes = torch.tensor([r.numel() for r in residuals], dtype=traces.dtype)
        self.samples.append((self.driver.step, traces / sizes))
        return traces, kernel


def test_spaced_exact_updates_average_with_the_rate_of_their_spacing():
    weighting = SpyExact(update_every_n_steps=2, alpha=0.3)
    _, trainer = train(weighting, steps=5)
    statistics = ntk_callback(trainer).statistics
    rate = rate_per_sample(0.3, 2)
    assert statistics.state_dict()["diag"]["alpha"] == pytest.approx(rate)
    assert statistics.refreshes == 3
    # updates at steps 0, 2 and 4; the buffer is the first update followed
    # by one fold-in per later update, at the rate of a 2-step spacing
    assert [step for step, _ in weighting.samples] == [0, 2, 4]
    buffer = weighting.samples[0][1]
    for _, sample in weighting.samples[1:]:
        buffer = (1 - rate) * buffer + rate * sample
    assert not torch.allclose(buffer, weighting.samples[-1][1], rtol=1e-3)
    assert torch.allclose(statistics.trace_buffer, buffer, rtol=1e-6)


def test_smoothed_exact_weights_move_less_than_plain_ones():
    plain, _ = train(NTKWeighting(safeguard=None), steps=6)
    smooth, _ = train(NTKWeighting(safeguard=None, alpha=0.1), steps=6)
    assert plain[0] == smooth[0]  # the first update is the warm start

    def change(history, name):
        return abs(math.log(history[-1][name] / history[0][name]))

    for name in plain[0]:
        assert change(smooth, name) < change(plain, name)


def test_float64_training_with_spaced_samples(float64):
    weighting = SketchNTKWeighting(
        alpha=0.3, warmup_samples=3, sample_every_n_steps=2, seed=0
    )
    weights, trainer = train(weighting, steps=5)
    statistics = ntk_callback(trainer).statistics
    assert statistics.trace_buffer.dtype == torch.float64
    assert all(
        w.dtype == torch.float64 for w in statistics.weight_tensors.values()
    )
    assert all(
        math.isfinite(w) and w > 0 for step in weights for w in step.values()
    )
    # float64 values, not float32 ones cast up
    assert not any(float32_exact(w) for w in weights[-1].values())
