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
    500 steps, and otherwise the weightings' defaults.
    :meth:`~ExperimentSettings.paper` gives the earlier runs' parameter-space
    sketch without safeguard.

    :Example:
        >>> settings = WaveSettings(steps=2000, weightings=("none", "sketch"))
        >>> WaveSettings.quick().steps
        20
    """

    problem_class: ClassVar[type] = WaveProblem
    PAPER: ClassVar[dict] = {"estimator": "parameter", "safeguard": "none"}
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


def wave_grid(size):
    """
    The evaluation grid of the wave experiment and the exact solution on it.

    :param int size: Points per axis on ``[0, 1]^2``.
    :return: ``(x, t, points, exact)``: the axes, the grid as a
        ``LabelTensor`` (``x`` slowest) and the solution at its points.
    :rtype: tuple
    """
    x = torch.linspace(0.0, 1.0, size)
    t = torch.linspace(0.0, 1.0, size)
    points = grid_points(["x", "t"], [x, t])
    exact = WaveProblem().solution(points)
    return x, t, points, torch.Tensor.as_subclass(exact, torch.Tensor)


def run_wave(settings=None, progress=False, on_result=None):
    """
    Train the requested PINNs on the wave problem and evaluate them.

    :param WaveSettings settings: Default :class:`WaveSettings()`.
    :param bool progress: Show progress bars.
    :param callable on_result: Called with the results so far after each
        PINN is trained and evaluated (the command writes them at once, so
        an interrupt keeps what finished). Default ``None``.
    :return: The results.
    :rtype: WaveResults
    """
    settings = settings or WaveSettings()
    x, t, points, exact = wave_grid(settings.grid)
    shape = (len(x), len(t))
    results = WaveResults(
        settings=settings,
        runs={},
        x=x.numpy(),
        t=t.numpy(),
        exact=exact.reshape(shape).numpy(),
        predictions={},
        errors={},
    )
    for name, run in train_runs(settings, progress):
        prediction = run.predict(points)
        results.runs[name] = run
        results.errors[name] = relative_l2(prediction, exact)
        results.predictions[name] = prediction.reshape(shape).numpy()
        if on_result is not None:
            on_result(results)
    return results


def plot_weights(results, ax=None):
    """
    NTK weight trajectories (the paper's figure): one colour per condition,
    exact weights dashed, sketched weights solid, on a log scale. The legend
    sits beside the axes, so no curve is hidden behind it.

    :param WaveResults results: The results.
    :param ax: A matplotlib axis; a new figure if ``None``.
    :return: The figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    if ax is None:
        fig, ax = plt.subplots(figsize=(10, 4.5), layout="constrained")
    else:
        fig = ax.figure
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    settings = results.settings
    estimator = "parameter-space sketch"
    if settings.estimator == "predictor":
        probe = "balanced" if settings.balanced_probe else "plain"
        estimator = f"predictor sketch, {probe} probe"
    styles = {
        "exact": (
            "--",
            f"exact NTK (recomputed every {settings.exact_every} steps)",
        ),
        "sketch": (
            "-",
            f"sketched NTK ({estimator},\n"
            f"moving average α = {settings.alpha:g})",
        ),
    }
    conditions, drawn = [], []
    for kind, (style, _) in styles.items():
        run = results.runs.get(kind)
        if run is None or not run.weights:
            continue
        drawn.append(kind)
        for name in run.weights[0]:
            if name not in conditions:
                conditions.append(name)
            colour = colours[conditions.index(name) % len(colours)]
            ax.plot(
                run.steps,
                [w[name] for w in run.weights],
                style,
                color=colour,
                # exact weights change only when recomputed
                drawstyle="steps-post" if kind == "exact" else "default",
            )
    ax.set_yscale("log")
    ax.set_xlabel("training step (Adam iteration)")
    ax.set_ylabel(r"loss weight $w_c$ of condition $c$ (log scale)")
    ax.set_title("Wave equation: NTK loss weights during training")
    if not drawn:  # no NTK-weighted PINN among the runs
        ax.text(
            0.5,
            0.5,
            "no NTK weights: no exact- or sketch-NTK PINN was trained",
            ha="center",
            transform=ax.transAxes,
        )
        return fig
    handles = [
        Line2D([], [], color=colours[i % len(colours)], lw=2, label=name)
        for i, name in enumerate(conditions)
    ]
    handles.append(Line2D([], [], ls="none", label=""))  # spacer
    handles += [
        Line2D([], [], color="0.2", ls=styles[kind][0], label=styles[kind][1])
        for kind in drawn
    ]
    ax.legend(
        handles=handles,
        title=(
            r"$w_c$ = mean diag $K$ / mean diag $K_{cc}$"
            "\nK: neural tangent kernel; colour: condition c"
        ),
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        borderaxespad=0.0,
        fontsize=8,
        title_fontsize=8,
    )
    return fig


def plot_solutions(results):
    """
    Prediction, exact solution and absolute error of each PINN over the
    ``(t, x)`` square, one row per PINN, each panel with a labelled
    colourbar.

    :param WaveResults results: The results.
    :return: The figure.
    """
    import matplotlib.pyplot as plt

    names = list(results.runs)
    fig, axes = plt.subplots(
        len(names),
        3,
        figsize=(12, 3.2 * len(names) + 0.6),
        squeeze=False,
        layout="constrained",
    )
    extent = [results.t[0], results.t[-1], results.x[0], results.x[-1]]
    limit = np.abs(results.exact).max()
    for row, name in zip(axes, names):
        prediction = results.predictions[name]
        panels = (
            (
                prediction,
                f"{LABELS[name]}: prediction",
                r"predicted $u_\theta(x, t)$",
                "RdBu_r",
                (-limit, limit),
            ),
            (
                results.exact,
                "exact solution",
                r"exact $u(x, t)$",
                "RdBu_r",
                (-limit, limit),
            ),
            (
                np.abs(prediction - results.exact),
                f"{LABELS[name]}: |error|, "
                f"relative L2 {results.errors[name]:.2e}",
                r"$|u_\theta - u|$ (own scale per row)",
                "viridis",
                (None, None),
            ),
        )
        for ax, (values, title, label, cmap, (low, high)) in zip(row, panels):
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
            ax.set_xlabel("time t")
            ax.set_ylabel("position x")
            fig.colorbar(image, ax=ax).set_label(label)
    fig.suptitle(
        r"Wave equation $u_{tt} = 4u_{xx}$: each PINN's prediction, "
        "the exact solution and the pointwise error"
    )
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
