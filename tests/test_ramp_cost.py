"""``benchmarks/no_harm/ramp_cost.py`` and ``exact_refresh_cost.py``: the
per-round measure, the verdict, the measured weighting and a smoke run."""

import json
import math
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.no_harm import (  # noqa: E402
    exact_refresh_cost,
    ramp_300_cost,
    ramp_cost,
)

C, P = ramp_cost.CANDIDATE, ramp_cost.PUBLISHED


def test_a_round_is_the_geometric_mean_over_settings_of_the_ratio():
    """Round 0: 1.2/1.0 and 1.0/1.2 give 1; round 1: 2.2/1.1 and 1.0/1.0
    give sqrt(2)."""
    ratios = {
        "a": {C: [1.2, 2.2], P: [1.0, 1.1]},
        "b": {C: [1.0, 1.0], P: [1.2, 1.0]},
    }
    found = ramp_cost.per_round(ratios)
    assert found == pytest.approx([1.0, math.sqrt(2)])


def _document(values, candidate=C):
    part = {
        "command": "python benchmarks/no_harm/ramp_cost.py",
        "date": "d",
        "cpu": "c",
        "cpus": 2,
        "versions": {"python": "3"},
    }
    ratios = {"s": {candidate: list(values), P: [1.0] * len(values)}}
    return {
        "part": part,
        "rounds": len(values),
        "steps": 200,
        "weightings": ["none", P, candidate],
        "ratios": ratios,
    }


@pytest.mark.parametrize(
    "values, verdict",
    [
        ((1.0, 1.01, 0.99), "pass"),
        ((1.2, 1.1, 1.3), "miss"),
        ((1.0, 1.2, 0.9), "not resolved"),
        ((1.0, 1.0), "not resolved"),
    ],
)
def test_the_verdict_is_by_the_interval_over_rounds(values, verdict):
    assert f": **{verdict}**." in ramp_cost.render(_document(values))


def test_the_page_judges_the_documents_weighting():
    """A run of ``exact_refresh_cost.py`` is judged on the exact weights'
    ratios (here 2x the sketch's: a miss), named as such; the ramp's
    ratios in the same document (level with the sketch) are not read."""
    document = _document((2.0, 2.1, 1.9), exact_refresh_cost.CANDIDATE)
    for by in document["ratios"].values():
        by[C] = [1.0, 1.0, 1.0]
    page = ramp_cost.render(document)
    assert "Target: `NTKWeighting(update_every_n_steps=10)` costs" in page
    assert "| exact every 10 ÷ none |" in page
    assert "Measured 2.000×" in page and ": **miss**." in page


@pytest.mark.parametrize(
    "study", [ramp_cost, exact_refresh_cost, ramp_300_cost]
)
def test_a_quick_run_writes_elsewhere(study, tmp_path, monkeypatch):
    import tempfile

    committed = os.path.join(ROOT, "docs", study.JSON)
    before = open(committed, "rb").read() if os.path.exists(committed) else None
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert study.main(["--quick", "--workers", "1"]) == 0
    after = open(committed, "rb").read() if os.path.exists(committed) else None
    assert after == before
    (folder,) = tmp_path.glob("pina-ntk-quick-*")
    document = json.loads((folder / study.JSON).read_text())
    candidate = getattr(study, "CANDIDATE", C)
    assert document["weightings"] == ["none", P, candidate]
    assert document["script"] == study.SCRIPT
    assert "Target:" in (folder / study.PAGE).read_text()
