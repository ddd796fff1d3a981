r"""What exact NTK weights cost on PINA's inverse-problem tutorial, against
what they cost on its forward twin, in interleaved rounds; the target of
issue #69 ("exact weights train the problem at their usual cost").

The tutorial's solver (``inverse_logs.tutorial_solver``: Poisson with a
Gaussian source centred at the unknowns, the Softplus network, Adam, one
step an epoch) and its forward twin: the same problem class, points,
observations and network, the source fixed at the true centre, so that no
parameter is unknown. Each is trained with no weighting, with
``NTKWeighting()`` (exact traces every step) and with the default
``SketchNTKWeighting()``. A round is one fresh single-threaded worker that
runs the six rows in an order rotated by the round (``paired_cost.py``).

The measure, fixed here before the run that judges it: per round, the
exact row's mean step over the unweighted row's on the inverse problem,
divided by the same ratio on the forward twin (:func:`round_measures`). The
target holds when the interval over rounds (``harness.judged``) lies below
:data:`MOST_EXCESS`. Before the fix of the clamp, exact weights fell back
to the quadratic path on this problem (a step grew from about 0.2 s to
2-63 s in the report of issue #69).

    python benchmarks/inverse/inverse_cost.py          # docs/inverse-cost.json
    python benchmarks/inverse/inverse_cost.py --quick  # a temporary folder
    python benchmarks/inverse/inverse_cost.py --from-json docs/inverse-cost.json
"""

import statistics
import sys
from pathlib import Path

from pina.equation import Equation
from pina.equation.zoo import FixedValue
from pina.problem import SpatialProblem
from pina_ntk import NTKWeighting, SketchNTKWeighting

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness, paired_cost
from benchmarks.inverse.inverse_logs import tutorial_solver
from benchmarks.suite.suite_base import _Benchmark, _conditions
from benchmarks.suite.suite_inverse_problems import PoissonSourceProblem
from benchmarks.suite.suite_inverse_problems import _poisson_source

SCRIPT = "inverse/inverse_cost.py"
JSON = "inverse-cost.json"
PAGE = "inverse-problems.md"
#: The rows: the weighting's factory (``None``: no weighting) and label.
WEIGHTINGS = {
    "none": (None, "no weighting"),
    "exact": (NTKWeighting, "NTKWeighting() (exact, every step)"),
    "default": (SketchNTKWeighting, "SketchNTKWeighting() (default)"),
}
TWINS = ("inverse", "forward")
#: The target: the exact row's cost ratio on the inverse problem is at
#: most this multiple of its ratio on the forward twin.
MOST_EXCESS = 1.25


def _fixed_source(input_, output_):
    """:math:`\\Delta u - f`, the source at the true centre."""
    return _poisson_source(input_, output_, None)


class ForwardPoissonSource(_Benchmark, SpatialProblem):
    """The tutorial's problem with the source fixed at its true centre: the
    same domain, conditions, observations (``data``) and solution, and no
    unknown parameter."""

    spatial_domain = PoissonSourceProblem.spatial_domain
    domains = PoissonSourceProblem.domains
    conditions = _conditions(
        D=Equation(_fixed_source), boundary=FixedValue(0.0)
    )
    OBSERVED = PoissonSourceProblem.OBSERVED
    solution = PoissonSourceProblem.solution
    observations = PoissonSourceProblem.observations


PROBLEMS = dict(inverse=PoissonSourceProblem, forward=ForwardPoissonSource)
ROWS = [(twin, name) for twin in TWINS for name in WEIGHTINGS]


def build(row):
    """The tutorial's solver of a row, ``"twin/weighting"``."""
    twin, name = row.split("/")
    factory = WEIGHTINGS[name][0]
    weighting = None if factory is None else factory()
    return tutorial_solver(weighting, PROBLEMS[twin])


def run_round(task):
    """A worker job: ``{"twin/weighting": durations}`` of one round."""
    rows = [f"{twin}/{name}" for twin, name in ROWS]
    return paired_cost.time_rows(task, rows, build)


def round_measures(durations, warmup):
    """``(means, excess)`` of a round: each row's mean step (s) after
    ``warmup``, and the exact row's ratio to none on the inverse problem
    over the same ratio on the forward twin."""
    means = paired_cost.mean_steps(durations, warmup)

    def ratio(twin, name="exact"):
        return means[f"{twin}/{name}"] / means[f"{twin}/none"]

    return means, ratio("inverse") / ratio("forward")


def summary(document):
    """``(rows, excess, verdict)``: per row its median over rounds of the
    mean step (ms) and of the ratio to its twin's unweighted step, the
    per-round excess of the exact rows, and the target's verdict."""
    warmup = document["settings"]["warmup"]
    measured = [round_measures(r, warmup) for r in document["rounds"]]
    rows = {}
    for twin, name in ROWS:
        key = f"{twin}/{name}"
        seconds = [m[key] for m, _ in measured]
        ratios = [m[key] / m[f"{twin}/none"] for m, _ in measured]
        rows[key] = (
            1e3 * statistics.median(seconds),
            statistics.median(ratios),
        )
    excess = [e for _, e in measured]
    return rows, excess, harness.judged(excess, MOST_EXCESS)


def render(document):
    """The page's block: the run, the table and the verdict."""
    rows, excess, verdict = summary(document)
    lines = harness.header_lines(document["part"])
    lines += [
        "",
        paired_cost.window_line(document["settings"])
        + " The forward twin is the same problem with the source fixed at "
        "its true centre.",
        "",
    ]
    table = []
    for name, (_, label) in WEIGHTINGS.items():
        cells = [label]
        for twin in TWINS:
            ms, ratio = rows[f"{twin}/{name}"]
            cells += [f"{ms:.1f}", f"{ratio:.2f}"]
        table.append(cells)
    lines += harness.markdown_table(
        [
            "weighting",
            "inverse: ms / step",
            "÷ none",
            "forward twin: ms / step",
            "÷ none",
        ],
        table,
    )
    low, high = harness.bootstrap_interval(excess, harness.LEVEL)
    lines += [
        "",
        "Target: exact weights cost on the inverse problem at most "
        f"{MOST_EXCESS}× what they cost on its forward twin (each against "
        f"its unweighted step). Measured {statistics.median(excess):.2f}× "
        f"({harness.LEVEL:.0%} interval over rounds {low:.2f}–{high:.2f}): "
        f"**{verdict}**.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    """Time the rounds, or re-render; the exit code."""
    job = "benchmarks.inverse.inverse_cost:run_round"
    return paired_cost.cost_main(SCRIPT, JSON, PAGE, render, job, argv)


if __name__ == "__main__":
    raise SystemExit(main())
