"""The convergence test of Section 5.1 of Hirsch & Pichi, run through PINA.

Problem: ``u_xx = -16 pi^2 sin(4 pi x)`` on ``[0, 1]``, ``u(0) = u(1) = 0``
(solution ``sin(4 pi x)``), with two interior collocation points
(``x = 1/3, 2/3``) in condition ``physics`` and the two end points in
condition ``boundary`` (so ``n_D = 2``, ``n_B1 = n_B2 = 1``, ``n = 4``, and the
two weights ``lambda_D``, ``lambda_B`` of the paper's figure).

Model: one hidden layer of 100 tanh units (``p = 301``), Xavier-uniform
weights, zero biases, input standardised to zero mean and unit standard
deviation over the domain (``(x - 1/2) * sqrt(12)``), everything in float64
so the losses can reach machine precision.

Training: full-batch gradient descent (``torch.optim.SGD`` without momentum,
one step per epoch) with exact NTK weights recomputed at every step
(Algorithm 1 with ``n = 1``): :class:`~pina_ntk.NTKWeighting` with
``safeguard=None``, because the library's default spaced-update safeguard
would reject some updates and the paper's Algorithm 1 has none. PINA
minimises ``sum_c w_c mean(R_c^2) = 2 G``, so the learning rate ``lr`` is the
paper's ``eta = 2 lr``.
:class:`~pina_ntk.integration.diagnostics_callback.NTKDiagnosticsCallback`
records the exact kernel eigenvalues, weights and the time averages of
Theorems 1 and 2 at every step.

Outputs (in ``--output-dir``): ``loss_components.png``, ``weights.png``,
``eigenvalues.png``, ``time_averages.png``, ``diagnostics.png`` (the
library's four-panel summary), ``results.json`` (settings, measured slopes
and numbers) and ``history.json`` (the full diagnostics history).

:Example:
    Quick run (about 15 s)::

        python -m pina_ntk.paper.experiments.convergence_test --quick

    The figures of ``docs/reproduction.md``::

        python -m pina_ntk.paper.experiments.convergence_test \
            --output-dir docs/figures/convergence
"""

import argparse
import json
import logging
import math
import os
import sys
import time
import warnings

import numpy as np
import torch
from matplotlib.figure import Figure
from pina import Condition, LabelTensor
from pina.domain import CartesianDomain
from pina.equation import Equation
from pina.model import FeedForward
from pina.operator import laplacian
from pina.optim import TorchOptimizer
from pina.problem import SpatialProblem
from pina.solver import PhysicsInformedSingleModelSolver

from pina_ntk.integration.callback import NTKCallback
from pina_ntk.integration.ntk_weighting import NTKWeighting
from pina_ntk.integration.diagnostics_callback import NTKDiagnosticsCallback
from pina_ntk.paper.experiments.training import make_trainer
from pina_ntk.paper.figures import (
    loglog_slope,
    plot_diagnostics,
    reference_line,
)

#: Full settings (the committed figures) and the quick smoke-test settings.
FULL = {"steps": 1000, "lr": 5e-5}
QUICK = {"steps": 500, "lr": 5e-5}
#: Wave number of the solution ``sin(4 pi x)``.
WAVE = 4.0 * math.pi
DTYPE = torch.float64


def forcing(x):
    """``f(x) = -16 pi^2 sin(4 pi x)`` on a ``LabelTensor`` with label x."""
    return -(WAVE**2) * torch.sin(WAVE * x.extract(["x"]))


def poisson_residual(input_, output_):
    """``u_xx - f``."""
    return laplacian(output_, input_) - forcing(input_)


def dirichlet_residual(input_, output_):
    """``u - 0``."""
    return output_


class ConvergenceProblem(SpatialProblem):
    """
    The 1-d Poisson problem of Section 5.1 on four fixed collocation points.

    :param interior: The interior collocation points.
    :type interior: list[float]
    """

    output_variables = ["u"]
    spatial_domain = CartesianDomain({"x": [0, 1]})

    def __init__(self, interior=(1.0 / 3.0, 2.0 / 3.0)):
        # Conditions on fixed points (no domain sampling); built per instance
        # because PINA attaches conditions to the problem that owns them.
        def points(values):
            tensor = torch.tensor([[v] for v in values], dtype=DTYPE)
            return LabelTensor(tensor, ["x"])

        self._conditions = {
            "physics": Condition(
                input=points(interior), equation=Equation(poisson_residual)
            ),
            "boundary": Condition(
                input=points([0.0, 1.0]), equation=Equation(dirichlet_residual)
            ),
        }
        super().__init__()

    @property
    def conditions(self):
        """:return: The two conditions. :rtype: dict"""
        return self._conditions


