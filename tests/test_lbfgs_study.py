"""The L-BFGS study's summaries (``benchmarks/lbfgs/lbfgs_page.py``) and its
candidate's prototype (``benchmarks/lbfgs/lbfgs.py``).

Each summary test is built so that a plausible wrong implementation gives
another number: a ratio taken the other way round, runs paired by their
order instead of by seed, the equal-time budget from one cost spread over
both phases, a priced step against one plain-sum run instead of the mean
of the round's two.
"""

import math
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.lbfgs import lbfgs  # noqa: E402
from benchmarks.lbfgs import lbfgs_page  # noqa: E402
from benchmarks.suite import weightings  # noqa: E402
from benchmarks.suite.weightings_setup import QUICK  # noqa: E402

SWITCH, STEPS = 4, 8


def run(setting, row, seed, error, ms=(1.0, 10.0), status="ok"):
    """A study run's record whose recorded errors all equal ``error`` (so
    the protocol's metric is ``error`` whatever the budget) and whose Adam
    and L-BFGS steps take ``ms`` milliseconds."""
    steps = list(range(STEPS + 1))
    seconds = [
        1e-3 * (ms[0] * min(s, SWITCH) + ms[1] * max(s - SWITCH, 0))
        for s in steps
    ]
    history = dict(steps=steps, seconds=seconds, errors=[error] * len(steps))
    return dict(
        problem=setting,
        weighting=row,
        seed=seed,
        status=status,
        steps=STEPS,
        history=history,
    )


def price(setting, row, round_, adam, lbfgs_, period=None):
    """A priced run whose every Adam step takes ``adam`` and every L-BFGS
    step ``lbfgs_`` seconds (``period``: the sketch's spacing)."""
    options = {"class": None}
    if period:
        options = {"class": "Sketch", "sample_every_n_steps": period}
    durations = [adam] * SWITCH + [lbfgs_] * (STEPS - SWITCH)
    return dict(
        problem=setting,
        row=row,
        round=round_,
        status="ok",
        options=options,
        durations=durations,
    )


def document(runs, prices=()):
    recipe = dict(adam=SWITCH, lbfgs=STEPS - SWITCH, every=1, seeds=2)
    recipe["settings"] = sorted({r["problem"] for r in runs})
    windows = dict(adam=[0, SWITCH], lbfgs=[SWITCH, STEPS])
    return dict(
        recipe=recipe,
        price=dict(windows=windows, rounds=1),
        runs=list(runs),
        prices=list(prices),
    )


# ------------------------------------------------------------ equal time
def test_the_equal_time_step_charges_each_phase_its_own_cost():
    # the plain sum: 1000 Adam steps and 100 L-BFGS steps of 20 Adam steps
    # each, 3000 Adam steps' time in all
    assert lbfgs_page.equal_time_step(1000, 100, 20, 1.0, 1.0) == 1100
    # 20 % dearer Adam steps take 200 of those: 90 L-BFGS steps are left
    # (not 1100 / the whole recipe's cost 3200 / 3000, about 1031)
    assert lbfgs_page.equal_time_step(1000, 100, 20, 1.2, 1.0) == 1090
    # dearer L-BFGS steps too: 1800 / (20 * 1.5) = 60 of them
    assert lbfgs_page.equal_time_step(1000, 100, 20, 1.2, 1.5) == 1060
    # Adam steps so dear that the budget ends before the switch
    assert lbfgs_page.equal_time_step(1000, 100, 20, 4.0, 1.0) == 750


def test_the_equal_time_cost_is_what_the_protocol_divides_the_steps_by():
    runs = [
        run("p", row, seed, 1.0, ms=(1.0, 3.0))
        for row in ("none", "sketch_predictor")
        for seed in (0, 1)
    ]
    prices = [
        price("p", "none", 0, 1.0, 1.0),
        price("p", "none", 0, 1.0, 1.0),
        price("p", "sketch_predictor", 0, 2.0, 1.0),
    ]
    costs = lbfgs_page.time_costs(document(runs, prices))
    # the plain sum: 4 + 4 * 3 = 16 Adam steps' time; the sketch's Adam
    # steps take 8 of it, its 8 / 3 L-BFGS steps the rest
    step = SWITCH + 8 / 3
    assert costs["p"]["sketch_predictor"] == pytest.approx(STEPS / step)
    assert costs["p"]["none"] == 1.0


