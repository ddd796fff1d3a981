"""The quick runs of the paper's Section 5.1 and 5.2.1 experiments.

Each experiment module of ``pina_ntk.paper.experiments`` is run in-process
with ``--quick``; the tests check the rates the paper claims, that every
figure is written and shows a drawing of its own (a decodable PNG, not
blank, no two alike), and the JSON summary.
"""

import importlib
import json
import os

import numpy as np
import pytest

from helpers import assert_figure


def load_script(name):
    """The experiment module ``pina_ntk.paper.experiments.<name>``."""
    return importlib.import_module(f"pina_ntk.paper.experiments.{name}")


def check_outputs(directory, figures, summary):
    images = [assert_figure(os.path.join(directory, f)) for f in figures]
    # each figure shows something of its own: no two images are the same
    for i, first in enumerate(images):
        for second in images[i + 1 :]:
            assert not (
                first.shape == second.shape and np.array_equal(first, second)
            )
    with open(os.path.join(directory, "results.json")) as handle:
        assert json.load(handle) == json.loads(json.dumps(summary))


def test_convergence_test_quick(tmp_path):
    summary = load_script("convergence_test").main(
        ["--quick", "--output-dir", str(tmp_path)]
    )
    # Theorems 1 and 2 of the paper: O(1/T) time averages at late times
    assert summary["slope_avg_residual_sq"] <= -0.8
    assert summary["slope_avg_grad_sq"] <= -0.8
    # the loss reaches about float64 machine precision (paper: by ~200 epochs)
    assert summary["final_weighted_loss"] < 1e-20
    # the solver's weights are Tr K / Tr K_cc of the independently built kernel
    assert summary["max_rel_diff_weights_vs_exact_traces"] < 1e-8
    assert summary["min_eigenvalue_over_run"] > 0
    check_outputs(
        tmp_path,
        [
            "loss_components.png",
            "weights.png",
            "eigenvalues.png",
            "time_averages.png",
            "diagnostics.png",
        ],
        summary,
    )
    with open(tmp_path / "history.json") as handle:
        history = json.load(handle)
    assert len(history["step"]) == summary["settings"]["steps"]


def test_quadratic_predictor_quick(tmp_path):
    summary = load_script("quadratic_predictor").main(
        ["--quick", "--output-dir", str(tmp_path)]
    )
    # Theorem 4 of the paper: O(1/N) Monte Carlo error of the sketches
    assert -1.25 <= summary["slope_kernel_mse"] <= -0.75
    assert -1.25 <= summary["slope_trace_mse"] <= -0.75
    assert summary["closed_form_vs_autograd_kernel_max_rel_diff"] < 1e-12
    # No discretisation bias (central differences are exact for quadratic R):
    # the measured mean squared error is the exact variance / N up to Monte
    # Carlo noise, 4 standard errors of the mean over the M repetitions.
    table = summary["monte_carlo"]
    variances = summary["exact_single_sample_variance"]
    for key in ("kernel", "trace"):
        for count, mse, se in zip(
            table["N"], table[f"{key}_mse"], table[f"{key}_se"]
        ):
            assert abs(mse - variances[key] / count) <= 4 * se, (key, count)
    # gradient descent on 1/2 ||R||^2 reaches the least-squares fit
    assert summary["thetaT_squared"] == pytest.approx(
        summary["least_squares_coefficients"], rel=1e-6
    )
    check_outputs(
        tmp_path,
        [
            "data_fit.png",
            "kernel_sketches.png",
            "monte_carlo_error.png",
            "moving_average.png",
            "moving_average_error.png",
        ],
        summary,
    )