class Standardised(torch.nn.Module):
    """
    ``net((x - mean) / std)``: the paper's standardised input.

    :param torch.nn.Module net: The network.
    :param float mean: Mean of the input over the domain.
    :param float std: Standard deviation of the input over the domain.
    """

    def __init__(self, net, mean, std):
        super().__init__()
        self.net = net
        self.mean = mean
        self.std = std

    def forward(self, x):
        """:param x: Inputs. :return: Network outputs."""
        return self.net((x - self.mean) / self.std)


def make_model(seed, width=100):
    """
    One hidden tanh layer, Xavier-uniform weights, zero biases, float64.

    :param int seed: Seed of the initialisation.
    :param int width: Hidden units.
    :return: The standardised network.
    :rtype: torch.nn.Module
    """
    torch.manual_seed(seed)
    net = FeedForward(1, 1, inner_size=width, n_layers=1, func=torch.nn.Tanh)
    for layer in net.modules():
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.xavier_uniform_(layer.weight)
            torch.nn.init.zeros_(layer.bias)
    # uniform distribution on [0, 1]: mean 1/2, standard deviation 1/sqrt(12)
    return Standardised(net, 0.5, 1.0 / math.sqrt(12.0)).to(DTYPE)


def train(steps, lr, seed):
    """
    Train with exact NTK weights and record the diagnostics.

    :param int steps: Gradient-descent steps.
    :param float lr: Learning rate of PINA's loss (``eta = 2 lr``).
    :param int seed: Seed of the initialisation.
    :return: ``(history, seconds)``.
    :rtype: tuple
    """
    problem = ConvergenceProblem()
    solver = PhysicsInformedSingleModelSolver(
        problem,
        make_model(seed),
        optimizer=TorchOptimizer(torch.optim.SGD, lr=lr),
        weighting=NTKWeighting(update_every_n_steps=1, safeguard=None),
    )
    diagnostics = NTKDiagnosticsCallback(max_entries=4)
    trainer = make_trainer(solver, steps, [NTKCallback(), diagnostics])
    start = time.perf_counter()
    trainer.train()
    return diagnostics.history, time.perf_counter() - start


def paper_weights(history):
    """
    The paper's per-entry weights ``lambda_c = Tr K / Tr K_cc``.

    PINA's condition weights are ``w_c = lambda_c n_c / n`` (mean reduction,
    :mod:`pina_ntk.core.weights`); both are returned for the comparison.

    :param dict history: The diagnostics history.
    :return: ``(from_weights, from_kernel)``: ``{name: array}`` from the
        solver's weights and from the recorded exact kernel traces.
    :rtype: tuple[dict, dict]
    """
    names = history["names"]
    sizes = {"physics": 2, "boundary": 2}
    total = sum(sizes[n] for n in names)
    from_weights = {
        n: np.asarray(history["weights"][n]) * total / sizes[n] for n in names
    }
    traces = {n: np.asarray(history["kernel_traces"][n]) for n in names}
    trace_sum = sum(traces.values())
    from_kernel = {n: trace_sum / traces[n] for n in names}
    return from_weights, from_kernel


def late_slope(values, late_fraction):
    """
    Fitted slope of ``values[T-1]`` against ``T`` on the last part of a run.

    :param values: The time average after ``T = 1, 2, ...`` steps.
    :param float late_fraction: The fraction of the run used, at its end.
    :return: ``(slope, first_T)``.
    :rtype: tuple[float, int]
    """
    values = np.asarray(values, dtype=float)
    count = np.arange(1, len(values) + 1)
    first = max(1, int(math.floor((1.0 - late_fraction) * len(values))))
    return loglog_slope(count[first - 1 :], values[first - 1 :]), first


