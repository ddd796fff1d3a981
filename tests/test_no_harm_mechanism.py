"""The mechanism study of issue #76 (``benchmarks/no_harm/no_harm_mechanism.py``
and its ``_setups``, ``_analysis`` and ``_page`` modules): its growth
rates, lags and replayed moving average on hand-made
trajectories, each against a value computed here by other means (a
swapped sign, a ratio taken the other way round, a dropped spacing or
per-entry factor, a sample entering one step early give other values);
its rendering from a small hand-made document; and the committed page,
which ``--from-json`` on the committed results writes again byte for
byte.
"""

import math
import os
import shutil
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pina_ntk.core.weights import ntk_weights  # noqa: E402
from benchmarks import harness  # noqa: E402
from benchmarks.no_harm import no_harm_mechanism as study  # noqa: E402
from benchmarks.no_harm import (
    no_harm_mechanism_analysis as analysis,
)  # noqa: E402
from benchmarks.no_harm import (
    no_harm_mechanism_page as mechanism_page,
)  # noqa: E402
from benchmarks.no_harm import no_harm_mechanism_setups as setups  # noqa: E402

DOCS = os.path.join(ROOT, "docs")
COMMITTED = os.path.join(DOCS, study.JSON)


def run_main(*arguments):
    """The script's ``main`` with ``arguments``; its exit code (what it
    prints is left to pytest)."""
    return study.main([str(a) for a in arguments])


def test_the_growth_rate_of_an_exponential_is_its_exponent():
    steps = list(range(0, 310, 10))
    values = [3.0 * math.exp(0.05 * t) for t in steps]
    for a, b in ((0, 50), (50, 150), (150, 300)):
        assert analysis.growth_rate(steps, values, a, b) == pytest.approx(0.05)
    falling = [7.0 * math.exp(-0.02 * t) for t in steps]
    assert analysis.growth_rate(steps, falling, 0, 50) == pytest.approx(-0.02)
    # per step, not per record (records are 10 steps apart)
    assert analysis.growth_rate(steps, values, 0, 50) != pytest.approx(0.25)
    assert math.isnan(analysis.growth_rate(steps, values, 0, 55))
    assert math.isnan(analysis.growth_rate([0, 10], [0.0, 1.0], 0, 10))


def trajectory(traces, applied=None, steps=None):
    """Records at ``steps`` (default every 10 from 0) of exact traces
    ``{condition: [value per step]}`` on 100 points each, the applied
    weights ``{condition: [value per step]}`` (default the exact ones)."""
    names = list(traces)
    steps = steps or [10 * i for i in range(len(traces[names[0]]))]
    records = []
    for i, step in enumerate(steps):
        exact = {c: traces[c][i] for c in names}
        sizes = torch.tensor([100.0] * len(names))
        found = ntk_weights(torch.tensor([exact[c] for c in names]), sizes)
        weights = dict(zip(names, found.tolist()))
        used = {c: applied[c][i] for c in names} if applied else weights
        records.append(
            dict(
                step=step,
                error=0.5,
                exact_traces=exact,
                exact_weights=weights,
                points=dict.fromkeys(names, 100),
                train_points=dict.fromkeys(names, 80),
                losses={f"{c}_loss": 1.0 + i for c in names},
                applied_weights=used,
                averaged_traces={c: 0.8 * exact[c] for c in names},
                rejections={"proposals": i + 1, "safeguard": 0},
                isolated=[],
            )
        )
    return records


def test_trace_growth_reads_each_condition_over_each_window():
    steps = list(range(0, 160, 10))
    found = analysis.trace_growth(
        trajectory(
            {
                "D": [math.exp(0.1 * t) for t in steps],
                "boundary": [2.0 * math.exp(-0.01 * t) for t in steps],
            }
        ),
        [[0, 50], [50, 150]],
    )
    assert found["D"] == [pytest.approx(0.1), pytest.approx(0.1)]
    assert found["boundary"] == [pytest.approx(-0.01), pytest.approx(-0.01)]


