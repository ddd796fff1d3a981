"""The scaling study's arithmetic (``benchmarks/scaling.py``) on hand-made
step times, each expected value worked out here, and one quick run end to
end (its page re-rendered from its results file)."""

import math
import os
import sys

import pytest
import torch
from pina.model import FeedForward

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import harness  # noqa: E402
import scaling  # noqa: E402

WARMUP = 2


def run(key, durations):
    """A timed run: ``WARMUP`` slow steps (which must be ignored), then
    ``durations``."""
    return {"key": key, "durations": [100.0] * WARMUP + list(durations)}


def hand_round(exact=True):
    """One round: unweighted steps of 1 s (twice); the sketch rows a costly
    sample step in each period of 10; the per-step rows constant; the exact
    run a 50 s refresh at step 0 (which is not a warm-up step) then 1.1 s."""
    runs = [run("unweighted", [1.0] * 20), run("unweighted", [1.0] * 20)]
    # per period: nine plain steps and one with the sample
    runs.append(run("default", ([1.0] * 9 + [2.5]) * 2))  # mean 1.15
    runs.append(run("published", ([1.0] * 9 + [2.0]) * 2))  # mean 1.1
    runs.append(run("parameter", ([1.0] * 9 + [1.5]) * 2))  # mean 1.05
    for key, value in (
        ("pina_ntk", 1.3),
        ("pina_self_adaptive", 1.2),
        ("reference_evaluation", 1.25),
        ("reference_predictor", 1.6),
    ):
        runs.append(run(key, [value] * 10 + [50.0]))  # one stray slow step
    if exact:
        runs.append({"key": "exact_every_100", "durations": [50.0] + [1.1] * 6})
    return runs


def test_round_ratios_by_hand():
    ratios = scaling.round_ratios(hand_round(), WARMUP)
    expected = {
        "unweighted": 1.0,
        # period means: the sample's cost spread over its period
        "default": 1.15,
        "published": 1.1,
        "parameter": 1.05,
        # medians: the stray slow step does not count
        "pina_ntk": 1.3,
        "pina_self_adaptive": 1.2,
        "reference_evaluation": 1.25,
        "reference_predictor": 1.6,
        # the refresh step; and it plus 99 steps between, over 100
        "exact_every_step": 50.0,
        "exact_every_100": (50.0 + 99 * 1.1) / 100,
    }
    assert set(ratios) == set(expected)
    for key, value in expected.items():
        assert ratios[key][1] == pytest.approx(value, rel=1e-12), key


def test_ratios_are_against_the_same_rounds_unweighted_steps():
    runs = hand_round()
    for entry in runs:  # a twice slower machine: every ratio unchanged
        entry["durations"] = [2 * d for d in entry["durations"]]
    ratios = scaling.round_ratios(runs, WARMUP)
    assert ratios["unweighted"][0] == 2.0
    assert ratios["default"][1] == pytest.approx(1.15)
    assert ratios["exact_every_100"][1] == pytest.approx((50 + 99 * 1.1) / 100)


def test_summary_floors_and_the_defaults_excess():
    rounds = [{"runs": hand_round()}, {"runs": hand_round(exact=False)}]
    slower = hand_round()
    slower[2] = run("default", ([1.0] * 9 + [4.0]) * 2)  # mean 1.3
    rounds.append({"runs": slower})
    summary = scaling.summarise(rounds, {"warmup": WARMUP})
    default = summary["rows"]["default"]
    assert default["ratio"] == pytest.approx(1.15)  # median of 1.15 x2, 1.3
    assert (default["low"], default["high"]) == pytest.approx((1.15, 1.3))
    # the exact rows of the two rounds that ran them
    assert summary["rows"]["exact_every_step"]["ratio"] == 50.0
    # floors: 1 + (reference - 1) / 10, per estimator's reference row
    assert summary["floors"]["default"] == pytest.approx(1.06)
    assert summary["floors"]["published"] == pytest.approx(1.06)
    assert summary["floors"]["parameter"] == pytest.approx(1.025)
    assert summary["excess"] == pytest.approx(0.09)


