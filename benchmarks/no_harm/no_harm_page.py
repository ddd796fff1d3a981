"""The decision of issue #76 on its candidates: the suite's rule on the two
confirmation halves together, (a)-(c) at equal steps and equal time
(``suite_protocol.decide``), with criterion (d) of the introductory half
(``introductory.summarise``), and the issue's targets on the confirmation
halves (the ratio to the published sketch, the worst setting). Written into
the introductory half's page, and README.md's block of where the default
helps and hurts on that half, from the committed results; nothing is run.

The candidates' time per step on a confirmation setting is the published
sketch's there times their measured ratio to it on the tuning half
(``ramp_cost.py``, ``ramp_300_cost.py``): the ramp adds one power of a
vector per proposal. A candidate not yet run on both confirmation halves
is listed, not decided.

    python benchmarks/no_harm/no_harm_page.py
    python benchmarks/no_harm/no_harm_page.py --quick  # a temporary folder
"""

import argparse
import math
import os
import statistics
import sys
from pathlib import Path

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness
from benchmarks.no_harm import ramp_300_cost, ramp_cost
from benchmarks.suite import suite_protocol as protocol
from benchmarks.suite import introductory, suite_page

SCRIPT = "no_harm/no_harm_page.py"
#: Issue #76's candidates, fixed before their confirmation runs, each with
#: the study that measured its time per step.
CANDIDATES = {
    ramp_cost.CANDIDATE: ramp_cost,
    ramp_300_cost.CANDIDATE: ramp_300_cost,
}
#: The issue's targets on the confirmation halves: the candidate's
#: geometric-mean ratio to the published sketch, and its worst setting's.
MOST_RATIO, MOST_SETTING = 1.05, 1.25


def read_costs(docs):
    """``{candidate: its cost study's committed document}``, for the
    candidates whose cost was measured."""
    paths = {c: os.path.join(docs, m.JSON) for c, m in CANDIDATES.items()}
    return {
        c: harness.read_json(p) for c, p in paths.items() if os.path.exists(p)
    }


def decided(documents, cost_documents):
    """The candidates with runs on every confirmation half and a measured
    cost, in :data:`CANDIDATES`' order."""
    return [
        c
        for c in CANDIDATES
        if c in cost_documents
        and all(
            any(r["weighting"] == c for r in documents[half]["runs"])
            for half in protocol.CONFIRMATION
        )
    ]


def with_candidate_costs(both, cost_ratios):
    """``both`` with each candidate's step cost on every setting: the
    published sketch's times the candidate's ratio in ``cost_ratios``."""
    ratios = both["step_costs"]["ratios"]
    for by in ratios.values():
        published = by.get(protocol.PUBLISHED)
        if published:
            for candidate, cost_ratio in cost_ratios.items():
                by[candidate] = [v * cost_ratio for v in published]
    return both


def decision(documents, intro_document, cost_documents):
    """``(both, summary, default, checks, no_harm)``: the checks of the
    decided candidates (:func:`decided`), criterion (d) of every one."""
    candidates = decided(documents, cost_documents)
    cost_ratios = {
        c: statistics.median(
            ramp_cost.per_round(cost_documents[c]["ratios"], c)
        )
        for c in candidates
    }
    both = with_candidate_costs(suite_page.combined(documents), cost_ratios)
    weightings = [protocol.NONE, protocol.PUBLISHED, *candidates]
    summary = suite_page.summary_of(both, weightings)
    intro = introductory.summarise(intro_document)
    no_harm = {c: intro.get(c, {}).get("no_harm", False) for c in CANDIDATES}
    default, checks = protocol.decide(summary, candidates, no_harm)
    return both, summary, default, checks, no_harm


def render(documents, intro_document, cost_documents):
    both, summary, default, checks, no_harm = decision(
        documents, intro_document, cost_documents
    )
    header = ["candidate", "basis", "÷ published (90 % interval)"]
    header += ["worst setting", "worse than none", "(a)", "(b)", "(c)"]
    rows, targets = [], []
    for candidate in checks:
        for basis in protocol.BASES:
            found = summary[candidate][basis]
            worst = found["per_problem_published"]
            top = max(worst, key=worst.get, default=None)
            published = found["to_published"], found["to_published_interval"]
            row = [suite_page.name(candidate, both), basis]
            row += [suite_page.interval(*published, 3)]
            row += [
                f"`{top}` ({suite_page.ratio(worst[top], 3)})" if top else "—"
            ]
            row += [str(len(found["worse_than_none"]))]
            for rule in "abc":
                ok = checks[candidate][f"{rule} ({basis})"]
                row.append("pass" if ok else "**fail**")
            rows.append(row)
        steps = summary[candidate]["steps"]
        worst = max(steps["per_problem_published"].values(), default=math.nan)
        met = steps["to_published"] <= MOST_RATIO and worst <= MOST_SETTING
        targets.append(
            f"- {suite_page.name(candidate, both)}: (d) "
            f"{'pass' if checks[candidate]['d'] else '**fail**'}; the "
            f"issue's targets at equal steps (÷ published at most "
            f"{MOST_RATIO}, no setting above {MOST_SETTING}×): "
            f"{suite_page.ratio(steps['to_published'], 3)} and "
            f"{suite_page.ratio(worst, 3)}: {'met' if met else '**missed**'}."
        )
    for candidate in CANDIDATES:
        if candidate not in checks:
            missing = (
                "" if candidate in cost_documents else "a cost measurement and "
            )
            targets.append(
                f"- {suite_page.name(candidate, both)}: (d) "
                f"{'pass' if no_harm[candidate] else '**fail**'}; not "
                f"decided: {missing}its runs on both confirmation halves "
                "are not made yet."
            )
    bar = summary[protocol.PUBLISHED]
    lines = [
        f"On the {len(both['problems'])} settings of both confirmation "
        "halves, every seed of each: the suite's rule (a)-(c), and (d) "
        f"every introductory setting at most {introductory.NO_HARM}× no "
        "weighting. Equal time takes each candidate's time per step as the "
        "published sketch's times its ratio measured on the tuning half "
        "(below).",
        "",
        *harness.markdown_table(header, rows),
        "",
        *targets,
        "",
        f"The published sketch is worse than none on "
        f"{len(bar['steps']['worse_than_none'])} of "
        f"{len(both['problems'])} settings at equal steps. By the rule, the "
        f"default is **{suite_page.name(default, both)}**.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    """Write the blocks from the committed results; the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    text = "write the page and README.md to a new temporary folder"
    parser.add_argument("--quick", action="store_true", help=text)
    args = parser.parse_args(argv)
    docs = os.path.join(harness.ROOT, "docs")
    documents = suite_page.read_documents(docs)
    intro = harness.read_json(os.path.join(docs, introductory.RESULTS))
    costs = read_costs(docs)
    page = os.path.join(docs, introductory.PAGE)
    begin = harness.BEGIN.format(script=SCRIPT)
    block = render(documents, intro, costs)
    harness.write_quick_block(args, page, begin, harness.END, block)
    readme = os.path.join(harness.ROOT, "README.md")
    block = introductory.readme_block(intro)
    harness.write_quick_block(args, readme, *introductory.README_MARKERS, block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
