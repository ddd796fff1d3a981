"""The wave-equation experiment (Section 5.2.2): vanilla, exact-NTK and
sketch-NTK PINNs at equal step counts, with resampled points."""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from ..problems import WaveProblem
from .outputs import grid_points, relative_l2, run_summary, save_outputs
from .settings import ExperimentSettings
from .training import train_runs

#: Display names of the weightings.
LABELS = {
    "none": "vanilla PINN",
    "exact": "exact-NTK PINN",
    "sketch": "sketch-NTK PINN",
}


@dataclass
class WaveSettings(ExperimentSettings):
    """
    Settings of the wave experiment (:class:`ExperimentSettings`, all
    arguments as there); the defaults are the tutorial's CPU run: 64 random
    Fourier features of scale 1 into a 3×128 tanh MLP, 10,000 Adam steps,
    the paper's point counts resampled every step, exact NTK weights every
    500 steps, the parameter-space sketch, no safeguard (as in the paper).

    :Example:
        >>> settings = WaveSettings(steps=2000, weightings=("none", "sketch"))
        >>> WaveSettings.quick().steps
        20
    """

    problem_class: ClassVar[type] = WaveProblem
    exact_every: int = 500
    QUICK: ClassVar[dict] = {
        "points": {name: 20 for name in WaveProblem.PAPER_POINTS}
    }

    @classmethod
    def full_size(cls, **overrides):
        """
        The full-size setting of Wang, Yu & Perdikaris (2022): 3×500 tanh,
        Adam with ``lr = 1e-3`` decayed by 0.9 every 1000 steps, 80,000
        steps, the paper's point counts resampled every step, exact weights
        every 1000 steps (their update interval); the plain MLP, without
        Fourier features.

        :return: The settings.
        :rtype: WaveSettings
        """
        base = dict(
            steps=80000,
            width=500,
            depth=3,
            lr=1e-3,
            lr_decay=0.9,
            exact_every=1000,
            fourier_features=0,
        )
        return cls(**{**base, **overrides})


@dataclass
class WaveResults:
    """
    Outcome of :func:`run_wave`.

    :param WaveSettings settings: The settings used.
    :param dict runs: ``{weighting: TrainResult}``.
    :param numpy.ndarray x: Grid of ``x`` (1-D).
    :param numpy.ndarray t: Grid of ``t`` (1-D).
    :param numpy.ndarray exact: Exact solution on the grid, ``(len(x),
        len(t))``.
    :param dict predictions: ``{weighting: array like exact}``.
    :param dict errors: ``{weighting: relative L2 error}`` on the grid.
    """

    settings: WaveSettings
    runs: dict
    x: np.ndarray
    t: np.ndarray
    exact: np.ndarray
    predictions: dict
    errors: dict

    def metrics(self):
        """
        The numbers of the run, JSON-serialisable.

        :return: Settings, and per weighting the relative L2 error, the
            wall time, the final NTK weights and the final loss.
        :rtype: dict
        """
        return {
            "experiment": "wave",
            "settings": self.settings.as_dict(),
            "results": {
                name: {"relative_l2": self.errors[name], **run_summary(run)}
                for name, run in self.runs.items()
            },
        }

    def table(self):
        """
        A Markdown table of errors and wall times.

        :rtype: str
        """
        rows = ["| PINN | relative L2 error | wall time (s) |", "|---|---|---|"]
        for name, run in self.runs.items():
            rows.append(
                f"| {LABELS[name]} | {self.errors[name]:.3e} | "
                f"{run.wall_time:.1f} |"
            )
        return "\n".join(rows)


