"""Figures of NTK diagnostics histories (matplotlib).

The figures are built on :class:`matplotlib.figure.Figure` directly, without
``pyplot``, so they work in scripts, tests and headless jobs alike and never
open a window; call ``figure.savefig(...)`` or pass ``path``.
"""

import math

import numpy as np
from matplotlib.figure import Figure

from ..core.checks import check_rate


def loglog_slope(x, y):
    """
    The least-squares slope of ``log y`` against ``log x``.

    :param x: Positive abscissae.
    :type x: array-like
    :param y: Positive ordinates, same length as ``x``.
    :type y: array-like
    :return: The fitted exponent ``a`` of ``y ≈ c x^a``.
    :rtype: float
    :raises ValueError: If fewer than two points are given, the lengths
        differ, or a value is not finite and positive.

    :Example:
        >>> round(loglog_slope([1, 10, 100], [3.0, 0.3, 0.03]), 6)
        -1.0
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError(
            "x and y must be one-dimensional of the same length >= 2, got "
            f"shapes {x.shape} and {y.shape}."
        )
    if not (np.all(np.isfinite(x)) and np.all(x > 0)):
        raise ValueError("x must be finite and positive for a log-log fit.")
    if not (np.all(np.isfinite(y)) and np.all(y > 0)):
        raise ValueError("y must be finite and positive for a log-log fit.")
    slope, _ = np.polyfit(np.log(x), np.log(y), 1)
    return float(slope)


def reference_line(x, anchor_x, anchor_y, exponent):
    """
    ``c x^exponent`` through ``(anchor_x, anchor_y)``, for rate guides.

    :param x: Abscissae where the line is evaluated.
    :type x: array-like
    :param float anchor_x: Abscissa the line passes through.
    :param float anchor_y: Ordinate there.
    :param float exponent: The rate, e.g. ``-1`` for ``O(1/T)``.
    :return: The ordinates.
    :rtype: numpy.ndarray
    """
    x = np.asarray(x, dtype=float)
    return anchor_y * (x / anchor_x) ** exponent


def _padded(rows):
    """Ragged lists of eigenvalues as a NaN-padded 2-d array."""
    width = max(len(r) for r in rows)
    out = np.full((len(rows), width), np.nan)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def _positive(values):
    """Values for a log axis: non-positive entries become NaN (gaps)."""
    values = np.asarray(values, dtype=float)
    return np.where(values > 0, values, np.nan)


def legend_beside(ax, **kwargs):
    """
    A legend to the right of the axes, outside the data; a figure built with
    ``layout="constrained"`` makes room for it.

    :param ax: The matplotlib axes.
    :param kwargs: Further arguments of :meth:`matplotlib.axes.Axes.legend`.
    :return: The legend.
    :rtype: matplotlib.legend.Legend
    """
    options = dict(
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        borderaxespad=0.0,
        fontsize=8,
    )
    return ax.legend(**{**options, **kwargs})


def plot_diagnostics(history, path=None, late_fraction=0.5, title=None):
    """
    Four panels of a
    :class:`~pina_ntk.integration.diagnostics_callback.NTKDiagnosticsCallback`
    history.

    Panels: (a) the unweighted condition losses and the weighted training loss,
    (b) the condition weights, (c) the exact NTK eigenvalues, (d) the time
    averages ``(1/T) sum ||R||^2`` and ``(1/T) sum ||grad G||^2`` against
    ``T`` with an ``O(1/T)`` reference line and the slope fitted on the last
    ``late_fraction`` of the steps (in the legend).

    :param dict history: ``callback.history`` (or the same dict loaded from
        JSON).
    :param str path: If given, the figure is saved there.
    :param float late_fraction: Fraction of the run, at its end, on which the
        slopes are fitted, in ``(0, 1]``. Default ``0.5``.
    :param str title: Optional figure title.
    :return: The figure.
    :rtype: matplotlib.figure.Figure
    :raises ValueError: If the history has no steps or ``late_fraction`` is
        out of range.

    :Example:
        >>> figure = plot_diagnostics(callback.history, "diagnostics.png")
        ... # doctest: +SKIP
    """
    if not history.get("step"):
        raise ValueError("history has no recorded steps to plot.")
    check_rate("late_fraction", late_fraction)
    figure = Figure(figsize=(14, 8), layout="constrained")
    axes = figure.subplots(2, 2)
    steps = np.asarray(history["step"])

    ax = axes[0, 0]
    for name, values in history["condition_loss"].items():
        ax.semilogy(steps, _positive(values), label=f"$L_c$, c = {name}")
    ax.semilogy(
        steps,
        _positive(history["weighted_loss"]),
        "k--",
        label=r"weighted training loss $\Sigma_c\, w_c L_c$",
    )
    ax.set(
        xlabel="training step",
        ylabel=r"loss (log scale)",
        title=r"(a) unweighted condition losses $L_c$ and the training loss",
    )
    legend_beside(ax)

    ax = axes[0, 1]
    for name, values in history["weights"].items():
        ax.semilogy(steps, _positive(values), label=f"$w_c$, c = {name}")
    ax.set(
        xlabel="training step",
        ylabel=r"loss weight $w_c$ (log scale)",
        title="(b) condition weights",
    )
    legend_beside(ax)

    ax = axes[1, 0]
    if history["eigenvalues"]:
        eigenvalues = _padded(history["eigenvalues"])
        kernel_steps = np.asarray(history["kernel_step"])
        for i in range(eigenvalues.shape[1]):
            ax.semilogy(kernel_steps, _positive(eigenvalues[:, i]), lw=1)
    ax.set(
        xlabel="training step",
        ylabel="eigenvalue of the NTK K (log scale)",
        title="(c) exact NTK eigenvalues, one line per eigenvalue",
    )

    ax = axes[1, 1]
    count = np.arange(1, len(steps) + 1)
    late = count >= max(1, math.floor((1.0 - late_fraction) * len(count)))
    for key, label in (
        ("avg_residual_sq", r"$\frac{1}{T}\sum\|R\|^2$"),
        ("avg_grad_sq", r"$\frac{1}{T}\sum\|\nabla G\|^2$"),
    ):
        values = np.asarray(history[key], dtype=float)
        usable = late & (values > 0)
        if usable.sum() >= 2:
            slope = loglog_slope(count[usable], values[usable])
            label = f"{label}\n(late slope {slope:.2f})"
        ax.loglog(count, _positive(values), label=label)
    anchor = 2.0 * history["avg_residual_sq"][-1]
    if anchor > 0:
        guide = reference_line(count, count[-1], anchor, -1.0)
        ax.loglog(count, guide, "k:", label=r"$O(1/T)$ reference")
    ax.set(
        xlabel="T (training steps averaged over)",
        ylabel="time average (log scale)",
        title="(d) time averages over the first T steps",
    )
    legend_beside(ax)
    if title:
        figure.suptitle(title)
    if path is not None:
        figure.savefig(path, dpi=120)
    return figure