def test_the_weight_ratio_is_the_applied_over_the_exact_weight():
    record = dict(
        exact_weights={"D": 5.5, "boundary": 0.2},
        applied_weights={"D": 55.0, "boundary": 0.1},
    )
    assert analysis.weight_ratios(record) == {
        "D": pytest.approx(10.0),
        "boundary": pytest.approx(0.5),
    }


def test_the_replayed_average_folds_samples_in_after_their_step():
    # records every 5 steps, a sample every 10: the sample of step s enters
    # the average behind the weights of the steps after s
    steps = [0, 5, 10, 15, 20, 25]
    values = [1.0, 50.0, 4.0, 60.0, 16.0, 70.0]
    alpha, every = 0.01, 10
    rate = 1 - 0.99**10
    expected = [
        1.0,  # the warm start
        1.0,
        1.0,  # the sample of step 0 is the warm start's value
        (1 - rate) * 1.0 + rate * 4.0,
        (1 - rate) * 1.0 + rate * 4.0,  # step 15 is no sample step
        (1 - rate) ** 2 * 1.0 + rate * (1 - rate) * 4.0 + rate * 16.0,
    ]
    found = analysis.replay_average(steps, values, alpha, every)
    assert found == [pytest.approx(e) for e in expected]
    with pytest.raises(ValueError):
        analysis.replay_average([10, 20], [1.0, 2.0], alpha, every)


def test_the_ratio_of_weights_is_the_ntk_weights_ratio():
    averaged, exact = {"a": 2.0, "b": 8.0}, {"a": 4.0, "b": 4.0}
    sizes = torch.tensor([3.0, 1.0])  # the ratio does not depend on them

    def weights(traces):
        return ntk_weights(torch.tensor([traces["a"], traces["b"]]), sizes)

    expected = (weights(averaged) / weights(exact)).tolist()
    found = analysis.ratio_of_weights(averaged, exact)
    assert [found["a"], found["b"]] == pytest.approx(expected)
    assert found["a"] == pytest.approx(2.5)  # (10 / 8) (4 / 2)


def test_the_replayed_weights_lag_a_growing_trace():
    steps = list(range(0, 60, 10))
    growing = [math.exp(0.1 * t) for t in steps]
    records = trajectory({"D": growing, "boundary": [1.0] * len(steps)})
    found = analysis.replayed_weight_ratios(records)
    rate = 1 - (1 - setups.DEFAULT_ALPHA) ** 10
    assert found[0] == {"D": pytest.approx(1.0), "boundary": 1.0}
    # at step 20 the average holds the warm start and the sample of step 10
    average = (1 - rate) * 1.0 + rate * growing[1]
    total = (average + 1.0) / (growing[2] + 1.0)
    assert found[20]["D"] == pytest.approx(total * growing[2] / average)
    assert found[20]["boundary"] == pytest.approx(total)
    assert found[20]["D"] > 1 > found[20]["boundary"]
    # constant traces: no lag at all
    flat = analysis.replayed_weight_ratios(trajectory({"D": [3.0] * 6}))
    assert all(r["D"] == pytest.approx(1.0) for r in flat.values())


def test_the_off_factors_count_a_ratio_either_way():
    # constant traces: the replay is exact; the default is off by 4 and 2
    # (below) and by 1/4 and 8 (above)
    records = trajectory({"D": [5.0] * 3, "boundary": [5.0] * 3})
    for record, factors in zip(records, ([4.0, 0.5], [0.25, 8.0])):
        exact = record["exact_weights"]
        record["applied_weights"] = {
            c: exact[c] * f for c, f in zip(exact, factors)
        }
    assert analysis.off_factor(0.25) == analysis.off_factor(4.0) == 4.0
    default, replay, noise = analysis.off_factors(records, 0)
    assert default == pytest.approx(math.sqrt(8.0))
    assert replay == pytest.approx(1.0)
    assert noise == pytest.approx(math.sqrt(8.0))
    assert analysis.off_factors(records, 10)[0] == pytest.approx(math.sqrt(32))
    assert analysis.off_factors(records, 15) is None