def run_wave(settings=None, progress=False):
    """
    Train the requested PINNs on the wave problem and evaluate them.

    :param WaveSettings settings: Default :class:`WaveSettings()`.
    :param bool progress: Show progress bars.
    :return: The results.
    :rtype: WaveResults
    """
    settings = settings or WaveSettings()
    runs = train_runs(settings, progress)
    x = torch.linspace(0.0, 1.0, settings.grid)
    t = torch.linspace(0.0, 1.0, settings.grid)
    points = grid_points(["x", "t"], [x, t])
    problem = WaveProblem()
    exact = torch.Tensor.as_subclass(problem.solution(points), torch.Tensor)
    shape = (len(x), len(t))
    predictions, errors = {}, {}
    for name, run in runs.items():
        prediction = run.predict(points)
        errors[name] = relative_l2(prediction, exact)
        predictions[name] = prediction.reshape(shape).numpy()
    return WaveResults(
        settings=settings,
        runs=runs,
        x=x.numpy(),
        t=t.numpy(),
        exact=exact.reshape(shape).numpy(),
        predictions=predictions,
        errors=errors,
    )


def plot_weights(results, ax=None):
    """
    NTK weight trajectories: exact dashed, sketch solid, one colour per
    condition (the paper's figure).

    :param WaveResults results: The results.
    :param ax: A matplotlib axis; a new figure if ``None``.
    :return: The figure.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 4.5))
    else:
        fig = ax.figure
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = {"exact": "--", "sketch": "-"}
    for kind, style in styles.items():
        run = results.runs.get(kind)
        if run is None or not run.weights:
            continue
        names = list(run.weights[0])
        for i, name in enumerate(names):
            values = [w[name] for w in run.weights]
            ax.plot(
                run.steps,
                values,
                style,
                color=colours[i % len(colours)],
                label=f"{name} ({kind})",
                # exact weights change only when recomputed
                drawstyle="steps-post" if kind == "exact" else "default",
            )
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss weight")
    ax.set_title("NTK loss weights: exact (dashed) and sketched (solid)")
    if ax.lines:
        ax.legend(fontsize=7, ncol=2)
    else:  # no NTK-weighted PINN among the runs
        ax.text(0.5, 0.5, "no NTK weights", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    return fig


def plot_solutions(results):
    """
    Prediction, exact solution and absolute error of each PINN over
    ``(t, x)``.

    :param WaveResults results: The results.
    :return: The figure.
    """
    import matplotlib.pyplot as plt

    names = list(results.runs)
    fig, axes = plt.subplots(
        len(names), 3, figsize=(12, 3.2 * len(names)), squeeze=False
    )
    extent = [results.t[0], results.t[-1], results.x[0], results.x[-1]]
    limit = np.abs(results.exact).max()
    for row, name in zip(axes, names):
        prediction = results.predictions[name]
        panels = (
            (prediction, f"{LABELS[name]}", "RdBu_r", (-limit, limit)),
            (results.exact, "exact", "RdBu_r", (-limit, limit)),
            (
                np.abs(prediction - results.exact),
                f"|error|, rel. L2 {results.errors[name]:.2e}",
                "viridis",
                (None, None),
            ),
        )
        for ax, (values, title, cmap, (low, high)) in zip(row, panels):
            image = ax.imshow(
                values,
                origin="lower",
                extent=extent,
                aspect="auto",
                cmap=cmap,
                vmin=low,
                vmax=high,
            )
            ax.set_title(title, fontsize=10)
            ax.set_xlabel("t")
            ax.set_ylabel("x")
            fig.colorbar(image, ax=ax)
    fig.tight_layout()
    return fig


def save_wave_outputs(results, output_dir):
    """
    Write ``weights.png``, ``solutions.png`` and ``metrics.json``.

    :param WaveResults results: The results.
    :param output_dir: The folder (created if missing).
    :return: The written paths.
    :rtype: list[pathlib.Path]
    """
    figures = {"weights": plot_weights, "solutions": plot_solutions}
    return save_outputs(results, output_dir, figures)


__all__ = [
    "WaveSettings",
    "WaveResults",
    "run_wave",
    "plot_weights",
    "plot_solutions",
    "save_wave_outputs",
]
