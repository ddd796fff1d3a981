"""Training machinery shared by the wave and Q-tensor experiments.

The command line (:mod:`pina_ntk.cli`) and the tutorials call these functions,
so both run exactly the same experiment.
"""

import contextlib
import json
import logging
import os
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar

import lightning
import torch
from lightning.pytorch.callbacks import Callback
from pina import LabelTensor, Trainer
from pina.optim import TorchOptimizer, TorchScheduler
from pina.solver import PhysicsInformedSingleModelSolver

from ..callback import NTKCallback
from ..resampling import ResampleCallback, discretise_conditions
from ..validation import (
    check_bool,
    check_choice,
    check_int,
    check_positive,
    check_rate,
)
from ..weighting import NTKWeighting, SketchNTKWeighting

#: Loss weightings of an experiment run.
WEIGHTINGS = ("none", "exact", "sketch")
#: Trace estimators of the sketch.
ESTIMATORS = ("predictor", "parameter")
#: Settings of the spaced-update safeguard.
SAFEGUARDS = ("default", "none")
#: Environment variable that switches tutorials to their quick settings.
QUICK_ENV = "PINA_NTK_QUICK"


def quick_mode():
    """
    Whether the quick (smoke-test) settings are asked for.

    :return: ``True`` when the environment variable ``PINA_NTK_QUICK`` is
        set to anything but ``""``, ``"0"``, ``"false"`` or ``"no"``.
    :rtype: bool
    """
    value = os.environ.get(QUICK_ENV, "").strip().lower()
    return value not in ("", "0", "false", "no")


class ScaledMLP(torch.nn.Module):
    """
    A tanh multilayer perceptron on inputs mapped affinely from a box
    ``[lower, upper]`` onto ``[-1, 1]``, optionally through a random Fourier
    feature embedding.

    With ``fourier_features = m > 0`` the scaled input ``z`` is first mapped
    to ``[cos(z B), sin(z B)]`` with a fixed (not trained) ``B`` of i.i.d.
    ``N(0, fourier_scale^2)`` entries, ``(len(lower), m)``, drawn from torch's
    global generator (Tancik et al. 2020; Wang, Wang & Perdikaris 2021).
    ``fourier_features=0`` is the plain MLP of the paper.

    Weights use Xavier-normal initialisation and biases start at zero, as in
    Wang, Yu & Perdikaris.

    :param list lower: Lower corner of the input box, one value per input.
    :param list upper: Upper corner of the input box.
    :param int output_dimensions: Number of outputs.
    :param int width: Neurons per hidden layer.
    :param int depth: Number of hidden layers.
    :param int fourier_features: ``m``, the number of random frequencies
        (``0``: no embedding). Default ``0``.
    :param float fourier_scale: Standard deviation of the frequencies.
        Default ``1.0``.
    :raises ValueError: If a size is not a positive integer, the box is
        empty or ``fourier_scale`` is not positive.

    :Example:
        >>> net = ScaledMLP([0.0, 0.0], [1.0, 1.0], 1, width=64, depth=3)
        >>> net(torch.rand(5, 2)).shape
        torch.Size([5, 1])
        >>> ScaledMLP([0.0], [1.0], 1, 8, 2, fourier_features=16)(
        ...     torch.rand(3, 1)).shape
        torch.Size([3, 1])
    """

    def __init__(
        self,
        lower,
        upper,
        output_dimensions,
        width,
        depth,
        fourier_features=0,
        fourier_scale=1.0,
    ):
        super().__init__()
        check_int("output_dimensions", output_dimensions, 1)
        check_int("width", width, 1)
        check_int("depth", depth, 1)
        check_int("fourier_features", fourier_features, 0)
        check_positive("fourier_scale", fourier_scale)
        lower = torch.as_tensor(lower, dtype=torch.get_default_dtype())
        upper = torch.as_tensor(upper, dtype=torch.get_default_dtype())
        if lower.shape != upper.shape or not bool((upper > lower).all()):
            raise ValueError(
                f"need lower < upper componentwise, got {lower} and {upper}."
            )
        self.register_buffer("centre", (upper + lower) / 2)
        self.register_buffer("half_width", (upper - lower) / 2)
        n_inputs = len(lower)
        frequencies = None
        if fourier_features:
            frequencies = fourier_scale * torch.randn(
                n_inputs, fourier_features
            )
            n_inputs = 2 * fourier_features
        # a buffer (saved, moved with the module), None without embedding
        self.register_buffer("frequencies", frequencies)
        sizes = [n_inputs] + [width] * depth + [output_dimensions]
        layers = []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            linear = torch.nn.Linear(n_in, n_out)
            torch.nn.init.xavier_normal_(linear.weight)
            torch.nn.init.zeros_(linear.bias)
            layers.append(linear)
            if i < depth:
                layers.append(torch.nn.Tanh())
        self.layers = torch.nn.Sequential(*layers)

    def forward(self, x):
        """
        :param torch.Tensor x: Inputs, ``(n, len(lower))``.
        :return: Outputs, ``(n, output_dimensions)``.
        :rtype: torch.Tensor
        """
        x = torch.Tensor.as_subclass(x, torch.Tensor)
        z = (x - self.centre) / self.half_width
        if self.frequencies is not None:
            z = z @ self.frequencies
            z = torch.cat([torch.cos(z), torch.sin(z)], dim=-1)
        return self.layers(z)