# ----------------------------------------------------------------- prices
def test_a_phase_price_spreads_the_refresh_over_its_period():
    durations = [1.0] * 30
    durations[10] = durations[20] = 2.0  # refreshes at steps 10 and 20
    assert lbfgs_page.phase_price(durations, [10, 30], 10) == pytest.approx(1.1)
    # a row without refreshes: the median step, the refreshes outvoted
    assert lbfgs_page.phase_price(durations, [10, 30], 1) == 1.0
    # the held candidate refreshes nothing under L-BFGS
    options = {"class": "Sketch", "sample_every_n_steps": 10}
    assert lbfgs_page.refresh_period(options, "adam", "sketch_held") == 10
    assert lbfgs_page.refresh_period(options, "lbfgs", "sketch_held") == 1
    assert lbfgs_page.refresh_period({"class": None}, "adam", "none") == 1


def test_a_price_is_a_ratio_to_the_mean_of_the_rounds_two_plain_runs():
    prices = [
        price("p", "none", 0, 1.0, 2.0),
        price("p", "sketch_predictor", 0, 3.0, 6.0),
        price("p", "none", 0, 3.0, 6.0),
        # another round, another setting: not mixed in
        price("p", "none", 1, 10.0, 10.0),
        price("p", "sketch_predictor", 1, 10.0, 20.0),
        price("p", "none", 1, 10.0, 10.0),
        price("q", "none", 0, 5.0, 5.0),
        price("q", "none", 0, 5.0, 5.0),
    ]
    ratios, plain = lbfgs_page.price_ratios(document([], prices))
    # 3 / mean(1, 3), not 3 / 1 (the first plain run) nor 2 / 3 (inverted)
    assert ratios["p"]["sketch_predictor"]["adam"] == [1.5, 1.0]
    assert ratios["p"]["sketch_predictor"]["lbfgs"] == [1.5, 2.0]
    assert plain["p"]["lbfgs"] == [4000.0, 10000.0]
    assert "q" not in ratios


# ---------------------------------------------------------- the summaries
def test_ratios_are_the_rows_error_over_none_paired_by_seed():
    runs = [
        run("p", "none", 0, 1.0),
        run("p", "none", 1, 4.0),
        # listed seed 1 first: pairing by order would give 1/1 and 0.5/4
        run("p", "sketch_predictor", 1, 1.0),
        run("p", "sketch_predictor", 0, 0.5),
        run("p", "sketch_held", 0, 2.0),
        run("p", "sketch_held", 1, 2.0),
    ]
    found = lbfgs_page.setting_rows(document(runs))
    mean, worst, every = found[("p", "sketch_predictor")]["steps"]
    # 0.5 / 1 and 1 / 4: geometric mean sqrt(1/8), worst 0.5
    assert mean == pytest.approx(math.sqrt(0.125))
    assert worst == 0.5 and not every
    mean, worst, every = found[("p", "sketch_held")]["steps"]
    assert mean == pytest.approx(1.0) and worst == 2.0 and not every
    assert found[("p", "sketch_predictor")]["at_end"] == pytest.approx(
        math.sqrt(0.5)
    )
    # without prices no ratio at equal time is made up
    assert math.isnan(found[("p", "sketch_predictor")]["time"][0])
    # what a row loses, named
    losses = lbfgs_page.losses(found, "sketch_held", "steps")
    assert losses == []
    assert lbfgs_page.losses(found, "sketch_predictor", "steps") == []
    # 3 / 1 and 2 / 4: worse on the whole (sqrt(1.5)), not on every seed
    runs[4] = run("p", "sketch_held", 0, 3.0)
    found = lbfgs_page.setting_rows(document(runs))
    assert lbfgs_page.losses(found, "sketch_held", "steps") == ["`p`"]
    runs[5] = run("p", "sketch_held", 1, 8.0)
    found = lbfgs_page.setting_rows(document(runs))
    assert lbfgs_page.losses(found, "sketch_held", "steps") == [
        "`p` (on every seed)"
    ]


