"""PINA's workflows with both weightings, written from PINA's public API:
every single-model solver, every PINA callback, and the patterns PINA's
users train with (train then validate and test, a validation split,
``batch_size``, an inverse problem, ``load_from_checkpoint`` followed by
more training). L-BFGS and several Trainers have files of their own
(``test_closure_optimizers.py``, ``test_several_trainers.py``). The guide's
*Works with* table names the test of each row.
"""

import math

import lightning
import pytest
import torch
from pina import Condition, LabelTensor
from pina.callback import (
    DataNormalizer,
    MetricTracker,
    PINAProgressBar,
    R3Refinement,
    SwitchScheduler,
)
from pina.domain import CartesianDomain
from pina.equation import Equation, FixedValue
from pina.model import FeedForward
from pina.operator import laplacian
from pina.optim import TorchScheduler
from pina.problem import InverseProblem, SpatialProblem
from pina.solver import (
    AutoregressiveSingleModelSolver,
    CausalPhysicsInformedSingleModelSolver,
    GradientPhysicsInformedSingleModelSolver,
    PhysicsInformedSingleModelSolver,
    RBAPhysicsInformedSingleModelSolver,
    SupervisedSingleModelSolver,
)

from pina_ntk import NTKWeighting, SketchNTKWeighting

from helpers import (
    MULTI_MODEL_KINDS,
    WeightHistory,
    make_problem,
    make_solver,
    make_trainer,
    mlp,
    multi_model_solver,
    series_problem,
)

WEIGHTINGS = {
    "sketch": lambda: SketchNTKWeighting(
        warmup_samples=2, sample_every_n_steps=2
    ),
    "exact": NTKWeighting,
}


def assert_trained(solver, steps):
    """Finite positive weights for every condition after ``steps`` steps."""
    statistics = solver.weighting.driver
    assert statistics.step == steps
    weights = statistics.weights
    assert set(weights) == set(solver.problem.conditions)
    assert all(math.isfinite(w) and w > 0 for w in weights.values())


# ------------------------------------------------------------------ solvers
def solver_of(kind, weighting):
    """A small instance of each single-model PINA solver."""
    if kind == "supervised":
        return make_solver("supervised", weighting)
    if kind == "autoregressive":
        torch.manual_seed(0)
        return AutoregressiveSingleModelSolver(
            series_problem(), mlp(2, 2, width=8), weighting=weighting, eps=0.5
        )
    if kind == "causal":
        problem = make_problem("wave", n=10)
        return CausalPhysicsInformedSingleModelSolver(
            problem,
            mlp(2, 1),
            weighting=weighting,
            n_steps=3,
            regularized_conditions=["D"],
        )
    classes = {
        "physics-informed": PhysicsInformedSingleModelSolver,
        "gradient-enhanced": GradientPhysicsInformedSingleModelSolver,
        "rba": RBAPhysicsInformedSingleModelSolver,
    }
    return classes[kind](
        make_problem("poisson", n=10), mlp(2, 1), weighting=weighting
    )


SOLVERS = [
    "physics-informed",
    "causal",
    "gradient-enhanced",
    "rba",
    "supervised",
    "autoregressive",
]


@pytest.mark.parametrize("weighting", list(WEIGHTINGS))
@pytest.mark.parametrize("kind", SOLVERS)
def test_every_single_model_solver_trains_and_tests(kind, weighting):
    solver = solver_of(kind, WEIGHTINGS[weighting]())
    trainer = make_trainer(solver, 3, train_size=0.7, test_size=0.3)
    trainer.train()
    assert_trained(solver, 3)
    weights = solver.weighting.driver.weights
    trainer.test()  # the loss of the test set takes the last weights
    assert solver.weighting.driver.weights == weights
    assert solver.weighting.driver.step == 3


class AggregatedWeights(lightning.Callback):
    """The weights of every loss aggregation of each training step."""

    def __init__(self):
        self.steps = []

    def on_train_batch_start(self, trainer, solver, batch, batch_idx):
        self.steps.append([])
        weighting = solver.weighting
        if "aggregate" not in weighting.__dict__:
            aggregate = weighting.aggregate

            def recorded(losses):
                saved = weighting.last_saved_weights()
                self.steps[-1].append({k: float(v) for k, v in saved.items()})
                return aggregate(losses)

            weighting.aggregate = recorded


@pytest.mark.parametrize("weighting", list(WEIGHTINGS))
@pytest.mark.parametrize("kind", MULTI_MODEL_KINDS)
def test_every_multi_model_solver_trains_and_tests(kind, weighting):
    # PINA's multi-model solvers optimise by hand; the self-adaptive and
    # competitive solvers evaluate the loss twice a step (the maximisers'
    # step, the model's step): one step is counted, one sample drawn
    solver = multi_model_solver(kind, WEIGHTINGS[weighting]())
    trainer = make_trainer(solver, 3, train_size=0.7, test_size=0.3)
    trainer.train()
    assert_trained(solver, 3)
    statistics = solver.weighting.driver
    assert statistics.refreshes == (3 if weighting == "exact" else 2)
    # every proposal reviewed by the safeguard, its sum grown where the
    # weights can change (more than one condition)
    assert statistics.rejections["proposals"] == statistics.refreshes
    if len(solver.problem.conditions) > 1:
        assert float(solver.weighting.safeguard.total) > 0
    weights = statistics.weights
    trainer.test()
    assert statistics.weights == weights and statistics.step == 3