def make_weighting(kind, settings):
    """
    The loss weighting of one PINN of an experiment.

    :param str kind: ``"none"`` (plain sum of losses), ``"exact"``
        (:class:`~pina_ntk.NTKWeighting`) or ``"sketch"``
        (:class:`~pina_ntk.SketchNTKWeighting`).
    :param ExperimentSettings settings: Estimator, ``alpha``, warm start,
        update interval, safeguard and seed.
    :return: The weighting, or ``None`` for ``"none"``.
    :raises ValueError: On an unknown ``kind``.
    """
    check_choice("weighting", kind, WEIGHTINGS)
    safeguard = None if settings.safeguard == "none" else "default"
    if kind == "none":
        return None
    if kind == "exact":
        return NTKWeighting(
            update_every_n_steps=settings.exact_every, safeguard=safeguard
        )
    # The experiments' networks are small: the warm start (the only sampling
    # that runs while a training graph is alive, see sample_after_backward)
    # evaluates the displaced residuals in one piece, saving PINA's per-call
    # overhead at little memory cost.
    return SketchNTKWeighting(
        alpha=settings.alpha,
        warmup_samples=settings.warmup_samples,
        estimator=settings.estimator,
        balanced_probe=settings.balanced_probe,
        safeguard=safeguard,
        seed=settings.seed,
        evaluation_chunk_size=None,
    )


def _step_loss(outputs):
    """The training loss of a step, from Lightning's ``outputs``."""
    loss = outputs["loss"] if isinstance(outputs, dict) else outputs
    return float(loss)


