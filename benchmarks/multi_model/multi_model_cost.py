r"""What the default weighting costs on PINA's multi-model solvers, against
what it costs on the single-model solver, in interleaved rounds (issue
#70: "the sketch's sample at its usual cost").

PINA's Poisson problem on the square (the suite's 800 interior and 200
boundary points, drawn once), PINA's ``FeedForward`` of three layers of 64
(tanh) and Adam, trained by three solvers: the physics-informed solver of
one network, a physics-informed ensemble of :data:`MEMBERS` such networks
and the self-adaptive solver; each with no weighting and with the default
``SketchNTKWeighting()``. A round is one fresh single-threaded worker that
runs the six rows in an order rotated by the round (``paired_cost.py``).

The measure, fixed here before the run that judges it: per round and
multi-model solver, the default's mean step over the same solver's
unweighted one, divided by that ratio on the single-model solver
(:func:`round_measures`). Each target holds when the interval over rounds
(``harness.judged``) lies below :data:`MOST_EXCESS`.

    python benchmarks/multi_model/multi_model_cost.py  # multi-model-cost.json
    python benchmarks/multi_model/multi_model_cost.py --quick  # a temp folder
    python benchmarks/multi_model/multi_model_cost.py \
        --from-json docs/multi-model-cost.json
"""

import statistics
import sys
from pathlib import Path

import torch
from pina.model import FeedForward
from pina.optim import TorchOptimizer
from pina.problem.zoo import Poisson2DSquareProblem
from pina.solver import (
    PhysicsInformedEnsembleSolver,
    PhysicsInformedSingleModelSolver,
    SelfAdaptivePhysicsInformedSolver,
)
from pina_ntk import SketchNTKWeighting

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness, paired_cost

SCRIPT = "multi_model/multi_model_cost.py"
JSON = "multi-model-cost.json"
PAGE = "multi-model.md"
MEMBERS = 5
POINTS = {"D": 800, "boundary": 200}
SOLVERS = {
    "single": "physics-informed, one network",
    "ensemble": f"physics-informed ensemble, {MEMBERS} networks",
    "self_adaptive": "self-adaptive",
}
WEIGHTINGS = ("none", "default")
ROWS = [f"{solver}/{name}" for solver in SOLVERS for name in WEIGHTINGS]
#: The target: on a multi-model solver the default's cost ratio to the
#: unweighted step is at most this multiple of its ratio on one network.
MOST_EXCESS = 1.25


def network():
    """PINA's ``FeedForward``, three layers of 64, tanh."""
    return FeedForward(2, 1, inner_size=64, n_layers=3, func=torch.nn.Tanh)


def adam():
    return TorchOptimizer(torch.optim.Adam, lr=1e-3)


def build(row):
    """The solver of a row, ``"solver/weighting"``, on a fresh problem."""
    solver, name = row.split("/")
    problem = harness.own_problem(Poisson2DSquareProblem)
    for domain, count in POINTS.items():
        problem.discretise_domain(count, "random", domains=[domain])
    weighting = SketchNTKWeighting() if name == "default" else None
    if solver == "ensemble":
        models = [network() for _ in range(MEMBERS)]
        optimizers = [adam() for _ in models]
        return PhysicsInformedEnsembleSolver(
            problem, models, optimizers=optimizers, weighting=weighting
        )
    if solver == "self_adaptive":
        return SelfAdaptivePhysicsInformedSolver(
            problem,
            network(),
            optimizer_model=adam(),
            optimizer_weights=adam(),
            weighting=weighting,
        )
    return PhysicsInformedSingleModelSolver(
        problem, network(), optimizer=adam(), weighting=weighting
    )


def run_round(task):
    """A worker job: ``{"solver/weighting": durations}`` of one round."""
    return paired_cost.time_rows(task, ROWS, build)


def round_measures(durations, warmup):
    """``(means, excess)`` of a round: each row's mean step (s) after
    ``warmup``, and per multi-model solver the default's ratio to none over
    the single-model solver's."""
    means = paired_cost.mean_steps(durations, warmup)

    def ratio(solver):
        return means[f"{solver}/default"] / means[f"{solver}/none"]

    single = ratio("single")
    return means, {s: ratio(s) / single for s in SOLVERS if s != "single"}


def summary(document):
    """``(rows, excess, verdicts)``: per row its median over rounds of the
    mean step (ms) and of the ratio to its solver's unweighted step; per
    multi-model solver the per-round excess and the target's verdict."""
    warmup = document["settings"]["warmup"]
    measured = [round_measures(r, warmup) for r in document["rounds"]]
    rows = {}
    for row in ROWS:
        base = row.split("/")[0] + "/none"
        seconds = [m[row] for m, _ in measured]
        ratios = [m[row] / m[base] for m, _ in measured]
        rows[row] = (
            1e3 * statistics.median(seconds),
            statistics.median(ratios),
        )
    excess = {s: [e[s] for _, e in measured] for s in measured[0][1]}
    verdicts = {s: harness.judged(v, MOST_EXCESS) for s, v in excess.items()}
    return rows, excess, verdicts


def render(document):
    """The page's block: the run, the table and the verdicts."""
    rows, excess, verdicts = summary(document)
    lines = harness.header_lines(document["part"])
    lines += ["", paired_cost.window_line(document["settings"]), ""]
    table = []
    for solver, label in SOLVERS.items():
        none, default = rows[f"{solver}/none"], rows[f"{solver}/default"]
        table.append(
            [label, f"{none[0]:.1f}", f"{default[0]:.1f}", f"{default[1]:.2f}"]
        )
    lines += harness.markdown_table(
        ["solver", "none: ms / step", "default: ms / step", "÷ none"], table
    )
    lines += [
        "",
        "Target: on each multi-model solver the default costs, against its "
        f"unweighted step, at most {MOST_EXCESS}× what it costs on one "
        "network.",
        "",
    ]
    for solver, values in excess.items():
        low, high = harness.bootstrap_interval(values, harness.LEVEL)
        lines.append(
            f"- {SOLVERS[solver]}: {statistics.median(values):.2f}× "
            f"({harness.LEVEL:.0%} interval over rounds {low:.2f}–"
            f"{high:.2f}): **{verdicts[solver]}**."
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    """Time the rounds, or re-render; the exit code."""
    job = "benchmarks.multi_model.multi_model_cost:run_round"
    return paired_cost.cost_main(SCRIPT, JSON, PAGE, render, job, argv)


if __name__ == "__main__":
    raise SystemExit(main())
