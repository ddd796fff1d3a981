"""The quadratically parameterised predictor of Section 5.2.1.

Data: 50 equispaced ``x_i`` in ``[-1, 1]`` and ``y_i = pi x_i^2 + e x_i +
sqrt(2) + xi_i`` with ``xi_i ~ N(0, sigma^2)`` drawn from a seeded generator.
The paper writes ``N(0, 1/sqrt(2))``; we read the second argument as the
variance, ``sigma^2 = 1/sqrt(2)`` (``sigma ≈ 0.841``), and expose it as
``--noise-variance``.

Model: ``R(theta)_i = (theta ⊙ theta) · (1, x_i, x_i^2) - y_i`` with
``theta ∈ R^3``, written as a plain residual function of a parameter vector
(:func:`pina_ntk.core.residual_functions.vector_residual_fn`). The exact
kernel comes from the closed-form Jacobian ``grad R(theta)_{ji} = 2 theta_j
u(x_i)_j`` and is checked against
:func:`pina_ntk.core.residual_functions.exact_kernel` (autograd).

Sketches: Algorithm 2 through the library's
:func:`~pina_ntk.core.estimators.kernel_probe_product` (Gaussian probes,
central difference) and
:func:`~pina_ntk.core.estimators.symmetrised_kernel_sketch`; the traces with
:func:`~pina_ntk.core.estimators.predictor_block_traces`. ``R`` is
quadratic in ``theta``, so the central difference ``(R(theta + dt v) -
R(theta - dt v)) / (2 dt)`` equals ``J v`` exactly (the second-order terms
cancel and there is no third-order term): the sketches have no
discretisation bias, only rounding error, and the Monte Carlo error is pure
variance. Its exact value is known: for a Gaussian probe the single-sample
sketch ``K^ = (K g g^T + g g^T K) / 2`` has
``E||K^ - K||_F^2 = ((n + 2) ||K||_F^2 + (Tr K)^2) / 2`` and its trace
``E(g^T K g - Tr K)^2 = 2 ||K||_F^2``; the mean of ``N`` samples divides
both by ``N``. The script draws them as "theory" lines.

Trajectory: Algorithm 3 with one residual block. With a single block the
NTK weight is ``Tr K^ / Tr K^ = 1``, so ``theta`` follows plain gradient
descent ``theta_{t+1} = theta_t - eta grad R(theta_t) R(theta_t)`` on
``1/2 ||R||^2`` while the moving-average kernel ``K^_t = (1 - alpha)
K^_{t-1} + alpha K^(1)(theta_t)`` (:class:`~pina_ntk.moving_average.
MovingAverage`, warm start of ``N_0`` samples) is tracked alongside. The
paper gives ``T = 1e5`` and ``alpha = 1e-4`` but neither ``eta``, ``N_0`` nor
``theta_0``; we use ``eta = 1e-4``, ``N_0 = 2000`` and ``theta_0 ~ N(0, I_3)``
from the seeded generator. The quick run keeps ``eta T`` and ``alpha T``:
``T = 1e4``, ``alpha = 1e-3``, ``eta = 1e-3``.

Outputs (in ``--output-dir``): ``data_fit.png``, ``kernel_sketches.png``,
``monte_carlo_error.png``, ``moving_average.png``,
``moving_average_error.png`` and ``results.json``.

:Example:
    Quick run (about 15 s)::

        python -m pina_ntk.paper.experiments.quadratic_predictor --quick

    The figures of ``docs/reproduction.md``::

        python -m pina_ntk.paper.experiments.quadratic_predictor \
            --output-dir docs/figures/quadratic
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
from matplotlib.figure import Figure

from pina_ntk.core.estimators import (
    kernel_probe_product,
    predictor_block_traces,
    sample_probe,
    symmetrised_kernel_sketch,
)
from pina_ntk.core.residual_functions import exact_kernel, vector_residual_fn
from pina_ntk.core.moving_average import MovingAverage
from pina_ntk.paper.figures import loglog_slope, reference_line

DTYPE = torch.float64
#: The paper's coefficients of (1, x, x^2): sqrt(2), e, pi.
TRUE_COEFFICIENTS = (math.sqrt(2.0), math.e, math.pi)

FULL = {
    "sketch_samples": (1, 2000, 20000),
    "mc_samples": (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000),
    "repetitions": 100,
    "steps": 100_000,
    "alpha": 1e-4,
    "eta": 1e-4,
    "warmup": 2000,
}
QUICK = {
    "sketch_samples": (1, 200, 2000),
    "mc_samples": (1, 3, 10, 30, 100),
    "repetitions": 100,
    "steps": 10_000,
    "alpha": 1e-3,
    "eta": 1e-3,
    "warmup": 200,
}


class QuadraticPredictor:
    """
    The data, residual function and closed-form kernel of Section 5.2.1.

    :param int n_points: Number of equispaced points in ``[-1, 1]``.
    :param float noise_variance: Variance of the Gaussian noise ``xi``.
    :param torch.Generator generator: Source of the noise.
    """

    def __init__(self, n_points, noise_variance, generator):
        self.x = torch.linspace(-1.0, 1.0, n_points, dtype=DTYPE)
        self.features = torch.stack(
            [torch.ones_like(self.x), self.x, self.x**2], dim=1
        )  # u(x_i) = (1, x_i, x_i^2), shape (n, 3)
        coefficients = torch.tensor(TRUE_COEFFICIENTS, dtype=DTYPE)
        self.clean = self.features @ coefficients
        noise = torch.randn(n_points, generator=generator, dtype=DTYPE)
        self.y = self.clean + math.sqrt(noise_variance) * noise
        self.residual_fn = vector_residual_fn(self.residual)

    def residual(self, theta):
        """``R(theta) = U (theta ⊙ theta) - y``."""
        return self.features @ (theta * theta) - self.y

    def jacobian(self, theta):
        """Closed form ``J_{ij} = dR_i / dtheta_j = 2 theta_j u(x_i)_j``."""
        return 2.0 * self.features * theta

    def kernel(self, theta):
        """The exact NTK ``K = J J^T`` from the closed-form Jacobian."""
        jacobian = self.jacobian(theta)
        return jacobian @ jacobian.T

    def least_squares_coefficients(self):
        """The least-squares fit of ``(1, x, x^2)`` to ``y``."""
        return torch.linalg.lstsq(self.features, self.y[:, None]).solution[:, 0]


class Sketcher:
    """
    Single-sample sketches ``(K^, Tr K^)`` at fixed ``theta``, through the
    library's predictor step.

    :param QuadraticPredictor predictor: The problem.
    :param torch.Tensor theta: The parameters.
    :param torch.Generator generator: Source of the probes.
    """

    def __init__(self, predictor, theta, generator):
        self.residual_fn = predictor.residual_fn
        self.params = {"theta": theta.detach().clone().requires_grad_(True)}
        # R(theta) with its graph, reused by every predictor step
        self.residuals = self.residual_fn(self.params)
        self.generator = generator

    def sample(self):
        """:return: ``(K^, Tr K^)`` of one Gaussian probe. :rtype: tuple"""
        probe = sample_probe(self.residuals, "gaussian", self.generator)
        product = kernel_probe_product(
            self.residual_fn,
            self.params,
            probe,
            step_size="auto",
            difference="central",
            residuals=self.residuals,
        )
        kernel = symmetrised_kernel_sketch(probe, product)
        trace = predictor_block_traces(probe, product)[0]
        return kernel, trace

    def mean(self, count, snapshots=()):
        """
        The mean of ``count`` sketches, and the running means at
        ``snapshots`` (sample counts ``<= count``).

        :return: ``(mean kernel, mean trace, {n: mean kernel of first n})``.
        :rtype: tuple
        """
        total_kernel, total_trace, saved = 0.0, 0.0, {}
        for j in range(1, count + 1):
            kernel, trace = self.sample()
            total_kernel = total_kernel + kernel
            total_trace = total_trace + trace
            if j in snapshots:
                saved[j] = total_kernel / j
        return total_kernel / count, total_trace / count, saved


def exact_mc_variance(kernel):
    """
    Single-sample variances of the Gaussian sketches (see module notes).

    :param torch.Tensor kernel: The exact ``K`` (``n × n``).
    :return: ``(E||K^ - K||_F^2, E(Tr K^ - Tr K)^2)``.
    :rtype: tuple[float, float]
    """
    n = kernel.shape[0]
    frob_sq = float(kernel.pow(2).sum())
    trace = float(torch.trace(kernel))
    return 0.5 * ((n + 2) * frob_sq + trace**2), 2.0 * frob_sq


def monte_carlo(sketcher, kernel, sample_counts, repetitions):
    """
    Mean squared errors of the ``N``-sample means over ``M`` repetitions.

    Every repetition of every ``N`` uses fresh probes (independent
    estimates, as in the paper).

    :return: Per ``N``: mean and standard error of ``||K_N - K||_F^2`` and
        of ``(Tr K_N - Tr K)^2``.
    :rtype: dict
    """
    trace = torch.trace(kernel)
    table = {"N": [], "kernel_mse": [], "kernel_se": [], "trace_mse": []}
    table["trace_se"] = []
    for count in sample_counts:
        kernel_errors, trace_errors = [], []
        for _ in range(repetitions):
            mean_kernel, mean_trace, _ = sketcher.mean(count)
            kernel_errors.append(float((mean_kernel - kernel).pow(2).sum()))
            trace_errors.append(float((mean_trace - trace) ** 2))
        table["N"].append(count)
        for key, errors in (("kernel", kernel_errors), ("trace", trace_errors)):
            errors = np.asarray(errors)
            table[f"{key}_mse"].append(float(errors.mean()))
            table[f"{key}_se"].append(
                float(errors.std(ddof=1) / math.sqrt(len(errors)))
            )
    return table


def train_moving_average(predictor, theta0, settings, generator):
    """
    Gradient descent on ``1/2 ||R||^2`` with the moving-average kernel.

    :return: ``(theta_T, snapshots, error_history)``: the exact and
        averaged kernels at ``t = 0`` and ``t = T`` and the relative
        Frobenius error of the average every ``T / 200`` steps.
    :rtype: tuple
    """
    theta = theta0.clone()
    average = MovingAverage(settings["alpha"])
    steps = settings["steps"]
    every = max(1, steps // 200)
    errors = {"step": [], "relative_error": []}
    snapshots = {}
    for t in range(steps + 1):
        sketcher = Sketcher(predictor, theta, generator)
        draws = settings["warmup"] if t == 0 else 1
        samples = torch.stack([sketcher.sample()[0] for _ in range(draws)])
        estimate = average.update(samples)
        exact = predictor.kernel(theta)
        if t == 0 or t == steps:
            key = "initial" if t == 0 else "final"
            snapshots[key] = (exact.clone(), estimate.clone())
        if t % every == 0:
            errors["step"].append(t)
            errors["relative_error"].append(
                float(
                    torch.linalg.norm(estimate - exact)
                    / torch.linalg.norm(exact)
                )
            )
        if t == steps:
            break
        # the single-block NTK weight is Tr K^ / Tr K^ = 1: plain descent
        residual = predictor.residual(theta)
        theta = theta - settings["eta"] * predictor.jacobian(theta).T @ residual
    return theta, snapshots, errors


def kernel_panel(figure, ax, matrix, title, limits=None):
    """One kernel image with its colour bar."""
    image = ax.imshow(
        matrix,
        cmap="viridis",
        vmin=None if limits is None else limits[0],
        vmax=None if limits is None else limits[1],
    )
    ax.set_title(title)
    ax.set_xlabel("j")
    ax.set_ylabel("i")
    figure.colorbar(image, ax=ax, shrink=0.8)


def save_figures(
    output_dir,
    predictor,
    theta_T,
    kernel0,
    sketches,
    table,
    variances,
    snapshots,
    errors,
    slopes,
):
    """Write the figures of Section 5.2.1."""
    x = predictor.x.numpy()
    fine = np.linspace(-1, 1, 200)
    figure = Figure(figsize=(6, 4.5), layout="constrained")
    ax = figure.subplots()
    ax.plot(x, predictor.y.numpy(), "o", ms=4, label="data $y_i$")
    true = sum(c * fine**k for k, c in enumerate(TRUE_COEFFICIENTS))
    ax.plot(fine, true, "k-", label=r"$f(x)=\pi x^2 + e x + \sqrt{2}$")
    fitted = (theta_T * theta_T).numpy()
    ax.plot(
        fine,
        sum(c * fine**k for k, c in enumerate(fitted)),
        "r--",
        label=r"$\hat f(x) = (\theta_T\odot\theta_T)\cdot(1,x,x^2)$",
    )
    ax.set(
        xlabel="x", ylabel="y", title="Quadratically parameterised predictor"
    )
    ax.legend()
    figure.savefig(os.path.join(output_dir, "data_fit.png"), dpi=120)

    figure = Figure(figsize=(10, 8.5), layout="constrained")
    axes = figure.subplots(2, 2).ravel()
    limits = (float(kernel0.min()), float(kernel0.max()))
    kernel_panel(figure, axes[0], kernel0.numpy(), r"exact $K(\theta_0)$")
    for ax, (count, matrix) in zip(axes[1:], sorted(sketches.items())):
        title = f"estimate, {count} sample" + ("s" if count > 1 else "")
        # one sample is far off the exact range: give it its own colour scale
        kernel_panel(
            figure, ax, matrix.numpy(), title, None if count == 1 else limits
        )
    figure.savefig(os.path.join(output_dir, "kernel_sketches.png"), dpi=120)

    figure = Figure(figsize=(11, 4.5), layout="constrained")
    axes = figure.subplots(1, 2)
    counts = np.asarray(table["N"], dtype=float)
    for ax, key, variance, label in (
        (axes[0], "kernel", variances[0], r"$\|\bar K_N - K\|_F^2$"),
        (
            axes[1],
            "trace",
            variances[1],
            r"$(\mathrm{Tr}\,\bar K_N - \mathrm{Tr}\,K)^2$",
        ),
    ):
        mse = np.asarray(table[f"{key}_mse"])
        se = np.asarray(table[f"{key}_se"])
        ax.errorbar(
            counts,
            mse,
            yerr=2 * se,
            fmt="o-",
            capsize=3,
            label=f"mean over M={table['M']} (±2 s.e.)",
        )
        ax.loglog(
            counts, variance / counts, "g--", lw=1, label="exact variance / N"
        )
        ax.loglog(
            counts,
            reference_line(counts, counts[0], 3 * mse[0], -1.0),
            "k:",
            label=r"$O(N^{-1})$",
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set(
            xlabel="samples N",
            ylabel="mean squared error",
            title=f"{label}: fitted slope {slopes[key]:.3f}",
        )
        ax.legend()
    figure.savefig(os.path.join(output_dir, "monte_carlo_error.png"), dpi=120)

    figure = Figure(figsize=(10, 8.5), layout="constrained")
    axes = figure.subplots(2, 2)
    for row, key, when in (
        (0, "initial", "time 0"),
        (1, "final", "final time"),
    ):
        exact, estimate = snapshots[key]
        limits = (float(exact.min()), float(exact.max()))
        kernel_panel(
            figure, axes[row, 0], exact.numpy(), f"exact NTK at {when}"
        )
        kernel_panel(
            figure,
            axes[row, 1],
            estimate.numpy(),
            f"moving-average estimate at {when}",
            limits,
        )
    figure.savefig(os.path.join(output_dir, "moving_average.png"), dpi=120)

    figure = Figure(figsize=(6, 4.5), layout="constrained")
    ax = figure.subplots()
    ax.semilogy(errors["step"], errors["relative_error"])
    ax.set(
        xlabel="step t",
        ylabel=r"$\|\hat K_t - K(\theta_t)\|_F / \|K(\theta_t)\|_F$",
        title="Moving-average kernel error along training",
    )
    figure.savefig(
        os.path.join(output_dir, "moving_average_error.png"), dpi=120
    )


def parse_args(argv):
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short run")
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--noise-variance", type=float, default=2**-0.5)
    parser.add_argument("--repetitions", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    return parser.parse_args(argv)


def main(argv=None):
    """
    Run the experiment and write the figures and JSON.

    :param list argv: Command-line arguments (``sys.argv[1:]`` if ``None``).
    :return: The summary written to ``results.json``.
    :rtype: dict
    """
    args = parse_args(argv)
    settings = dict(QUICK if args.quick else FULL)
    if args.repetitions is not None:
        settings["repetitions"] = args.repetitions
    if args.steps is not None:
        settings["steps"] = args.steps
    output_dir = args.output_dir or os.path.join("out", "quadratic_predictor")
    os.makedirs(output_dir, exist_ok=True)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()

    generator = torch.Generator().manual_seed(args.seed)
    predictor = QuadraticPredictor(50, args.noise_variance, generator)
    theta0 = torch.randn(3, generator=generator, dtype=DTYPE)
    kernel0 = predictor.kernel(theta0)
    autograd_kernel = exact_kernel(predictor.residual_fn, {"theta": theta0})
    kernel_check = float(
        (autograd_kernel - kernel0).abs().max() / kernel0.abs().max()
    )

    sketcher = Sketcher(predictor, theta0, generator)
    largest = max(settings["sketch_samples"])
    _, _, sketches = sketcher.mean(largest, set(settings["sketch_samples"]))
    sketch_errors = {
        n: float(torch.linalg.norm(k - kernel0) / torch.linalg.norm(kernel0))
        for n, k in sketches.items()
    }

    table = monte_carlo(
        sketcher, kernel0, settings["mc_samples"], settings["repetitions"]
    )
    table["M"] = settings["repetitions"]
    variances = exact_mc_variance(kernel0)
    slopes = {
        key: loglog_slope(table["N"], table[f"{key}_mse"])
        for key in ("kernel", "trace")
    }
    # measured / exact MSE at every N: 1 up to Monte Carlo noise
    ratios = {
        key: [
            mse * n / variance
            for n, mse in zip(table["N"], table[f"{key}_mse"])
        ]
        for key, variance in zip(("kernel", "trace"), variances)
    }

    theta_T, snapshots, errors = train_moving_average(
        predictor, theta0, settings, generator
    )
    save_figures(
        output_dir,
        predictor,
        theta_T,
        kernel0,
        sketches,
        table,
        variances,
        snapshots,
        errors,
        slopes,
    )

    def corner(matrix):
        return float(matrix[0, -1])

    seconds = time.perf_counter() - start
    summary = {
        "settings": {
            **{
                k: list(v) if isinstance(v, tuple) else v
                for k, v in settings.items()
            },
            "quick": args.quick,
            "seed": args.seed,
            "noise_variance": args.noise_variance,
            "threads": args.threads,
            "probe": "gaussian",
            "difference": "central",
            "step_size": "auto",
        },
        "seconds": seconds,
        "theta0": theta0.tolist(),
        "thetaT_squared": (theta_T * theta_T).tolist(),
        "least_squares_coefficients": (
            predictor.least_squares_coefficients().tolist()
        ),
        "closed_form_vs_autograd_kernel_max_rel_diff": kernel_check,
        "sketch_relative_frobenius_error": sketch_errors,
        "monte_carlo": table,
        "exact_single_sample_variance": {
            "kernel": variances[0],
            "trace": variances[1],
        },
        "measured_over_exact_mse": ratios,
        "slope_kernel_mse": slopes["kernel"],
        "slope_trace_mse": slopes["trace"],
        "moving_average_relative_error": {
            "initial": errors["relative_error"][0],
            "final": errors["relative_error"][-1],
            "max": max(errors["relative_error"]),
            "history": errors,
        },
        "corner_K_0_last": {
            key: {
                "exact": corner(snapshots[key][0]),
                "estimate": corner(snapshots[key][1]),
            }
            for key in ("initial", "final")
        },
    }
    with open(os.path.join(output_dir, "results.json"), "w") as handle:
        json.dump(summary, handle, indent=2)
    print(
        f"Monte Carlo slopes: kernel {slopes['kernel']:.3f}, "
        f"trace {slopes['trace']:.3f} (expected -1)"
    )
    print(
        "moving-average relative error: "
        f"{summary['moving_average_relative_error']['initial']:.3f} at t=0, "
        f"{summary['moving_average_relative_error']['final']:.3f} at "
        f"t={settings['steps']}; {seconds:.1f} s; figures in {output_dir}"
    )
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