class _History(Callback):
    """Records the loss and the NTK weights every ``every`` steps."""

    def __init__(self, every, ntk=None):
        self.every = every
        self.ntk = ntk
        self.steps, self.losses, self.weights = [], [], []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step - 1  # the step that just ended
        if step % self.every:
            return
        self.steps.append(step)
        self.losses.append(_step_loss(outputs))
        if self.ntk is not None:
            self.weights.append(self.ntk.weights)


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
class ExperimentSettings:
    """
    Settings of one experiment (the PINNs it trains and how); subclasses
    set the problem and the defaults of the tutorial's CPU run.

    Every PINN of an experiment uses the same settings; only the loss
    weighting differs.

    :param int steps: Adam steps per PINN (one full batch per step).
    :param int width: Neurons per hidden layer (tanh).
    :param int depth: Hidden layers.
    :param int fourier_features: Random Fourier features of the scaled
        inputs (``0``: the plain MLP of the paper); see :class:`ScaledMLP`.
        Default ``64``.
    :param float fourier_scale: Standard deviation of their frequencies.
    :param float lr: Adam's initial learning rate.
    :param float lr_decay: Factor applied to the learning rate every
        ``lr_decay_steps`` steps (applied smoothly, per step).
    :param int lr_decay_steps: See ``lr_decay``.
    :param dict points: Fresh points per condition and draw; conditions it
        does not name keep the paper's counts (``PAPER_POINTS``).
    :param int resample_every: Steps between draws of fresh points; ``0``
        keeps the initial points.
    :param tuple weightings: Which PINNs to train, from ``none``, ``exact``,
        ``sketch``.
    :param str estimator: The sketch's trace estimator, ``predictor`` or
        ``parameter``.
    :param bool balanced_probe: Scale the predictor's probe by the square
        roots of the current weights (``SketchNTKWeighting(balanced_probe=
        ...)``); predictor only. Default ``True``.
    :param float alpha: The sketch's moving-average rate.
    :param int warmup_samples: Sketches averaged for the warm start.
    :param int exact_every: Steps between exact NTK recomputations.
    :param str safeguard: ``default`` (the spaced-update rule) or ``none``
        (every weight update applied).
    :param int seed: Seed of initialisation, sampling and probes.
    :param str accelerator: Lightning's accelerator (``cpu``, ``gpu``,
        ``auto``).
    :param int grid: Evaluation grid points per axis.
    :raises ValueError: On a setting out of range, naming it.
    """

    #: The PINA problem class of the experiment.
    problem_class: ClassVar[type] = None
    #: Overrides of :meth:`quick` beyond the shared tiny network.
    QUICK: ClassVar[dict] = {}

    steps: int = 10000
    width: int = 128
    depth: int = 3
    fourier_features: int = 64
    fourier_scale: float = 1.0
    lr: float = 2e-3
    lr_decay: float = 0.75
    lr_decay_steps: int = 1000
    points: dict = field(default_factory=dict)
    resample_every: int = 1
    weightings: tuple = WEIGHTINGS
    estimator: str = "parameter"
    balanced_probe: bool = True
    alpha: float = 1e-3
    warmup_samples: int = 32
    exact_every: int = 250
    safeguard: str = "none"
    seed: int = 0
    accelerator: str = "cpu"
    grid: int = 101

    def __post_init__(self):
        # a partial dict overrides the paper's counts it names
        self.points = {**self.problem_class.PAPER_POINTS, **self.points}
        for name in ("steps", "width", "depth", "lr_decay_steps"):
            check_int(name, getattr(self, name), 1)
        check_int("exact_every", self.exact_every, 1)
        check_int("warmup_samples", self.warmup_samples, 1)
        check_int("resample_every", self.resample_every, 0)
        check_int("seed", self.seed, 0)
        check_int("grid", self.grid, 2)
        check_int("fourier_features", self.fourier_features, 0)
        check_positive("fourier_scale", self.fourier_scale)
        check_positive("lr", self.lr)
        check_rate("lr_decay", self.lr_decay)
        check_rate("alpha", self.alpha)
        unknown = set(self.points) - set(self.problem_class.PAPER_POINTS)
        if unknown:
            raise ValueError(
                f"points names unknown conditions {sorted(unknown)}; the "
                f"conditions are {list(self.problem_class.PAPER_POINTS)}."
            )
        for name, count in self.points.items():
            check_int(f"points[{name!r}]", count, 1)
        self.weightings = tuple(self.weightings)
        if not self.weightings:
            raise ValueError("weightings must name at least one PINN.")
        for name in self.weightings:
            check_choice("weightings", name, WEIGHTINGS)
        check_choice("estimator", self.estimator, ESTIMATORS)
        check_bool("balanced_probe", self.balanced_probe)
        check_choice("safeguard", self.safeguard, SAFEGUARDS)

    @classmethod
    def quick(cls, **overrides):
        """
        Seconds-long settings for smoke tests (not meaningful results).

        :return: The settings.
        """
        base = dict(steps=20, width=16, depth=2, exact_every=10, grid=21)
        return cls(**{**base, **cls.QUICK, **overrides})

    @property
    def history_every(self):
        """:return: Steps between recorded losses and weights. :rtype: int"""
        return max(1, self.steps // 200)

    def as_dict(self):
        """:return: The settings, JSON-serialisable. :rtype: dict"""
        values = asdict(self)
        values["weightings"] = list(self.weightings)
        return values


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
    ntk = NTKCallback() if weighting != "none" else None
    history = _History(settings.history_every, ntk)
    callbacks = [history] + ([ntk] if ntk is not None else [])
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
        final_weights={} if ntk is None else ntk.weights,
    )


