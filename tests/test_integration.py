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
    "predictor": lambda: SketchNTKWeighting(alpha=0.2, warmup_samples=4),
    "predictor-central-rademacher": lambda: SketchNTKWeighting(
        alpha=0.2, warmup_samples=4, difference="central", probe="rademacher"
    ),
    "parameter": lambda: SketchNTKWeighting(
        alpha=0.2, warmup_samples=4, estimator="parameter"
    ),
    "parameter-central": lambda: SketchNTKWeighting(
        alpha=0.2, warmup_samples=4, estimator="parameter", difference="central"
    ),
    "predictor-full-kernel": lambda: SketchNTKWeighting(
        alpha=0.2, warmup_samples=4, full_kernel=True
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
def test_physics_informed_solver_variants(solver_cls, kind):
    problem = make_problem(kind)
    model = mlp(len(problem.input_variables), len(problem.output_variables))
    extra = {}
    if solver_cls is CausalPhysicsInformedSingleModelSolver:
        extra["regularized_conditions"] = ["D"]
    solver = solver_cls(
        problem, model, weighting=SketchNTKWeighting(warmup_samples=2), **extra
    )
    trainer = make_trainer(solver, steps=3)
    trainer.train()
    weights = ntk_callback(trainer).weights
    assert set(weights) == set(problem.conditions)
    assert all(math.isfinite(w) and w > 0 for w in weights.values())


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
        "poisson", weighting=SketchNTKWeighting(warmup_samples=2), n=20
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
    callback = NTKCallback()
    callback._names = ["D", "boundary"]
    with pytest.raises(RuntimeError, match="common_batch_size"):
        callback.weights_for_step({"D": torch.tensor(1.0)})


def test_full_kernel_refuses_changing_points():
    solver = make_solver(
        "poisson", weighting=SketchNTKWeighting(full_kernel=True), n=20
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
        lambda: SketchNTKWeighting(alpha=0.3, warmup_samples=3, seed=5),
        lambda: SketchNTKWeighting(
            alpha=0.3, warmup_samples=3, seed=5, estimator="parameter"
        ),
        lambda: SketchNTKWeighting(
            alpha=0.3, warmup_samples=3, seed=5, full_kernel=True
        ),
    ],
    ids=["exact", "predictor", "parameter", "full-kernel"],
)
def test_checkpoint_resume_continues_with_identical_weights(
    tmp_path, weighting
):
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
    assert torch.equal(a._diag.value, b._diag.value)  # kernel buffer
    if a.kernel is not None:
        assert torch.equal(a.kernel, b.kernel)


# ------------------------------------------------------------ mis-use
def test_forgetting_the_callback_says_how_to_fix_it():
    solver = make_solver("poisson", weighting=SketchNTKWeighting())
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