@pytest.mark.parametrize("kind", ["self-adaptive", "competitive"])
def test_both_loss_evaluations_of_a_step_take_its_weights(kind):
    solver = multi_model_solver(
        kind, SketchNTKWeighting(warmup_samples=2, sample_every_n_steps=1)
    )
    aggregations, history = AggregatedWeights(), WeightHistory()
    make_trainer(solver, 4, callbacks=[aggregations, history]).train()
    # the weights in force before each aggregation: the previous step's
    # (none before the first), then the step's own for the second
    for step, seen in enumerate(aggregations.steps):
        assert len(seen) == 2
        assert seen[1] == history.weights[step]
    assert len({tuple(w.values()) for w in history.weights}) == 4


@pytest.mark.parametrize(
    "kind", ["physics-informed ensemble", "self-adaptive", "competitive"]
)
def test_a_multi_model_solver_resumes_bitwise(tmp_path, kind):
    def run(steps, save=False, **fit):
        weighting = SketchNTKWeighting(
            warmup_samples=2, sample_every_n_steps=2, seed=5
        )
        solver = multi_model_solver(kind, weighting)
        history = WeightHistory()
        callbacks = [history]
        if save:
            callbacks.append(
                lightning.pytorch.callbacks.ModelCheckpoint(
                    dirpath=tmp_path, save_last=True, every_n_epochs=1
                )
            )
        make_trainer(
            solver, steps, callbacks=callbacks, enable_checkpointing=save
        ).train(**fit)
        return history.weights, solver

    straight, solver_a = run(6)
    first, _ = run(3, save=True)
    resumed, solver_b = run(6, ckpt_path=str(tmp_path / "last.ckpt"))
    assert first == straight[:3] and resumed == straight[3:]
    for p, q in zip(solver_a.parameters(), solver_b.parameters()):
        assert torch.equal(p, q)


# ---------------------------------------------------------------- callbacks
def test_metric_tracker_and_pinas_progress_bar():
    solver = make_solver("poisson", WEIGHTINGS["sketch"](), n=10)
    tracker = MetricTracker(["train_loss"])
    trainer = make_trainer(
        solver,
        4,
        callbacks=[tracker, PINAProgressBar(metrics=["train", "D"])],
        enable_progress_bar=True,
    )
    trainer.train()
    assert_trained(solver, 4)
    losses = tracker.metrics["train_loss"]
    assert len(losses) >= 3 and torch.isfinite(losses).all()


def test_r3_refinement():
    # R3 replaces the interior points every 2 epochs (PINA 0.3.2 stores them
    # in the condition's ``data.input``); the statistics carry on
    solver = make_solver("poisson", WEIGHTINGS["exact"](), n=10)
    trainer = make_trainer(solver, 5, callbacks=[R3Refinement(sample_every=2)])
    before = solver.problem.conditions["D"].data.input.tensor.clone()
    trainer.train()
    assert_trained(solver, 5)
    after = solver.problem.conditions["D"].data.input.tensor
    assert not torch.equal(after, before)


def test_switch_scheduler():
    solver = make_solver("poisson", WEIGHTINGS["sketch"](), n=10)
    switch = SwitchScheduler(
        TorchScheduler(torch.optim.lr_scheduler.StepLR, step_size=1),
        epoch_switch=2,
    )
    trainer = make_trainer(solver, 4, callbacks=[switch])
    trainer.train()
    assert_trained(solver, 4)
    assert type(trainer.lr_scheduler_configs[0].scheduler).__name__ == (
        "StepLR"
    )


@pytest.mark.parametrize("weighting", list(WEIGHTINGS))
def test_data_normalizer_on_a_supervised_problem(weighting):
    solver = make_solver("supervised", WEIGHTINGS[weighting]())
    normalizer = DataNormalizer(apply_to="target", stage="train")
    trainer = make_trainer(
        solver, 3, callbacks=[normalizer], train_size=0.7, val_size=0.3
    )
    trainer.train()
    assert_trained(solver, 3)
    assert normalizer.normalizer  # it normalised the targets