def train_runs(settings, progress=False):
    """
    Train one PINN per weighting of ``settings``, each on a fresh problem.

    :param ExperimentSettings settings: The settings.
    :param bool progress: Show progress bars.
    :return: ``{weighting: TrainResult}`` in the order of
        ``settings.weightings``.
    :rtype: dict
    """
    return {
        name: train_pinn(settings.problem_class(), name, settings, progress)
        for name in settings.weightings
    }


def run_summary(run):
    """
    The JSON-serialisable numbers of one trained PINN.

    :param TrainResult run: The run.
    :return: Wall time, final NTK weights and final training loss.
    :rtype: dict
    """
    return {
        "wall_time_s": run.wall_time,
        "final_weights": run.final_weights,
        "final_loss": run.losses[-1] if run.losses else None,
    }


def save_outputs(results, output_dir, figures, dpi=120):
    """
    Write one PNG per figure maker and ``metrics.json``.

    :param results: The experiment's results (with a ``metrics()`` method).
    :param output_dir: The folder (created if missing).
    :param dict figures: ``{file stem: function(results) -> figure}``.
    :param int dpi: Resolution of the PNGs.
    :return: The written paths.
    :rtype: list[pathlib.Path]
    """
    import matplotlib.pyplot as plt

    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, make in figures.items():
        fig = make(results)
        path = folder / f"{stem}.png"
        fig.savefig(path, dpi=dpi)
        plt.close(fig)
        written.append(path)
    path = folder / "metrics.json"
    path.write_text(json.dumps(results.metrics(), indent=2))
    written.append(path)
    return written


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


def input_box(problem):
    """
    The bounding box of a problem's inputs, in ``input_variables`` order.

    :param problem: A PINA spatial (and possibly time-dependent) problem.
    :return: ``(lower, upper)`` lists.
    :rtype: tuple[list, list]
    """
    ranges = {}
    for domain in (problem.spatial_domain, problem.temporal_domain):
        for var, (low, high) in domain.range.items():
            ranges[var] = (float(low), float(high))
    lower = [ranges[v][0] for v in problem.input_variables]
    upper = [ranges[v][1] for v in problem.input_variables]
    return lower, upper


def grid_points(labels, axes):
    """
    A tensor-product grid as a ``LabelTensor``.

    :param list labels: Variable names, one per axis.
    :param list axes: 1-D tensors of grid values, one per label.
    :return: ``(prod(len(axis)), len(labels))`` points, first axis slowest.
    :rtype: LabelTensor
    """
    mesh = torch.meshgrid(*axes, indexing="ij")
    flat = torch.stack([m.reshape(-1) for m in mesh], dim=-1)
    return LabelTensor(flat, labels=list(labels))


def relative_l2(prediction, reference):
    """
    ``||prediction - reference|| / ||reference||`` over all entries.

    :param torch.Tensor prediction: Predicted values.
    :param torch.Tensor reference: Reference values, same shape.
    :return: The relative error.
    :rtype: float
    :raises ValueError: On a shape mismatch or a zero reference.
    """
    prediction = torch.as_tensor(prediction, dtype=torch.float64)
    reference = torch.as_tensor(reference, dtype=torch.float64)
    if prediction.shape != reference.shape:
        raise ValueError(
            f"shapes differ: prediction {tuple(prediction.shape)}, reference "
            f"{tuple(reference.shape)}."
        )
    norm = torch.linalg.vector_norm(reference)
    if not norm > 0:
        raise ValueError("the reference is zero: relative error undefined.")
    return float(torch.linalg.vector_norm(prediction - reference) / norm)
