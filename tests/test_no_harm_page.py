"""``benchmarks/no_harm/no_harm_page.py``: which of issue #76's candidates
the decision covers, and the time per step each one is given."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import harness  # noqa: E402
from benchmarks.no_harm import no_harm_page, ramp_300_cost  # noqa: E402
from benchmarks.no_harm import ramp_cost  # noqa: E402
from benchmarks.suite import introductory, suite_page  # noqa: E402
from benchmarks.suite import suite_protocol as protocol  # noqa: E402

DOCS = os.path.join(ROOT, "docs")
LONG, SHORT = ramp_cost.CANDIDATE, ramp_300_cost.CANDIDATE


def _halves(weightings_by_half):
    return {
        half: {"runs": [{"weighting": w} for w in weightings]}
        for half, weightings in weightings_by_half.items()
    }


def test_a_candidate_is_decided_with_runs_on_both_halves_and_a_cost():
    documents = _halves(
        {
            "confirmation": ["none", LONG, SHORT],
            "confirmation-2": ["none", LONG],
        }
    )
    costs = {LONG: {}, SHORT: {}}
    assert no_harm_page.decided(documents, costs) == [LONG]
    documents["confirmation-2"]["runs"].append({"weighting": SHORT})
    assert no_harm_page.decided(documents, costs) == [LONG, SHORT]
    assert no_harm_page.decided(documents, {SHORT: {}}) == [SHORT]


def test_each_candidate_is_timed_at_its_own_ratio():
    both = {
        "step_costs": {
            "ratios": {
                "a": {protocol.PUBLISHED: [2.0, 4.0]},
                "b": {"none": [1.0]},  # no published sketch: left alone
            }
        }
    }
    found = no_harm_page.with_candidate_costs(both, {LONG: 1.5, SHORT: 0.5})
    assert found["step_costs"]["ratios"]["a"][LONG] == [3.0, 6.0]
    assert found["step_costs"]["ratios"]["a"][SHORT] == [1.0, 2.0]
    assert LONG not in found["step_costs"]["ratios"]["b"]


@pytest.mark.parametrize("cost_known", [True, False])
def test_a_candidate_without_its_runs_is_listed_not_decided(cost_known):
    """On the committed results, a candidate whose cost or confirmation
    runs are missing gets a line saying what is missing and no row."""
    documents = suite_page.read_documents(DOCS)
    intro = harness.read_json(os.path.join(DOCS, introductory.RESULTS))
    costs = {LONG: harness.read_json(os.path.join(DOCS, ramp_cost.JSON))}
    for half in protocol.CONFIRMATION:  # as if SHORT had not run there
        runs = documents[half]["runs"]
        documents[half] = dict(
            documents[half], runs=[r for r in runs if r["weighting"] != SHORT]
        )
    if cost_known:
        costs[SHORT] = costs[LONG]
    page = no_harm_page.render(documents, intro, costs)
    line = next(x for x in page.splitlines() if "ramp_steps=300" in x)
    assert "not decided" in line
    assert ("a cost measurement" in line) is not cost_known
    assert "| `SketchNTKWeighting(ramp_steps=1000)` | steps |" in page