# ----------------------------------------------------------------- patterns
@pytest.mark.parametrize("weighting", list(WEIGHTINGS))
def test_a_validation_split_leaves_the_statistics_alone(weighting):
    # validation runs PINA's loss with the training weights after every
    # epoch; it neither counts as a step nor changes the weights
    solver = make_solver("poisson", WEIGHTINGS[weighting](), n=10)
    seen = []

    class Statistics(lightning.Callback):
        def on_train_batch_end(self, trainer, pl_module, *args):
            statistics = pl_module.weighting.driver
            seen.append(("train", statistics.step, statistics.weights))

        def on_validation_end(self, trainer, pl_module):
            statistics = pl_module.weighting.driver
            seen.append(("val", statistics.step, statistics.weights))

    trainer = make_trainer(
        solver, 3, callbacks=[Statistics()], train_size=0.7, val_size=0.3
    )
    trainer.train()
    assert_trained(solver, 3)
    assert math.isfinite(trainer.callback_metrics["val_loss"])
    validations = [i for i, row in enumerate(seen) if row[0] == "val"]
    assert len(validations) >= 3
    for index in validations:
        # every training step counted, none for validation ...
        trained_steps = sum(row[0] == "train" for row in seen[:index])
        assert seen[index][1] == trained_steps
        if index > 0:  # ... and the weights of the last training step
            assert seen[index][2] == seen[index - 1][2]


@pytest.mark.parametrize("weighting", list(WEIGHTINGS))
def test_batch_size_counts_one_step_per_batch(weighting):
    solver = make_solver("poisson", WEIGHTINGS[weighting](), n=10)
    trainer = make_trainer(solver, 2, batch_size=4)  # 3 batches an epoch
    trainer.train()
    assert trainer.global_step == 6
    assert_trained(solver, 6)


def inverse_problem():
    """``u'' + k pi^2 sin(pi x) = 0``, ``u(0) = u(1) = 0``, with ``k`` in
    ``[0.5, 2]`` unknown, and 8 observations of ``u = sin(pi x)``."""

    def poisson_with_unknown(input_, output_, params_):
        x = input_.extract(["x"])
        second = laplacian(output_, input_, components=["u"], d=["x"])
        return second + params_["k"] * torch.pi**2 * torch.sin(torch.pi * x)

    observed = LabelTensor(torch.linspace(0.05, 0.95, 8).unsqueeze(1), ["x"])
    values = LabelTensor(torch.sin(torch.pi * observed.tensor), ["u"])

    class Inverse(SpatialProblem, InverseProblem):
        output_variables = ["u"]
        spatial_domain = CartesianDomain({"x": [0, 1]})
        unknown_parameter_domain = CartesianDomain({"k": [0.5, 2]})
        domains = {
            "D": spatial_domain,
            "ends": CartesianDomain({"x": [0, 1]}),
        }
        conditions = {
            "D": Condition(domain="D", equation=Equation(poisson_with_unknown)),
            "ends": Condition(domain="ends", equation=FixedValue(0.0)),
            "data": Condition(input=observed, target=values),
        }

    problem = Inverse()
    lightning.seed_everything(0, verbose=False)
    problem.discretise_domain(12, "random", domains=["D"])
    problem.discretise_domain(2, "grid", domains=["ends"])
    return problem


@pytest.mark.parametrize("weighting", list(WEIGHTINGS))
def test_an_inverse_problem_trains_its_unknowns(weighting):
    problem = inverse_problem()
    solver = PhysicsInformedSingleModelSolver(
        problem, mlp(1, 1), weighting=WEIGHTINGS[weighting]()
    )
    start = float(problem.unknown_parameters["k"].detach())
    make_trainer(solver, 4).train()
    assert_trained(solver, 4)
    # the unknown is trained by the same optimiser, within its domain
    k = float(problem.unknown_parameters["k"].detach())
    assert k != start and 0.5 <= k <= 2


def test_load_from_checkpoint_then_more_training(tmp_path):
    solver = make_solver("poisson", WEIGHTINGS["sketch"](), n=10)
    checkpoint = lightning.pytorch.callbacks.ModelCheckpoint(
        dirpath=tmp_path, save_last=True
    )
    make_trainer(
        solver, 4, callbacks=[checkpoint], enable_checkpointing=True
    ).train()
    path = str(tmp_path / "last.ckpt")
    trained = solver.weighting.driver.weights

    def loaded():
        return PhysicsInformedSingleModelSolver.load_from_checkpoint(
            path,
            problem=solver.problem,
            model=FeedForward(
                2, 1, inner_size=16, n_layers=2, func=torch.nn.Tanh
            ),
            weighting=WEIGHTINGS["sketch"](),
        )

    # the module's state alone: the network as trained, fresh statistics
    fresh = loaded()
    for (_, a), (_, b) in zip(
        fresh.named_parameters(), solver.named_parameters()
    ):
        assert torch.equal(a, b)
    make_trainer(fresh, 2).train()
    assert_trained(fresh, 2)
    # with ckpt_path, the callback's state too: the steps go on from 4
    resumed = loaded()
    restored = []

    class Restored(lightning.Callback):
        def on_train_batch_start(self, trainer, pl_module, *args):
            if not restored:
                restored.append(pl_module.weighting.driver.weights)

    make_trainer(resumed, 6, callbacks=[Restored()], ntk=False).train(
        ckpt_path=path
    )
    assert restored[0] == trained
    assert_trained(resumed, 6)
