"""The training loop of the paper's experiments.

The command line (:mod:`pina_ntk.paper.cli`) and the tutorials call these
functions, so both run exactly the same experiment.
"""

import contextlib
import logging
import time
import warnings
from dataclasses import dataclass, field

import lightning
import torch
from lightning.pytorch.callbacks import Callback
from pina import Trainer
from typing_extensions import override
from pina.optim import TorchOptimizer, TorchScheduler
from pina.solver import PhysicsInformedSingleModelSolver

from ...core.checks import check_choice
from ...integration.resampling import ResampleCallback, discretise_conditions
from .models import ScaledMLP, input_box
from .settings import WEIGHTINGS, make_weighting


def _step_loss(outputs):
    """The training loss of a step, from Lightning's ``outputs``."""
    loss = outputs["loss"] if isinstance(outputs, dict) else outputs
    return float(loss)


class _History(Callback):
    """Records the loss and the NTK weights every ``every`` steps."""

    def __init__(self, every):
        self.every = every
        self.steps, self.losses, self.weights = [], [], []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step - 1  # the step that just ended
        if step % self.every:
            return
        self.steps.append(step)
        self.losses.append(_step_loss(outputs))
        weights = ntk_weights_of(pl_module)
        if weights:
            self.weights.append(weights)


class ErrorHistory(Callback):
    """
    Records an error of the solver every ``every`` optimisation steps, with
    the training time spent so far (the evaluations' own time excluded), so
    that runs can be compared at equal wall time.

    :param int every: Steps between evaluations (after steps ``every``,
        ``2 every``, ... and after the last step).
    :param callable error_fn: ``solver -> float``, e.g. the relative L2
        error on a fixed grid.
    """

    def __init__(self, every, error_fn):
        self.every = every
        self.error_fn = error_fn
        self.steps, self.seconds, self.errors = [], [], []
        #: Seconds spent in evaluations (not training).
        self.excluded = 0.0
        self._start = None

    @override
    def on_train_start(self, trainer, pl_module):
        self._start = time.perf_counter()

    @override
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step % self.every == 0:
            self._record(trainer.global_step, pl_module)

    @override
    def on_train_end(self, trainer, pl_module):
        if not self.steps or self.steps[-1] != trainer.global_step:
            self._record(trainer.global_step, pl_module)

    def as_dict(self):
        """
        The record so far.

        :return: ``{"steps": [...], "seconds": [...], "errors": [...]}``
            (copies).
        :rtype: dict
        """
        return {
            "steps": list(self.steps),
            "seconds": list(self.seconds),
            "errors": list(self.errors),
        }

    def _record(self, step, solver):
        now = time.perf_counter()
        training = solver.training
        error = float(self.error_fn(solver))
        solver.train(training)
        self.steps.append(step)
        self.seconds.append(now - self._start - self.excluded)
        self.errors.append(error)
        self.excluded += time.perf_counter() - now


def ntk_weights_of(solver):
    """
    The current NTK weights of a solver (empty without NTK weighting).

    :param solver: A PINA solver.
    :return: ``{condition: float}``.
    :rtype: dict
    """
    driver = getattr(solver.weighting, "driver", None)
    return {} if driver is None else driver.weights


class _Progress(Callback):
    """A tqdm bar over optimisation steps (Lightning's counts epochs)."""

    def __init__(self, total, description):
        self.total = total
        self.description = description
        self.bar = None

    def on_train_start(self, trainer, pl_module):
        # the plain text bar: it also renders in notebooks without
        # ipywidgets and leaves one readable line in saved outputs
        from tqdm import tqdm

        self.bar = tqdm(
            total=self.total,
            desc=self.description,
            unit="step",
            mininterval=2.0,
        )

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.bar.update(1)
        if trainer.global_step % 50 == 0:
            self.bar.set_postfix(loss=f"{_step_loss(outputs):.3e}")

    def on_train_end(self, trainer, pl_module):
        self.bar.close()


@dataclass
class TrainResult:
    """
    The outcome of :func:`train_pinn`.

    :param str weighting: ``"none"``, ``"exact"`` or ``"sketch"``.
    :param solver: The trained PINA solver.
    :param float wall_time: Seconds spent in ``Trainer.train``.
    :param list steps: Steps at which the history was recorded.
    :param list losses: Total (weighted) training loss at those steps.
    :param list weights: NTK weights ``{condition: w}`` at those steps
        (empty without NTK weighting).
    :param dict final_weights: The weights after the last step.
    :param dict error_history: With ``error_fn``: ``steps``, ``seconds``
        (training time so far, evaluations excluded) and ``errors``; empty
        lists otherwise.
    """

    weighting: str
    solver: object
    wall_time: float
    steps: list
    losses: list
    weights: list
    final_weights: dict
    error_history: dict = field(
        default_factory=lambda: {"steps": [], "seconds": [], "errors": []}
    )

    def predict(self, points):
        """
        Evaluate the trained network.

        :param LabelTensor points: Inputs labelled like the problem's.
        :return: The outputs as a plain tensor.
        :rtype: torch.Tensor
        """
        self.solver.eval()
        with torch.no_grad():
            out = self.solver(points.to(self.solver.device))
        return torch.Tensor.as_subclass(out, torch.Tensor).cpu()


