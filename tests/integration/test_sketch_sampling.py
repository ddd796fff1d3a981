"""When and where sketch samples are taken: at the step's own parameters,
before or after its backward pass (deferred samples), with probe scales
from the running estimate (balanced probes). Sample periods:
``test_spaced_refreshes.py``."""

import lightning
import pytest
import torch
from pina.solver import PhysicsInformedSingleModelSolver

from pina_ntk import SketchNTKWeighting
from pina_ntk.integration.kernel_weighting import block_sizes

from helpers import make_problem, make_solver, make_trainer, mlp, ntk_callback


class CompletionSpy(SketchNTKWeighting):
    """Records, for every completed sample, the step, the parameters it was
    evaluated at and whether the step's backward pass had already run."""

    def __init__(self, progress, **kwargs):
        # these tests follow the samples of every step
        super().__init__(**{"sample_every_n_steps": 1, **kwargs})
        self.progress = progress
        self.completed = []

    def complete_sample(self, residual_fn, params, prepared, generator):
        values = [p.detach().clone() for p in params.values()]
        self.completed.append(
            (self.driver.step, values, self.progress.after_backward)
        )
        return super().complete_sample(residual_fn, params, prepared, generator)


class StepProgress(lightning.Callback):
    """``theta_t`` at the start of every training step, and whether the
    current step's backward pass has run (this callback's hooks run before
    the NTKCallback's, which make_trainer appends last)."""

    def __init__(self):
        self.params = []
        self.after_backward = False

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.after_backward = False
        self.params.append([p.detach().clone() for p in pl_module.parameters()])

    def on_after_backward(self, trainer, pl_module):
        self.after_backward = True


@pytest.mark.parametrize("estimator", ["predictor", "parameter"])
@pytest.mark.parametrize("deferred", [True, False])
def test_samples_are_taken_at_the_steps_own_parameters(estimator, deferred):
    progress = StepProgress()
    weighting = CompletionSpy(
        progress,
        alpha=0.5,
        warmup_samples=3,
        estimator=estimator,
        sample_after_backward=deferred,
    )
    solver = make_solver("wave", weighting=weighting)
    make_trainer(solver, steps=4, callbacks=[progress]).train()
    steps = [step for step, _, _ in weighting.completed]
    extra = 1 if deferred else 0  # step 0: the warm start, then its sample
    assert steps == [0] * (3 + extra) + [1, 2, 3]
    for index, (step, values, after_backward) in enumerate(weighting.completed):
        # the warm start runs before step 0's backward pass, deferred
        # samples after their step's backward pass, others before it
        assert after_backward == (deferred and index >= 3)
        for value, snapshot in zip(values, progress.params[step]):
            assert torch.equal(value, snapshot)  # theta_t, not theta_t+1


class ScaleSpy(SketchNTKWeighting):
    """Records the probe scales of every sample, and its trace sketch."""

    def __init__(self, **kwargs):
        # these tests follow the samples of every step
        super().__init__(**{"sample_every_n_steps": 1, **kwargs})
        self.drawn = []  # (step, scales, traces or None until completed)
        self.sizes = None  # entry counts per block, from the last sample

    def prepare_sample(
        self, params, residuals, generator, scales=None, isolated=None
    ):
        prepared = super().prepare_sample(
            params, residuals, generator, scales, isolated
        )
        copy = None if scales is None else scales.clone()
        self.drawn.append([self.driver.step, copy, None])
        self.sizes = block_sizes(residuals)
        return prepared

    def complete_sample(self, residual_fn, params, prepared, generator):
        traces, kernel = super().complete_sample(
            residual_fn, params, prepared, generator
        )
        self.drawn[-1][2] = traces.clone()
        return traces, kernel