def test_a_setting_no_row_solves_counts_as_no_loss():
    # every row at or above a relative error of 1: the ratios compare
    # failures; a setting one row solves keeps its losses
    runs = [
        run("p", "none", 0, 2.0),
        run("p", "sketch_predictor", 0, 4.0),
        run("p", "sketch_held", 0, 1.0),
    ]
    found = lbfgs_page.setting_rows(document(runs))
    assert lbfgs_page.unsolved(found) == ["p"]
    assert lbfgs_page.losses(found, "sketch_predictor", "steps") == []
    runs[0] = run("p", "none", 0, 0.5)
    found = lbfgs_page.setting_rows(document(runs))
    assert lbfgs_page.unsolved(found) == []
    assert lbfgs_page.losses(found, "sketch_predictor", "steps") == [
        "`p` (on every seed)"
    ]


def test_the_phase_times_are_read_off_the_records_at_the_switch():
    record = run("p", "none", 0, 1.0, ms=(2.0, 30.0))
    assert lbfgs_page.phase_ms(record, SWITCH) == pytest.approx((2.0, 30.0))
    failed = run("p", "none", 0, 1.0, status="failed")
    assert all(map(math.isnan, lbfgs_page.phase_ms(failed, SWITCH)))


def verdict_document(held_error):
    runs = [
        run(setting, row, seed, error)
        for setting in ("p", "q", "r")
        for seed in (0, 1, 2)
        for row, error in (
            ("none", 1.0),
            ("sketch_predictor", 0.5),
            ("sketch_held", held_error * (1 + 0.01 * seed)),
        )
    ]
    prices = [
        price(setting, row, 0, 1.0, 1.0)
        for setting in ("p", "q", "r")
        for row in ("none", "sketch_predictor", "sketch_held", "none")
    ]
    return document(runs, prices)


def test_the_suites_rule_decides_between_held_and_default():
    winner, checks, _ = lbfgs_page.verdict(verdict_document(0.25))
    assert winner == "sketch_held" and all(checks["sketch_held"].values())
    # held 0.7 / 0.5 = 1.4 times the default: above 1, and above 1.25
    winner, checks, _ = lbfgs_page.verdict(verdict_document(0.7))
    assert winner == "sketch_predictor"
    assert not checks["sketch_held"]["a (steps)"]
    assert not checks["sketch_held"]["b (time)"]


# ------------------------------------------------------ the candidate
def test_the_held_candidate_stops_refreshing_at_the_switch(monkeypatch):
    monkeypatch.setattr(lbfgs, "LBFGS", dict(lbfgs.LBFGS, max_iter=2))
    settings = dict(QUICK, calibrate=0)
    # heat_data: a problem class no other test trains in this process (a
    # Trainer turns a zoo class's shared conditions into input conditions,
    # which weightings.fresh_problem cannot copy)
    recipe = dict(settings=["heat_data"], seeds=1, adam=5, lbfgs=8)
    jobs = lbfgs.study_jobs(settings, dict(recipe, every=1))
    weights = {}
    for job in jobs:
        if job["row"] == "none":
            continue
        record = weightings.run_job(job)
        assert record["status"] == "ok", record["failure"]
        history = record["history"]["conditions"]
        weights[job["row"]] = dict(zip(history["steps"], history["weights"]))
    held, default = weights["sketch_held"], weights["sketch_predictor"]
    # (the record after s steps holds the weights of step s - 1, from 0)
    # the same before the switch; the default's sample of step 10 enters
    # at step 11, the candidate takes none from the switch (step 5) on
    assert all(held[s] == default[s] for s in range(1, 12))
    assert all(held[s] == held[5] for s in range(5, 14))
    assert default[12] != default[11]