def test_the_trace_lag_is_per_entry():
    record = dict(
        exact_traces={"D": 900.0},
        points={"D": 900},
        averaged_traces={"D": 72.0},
        train_points={"D": 720},
    )
    # 1 per entry exactly, 0.1 per entry on average: not 900 / 72 = 12.5
    assert analysis.trace_lag(record) == {"D": pytest.approx(10.0)}
    record["averaged_traces"] = {}
    assert math.isnan(analysis.trace_lag(record)["D"])


def test_the_constant_growth_lag_and_the_hypothesis_formula():
    growth, alpha, steps = 0.05, 1e-3, 300
    # the warm start's share and the samples' geometric sum, closed form
    q = math.exp(growth) / (1 - alpha)
    average = (1 - alpha) ** steps * (1 + alpha * q * (q**steps - 1) / (q - 1))
    expected = math.exp(growth * steps) / average
    assert analysis.constant_growth_lag(growth, alpha, steps) == pytest.approx(
        expected
    )
    # long after the start: the steady lag, about 1 + growth / alpha
    steady = (1 - (1 - alpha) * math.exp(-growth)) / alpha
    found = analysis.constant_growth_lag(growth, alpha, 2000)
    assert found == pytest.approx(steady, rel=1e-6)
    assert found == pytest.approx(1 + growth / alpha, rel=0.05)
    assert analysis.constant_growth_lag(0.0, alpha, steps) == pytest.approx(1.0)
    assert analysis.span_delay_lag(growth, alpha) == pytest.approx(math.exp(50))
    assert analysis.span_delay_lag(1.0, alpha) == math.inf


