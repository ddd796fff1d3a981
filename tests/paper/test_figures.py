"""The experiments' figures say what they show: labelled axes and colourbars,
legends outside the data, weighted and unweighted losses named."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from pina_ntk.paper.experiments.qtensor import (  # noqa: E402
    FIGURE_TIMES,
    QTensorResults,
    QTensorSettings,
    plot_directors,
    plot_losses,
)
from pina_ntk.paper.experiments.training import TrainResult  # noqa: E402
from pina_ntk.paper.experiments.wave import (  # noqa: E402
    WaveResults,
    WaveSettings,
    plot_solutions,
    plot_weights,
)
from pina_ntk.paper.figures import plot_diagnostics  # noqa: E402

STEPS = list(range(0, 100, 10))


def fake_run(kind, conditions):
    weights = []
    if kind != "none":
        weights = [
            {
                name: 10.0**i * (1 + 0.01 * s)
                for i, name in enumerate(conditions)
            }
            for s in STEPS
        ]
    return TrainResult(
        weighting=kind,
        solver=None,
        wall_time=1.0,
        steps=list(STEPS),
        losses=[1.0 / (1 + s) for s in STEPS],
        weights=weights,
        final_weights=weights[-1] if weights else {},
    )


@pytest.fixture
def wave_results():
    settings = WaveSettings.quick()
    conditions = list(settings.points)
    grid = np.linspace(0.0, 1.0, 11)
    exact = np.outer(np.sin(np.pi * grid), np.cos(2 * np.pi * grid))
    runs = {k: fake_run(k, conditions) for k in settings.weightings}
    return WaveResults(
        settings=settings,
        runs=runs,
        x=grid,
        t=grid,
        exact=exact,
        predictions={k: 0.9 * exact for k in runs},
        errors={k: 0.1 for k in runs},
    )


@pytest.fixture
def qtensor_results():
    settings = QTensorSettings.quick()
    conditions = list(settings.points)
    axis = np.linspace(-2.0, 2.0, 9)
    xx, yy = np.meshgrid(axis, axis, indexing="ij")
    runs = {k: fake_run(k, conditions) for k in settings.weightings}
    fields = {
        (source, t): (0.3 * np.cos(xx + t), 0.2 * np.sin(yy - t))
        for source in list(runs) + ["fem"]
        for t in FIGURE_TIMES
    }
    return QTensorResults(
        settings=settings,
        runs=runs,
        reference=None,
        fem_wall_time=1.0,
        axis=axis,
        fields=fields,
        errors={k: {t: 0.1 for t in settings.error_times} for k in runs},
    )


def data_axes(fig):
    """The axes holding data (colourbars are axes too)."""
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def colourbars(fig):
    return [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]


def assert_axes_labelled(fig):
    for ax in data_axes(fig):
        assert ax.get_xlabel().strip() and ax.get_ylabel().strip()
        assert ax.get_title().strip()


def assert_outside(fig, legend, ax):
    """No part of the legend lies inside the axes' data area."""
    fig.draw_without_rendering()  # settles the constrained layout
    box = legend.get_window_extent()
    area = ax.get_window_extent()
    overlap_x = min(box.x1, area.x1) - max(box.x0, area.x0)
    overlap_y = min(box.y1, area.y1) - max(box.y0, area.y0)
    assert overlap_x <= 1 or overlap_y <= 1


def test_wave_weights_figure_keeps_its_legend_off_the_curves(wave_results):
    fig = plot_weights(wave_results)
    try:
        [ax] = data_axes(fig)
        assert_axes_labelled(fig)
        assert "weight" in ax.get_ylabel()
        legend = ax.get_legend()
        assert legend is not None
        texts = [t.get_text() for t in legend.get_texts()]
        for name in wave_results.settings.points:
            assert name in texts
        assert any(t.startswith("exact NTK") for t in texts)
        assert any(t.startswith("sketched NTK") for t in texts)
        assert_outside(fig, legend, ax)
    finally:
        plt.close(fig)


def test_wave_solutions_figure_labels_every_colourbar(wave_results):
    fig = plot_solutions(wave_results)
    try:
        assert_axes_labelled(fig)
        bars = colourbars(fig)
        assert len(bars) == 3 * len(wave_results.runs)
        assert all(bar.get_ylabel().strip() for bar in bars)
    finally:
        plt.close(fig)


def test_qtensor_directors_figure_says_what_colour_and_segments_show(
    qtensor_results,
):
    fig = plot_directors(qtensor_results)
    try:
        assert_axes_labelled(fig)
        [bar] = colourbars(fig)
        assert "light intensity" in bar.get_ylabel()
        [legend] = fig.legends
        assert "director" in legend.get_texts()[0].get_text()
        for ax in data_axes(fig):
            assert_outside(fig, legend, ax)
    finally:
        plt.close(fig)


def test_qtensor_losses_name_the_weighted_and_the_unweighted_loss(
    qtensor_results,
):
    fig = plot_losses(qtensor_results)
    try:
        assert_axes_labelled(fig)
        [legend] = fig.legends
        texts = [t.get_text() for t in legend.get_texts()]
        [plain] = [t for t in texts if t.startswith("PINN")]
        [weighted] = [t for t in texts if t.startswith("NTK-PINN")]
        assert "unweighted training loss" in plain
        assert "weighted training loss" in weighted
        assert "NTK weights" in weighted
        [ax] = data_axes(fig)
        assert_outside(fig, legend, ax)
    finally:
        plt.close(fig)


def test_diagnostics_figure_keeps_its_legends_off_the_data():
    steps = list(range(20))
    decay = [1.0 / (1 + s) for s in steps]
    history = {
        "step": steps,
        "condition_loss": {"pde": decay, "bc": [0.1 * v for v in decay]},
        "weighted_loss": [2 * v for v in decay],
        "weights": {"pde": [0.5] * 20, "bc": [5.0] * 20},
        "eigenvalues": [[1.0, 2.0, 3.0]] * 4,
        "kernel_step": [0, 5, 10, 15],
        "avg_residual_sq": decay,
        "avg_grad_sq": [2 * v for v in decay],
    }
    fig = plot_diagnostics(history)
    assert_axes_labelled(fig)
    for ax in fig.axes:
        if ax.get_legend() is not None:
            assert_outside(fig, ax.get_legend(), ax)