def test_crossing_interpolates_in_log_log():
    rows = [{"ratio": 1.5}, {"ratio": 3.0}, {"ratio": 6.0}]
    entries = [{"summary": {"rows": {"exact_every_100": r}}} for r in rows]
    below, above, at = scaling.crossing([100, 1000, 10000], entries)
    assert (below, above) == (100, 1000)
    # log-linear: 2 = 1.5 * 2^s with s the share of the decade
    share = math.log(2 / 1.5) / math.log(2)
    assert at == pytest.approx(100 * 10**share, rel=1e-12)
    never = [{"summary": {"rows": {"exact_every_100": {"ratio": 1.5}}}}] * 2
    assert scaling.crossing([100, 1000], never) is None


def test_skipped_rows_are_left_out_of_the_crossing():
    entries = [
        {"summary": {"rows": {"exact_every_100": {"ratio": 1.5}}}},
        {"summary": {"rows": {}}},  # skipped: above the cap
    ]
    assert scaling.crossing([100, 1000], entries) is None


@pytest.mark.parametrize("width", [10, 100, 1000])
def test_parameter_count_is_pinas_network(width):
    network = FeedForward(
        2, 1, inner_size=width, n_layers=3, func=torch.nn.Tanh
    )
    count = sum(p.numel() for p in network.parameters())
    assert scaling.parameters_of({"depth": 3}, (1000, width)) == count


def test_exact_projection_grows_with_entries_squared_times_parameters():
    settings = {"depth": 3}
    sizes = [(100, 100), (1000, 100), (1000, 300)]
    parameters = {s: scaling.parameters_of(settings, s) for s in sizes}
    measured = {(100, 100): 0.8}
    assert scaling.projected_exact((100, 100), {}, parameters) is None
    # ten times the entries, each backward through a ten times larger graph
    assert scaling.projected_exact(
        (1000, 100), measured, parameters
    ) == pytest.approx(80.0)
    measured[(1000, 100)] = 9.0  # the nearest smaller size is used
    ratio = parameters[(1000, 300)] / parameters[(1000, 100)]
    assert scaling.projected_exact(
        (1000, 300), measured, parameters
    ) == pytest.approx(9.0 * ratio)


def test_run_order_interleaves_the_rows():
    for index in range(3):
        order = scaling.run_order(index, exact=True)
        assert order[0] == "unweighted" and order.count("unweighted") == 2
        assert order[-1] == "exact_every_100"
        cheap = [k for k in order if k not in ("unweighted", "exact_every_100")]
        assert sorted(cheap) == sorted(
            set(scaling.SPECS)
            - {"unweighted", "exact_every_100"}
            - {"exact_every_step"}
        )
    assert scaling.run_order(0, True)[1] != scaling.run_order(1, True)[1]
    assert "exact_every_100" not in scaling.run_order(0, exact=False)


def test_quick_run_writes_page_figure_and_readme_block(tmp_path):
    output = tmp_path / "docs" / "scaling.md"
    readme = tmp_path / "README.md"
    readme.write_text("x\n<!-- scaling -->\n<!-- /scaling -->\ny\n")
    flags = ["--quick", "--output", str(output), "--readme", str(readme)]
    assert scaling.main(flags) == 0
    page = output.read_text(encoding="utf-8")
    document = harness.read_json(str(tmp_path / "docs" / "scaling.json"))
    assert (tmp_path / "docs" / scaling.FIGURE).stat().st_size > 0
    # the results so far, kept while it ran, are gone once it has finished
    assert not (tmp_path / "docs" / "scaling.partial.json").exists()
    block = harness.page_block(str(output), "scaling.py")
    assert block == scaling.render(document)
    for entry in document["sizes"]:
        rows = entry["summary"]["rows"]
        for key in scaling.SPECS:
            if key in rows:
                assert math.isfinite(rows[key]["ratio"]) > 0, key
        assert rows["unweighted"]["ratio"] == 1.0
    assert "docs/scaling.md" in readme.read_text(encoding="utf-8")
    again = tmp_path / "again.md"
    results = str(tmp_path / "docs" / "scaling.json")
    assert scaling.main(["--from-json", results, "--output", str(again)]) == 0
    assert harness.page_block(str(again), "scaling.py") == block
