"""NTK weightings inside pina.Trainer: training, logging, solvers, resume."""

import csv
import math

import lightning
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from pina.solver import (
    CausalPhysicsInformedSingleModelSolver,
    GradientPhysicsInformedSingleModelSolver,
    PhysicsInformedEnsembleSolver,
    PhysicsInformedSingleModelSolver,
    RBAPhysicsInformedSingleModelSolver,
)
from pina.weighting import ScalarWeighting

from pina_ntk import NTKCallback, NTKWeighting, SketchNTKWeighting
from pina_ntk.integration.kernel_statistics import KernelStatistics, probe_seed
from pina_ntk.integration.kernel_weighting import block_sizes

from conftest import (
    WeightHistory,
    make_problem,
    make_solver,
    make_trainer,
    mlp,
    ntk_callback,
)

WEIGHTINGS = {
    "exact": lambda: NTKWeighting(),
    "exact-every-3": lambda: NTKWeighting(update_every_n_steps=3),
    "predictor": lambda: SketchNTKWeighting(
        sample_every_n_steps=1, alpha=0.2, warmup_samples=4
    ),
    "predictor-central-rademacher": lambda: SketchNTKWeighting(
        sample_every_n_steps=1,
        alpha=0.2,
        warmup_samples=4,
        difference="central",
        probe="rademacher",
    ),
    "parameter": lambda: SketchNTKWeighting(
        sample_every_n_steps=1,
        alpha=0.2,
        warmup_samples=4,
        estimator="parameter",
    ),
    "parameter-central": lambda: SketchNTKWeighting(
        sample_every_n_steps=1,
        alpha=0.2,
        warmup_samples=4,
        estimator="parameter",
        difference="central",
    ),
    "predictor-full-kernel": lambda: SketchNTKWeighting(
        sample_every_n_steps=1, alpha=0.2, warmup_samples=4, full_kernel=True
    ),
    "predictor-same-step": lambda: SketchNTKWeighting(
        sample_every_n_steps=1,
        alpha=0.2,
        warmup_samples=4,
        sample_after_backward=False,
    ),
    "predictor-plain-probe": lambda: SketchNTKWeighting(
        sample_every_n_steps=1,
        alpha=0.2,
        warmup_samples=4,
        balanced_probe=False,
    ),
    "predictor-every-2": lambda: SketchNTKWeighting(
        alpha=0.05, warmup_samples=8, sample_every_n_steps=2
    ),
    "parameter-every-3": lambda: SketchNTKWeighting(
        alpha=0.2,
        warmup_samples=4,
        estimator="parameter",
        sample_every_n_steps=3,
    ),
    "exact-smoothed-every-2": lambda: NTKWeighting(
        update_every_n_steps=2, alpha=0.3
    ),
}


def read_csv_metrics(logger):
    with open(f"{logger.log_dir}/metrics.csv") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("name", list(WEIGHTINGS))
