"""The problem suite's page (``benchmarks/suite_page.py``) on a hand-made
results file: each ratio, verdict and sentence worked out here."""

import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import suite_page  # noqa: E402

SETTINGS = dict(update_every=100, steps=3000, depth=3, width=64, lr=1e-3)
SETTINGS.update(lr_decay=0.9, lr_decay_steps=1000, records=50, grid=101)
PART = dict(command="python benchmarks/weightings.py --half confirmation")
PART.update(date="2026-11-28 02:00 UTC", cpu="a CPU", cpus=2)
#: Each weighting's last five errors per problem and seed (none's: 1), so
#: that each run's error (their median) is the value given.
ERRORS = {
    "none": {"p1": (1.0, 1.0), "p2": (1.0, 1.0)},
    "sketch_predictor": {"p1": (0.5, 0.5), "p2": (0.8, 2.0)},
    # worse than none on every seed of p2
    "sketch_band_4": {"p1": (0.25, 0.25), "p2": (2.0, 2.0)},
    "default": {"p1": (0.5, 0.5), "p2": (0.8, 2.0)},
}


def run(problem, weighting, seed, error):
    history = {"steps": list(range(5)), "seconds": [1.0, 2, 3, 4, 5]}
    history["errors"] = [error] * 5
    return dict(problem=problem, weighting=weighting, seed=seed,
                status="ok", history=history)  # fmt: skip


def document():
    runs = [
        run(problem, weighting, seed, error)
        for weighting, problems in ERRORS.items()
        for problem, errors in problems.items()
        for seed, error in enumerate(errors)
    ]
    return dict(settings=SETTINGS, parts=[PART], runs=runs,
                problems=["p1", "p2"], weightings=list(ERRORS))  # fmt: skip


def test_the_decision_fails_a_candidate_worse_than_none_on_more_problems():
    # band 4: geometric mean sqrt(0.25 * 2) = 0.71 below the published
    # sketch's sqrt(0.5 * sqrt(1.6)) = 0.80, but worse than none on p2 on
    # every seed where the published sketch is worse on one seed only
    page = suite_page.render({"confirmation": document()})
    assert "- `SketchNTKWeighting(gradient_band=4)` fails." in page
    assert "- `SketchNTKWeighting(gradient_band=None)` passes." in page
    assert "the default: **`SketchNTKWeighting(gradient_band=None)`**" in page


def test_the_summary_table_holds_the_paired_geometric_means():
    page = suite_page.render({"confirmation": document()})
    row = next(
        line
        for line in page.splitlines()
        if line.startswith("| `SketchNTKWeighting(gradient_band=4)`")
    )
    cells = [c.strip() for c in row.strip("|").split("|")]
    # ÷ none: sqrt(0.25 * 2); ÷ published: sqrt(0.5 * (2 / sqrt(1.6)))
    assert cells[1] == "2"
    assert cells[2] == f"{math.sqrt(0.5):.2g}"
    assert cells[3] == f"{math.sqrt(0.5 * 2 / math.sqrt(1.6)):.2g}"
    assert cells[4] == "p2 (2)"
    assert cells[5] == "1 (p2)"


def test_the_per_problem_table_gives_the_seeds_range():
    page = suite_page.render({"confirmation": document()})
    row = next(
        line
        for line in page.splitlines()
        if line.startswith("| `SketchNTKWeighting(gradient_band=None)` | 0.5")
    )
    # p2: geometric mean of 0.8 and 2.0, range 0.8-2
    assert f"{math.sqrt(1.6):.2g} (0.8–2)" in row


def test_the_page_names_the_problems_the_default_loses():
    page = suite_page.render({"confirmation": document()})
    losses = page[page.index("Where the default still loses") :]
    # on p1 band 4 is lower than the decided default (0.25 < 0.5); on p2
    # the default is above none (sqrt(1.6) > 1) and nothing is lower
    assert "- p1: the default's ratio to none is 0.5; lower: " in losses
    assert "`SketchNTKWeighting(gradient_band=4)` (0.25)" in losses
    assert "- p2: the default's ratio to none is 1.26; lower: no weighting" in (
        losses
    )


def test_the_readme_block_shows_the_default_and_the_plain_sum():
    block = suite_page.readme_block({"confirmation": document()})
    lines = [line for line in block.splitlines() if line.startswith("|")]
    rows = lines[2:]  # after the header and its rule
    assert [row.split("|")[1].strip() for row in rows] == [
        "no weighting",
        "`SketchNTKWeighting()`, the default",
    ]
    # the default: sqrt(0.5 * sqrt(1.6)) at equal steps, worse on no
    # problem on every seed
    assert f"| {math.sqrt(0.5 * math.sqrt(1.6)):.2g} |" in rows[1]
    assert rows[1].endswith("| 0 of 2 |")


def test_a_superseded_run_is_left_out_and_its_errors_compared():
    found = document()
    # an earlier run of band 4 on p1, seed 0, with another error: left out
    # of the ratios (which stay those of the rerun), counted on the page
    earlier = run("p1", "sketch_band_4", 0, 0.9)
    earlier["superseded"] = {"part": 1, "reason": "shared the CPUs"}
    found["runs"].insert(0, earlier)
    page = suite_page.render({"confirmation": found})
    assert "the bit on 0 of them." in page
    assert "1 more superseded by a rerun" in page
    assert page == suite_page.render({"confirmation": document()}).replace(
        "0 more superseded", "1 more superseded"
    ).replace(
        "points.\n\n",
        "points.\n\nThe errors the 1 superseded runs recorded are those of "
        "their reruns to the bit on 0 of them.\n\n",
    )


def test_without_runs_of_the_shipped_default_the_decided_candidate_shows():
    found = document()
    found["runs"] = [r for r in found["runs"] if r["weighting"] != "default"]
    block = suite_page.readme_block({"confirmation": found})
    assert "| `SketchNTKWeighting(gradient_band=None)`, the default |" in block


def test_the_shipped_defaults_runs_are_compared_with_the_decided_candidate():
    # the hand-made default runs copy the published sketch's errors, which
    # is the candidate decided here: 4 of 4; with one changed, 3 of 4
    page = suite_page.render({"confirmation": document()})
    assert (
        "`SketchNTKWeighting(gradient_band=None)` to the bit on 4 of them"
        in (page)
    )
    found = document()
    changed = next(r for r in found["runs"] if r["weighting"] == "default")
    changed["history"]["errors"] = [0.7] * 5
    page = suite_page.render({"confirmation": found})
    assert "to the bit on 3 of them" in page


def test_the_shipped_defaults_own_runs_take_the_same_test():
    # the hand-made default runs are the published sketch's: they pass, at
    # its ratio sqrt(0.5 * sqrt(1.6)); worse than none on every seed of p1
    # as well, they are worse on more problems than the published sketch
    bar = f"{math.sqrt(0.5 * math.sqrt(1.6)):.2g}"
    page = suite_page.render({"confirmation": document()})
    assert (
        "- `SketchNTKWeighting()` as shipped (runs `default`) passes the "
        f"same test: {bar} at equal steps, the published sketch {bar}."
    ) in page
    found = document()
    for r in found["runs"]:
        if r["weighting"] == "default" and r["problem"] == "p1":
            r["history"]["errors"] = [1.5] * 5
    page = suite_page.render({"confirmation": found})
    assert "(runs `default`) fails the same test: " in page
