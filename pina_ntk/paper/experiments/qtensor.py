"""The Q-tensor experiment (Section 5.2.3): PINN and NTK-PINN against a
finite-element reference."""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from ..problems import QTensorProblem
from ...core.checks import check_choice, check_int, check_positive
from .outputs import grid_points, relative_l2, run_summary, save_outputs
from .settings import ExperimentSettings
from .training import train_runs

#: Display names of the weightings.
LABELS = {"none": "PINN", "exact": "exact NTK-PINN", "sketch": "NTK-PINN"}
#: Times of the paper's figure.
FIGURE_TIMES = (0.0, 0.5, 2.0)


@dataclass
class QTensorSettings(ExperimentSettings):
    """
    Settings of the Q-tensor experiment: those of
    :class:`ExperimentSettings` plus the finite-element reference's. The
    defaults are the tutorial's CPU run: a PINN and a sketch-NTK PINN (the
    weightings' defaults), 64 random Fourier features of scale 1 into a
    3×128 tanh MLP, 10,000 Adam steps, the paper's point counts resampled
    every step. :meth:`~ExperimentSettings.paper` gives the earlier runs'
    parameter-space sketch.

    :param int fem_cells: FEM mesh cells per side.
    :param int fem_degree: FEM polynomial degree (1 or 2).
    :param float fem_time_step: FEM time step.
    :param tuple error_times: Times at which errors against the FEM are
        reported.

    :Example:
        >>> settings = QTensorSettings(steps=2000, fem_cells=24)
        >>> QTensorSettings.quick().fem_cells
        16
    """

    problem_class: ClassVar[type] = QTensorProblem
    QUICK: ClassVar[dict] = {
        "points": {name: 10 for name in QTensorProblem.PAPER_POINTS},
        "fem_cells": 16,
        "fem_time_step": 0.05,
    }

    weightings: tuple = ("none", "sketch")
    exact_every: int = 100
    grid: int = 81
    fem_cells: int = 32
    fem_degree: int = 2
    fem_time_step: float = 5e-3
    error_times: tuple = (0.5, 2.0)

    def __post_init__(self):
        super().__post_init__()
        check_int("fem_cells", self.fem_cells, 1)
        check_choice("fem_degree", self.fem_degree, (1, 2))
        check_positive("fem_time_step", self.fem_time_step)
        self.error_times = tuple(float(t) for t in self.error_times)
        final_time = self.problem_class().final_time
        for t in self.error_times:
            if not 0 <= t <= final_time:
                raise ValueError(
                    f"error_times must lie in [0, {final_time}], got {t!r}."
                )

    @classmethod
    def full_size(cls, **overrides):
        """
        The paper's network and sampling (a plain 3×500 tanh MLP, its point
        counts resampled every step) with Wang et al.'s 80,000 Adam steps,
        and a finer FEM reference.

        :return: The settings.
        :rtype: QTensorSettings
        """
        base = dict(
            steps=80000,
            width=500,
            depth=3,
            lr=1e-3,
            lr_decay=0.9,
            fem_cells=64,
            fem_time_step=2.5e-3,
            fourier_features=0,
        )
        return cls(**{**base, **overrides})

    def as_dict(self):
        """:return: The settings, JSON-serialisable. :rtype: dict"""
        values = super().as_dict()
        values["error_times"] = list(self.error_times)
        return values


def director_picture(q1, q2):
    """
    The paper's visualisation of a Q-tensor ``[[q1, q2], [q2, -q1]]``.

    Its eigenvalues are ``±r`` with ``r = sqrt(q1^2 + q2^2)``; the
    eigenvector of ``λ1 = r`` is ``v1 = (cos θ, sin θ)``, ``θ = atan2(q2,
    q1) / 2``.

    :param numpy.ndarray q1: ``Q11`` values.
    :param numpy.ndarray q2: ``Q12`` values.
    :return: ``(|λ1 (v1 · e_x)|, v1_x, v1_y)``.
    :rtype: tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]
    """
    radius = np.hypot(q1, q2)
    theta = 0.5 * np.arctan2(q2, q1)
    vx, vy = np.cos(theta), np.sin(theta)
    return np.abs(radius * vx), vx, vy


