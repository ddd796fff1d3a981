"""The training loop of the paper's experiments.

The command line (:mod:`pina_ntk.paper.cli`) and the tutorials call these
functions, so both run exactly the same experiment.
"""

import contextlib
import logging
import time
import warnings
from dataclasses import dataclass

import lightning
import torch
from lightning.pytorch.callbacks import Callback
from pina import Trainer
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
    """

    weighting: str
    solver: object
    wall_time: float
    steps: list
    losses: list
    weights: list
    final_weights: dict

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


def train_pinn(problem, weighting, settings, progress=False):
    """
    Train a PINN with the given loss weighting, resampling points each step.

    :param problem: A PINA problem (a fresh instance; it is discretised here).
    :param str weighting: ``"none"``, ``"exact"`` or ``"sketch"``.
    :param ExperimentSettings settings: The settings.
    :param bool progress: Show a progress bar over the steps.
    :return: The trained solver, timings and histories.
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
    if progress:
        callbacks.append(_Progress(settings.steps, weighting))
    with _quiet_lightning():
        trainer = make_trainer(
            solver, settings.steps, callbacks, settings.accelerator
        )
        start = time.perf_counter()
        trainer.train()
        wall_time = time.perf_counter() - start
    return TrainResult(
        weighting=weighting,
        solver=solver,
        wall_time=wall_time,
        steps=history.steps,
        losses=history.losses,
        weights=history.weights,
        final_weights=ntk_weights_of(solver),
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
def _quiet_lightning():
    # Lightning's start-up banners and two warnings that do not apply here
    # (no validation set; batch size inferred for logged scalars) would
    # bury the tutorial's output.
    logger = logging.getLogger("lightning.pytorch")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*val_dataloader.*")
            warnings.filterwarnings(
                "ignore", message=".*ambiguous collection.*"
            )
            # emitted by Lightning's own internals, nothing for users to fix
            warnings.filterwarnings("ignore", message=".*LeafSpec.*")
            yield
    finally:
        logger.setLevel(level)
