"""What the ramp of the weights costs (issue #76): the candidate
``SketchNTKWeighting(ramp_steps=1000)`` against the published sketch
(``ramp_steps=0``) on the tuning half's settings, in interleaved rounds.
``exact_refresh_cost.py`` measures another weighting of the suite's
:data:`~benchmarks.suite.weightings_setup.WEIGHTINGS` the same way.

The measure, fixed before the run that judges it: per round and setting,
each weighting's time per step over the plain sum's
(``weightings.measure_step_costs``: the rows of a round in an order rotated
by the round between two plain-sum runs, :data:`STEPS` steps each from seed
0, timed over the second half, past the warm start and the first samples);
per round, the geometric mean over the settings of the candidate's ratio
over the published sketch's. Target: at most :data:`MOST` (the verdict by
the interval over rounds, ``harness.judged``).

    python benchmarks/no_harm/ramp_cost.py          # docs/ramp-cost.json
    python benchmarks/no_harm/ramp_cost.py --quick  # a smoke run, temp folder
    python benchmarks/no_harm/ramp_cost.py --from-json docs/ramp-cost.json
"""

import functools
import statistics
import sys
import time
from pathlib import Path

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness, paired_cost
from benchmarks.suite import suite_protocol, weightings
from benchmarks.suite.weightings_setup import FULL, QUICK, SPLIT, WEIGHTINGS

SCRIPT = "no_harm/ramp_cost.py"
JSON = "ramp-cost.json"
PAGE = "weights.md"
CANDIDATE, PUBLISHED = "sketch_ramp_1000", suite_protocol.PUBLISHED
#: Target: the candidate's time per step at most this multiple of the
#: published sketch's.
MOST = 1.05
ROUNDS, STEPS = 3, 200
#: The table's short name of each measured weighting.
COLUMNS = {
    CANDIDATE: "ramp",
    "sketch_ramp_300": "ramp over 300",
    "exact_10": "exact every 10",
}


def per_round(ratios, candidate=CANDIDATE):
    """``[geometric mean over settings of candidate / published]`` by round,
    from ``{setting: {weighting: [ratio to none by round]}}``."""
    rounds = min(len(by[w]) for by in ratios.values() for w in by)
    return [
        suite_protocol.geometric_mean(
            by[candidate][i] / by[PUBLISHED][i] for by in ratios.values()
        )
        for i in range(rounds)
    ]


def run(args, argv, script=SCRIPT, candidate=CANDIDATE):
    """The document of ``script``'s run: ``candidate``, the published
    sketch and the plain sum timed in interleaved rounds."""
    settings = dict(QUICK if args.quick else FULL)
    problems = [e["setting"] for e in SPLIT["tuning"]]
    if args.quick:
        problems = problems[:1]
    rounds, steps = (1, 4) if args.quick else (ROUNDS, STEPS)
    document = {
        "script": script,
        "problems": problems,
        "weightings": ["none", PUBLISHED, candidate],
        "settings": settings,
    }
    started = time.perf_counter()
    part = harness.provenance(
        script, argv, args.machine_label, threads=1, workers=args.workers
    )
    log = functools.partial(print, file=sys.stderr, flush=True)
    ratios = weightings.measure_step_costs(
        document, rounds, args.workers, log, steps
    )
    harness.finish(part, started)
    return dict(document, part=part, rounds=rounds, steps=steps, ratios=ratios)


def render(document):
    """The block of a run: each setting's ratios, the target's verdict."""
    candidate = document["weightings"][-1]
    ratios = document["ratios"]
    values = per_round(ratios, candidate)
    verdict = harness.judged(values, MOST)
    low, high = harness.bootstrap_interval(values, harness.LEVEL)
    rows = [
        [
            f"`{setting}`",
            f"{statistics.median(by[PUBLISHED]):.2f}",
            f"{statistics.median(by[candidate]):.2f}",
        ]
        for setting, by in ratios.items()
    ]
    lines = harness.header_lines(document["part"])
    lines += [
        "",
        f"{document['rounds']} interleaved round(s), one worker of one "
        f"thread; per setting each row's time per step over the plain "
        f"sum's, over the second half of {document['steps']} steps from "
        "seed 0; medians over rounds.",
        "",
        *harness.markdown_table(
            [
                "setting",
                "published sketch ÷ none",
                f"{COLUMNS[candidate]} ÷ none",
            ],
            rows,
        ),
        "",
        f"Target: {WEIGHTINGS[candidate][0]} costs at most "
        f"{MOST}× the published sketch per step (geometric mean over the "
        f"settings, per round). Measured "
        f"{statistics.median(values):.3f}× ({harness.LEVEL:.0%} interval "
        f"over rounds {low:.3f}–{high:.3f}): **{verdict.strip('*')}**.",
    ]
    return "\n".join(lines) + "\n"


def study_main(script, results, candidate, argv=None):
    """The ``main`` of a study of this measure on ``candidate`` (its
    ``script`` and committed ``results`` file): time the rounds, or
    re-render; the exit code."""
    timed = functools.partial(run, script=script, candidate=candidate)
    return paired_cost.cost_main(
        script, results, PAGE, render, None, argv, timed
    )


def main(argv=None):
    """Time the rounds, or re-render; the exit code."""
    return study_main(SCRIPT, JSON, CANDIDATE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