@dataclass
class QTensorResults:
    """
    Outcome of :func:`run_qtensor`.

    :param QTensorSettings settings: The settings used.
    :param dict runs: ``{weighting: TrainResult}``.
    :param reference: The :class:`~pina_ntk.paper.reference.QTensorFEMSolution`.
    :param float fem_wall_time: Seconds the reference's solve took (also when
        it was loaded from the cache).
    :param numpy.ndarray axis: The grid's coordinates along ``x`` and ``y``.
    :param dict fields: ``{(source, t): (q1, q2)}`` on the grid, for
        ``source`` in the weightings and ``"fem"``, ``t`` in the figure and
        error times.
    :param dict errors: ``{weighting: {t: relative L2 error vs FEM}}``.
    """

    settings: QTensorSettings
    runs: dict
    reference: object
    fem_wall_time: float
    axis: np.ndarray
    fields: dict
    errors: dict

    def metrics(self):
        """
        The numbers of the run, JSON-serialisable.

        :rtype: dict
        """
        return {
            "experiment": "qtensor",
            "settings": self.settings.as_dict(),
            "fem_wall_time_s": self.fem_wall_time,
            "results": {
                name: {
                    "relative_l2_vs_fem": {
                        str(t): e for t, e in self.errors[name].items()
                    },
                    **run_summary(run),
                }
                for name, run in self.runs.items()
            },
        }

    def table(self):
        """
        A Markdown table of errors against the FEM and wall times.

        :rtype: str
        """
        times = self.settings.error_times
        header = " | ".join(f"rel. L2 at t = {t:g}" for t in times)
        rows = [
            f"| model | {header} | wall time (s) |",
            "|---" * (len(times) + 2) + "|",
        ]
        for name, run in self.runs.items():
            cells = " | ".join(f"{self.errors[name][t]:.3e}" for t in times)
            rows.append(f"| {LABELS[name]} | {cells} | {run.wall_time:.1f} |")
        rows.append(
            "| FEM (reference) | "
            + " | ".join("—" for _ in times)
            + f" | {self.fem_wall_time:.1f} |"
        )
        return "\n".join(rows)


def fem_reference(settings, problem=None):
    """
    The cached finite-element reference for the settings.

    :param QTensorSettings settings: The settings.
    :param QTensorProblem problem: Physical parameters; default the paper's.
    :return: The solution.
    """
    from ..reference import solve_qtensor_fem

    problem = problem or QTensorProblem()
    return solve_qtensor_fem(
        elasticity=problem.elasticity,
        a=problem.a,
        c=problem.c,
        final_time=problem.final_time,
        half_width=problem.half_width,
        cells=settings.fem_cells,
        degree=settings.fem_degree,
        time_step=settings.fem_time_step,
        save_every=max(1, int(round(0.05 / settings.fem_time_step))),
    )


def run_qtensor(settings=None, progress=False, on_result=None):
    """
    Train the requested PINNs on the Q-tensor problem and compare them with
    the finite-element reference.

    :param QTensorSettings settings: Default :class:`QTensorSettings()`.
    :param bool progress: Show progress bars.
    :param callable on_result: Called with the results so far after each
        PINN is trained and evaluated (the command writes them at once, so
        an interrupt keeps what finished). Default ``None``.
    :return: The results.
    :rtype: QTensorResults
    """
    settings = settings or QTensorSettings()
    problem = QTensorProblem()
    reference = fem_reference(settings, problem)
    s = problem.half_width
    axis = np.linspace(-s, s, settings.grid)
    xx, yy = np.meshgrid(axis, axis, indexing="ij")
    times = sorted(set(FIGURE_TIMES) | set(settings.error_times))
    points = {}
    results = QTensorResults(
        settings=settings,
        runs={},
        reference=reference,
        fem_wall_time=reference.solve_time,
        axis=axis,
        fields={},
        errors={},
    )
    for t in times:
        fem = reference.evaluate(xx, yy, t)
        results.fields[("fem", t)] = (fem[..., 0], fem[..., 1])
        points[t] = grid_points(
            ["x", "y", "t"],
            [
                torch.as_tensor(axis, dtype=torch.float32),
                torch.as_tensor(axis, dtype=torch.float32),
                torch.tensor([float(t)]),
            ],
        )
    for name, run in train_runs(settings, progress):
        results.runs[name] = run
        results.errors[name] = {}
        for t in times:
            prediction = run.predict(points[t]).numpy().reshape(*xx.shape, 2)
            results.fields[(name, t)] = (prediction[..., 0], prediction[..., 1])
            if t in settings.error_times:
                fem = results.fields[("fem", t)]
                results.errors[name][t] = relative_l2(
                    torch.as_tensor(prediction),
                    torch.as_tensor(np.stack(fem, axis=-1)),
                )
        if on_result is not None:
            on_result(results)
    return results