@pytest.mark.parametrize("deferred", [True, False])
def test_balanced_probe_scales_follow_the_running_estimate(deferred):
    from pina_ntk.core.estimators import balanced_probe_scales

    class DiagHistory(lightning.Callback):
        def __init__(self):
            self.values = []

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, i):
            self.values.append(
                ntk_callback(trainer).statistics.trace_buffer.clone()
            )

    history = DiagHistory()
    weighting = ScaleSpy(
        alpha=0.5,
        warmup_samples=3,
        balanced_probe=True,
        sample_after_backward=deferred,
    )
    solver = make_solver("wave", weighting=weighting)
    make_trainer(solver, steps=4, callbacks=[history]).train()
    sizes = weighting.sizes
    warm, later = weighting.drawn[:3], weighting.drawn[3:]
    assert [step for step, _, _ in warm] == [0, 0, 0]
    # the warm start: unscaled first probe, then the running mean's scales
    assert warm[0][1] is None
    for index in (1, 2):
        mean = torch.stack([t for _, _, t in warm[:index]]).mean(dim=0)
        assert torch.equal(warm[index][1], balanced_probe_scales(mean, sizes))
    # afterwards: the moving average as it stood when the probe was drawn,
    # that is after the previous step (deferred) or after the warm start
    # and previous steps (same-step sampling)
    assert len(later) == (4 if deferred else 3)
    for step, scales, _ in later:
        if deferred and step == 0:
            mean = torch.stack([t for _, _, t in warm]).mean(dim=0)
            expected = balanced_probe_scales(mean, sizes)
        else:
            expected = balanced_probe_scales(
                history.values[step - 1] * sizes, sizes
            )
        assert torch.allclose(scales, expected, rtol=1e-6)
    # the weights differ between conditions, so the scales do too
    assert not torch.allclose(later[-1][1], torch.ones_like(later[-1][1]))


@pytest.mark.parametrize(
    "options",
    [{"balanced_probe": False}, {"estimator": "parameter"}],
    ids=["plain-probe", "parameter"],
)
def test_probe_scales_only_for_a_balanced_predictor(options):
    weighting = ScaleSpy(alpha=0.5, warmup_samples=3, **options)
    solver = make_solver("wave", weighting=weighting)
    make_trainer(solver, steps=3).train()
    assert len(weighting.drawn) == 3 + 3  # warm start, then one per step
    assert all(scales is None for _, scales, _ in weighting.drawn)


class TraceHistory(lightning.Callback):
    """The trace estimates behind each training step's weights."""

    def __init__(self):
        self.traces = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, idx):
        self.traces.append(ntk_callback(trainer).statistics.traces)


@pytest.mark.parametrize("estimator", ["predictor", "parameter"])
def test_deferred_samples_enter_the_next_steps_weights(estimator):
    # With the parameters frozen (lr = 0) and alpha = 1 the trace estimates
    # behind the weights are the last sample, and step t draws the same
    # probes in both modes (after step 0's warm start), so the deferred
    # estimates of step t + 1 are the same-step estimates of step t. Plain
    # probes: balanced ones take their scales from the running estimate,
    # which the deferral shifts by one step.
    from pina.optim import TorchOptimizer

    class Published(SketchNTKWeighting):
        # With alpha = 1 a single sketch's cross terms can turn an average
        # negative; the restart of that block draws probes of its own, which
        # would break the step-for-step correspondence tested here.
        isolates_blocks = False

    def traces(deferred):
        weighting = Published(
            sample_every_n_steps=1,
            alpha=1.0,
            warmup_samples=2,
            estimator=estimator,
            seed=3,
            safeguard=None,
            balanced_probe=False,
            sample_after_backward=deferred,
        )
        problem = make_problem("wave")
        torch.manual_seed(0)
        solver = PhysicsInformedSingleModelSolver(
            problem,
            mlp(2, 1),
            optimizer=TorchOptimizer(torch.optim.SGD, lr=0.0),
            weighting=weighting,
        )
        recorder = TraceHistory()
        make_trainer(solver, steps=6, callbacks=[recorder]).train()
        return recorder.traces

    same_step, deferred = traces(False), traces(True)
    assert len(same_step[0]) == 3
    assert same_step[0] == deferred[0]  # the warm start, in both modes
    for step in range(1, 5):
        for name, trace in same_step[step].items():
            assert deferred[step + 1][name] == pytest.approx(trace, rel=1e-5)
    # the estimates do change from step to step (the test is not vacuous)
    assert same_step[1] != same_step[2]