def save_figures(history, output_dir, slopes, first):
    """Write the four figures of Section 5.1 and the diagnostics summary."""
    steps = np.asarray(history["step"])
    floor = (np.finfo(np.float64).eps * WAVE**2) ** 2

    figure = Figure(figsize=(6, 4.5), layout="constrained")
    ax = figure.subplots()
    for name in history["names"]:
        ax.semilogy(steps, history["condition_loss"][name], label=f"{name}")
    ax.semilogy(steps, history["weighted_loss"], "k--", label="weighted total")
    ax.axhline(floor, color="grey", ls=":", label=r"$(\epsilon\,\max|f|)^2$")
    ax.set(
        xlabel="step",
        ylabel="mean squared residual",
        title="Loss components (float64)",
    )
    ax.legend()
    figure.savefig(os.path.join(output_dir, "loss_components.png"), dpi=120)

    from_weights, _ = paper_weights(history)
    figure = Figure(figsize=(6, 4.5), layout="constrained")
    ax = figure.subplots()
    for name, label in (
        ("physics", r"$\lambda_D$"),
        ("boundary", r"$\lambda_B$"),
    ):
        ax.semilogy(steps, from_weights[name], label=label)
    ax.set(
        xlabel="step",
        ylabel=r"$\lambda_c = \mathrm{Tr}\,K / \mathrm{Tr}\,K_{cc}$",
        title="Loss weights",
    )
    ax.legend()
    figure.savefig(os.path.join(output_dir, "weights.png"), dpi=120)

    figure = Figure(figsize=(6, 4.5), layout="constrained")
    ax = figure.subplots()
    eigenvalues = np.asarray(history["eigenvalues"])
    for i in range(eigenvalues.shape[1]):
        ax.semilogy(
            history["kernel_step"], eigenvalues[:, i], label=rf"$\mu_{i + 1}$"
        )
    ax.set(
        xlabel="step",
        ylabel="eigenvalue of K",
        title="NTK eigenvalues (sorted ascending)",
    )
    ax.legend()
    figure.savefig(os.path.join(output_dir, "eigenvalues.png"), dpi=120)

    figure = Figure(figsize=(11, 4.5), layout="constrained")
    axes = figure.subplots(1, 2)
    count = np.arange(1, len(steps) + 1)
    for ax, key, label in (
        (
            axes[0],
            "avg_residual_sq",
            r"$\frac{1}{T}\sum_{t<T}\|R(\theta_t)\|^2$",
        ),
        (
            axes[1],
            "avg_grad_sq",
            r"$\frac{1}{T}\sum_{t<T}\|\nabla_\theta G(\theta_t;\theta_t)\|^2$",
        ),
    ):
        values = np.asarray(history[key])
        ax.loglog(count, values, label=label)
        guide = reference_line(count, count[-1], 3.0 * values[-1], -1.0)
        ax.loglog(count, guide, "k:", label=r"$O(T^{-1})$")
        ax.axvline(first, color="grey", lw=0.8, ls="--")
        ax.set(
            xlabel="T",
            title=f"fitted slope on T >= {first}: {slopes[key]:.3f}",
        )
        ax.legend()
    axes[0].set_ylabel("time average")
    figure.savefig(os.path.join(output_dir, "time_averages.png"), dpi=120)

    plot_diagnostics(
        history,
        os.path.join(output_dir, "diagnostics.png"),
        title="NTKDiagnosticsCallback summary, Section 5.1",
    )


def window_slopes(values, edges):
    """Fitted slopes of ``values[T-1]`` against ``T`` on ``[lo, hi]`` windows."""
    values = np.asarray(values, dtype=float)
    count = np.arange(1, len(values) + 1)
    slopes = {}
    for lo, hi in zip(edges[:-1], edges[1:]):
        hi = min(hi, len(values))
        if hi - lo >= 2:
            window = slice(lo - 1, hi)
            slopes[f"{lo}-{hi}"] = loglog_slope(count[window], values[window])
    return slopes


def settled_step(eigenvalues, tolerance=0.01):
    """First step after which every eigenvalue stays within ``tolerance``
    (relative) of its final value."""
    within = np.all(np.abs(eigenvalues / eigenvalues[-1] - 1.0) < tolerance, 1)
    outside = np.nonzero(~within)[0]
    return int(outside[-1] + 1) if len(outside) else 0