def plot_directors(results, times=FIGURE_TIMES, arrows=17):
    """
    The paper's figure: filled contours of the light intensity
    ``|λ1 (v1 · e_x)|`` with the director ``v1`` drawn as white headless
    segments, one column per model (and the FEM), one row per time. One
    labelled colourbar serves every panel (they share the levels); the key
    to the segments sits below the panels.

    :param QTensorResults results: The results.
    :param tuple times: The rows' times.
    :param int arrows: Director segments per axis.
    :return: The figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib import patheffects
    from matplotlib.lines import Line2D

    sources = list(results.runs) + ["fem"]
    titles = {**LABELS, "fem": "FEM reference"}
    fig, axes = plt.subplots(
        len(times),
        len(sources),
        figsize=(3.9 * len(sources) + 1.4, 3.7 * len(times) + 1.2),
        squeeze=False,
        layout="constrained",
    )
    axis = results.axis
    stride = max(1, (len(axis) - 1) // (arrows - 1))
    levels = np.linspace(0.0, 0.5, 21)
    for row, t in zip(axes, times):
        for ax, source in zip(row, sources):
            q1, q2 = results.fields[(source, t)]
            light, vx, vy = director_picture(q1, q2)
            contour = ax.contourf(
                axis, axis, light.T, levels=levels, cmap="viridis", extend="max"
            )
            sub = slice(None, None, stride)
            ax.quiver(
                axis[sub],
                axis[sub],
                vx[sub, sub].T,
                vy[sub, sub].T,
                color="white",
                width=0.004,
                pivot="mid",
                headwidth=0,
                headlength=0,
                headaxislength=0,
                scale=arrows * 1.2,
            )
            ax.set_aspect("equal")
            ax.set_title(f"{titles[source]}, t = {t:g}", fontsize=10)
            ax.set_xlabel("x")
            ax.set_ylabel("y")
    bar = fig.colorbar(contour, ax=axes.ravel().tolist(), shrink=0.6)
    bar.set_label(
        r"light intensity $|\lambda_1\,(v_1 \cdot e_x)|$ "
        "between crossed polarisers"
    )
    director = Line2D(
        [],
        [],
        color="white",
        lw=2,
        path_effects=[patheffects.withStroke(linewidth=4, foreground="k")],
        label=(
            r"director $v_1$: eigenvector of the positive eigenvalue "
            r"$\lambda_1$ of $Q$ (a headless segment: $v_1$ and $-v_1$ "
            "are the same orientation)"
        ),
    )
    fig.legend(handles=[director], loc="outside lower center", fontsize=9)
    fig.suptitle(
        r"Q-tensor flow on $(-2, 2)^2$: light intensity (colour) and "
        "director field (segments), one column per model, one row per time"
    )
    return fig


def plot_losses(results):
    """
    The training loss of each PINN against the step. The two losses are not
    the same quantity, and the legend says so: the PINN minimises the
    unweighted sum of its condition losses, an NTK-PINN the sum weighted by
    its NTK weights, ``sum_c w_c L_c``.

    :param QTensorResults results: The results.
    :return: The figure.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8), layout="constrained")
    for name, run in results.runs.items():
        if name == "none":
            what = r"unweighted training loss $\Sigma_c\, L_c$"
        else:
            what = (
                r"weighted training loss $\Sigma_c\, w_c L_c$ "
                f"({'exact ' if name == 'exact' else ''}NTK weights)"
            )
        ax.plot(run.steps, run.losses, label=f"{LABELS[name]}: {what}")
    ax.set_yscale("log")
    ax.set_xlabel("training step (Adam iteration)")
    ax.set_ylabel("training loss (log scale)")
    ax.set_title(
        "Q-tensor flow: training losses\n"
        r"$L_c$: mean squared residual of condition $c$ on that step's "
        "points",
        fontsize=10,
    )
    fig.legend(
        loc="outside lower center",
        fontsize=9,
        title="different objectives: compare the models' errors, not these "
        "curves",
        title_fontsize=9,
    )
    return fig


def save_qtensor_outputs(results, output_dir):
    """
    Write ``directors.png``, ``losses.png`` and ``metrics.json``.

    :param QTensorResults results: The results.
    :param output_dir: The folder (created if missing).
    :return: The written paths.
    :rtype: list[pathlib.Path]
    """
    figures = {"directors": plot_directors, "losses": plot_losses}
    return save_outputs(results, output_dir, figures, dpi=110)


__all__ = [
    "QTensorSettings",
    "QTensorResults",
    "run_qtensor",
    "fem_reference",
    "director_picture",
    "plot_directors",
    "plot_losses",
    "save_qtensor_outputs",
]