def outcome_run(case, row, seed, final, steps=1000):
    return dict(
        case=case,
        row=row,
        seed=seed,
        steps=steps,
        status="ok",
        error_steps=[steps // 2, steps],
        errors=[2 * final, final],
    )


def test_the_ratios_to_none_are_paired_by_seed():
    document = dict(
        outcome=[
            outcome_run("poisson", "none", 0, 0.2),
            outcome_run("poisson", "none", 1, 0.4),
            outcome_run("poisson", "default", 1, 0.2),
            outcome_run("poisson", "default", 0, 0.8),
            outcome_run("other", "default", 0, 1.0),
        ]
    )
    found = analysis.ratios_to_none(document, "poisson", "default")
    assert found == {0: pytest.approx(4.0), 1: pytest.approx(0.5)}
    assert analysis.geometric_mean(found.values()) == pytest.approx(
        math.sqrt(2)
    )
    assert math.isnan(analysis.geometric_mean([]))


def test_the_full_plan():
    jobs = study.plan(setups.FULL)
    parts = [name for name, _ in jobs]
    assert parts.count("trajectories") == 4 * 2
    assert parts.count("outcome") == 2 * 4 * len(setups.ROWS)
    assert parts.count("budget") == 3 * 2
    first = jobs[0][1]
    # the record of step 300 needs the parameters before step 300
    assert first["steps"] == 301 and first["trajectory"]["last"] == 300
    budget = [job for name, job in jobs if name == "budget"]
    assert {job["steps"] for job in budget} == {10000}
    assert budget[0]["error_steps"] == [1000, 3000, 10000]


def small_document():
    """A study of one trajectory, two seeds of two rows, one budget seed."""
    steps = list(range(0, 40, 10))
    records = trajectory(
        {
            "D": [math.exp(0.05 * t) for t in steps],
            "boundary": [10.0] * len(steps),
        },
        applied={"D": [4.0] * 4, "boundary": [0.5] * 4},
    )
    run = dict(case="poisson", row="default", seed=0, steps=31, status="ok")
    run.update(error_steps=[], errors=[], trajectory=records)
    settings = dict(
        grid=8,
        trajectory=dict(
            cases=["poisson"],
            seeds=[0],
            last=30,
            every=10,
            windows=[[0, 10], [10, 30]],
            lag_steps=[10, 30],
        ),
        outcome=dict(
            cases=["poisson"],
            seeds=[0, 1],
            rows=["none", "default"],
            steps=30,
            error_every=10,
        ),
        budget=dict(
            case="poisson",
            seeds=[0],
            rows=["none", "default"],
            budgets=[30, 60],
        ),
    )
    outcome = [
        outcome_run("poisson", "none", 0, 0.1, 30),
        outcome_run("poisson", "default", 0, 0.3, 30),
        outcome_run("poisson", "none", 1, 0.2, 30),
        outcome_run("poisson", "default", 1, 0.1, 30),
    ]
    budget = [
        dict(outcome_run("poisson", "none", 0, 0.05, 60), errors=[0.1, 0.05]),
        dict(outcome_run("poisson", "default", 0, 0.5, 60), errors=[0.3, 0.5]),
    ]
    for run_ in budget:
        run_["error_steps"] = [30, 60]
    part = dict(
        command="python benchmarks/no_harm/no_harm_mechanism.py",
        date="2026-01-01 00:00 UTC",
        cpu="a CPU",
        cpus=2,
        versions={"python": "3.11"},
        workers=1,
        threads=1,
        load_start=[0.5, 0, 0],
        load_end=[0.7, 0, 0],
        duration_min=1.5,
    )
    return dict(
        script=study.SCRIPT,
        part=part,
        settings=settings,
        trajectories=[run],
        outcome=outcome,
        budget=budget,
    )


def table_cells(block, header_start):
    lines = block.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_the_block_is_rendered_from_a_small_document():
    block = mechanism_page.render(small_document())
    for field in ("Command", "Date", "Hardware", "Versions", "Load"):
        assert f"- {field}: " in block
    growth = table_cells(block, "| case | seed | condition | rate")
    assert growth[0][:5] == ["`poisson`", "0", "`D`", "+0.050", "+0.050"]
    assert growth[1][3:5] == ["+0.000", "+0.000"]
    # applied D weight 4 over the exact one at step 10
    exact = (math.exp(0.5) + 10.0) / 2 / math.exp(0.5)
    lag = table_cells(block, "| case | seed | condition | step 10: default")
    assert lag[0][3].startswith(mechanism_page.number(4.0 / exact) + " (")
    outcome = table_cells(block, "| weighting |")
    assert outcome[1][0] == "`SketchNTKWeighting()`, the default"
    # seed 0: 3, seed 1: 0.5; geometric mean sqrt(1.5)
    assert outcome[1][3] == f"{mechanism_page.number(math.sqrt(1.5))} (1 of 2)"
    budget = table_cells(block, "| seed |")
    assert budget[0][1:] == ["0.1 / 0.3 (3)", "0.05 / 0.5 (10)"]
    # the budget runs are the outcome runs continued; the trajectory's
    # error at step 30 (0.5) is not its twin's (0.3)
    assert "steps equals the outcome study's run" in block
    assert "to the bit on 2 of 2 runs" in block
    assert "to the bit on 0 of 1 runs" in block
    assert not any(p in block for p in ("/tmp/", "/work/", "/home/"))


def test_the_block_replaces_only_its_markers(tmp_path):
    begin, end = mechanism_page.MARKERS
    page = tmp_path / mechanism_page.PAGE
    page.write_text(
        f"# Page\n\ntext before\n\n{begin}\nold\n{end}\n\ntext after\n",
        encoding="utf-8",
    )
    document = small_document()
    mechanism_page.write_outputs(document, str(tmp_path))
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Page\n\ntext before\n\n")
    assert text.endswith(f"{end}\n\ntext after\n")
    assert "old" not in text
    assert harness.read_block(str(page), begin, end) == mechanism_page.render(
        document
    )


def test_the_committed_page_is_rendered_from_the_committed_results():
    document = harness.read_json(COMMITTED)
    assert document["script"] == study.SCRIPT
    page = os.path.join(DOCS, mechanism_page.PAGE)
    assert harness.read_block(
        page, *mechanism_page.MARKERS
    ) == mechanism_page.render(document)


def test_from_json_writes_the_committed_page_again_byte_for_byte(tmp_path):
    page = os.path.join(DOCS, mechanism_page.PAGE)
    shutil.copy(page, tmp_path / mechanism_page.PAGE)
    code = run_main("--from-json", COMMITTED, "--output-dir", tmp_path)
    assert code == 0
    with open(page, "rb") as committed:
        assert (tmp_path / mechanism_page.PAGE).read_bytes() == committed.read()
    assert not (tmp_path / study.JSON).exists()  # nothing was run