def summarise(history, settings, seconds, slopes, first):
    """The numbers reported in ``results.json``."""
    weighted = np.asarray(history["weighted_loss"])
    below = np.nonzero(weighted < 1e-20)[0]
    eigenvalues = np.asarray(history["eigenvalues"])
    change = np.diff(eigenvalues, axis=0) / eigenvalues[1:]
    edges = [1, 10, 30, 100, 300, 1000, 3000, 10000]
    from_weights, from_kernel = paper_weights(history)
    agreement = max(
        float(np.max(np.abs(from_weights[n] / from_kernel[n] - 1.0)))
        for n in history["names"]
    )
    return {
        "settings": settings,
        "seconds": seconds,
        "late_fraction_start_T": first,
        "slope_avg_residual_sq": slopes["avg_residual_sq"],
        "slope_avg_grad_sq": slopes["avg_grad_sq"],
        "initial_weighted_loss": float(weighted[0]),
        "final_weighted_loss": float(weighted[-1]),
        "min_weighted_loss": float(weighted.min()),
        "final_condition_loss": {
            n: history["condition_loss"][n][-1] for n in history["names"]
        },
        "first_step_below_1e-20": int(below[0]) if len(below) else None,
        "initial_eigenvalues": eigenvalues[0].tolist(),
        "final_eigenvalues": eigenvalues[-1].tolist(),
        "min_eigenvalue_over_run": float(eigenvalues.min()),
        "eigenvalues_within_1pc_of_final_from_step": settled_step(eigenvalues),
        "steps_where_sorted_eigenvalue_decreased": (
            (change < -1e-9).sum(axis=0).tolist()
        ),
        "window_slopes_avg_residual_sq": window_slopes(
            history["avg_residual_sq"], edges
        ),
        "window_slopes_avg_grad_sq": window_slopes(
            history["avg_grad_sq"], edges
        ),
        "max_eigenvalue_over_run": float(eigenvalues.max()),
        "final_lambda": {
            n: float(from_weights[n][-1]) for n in history["names"]
        },
        "lambda_range": {
            n: [float(from_weights[n].min()), float(from_weights[n].max())]
            for n in history["names"]
        },
        "max_rel_diff_weights_vs_exact_traces": agreement,
        "final_avg_residual_sq": history["avg_residual_sq"][-1],
        "final_avg_grad_sq": history["avg_grad_sq"][-1],
    }


def parse_args(argv):
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short run")
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--late-fraction",
        type=float,
        default=0.5,
        help="fraction of the run, at its end, for the slope fit",
    )
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
    defaults = QUICK if args.quick else FULL
    steps = args.steps or defaults["steps"]
    lr = args.lr or defaults["lr"]
    output_dir = args.output_dir or os.path.join("out", "convergence_test")
    os.makedirs(output_dir, exist_ok=True)
    torch.set_num_threads(args.threads)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")

    history, seconds = train(steps, lr, args.seed)
    slopes, first = {}, None
    for key in ("avg_residual_sq", "avg_grad_sq"):
        slopes[key], first = late_slope(history[key], args.late_fraction)
    settings = {
        "quick": args.quick,
        "steps": steps,
        "lr": lr,
        "eta_paper": 2.0 * lr,
        "seed": args.seed,
        "late_fraction": args.late_fraction,
        "threads": args.threads,
        "interior_points": [1.0 / 3.0, 2.0 / 3.0],
        "boundary_points": [0.0, 1.0],
        "width": 100,
        "dtype": "float64",
        "safeguard": None,
    }
    summary = summarise(history, settings, seconds, slopes, first)
    save_figures(history, output_dir, slopes, first)
    with open(os.path.join(output_dir, "results.json"), "w") as handle:
        json.dump(summary, handle, indent=2)
    with open(os.path.join(output_dir, "history.json"), "w") as handle:
        json.dump(history, handle)
    print(
        f"late-time slope (T >= {first}) of (1/T) sum ||R||^2: "
        f"{slopes['avg_residual_sq']:.4f}; of (1/T) sum ||grad G||^2: "
        f"{slopes['avg_grad_sq']:.4f}"
    )
    print(
        f"weighted loss {summary['initial_weighted_loss']:.3e} -> "
        f"{summary['final_weighted_loss']:.3e} in {steps} steps "
        f"({seconds:.1f} s); figures in {output_dir}"
    )
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