@pytest.mark.parametrize("kind", ["poisson", "wave", "supervised"])
def test_training_gives_finite_positive_logged_weights(tmp_path, kind, name):
    solver = make_solver(kind, weighting=WEIGHTINGS[name]())
    logger = CSVLogger(tmp_path)
    steps = 5
    trainer = make_trainer(solver, steps=steps, logger=logger)
    trainer.train()
    rows = read_csv_metrics(logger)
    conditions = list(solver.problem.conditions)
    for condition in conditions:
        logged = [
            float(r[f"ntk_weight/{condition}"])
            for r in rows
            if r.get(f"ntk_weight/{condition}")
        ]
        assert len(logged) == steps
        assert all(math.isfinite(w) and w > 0 for w in logged)
        traces = [
            float(r[f"ntk_trace/{condition}"])
            for r in rows
            if r.get(f"ntk_trace/{condition}")
        ]
        assert len(traces) == steps and all(t > 0 for t in traces)
    accepted = [
        float(r["ntk_safeguard/accepted"])
        for r in rows
        if r.get("ntk_safeguard/accepted")
    ]
    rejected = [
        float(r["ntk_safeguard/rejected"])
        for r in rows
        if r.get("ntk_safeguard/rejected")
    ]
    assert len(accepted) == steps and accepted[-1] + rejected[-1] >= 1
    refreshes = [
        float(r["ntk_refreshes"]) for r in rows if r.get("ntk_refreshes")
    ]
    every = solver.weighting.refresh_every_n_steps
    assert refreshes == [float(t // every + 1) for t in range(steps)]
    weights = ntk_callback(trainer).weights
    assert set(weights) == set(conditions)
    if name == "predictor-full-kernel":
        kernel = ntk_callback(trainer).kernel
        n = sum(
            len(c.input) * (2 if c.name == "t0" else 1)
            for c in solver.problem.conditions.values()
        )
        assert kernel.shape == (n, n) and torch.allclose(kernel, kernel.T)


def test_larger_kernel_trace_gets_smaller_weight():
    # NTK weights balance convergence rates: the condition whose residual
    # moves fastest (largest mean kernel diagonal) is weighted least, the
    # opposite of PINA's gradient-norm NeuralTangentKernelWeighting.
    solver = make_solver("wave", weighting=NTKWeighting())
    trainer = make_trainer(solver, steps=1)
    trainer.train()
    weights = ntk_callback(trainer).weights
    traces = ntk_callback(trainer).traces
    columns = {"D": 1, "boundary": 1, "t0": 2}
    mean_diag = {
        c: traces[c] / (len(solver.problem.conditions[c].input) * columns[c])
        for c in traces
    }
    order = sorted(mean_diag, key=mean_diag.get)
    assert sorted(weights, key=weights.get, reverse=True) == order
    assert len(set(round(v, 6) for v in weights.values())) == 3


@pytest.mark.parametrize(
    "solver_cls,kind",
    [
        (CausalPhysicsInformedSingleModelSolver, "wave"),
        (GradientPhysicsInformedSingleModelSolver, "poisson"),
        (PhysicsInformedSingleModelSolver, "poisson"),
        (RBAPhysicsInformedSingleModelSolver, "poisson"),
    ],
)
@pytest.mark.parametrize("every", [1, 2])
def test_physics_informed_solver_variants(solver_cls, kind, every):
    problem = make_problem(kind)
    model = mlp(len(problem.input_variables), len(problem.output_variables))
    extra = {}
    if solver_cls is CausalPhysicsInformedSingleModelSolver:
        extra["regularized_conditions"] = ["D"]
    solver = solver_cls(
        problem,
        model,
        weighting=SketchNTKWeighting(
            sample_every_n_steps=every, warmup_samples=2
        ),
        **extra,
    )
    trainer = make_trainer(solver, steps=3)
    trainer.train()
    weights = ntk_callback(trainer).weights
    assert set(weights) == set(problem.conditions)
    assert all(math.isfinite(w) and w > 0 for w in weights.values())
    assert ntk_callback(trainer).statistics.refreshes == (
        3 if every == 1 else 2
    )


def test_causal_solver_kernel_covers_every_time_slice():
    problem = make_problem("wave")
    model = mlp(2, 1)
    solver = CausalPhysicsInformedSingleModelSolver(
        problem,
        model,
        weighting=NTKWeighting(),
        n_steps=4,
        regularized_conditions=["D"],
    )
    trainer = make_trainer(solver, steps=1)
    recorder_calls = []
    original = NTKCallback.weights_for_step

    def spy(self, losses):
        recorder_calls.append([n for n, _, _ in self._recorder.calls])
        return original(self, losses)

    NTKCallback.weights_for_step = spy
    try:
        trainer.train()
    finally:
        NTKCallback.weights_for_step = original
    # the causal solver evaluates its interior residual once per time slice
    assert recorder_calls[0].count("D") == 4


def test_batches_update_once_per_optimisation_step():
    solver = make_solver(
        "poisson",
        weighting=SketchNTKWeighting(sample_every_n_steps=1, warmup_samples=2),
        n=20,
    )
    history = WeightHistory()
    trainer = make_trainer(solver, steps=2, callbacks=[history], batch_size=10)
    trainer.train()
    batches_per_epoch = len(history.weights) // 2
    assert batches_per_epoch > 1
    assert ntk_callback(trainer).step == len(history.weights)


def test_batches_with_a_subset_of_conditions_are_refused():
    # PINA 0.3 puts every condition in every batch; a future batching mode
    # that does not must fail loudly rather than compare partial kernels.
    statistics = KernelStatistics(NTKWeighting(), "mean")
    statistics.check_names(["D", "boundary"])
    with pytest.raises(RuntimeError, match="common_batch_size"):
        statistics.check_names(["D"])


def test_full_kernel_refuses_changing_points():
    solver = make_solver(
        "poisson",
        weighting=SketchNTKWeighting(sample_every_n_steps=1, full_kernel=True),
        n=20,
    )
    trainer = make_trainer(solver, steps=2, batch_size=10)
    with pytest.raises(
        ValueError, match="full_kernel=True needs the same points"
    ):
        trainer.train()


def test_validation_uses_training_weights():
    solver = make_solver("poisson", weighting=NTKWeighting(), n=20)
    trainer = make_trainer(
        solver, steps=3, train_size=0.7, val_size=0.3, num_sanity_val_steps=1
    )
    trainer.train()
    assert ntk_callback(trainer).step == 3


# ------------------------------------------------------------ checkpoints
def run_with_history(
    weighting, steps, tmp_path=None, ckpt_path=None, save=False
):
    solver = make_solver("wave", weighting=weighting, seed=3)
    history = WeightHistory()
    callbacks = [history]
    kwargs = {}
    if save:
        callbacks.append(
            ModelCheckpoint(dirpath=tmp_path, save_last=True, every_n_epochs=1)
        )
        kwargs["enable_checkpointing"] = True
    trainer = make_trainer(solver, steps=steps, callbacks=callbacks, **kwargs)
    trainer.train(ckpt_path=ckpt_path)
    return history, solver, trainer


@pytest.mark.parametrize(
    "weighting",
    [
        lambda: NTKWeighting(update_every_n_steps=2),
        lambda: NTKWeighting(update_every_n_steps=3),
        lambda: SketchNTKWeighting(
            sample_every_n_steps=1, alpha=0.3, warmup_samples=3, seed=5
        ),
        lambda: SketchNTKWeighting(
            sample_every_n_steps=1,
            alpha=0.3,
            warmup_samples=3,
            seed=5,
            estimator="parameter",
        ),
        lambda: SketchNTKWeighting(
            sample_every_n_steps=1,
            alpha=0.3,
            warmup_samples=3,
            seed=5,
            full_kernel=True,
        ),
        lambda: SketchNTKWeighting(
            sample_every_n_steps=1,
            alpha=0.3,
            warmup_samples=3,
            seed=5,
            full_kernel=True,
            balanced_probe=False,
        ),
        lambda: SketchNTKWeighting(
            alpha=0.3, warmup_samples=3, seed=5, sample_every_n_steps=2
        ),
        lambda: SketchNTKWeighting(
            alpha=0.3,
            warmup_samples=3,
            seed=5,
            estimator="parameter",
            sample_every_n_steps=2,
        ),
        lambda: SketchNTKWeighting(
            alpha=0.3, warmup_samples=3, seed=5, sample_every_n_steps=3
        ),
        lambda: NTKWeighting(update_every_n_steps=2, alpha=0.5),
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
    ],
)
def test_checkpoint_resume_continues_with_identical_weights(
    tmp_path, weighting
):
    # The checkpoint is written by a run with max_epochs=3 and resumed with
    # max_epochs=6, at step 3: between two exact updates (every 2 steps),
    # at an exact update (every 3 steps), at a sketch sample (every step).
    straight, solver_a, trainer_a = run_with_history(weighting(), steps=6)
    first, _, _ = run_with_history(
        weighting(), steps=3, tmp_path=tmp_path, save=True
    )
    resumed, solver_b, trainer_b = run_with_history(
        weighting(), steps=6, ckpt_path=str(tmp_path / "last.ckpt")
    )
    assert first.weights == straight.weights[:3]
    assert resumed.weights == straight.weights[3:]  # bitwise equal floats
    for p, q in zip(solver_a.parameters(), solver_b.parameters()):
        assert torch.equal(p, q)
    a, b = ntk_callback(trainer_a), ntk_callback(trainer_b)
    assert a.step == b.step == 6
    assert a.traces == b.traces
    guard_a, guard_b = (
        solver_a.weighting.safeguard,
        solver_b.weighting.safeguard,
    )
    assert torch.equal(guard_a.total, guard_b.total)
    assert a.state_dict()["seed"] == b.state_dict()["seed"]  # probe stream
    assert torch.equal(
        a.statistics.trace_buffer, b.statistics.trace_buffer
    )  # kernel buffer
    if a.kernel is not None:
        assert torch.equal(a.kernel, b.kernel)


# ------------------------------------------------------------ mis-use
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


def test_callback_without_ntk_weighting_is_rejected():
    solver = make_solver("poisson", weighting=ScalarWeighting(weights=1.0))
    trainer = make_trainer(solver, steps=1)
    with pytest.raises(ValueError, match="weighting=pina_ntk.NTKWeighting"):
        trainer.train()


def test_multi_model_solver_is_rejected():
    problem = make_problem("poisson")
    models = [mlp(2, 1), mlp(2, 1)]
    solver = PhysicsInformedEnsembleSolver(
        problem, models, weighting=NTKWeighting()
    )
    trainer = make_trainer(solver, steps=1)
    with pytest.raises(ValueError, match="single-model"):
        trainer.train()


def test_weighting_shared_by_two_solvers_is_rejected():
    weighting = NTKWeighting()
    first = make_solver("poisson", weighting=weighting)
    make_solver("poisson", weighting=weighting)  # PINA re-binds the weighting
    trainer = make_trainer(first, steps=1)
    with pytest.raises(ValueError, match="one weighting instance per solver"):
        trainer.train()


# ------------------------------------------------ deferred sketch samples
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

    def prepare_sample(self, params, residuals, generator, scales=None):
        prepared = super().prepare_sample(params, residuals, generator, scales)
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
        self.traces.append(ntk_callback(trainer).traces)


@pytest.mark.parametrize("estimator", ["predictor", "parameter"])
def test_deferred_samples_enter_the_next_steps_weights(estimator):
    # With the parameters frozen (lr = 0) and alpha = 1 the trace estimates
    # behind the weights are the last sample, and step t draws the same
    # probes in both modes (after step 0's warm start), so the deferred
    # estimates of step t + 1 are the same-step estimates of step t. Plain
    # probes: balanced ones take their scales from the running estimate,
    # which the deferral shifts by one step.
    from pina.optim import TorchOptimizer

    def traces(deferred):
        weighting = SketchNTKWeighting(
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


def test_probe_seeds_are_reproducible_and_distinct():
    seeds = {
        (rank, step): probe_seed(7, rank, step)
        for rank in range(4)
        for step in range(256)
    }
    assert probe_seed(7, 1, 5) == seeds[1, 5]  # a pure function
    assert all(0 <= s < 2**63 for s in seeds.values())
    # torch's CPU generator keeps the low 32 bits: those must differ too
    assert len({s & 0xFFFFFFFF for s in seeds.values()}) == len(seeds)
    assert probe_seed(8, 0, 0) != probe_seed(7, 0, 0)


def test_entry_counts_are_rebuilt_only_when_they_change():
    callback = KernelStatistics(NTKWeighting(), "mean")
    blocks = [torch.zeros(4), torch.zeros(2, 3)]
    first = callback.local_sizes(blocks)
    assert first.tolist() == [4.0, 6.0]
    # same counts: the same tensor (no host-to-device copy on a GPU)
    assert callback.local_sizes([torch.ones(4), torch.ones(6)]) is first
    changed = callback.local_sizes([torch.zeros(5), torch.zeros(6)])
    assert changed.tolist() == [5.0, 6.0]
    # same counts in another dtype (or on another device): rebuilt
    double = callback.local_sizes([torch.zeros(5).double(), torch.zeros(6)])
    assert double.dtype == torch.float64 and double.tolist() == [5.0, 6.0]