def train_pinn(
    problem, weighting, settings, progress=False, error_fn=None, error_every=0
):
    """
    Train a PINN with the given loss weighting, resampling points each step.

    :param problem: A PINA problem (a fresh instance; it is discretised here).
    :param str weighting: ``"none"``, ``"exact"`` or ``"sketch"``.
    :param ExperimentSettings settings: The settings.
    :param bool progress: Show a progress bar over the steps.
    :param callable error_fn: ``solver -> float``, recorded every
        ``error_every`` steps with the training time so far
        (:class:`ErrorHistory`); ``None`` records nothing. Default ``None``.
    :param int error_every: See ``error_fn``. Default ``0`` (only with
        ``error_fn``: after the last step only).
    :return: The trained solver, timings and histories; ``wall_time``
        excludes the evaluations of ``error_fn``.
    :rtype: TrainResult
    :raises ValueError: On an unknown weighting or bad settings.
    """
    check_choice("weighting", weighting, WEIGHTINGS)
    lightning.seed_everything(settings.seed, verbose=False)
    counts = settings.points
    discretise_conditions(problem, counts)
    lower, upper = input_box(problem)
    model = ScaledMLP(
        lower,
        upper,
        len(problem.output_variables),
        settings.width,
        settings.depth,
        settings.fourier_features,
        settings.fourier_scale,
    )
    gamma = settings.lr_decay ** (1.0 / settings.lr_decay_steps)
    solver = PhysicsInformedSingleModelSolver(
        problem,
        model,
        optimizer=TorchOptimizer(torch.optim.Adam, lr=settings.lr),
        scheduler=TorchScheduler(
            torch.optim.lr_scheduler.ExponentialLR, gamma=gamma
        ),
        weighting=make_weighting(weighting, settings),
    )
    # a pina-ntk weighting brings its NTKCallback by itself
    history = _History(settings.history_every)
    callbacks = [history]
    if settings.resample_every > 0:
        callbacks.append(ResampleCallback(settings.resample_every, counts))
    errors = None
    if error_fn is not None:
        errors = ErrorHistory(error_every or settings.steps, error_fn)
        callbacks.append(errors)
    if progress:
        callbacks.append(_Progress(settings.steps, weighting))
    with quiet_lightning():
        trainer = make_trainer(
            solver, settings.steps, callbacks, settings.accelerator
        )
        start = time.perf_counter()
        trainer.train()
        wall_time = time.perf_counter() - start
    history_of_errors = {"steps": [], "seconds": [], "errors": []}
    if errors is not None:
        wall_time -= errors.excluded
        history_of_errors = errors.as_dict()
    return TrainResult(
        weighting=weighting,
        solver=solver,
        wall_time=wall_time,
        steps=history.steps,
        losses=history.losses,
        weights=history.weights,
        final_weights=ntk_weights_of(solver),
        error_history=history_of_errors,
    )


def train_runs(settings, progress=False):
    """
    Train one PINN per weighting of ``settings``, each on a fresh problem,
    yielding each as soon as it is trained.

    :param ExperimentSettings settings: The settings.
    :param bool progress: Show progress bars.
    :return: ``(weighting, TrainResult)`` pairs in the order of
        ``settings.weightings``.
    :rtype: iterator
    """
    for name in settings.weightings:
        yield name, train_pinn(
            settings.problem_class(), name, settings, progress
        )


def make_trainer(solver, steps, callbacks, accelerator="cpu"):
    """
    The experiments' full-batch ``pina.Trainer``: one optimisation step per
    epoch, no validation, test split, logger, checkpoints or Lightning bar.

    :param solver: The PINA solver.
    :param int steps: Optimisation steps (epochs).
    :param list callbacks: Lightning callbacks.
    :param str accelerator: Lightning's accelerator. Default ``"cpu"``.
    :rtype: pina.Trainer
    """
    return Trainer(
        solver,
        max_epochs=steps,
        accelerator=accelerator,
        devices=1,
        callbacks=callbacks,
        train_size=1.0,
        val_size=0.0,
        test_size=0.0,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        enable_checkpointing=False,
    )


@contextlib.contextmanager
def quiet_lightning(*messages):
    """
    Silence Lightning's start-up banners and the warnings that do not apply
    to the experiments' full-batch training (no validation set; batch size
    inferred for logged scalars), which would bury a tutorial's output.

    :param str messages: More warning messages (regular expressions) to
        ignore.
    """
    logger = logging.getLogger("lightning.pytorch")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            for message in (
                ".*val_dataloader.*",
                ".*ambiguous collection.*",
                # emitted by Lightning's own internals, nothing to fix
                ".*LeafSpec.*",
                *messages,
            ):
                warnings.filterwarnings("ignore", message=message)
            yield
    finally:
        logger.setLevel(level)
