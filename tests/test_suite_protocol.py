"""The suite's split file and decision protocol
(``benchmarks/suite/suite_protocol.py``) on hand-made results, every expected
value worked out here."""

import ast
import collections
import math
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.suite import suite_protocol as protocol  # noqa: E402


def run(problem, weighting, seed, errors, status="ok", steps=None):
    """A run whose errors were recorded at steps 0, 1, ... of ``steps``
    (default: the last record's)."""
    history = {"steps": list(range(len(errors))), "errors": errors}
    history["seconds"] = [float(i + 1) for i in range(len(errors))]
    steps = len(errors) - 1 if steps is None else steps
    return dict(problem=problem, weighting=weighting, seed=seed,
                status=status, history=history, steps=steps)  # fmt: skip


# ------------------------------------------------------------------ split
def test_the_committed_split_parses_and_its_halves_are_disjoint():
    split = protocol.read_split()
    tuning = {e["setting"] for e in split["tuning"]}
    confirmation = {e["setting"] for e in split["confirmation"]}
    assert tuning.isdisjoint(confirmation)
    for half in (split["tuning"], split["confirmation"]):
        assert sum(e["stationary"] for e in half) >= 3
        assert sum(not e["stationary"] for e in half) >= 3
    # the settings the earlier default was chosen on are all tuning ones
    earlier = {"poisson", "poisson_fixed", "helmholtz", "diffusion_reaction"}
    earlier |= {"acoustic_wave", "advection", "wave"}
    assert earlier <= tuning
    # a third of the settings train PINA's FeedForward; both point regimes
    entries = split["tuning"] + split["confirmation"]
    users = sum(e["network"] == "feedforward" for e in entries)
    assert 3 * users >= len(entries)
    assert {e["points"] for e in entries} == {"fresh", "fixed"}


def write_split(tmp_path, tuning, confirmation):
    lines = []
    for half, entries in (("tuning", tuning), ("confirmation", confirmation)):
        for name, stationary in entries:
            lines += [
                f"[[{half}]]",
                f'setting = "{name}"',
                f"stationary = {str(stationary).lower()}",
                'network = "benchmark"',
                'points = "fresh"',
                "",
            ]
    path = tmp_path / "split.toml"
    path.write_text("\n".join(lines))
    return str(path)


def three_and_three(prefix):
    return [(f"{prefix}{i}", i < 3) for i in range(6)]


def test_a_good_split_file_is_read(tmp_path):
    path = write_split(tmp_path, three_and_three("a"), three_and_three("b"))
    assert len(protocol.read_split(path)["confirmation"]) == 6


def test_a_setting_in_both_halves_is_refused(tmp_path):
    confirmation = three_and_three("b")
    confirmation[0] = ("a0", True)
    path = write_split(tmp_path, three_and_three("a"), confirmation)
    with pytest.raises(ValueError, match="a0 is listed twice"):
        protocol.read_split(path)


def test_a_half_with_two_time_dependent_settings_is_refused(tmp_path):
    path = write_split(tmp_path, three_and_three("a"), three_and_three("b")[:5])
    with pytest.raises(ValueError, match="confirmation half has 2 time-dep"):
        protocol.read_split(path)


def test_a_second_confirmation_half_needs_six_stationary_settings(tmp_path):
    # optional in a split file; where there, at least six stationary
    # settings, and no time-dependent one needed
    path = write_split(tmp_path, three_and_three("a"), three_and_three("b"))
    text, row = open(path).read(), '{{ setting = "c{}", stationary = true, '
    row += 'network = "benchmark", points = "fixed" }}'
    for count in (6, 5):
        rows = ", ".join(row.format(i) for i in range(count))
        open(path, "w").write(f"confirmation-2 = [{rows}]\n" + text)
        if count == 6:
            assert len(protocol.read_split(path)["confirmation-2"]) == 6
    with pytest.raises(ValueError, match="confirmation-2 half has 5 stat"):
        protocol.read_split(path)


def test_a_wrong_network_is_refused(tmp_path):
    path = write_split(tmp_path, three_and_three("a"), three_and_three("b"))
    text = open(path).read().replace('"benchmark"', '"resnet"', 1)
    open(path, "w").write(text)
    with pytest.raises(ValueError, match="network must be one of"):
        protocol.read_split(path)


#: The most lines a file of ``benchmarks/`` may have, so that a reader
#: can take it in whole (issue #71: it replaces a cap on the folder's
#: total, which bent the code to fit it).
FILE_LINES = 600


def benchmark_files(suffix=""):
    """The paths of the files below ``benchmarks/`` whose names end in
    ``suffix``, Python's caches left out."""
    found = []
    for folder, subfolders, files in os.walk(os.path.join(ROOT, "benchmarks")):
        subfolders[:] = [d for d in subfolders if d != "__pycache__"]
        found += [os.path.join(folder, f) for f in files if f.endswith(suffix)]
    return sorted(found)


def test_no_benchmark_file_is_over_600_lines():
    # every file, as ``wc -l`` counts its lines
    lines = {}
    for path in benchmark_files():
        with open(path, "rb") as handle:
            lines[os.path.relpath(path, ROOT)] = handle.read().count(b"\n")
    # the shared files and the studies' folders below them
    names = {path.replace(os.sep, "/") for path in lines}
    expected = {"benchmarks/harness.py", "benchmarks/suite/suite-split.toml"}
    assert expected <= names
    over = {path: count for path, count in lines.items() if count > FILE_LINES}
    assert not over, f"over {FILE_LINES} lines: {over}"


def drawn_benchmark_files(page):
    """The files the tree of ``page``'s section *The benchmarks* draws,
    below the root, each at its depth (four columns a level)."""
    with open(page, encoding="utf-8") as handle:
        text = handle.read()
    start = text.index("```\n", text.index("## The benchmarks")) + 4
    lines = text[start : text.index("```", start)].splitlines()
    found, folders = [], [lines[0].rstrip("/")]
    for line in lines[1:]:
        match = re.match(r"^([│ ]*)[├└]── (\S+)", line)
        if match:
            depth = len(match.group(1)) // 4 + 1
            folders[depth:] = [match.group(2).rstrip("/")]
            if not match.group(2).endswith("/"):
                found.append("/".join(folders))
    return found


def test_the_architecture_page_draws_every_benchmark_file():
    # docs/architecture.md: a line per file (the packages' __init__.py
    # aside), each file once, none that is gone
    page = os.path.join(ROOT, "docs", "architecture.md")
    drawn = drawn_benchmark_files(page)
    files = {
        os.path.relpath(path, ROOT).replace(os.sep, "/")
        for path in benchmark_files()
        if not path.endswith("__init__.py")
    }
    assert len(drawn) == len(set(drawn)) and set(drawn) == files


def packed_lines(source):
    """:return: The lines of ``source`` that hold more than one statement
    (``a = 1; b = 2``, ``if x: y``)."""
    starts = collections.Counter(
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.stmt)
    )
    return sorted(line for line, count in starts.items() if count > 1)


@pytest.mark.parametrize(
    "source, lines",
    [
        ("a = 1\nb = 2\n", []),
        ("a = 1; b = 2\n", [1]),
        ("if a:\n    b = 2\n", []),
        ("x = 0\nif a: b = 2\n", [2]),
        ("def f():\n    return 1\n", []),
    ],
)
def test_packed_lines_are_found(source, lines):
    assert packed_lines(source) == lines


def test_benchmarks_are_formatted_as_the_library():
    # black formats every file (line length 80, ``pyproject.toml``): none
    # opts out of it, and no line packs several statements
    for path in benchmark_files(".py"):
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
        name = os.path.relpath(path, ROOT)
        assert not re.search(r"#\s*fmt:\s*(off|on|skip)", source), name
        assert not packed_lines(source), name


# ------------------------------------------------------------- the metric
def test_a_runs_error_is_the_median_of_its_last_five_records():
    errors = [9.0, 8.0, 1.0, 5.0, 2.0, 4.0, 6.0]
    # of 1, 5, 2, 4, 6: not the last (6) nor the median of all (5)
    assert protocol.run_error(run("p", "w", 0, errors)) == 4.0
    # within a step budget: the records up to step 3 only (9, 8, 1, 5)
    assert protocol.run_error(run("p", "w", 0, errors), until=3) == 6.5
    assert protocol.run_error(run("p", "w", 0, errors, status="failed")) == (
        math.inf
    )


def test_step_costs_are_medians_over_rounds_and_none_costs_one():
    document = {"step_costs": {"ratios": {"p": {"a": [1.5, 1.1, 3.0]}}}}
    assert protocol.step_costs(document) == {"p": {"a": 1.5, "none": 1}}
    assert protocol.step_costs({}) == {}


# ------------------------------------------------------- the intervals
def test_the_interval_draws_problems_then_seeds():
    # One problem, seeds 1 and 4: a draw's mean of logs is that of (1, 1),
    # (1, 4) or (4, 4), geometric means 1, 2, 4 with chances 1/4, 1/2,
    # 1/4; the 5 % and 95 % points fall in the end masses.
    low, high = protocol.paired_interval({"p": [1.0, 4.0]})
    assert (low, high) == pytest.approx((1.0, 4.0))
    # Two problems of identical seeds, 1/2 and 2: only the problems' draw
    # varies, (p, p), (p, q), (q, q); an interval that kept the problems
    # fixed would collapse to 1.
    low, high = protocol.paired_interval({"p": [0.5, 0.5], "q": [2.0, 2.0]})
    assert (low, high) == pytest.approx((0.5, 2.0))
    # a diverged seed is left out; identical values give a point
    assert protocol.paired_interval({"p": [3.0, math.inf]}) == (
        pytest.approx((3.0, 3.0))
    )


def test_the_interval_holds_its_level():
    # Nine problems of one seed each, ratios 2^-4 ... 2^4: the bootstrap
    # mean of logs is the mean of 9 draws from a uniform set of variance
    # 60/9 (in units of log 2); its 90 % interval is about the mean
    # +- 1.645 sqrt(60/81) = +- 1.42 (log 2), within a draw's graininess.
    ratios = {f"p{i}": [2.0**i] for i in range(-4, 5)}
    low, high = protocol.paired_interval(ratios)
    assert math.log2(high) == pytest.approx(1.42, abs=0.2)
    assert math.log2(low) == pytest.approx(-1.42, abs=0.2)


# ------------------------------------------------------------ the summary
def hand_runs():
    """Two problems, two seeds. Errors constant over the records, so a run's
    error is that constant. ``a`` halves none's error on p (both seeds) and
    is 1.5x and 0.5x on q; ``b`` is 2x none on p on both seeds (worse on
    every seed) and equal on q; ``c`` runs p only, 3x and 0.5x none (worse
    on average, not on every seed); the published sketch is 0.8x none."""
    runs = []
    table = {
        ("p", 0): {
            "none": 4.0,
            "a": 2.0,
            "b": 8.0,
            "sketch_predictor": 3.2,
            "c": 12.0,
        },
        ("p", 1): {
            "none": 2.0,
            "a": 1.0,
            "b": 4.0,
            "sketch_predictor": 1.6,
            "c": 1.0,
        },
        ("q", 0): {"none": 1.0, "a": 1.5, "b": 1.0, "sketch_predictor": 0.8},
        ("q", 1): {"none": 2.0, "a": 1.0, "b": 2.0, "sketch_predictor": 1.6},
    }
    for (problem, seed), errors in table.items():
        for weighting, error in errors.items():
            runs.append(run(problem, weighting, seed, [error] * 6))
    return runs


#: Every weighting of :func:`hand_runs` as fast as the plain sum.
EVEN = {p: dict.fromkeys(["none", "a", "b", "c", "sketch_predictor"], 1.0)
        for p in "pq"}  # fmt: skip


def test_summary_ratios_are_paired_geometric_means():
    summary = protocol.summarise(hand_runs(), ["a", "b"], ["p", "q"], EVEN)
    a = summary["a"]["steps"]
    assert a["per_problem"]["p"] == pytest.approx(0.5)
    # q: seeds 1.5 and 0.5, geometric mean sqrt(0.75)
    assert a["per_problem"]["q"] == pytest.approx(math.sqrt(0.75))
    assert a["to_none"] == pytest.approx(math.sqrt(0.5 * math.sqrt(0.75)))
    assert a["to_published"] == pytest.approx(a["to_none"] / 0.8)
    assert a["per_problem_published"]["p"] == pytest.approx(0.5 / 0.8)
    assert a["worst"] == "q" and a["worse_than_none"] == []
    low, high = a["to_none_interval"]
    assert low < a["to_none"] < high
    b = summary["b"]["steps"]
    assert b["per_problem"] == pytest.approx({"p": 2.0, "q": 1.0})
    assert b["worse_than_none"] == ["p"]  # q: equal, not worse
    c = protocol.summarise(hand_runs(), ["c"], ["p", "q"])["c"]["steps"]
    assert c["per_problem"] == pytest.approx({"p": math.sqrt(1.5)})
    assert c["worse_than_none"] == []
    # every record is within none's time here: equal time agrees
    assert summary["a"]["time"]["to_none"] == pytest.approx(a["to_none"])
    assert summary["a"]["diverged"] == 0 and summary["a"]["runs"] == 4


def test_equal_time_needs_measured_step_costs():
    summary = protocol.summarise(hand_runs(), ["a"], ["p", "q"])
    assert summary["a"]["time"]["per_problem"] == {}
    assert math.isnan(summary["a"]["time"]["to_none"])


def test_pairing_is_by_seed_not_by_order():
    runs = hand_runs()
    # a none run of an unmatched seed must not enter any ratio
    runs.append(run("p", "none", 7, [1e-9] * 6))
    summary = protocol.summarise(runs, ["a"], ["p", "q"])
    assert summary["a"]["steps"]["per_problem"]["p"] == pytest.approx(0.5)


def test_equal_time_cuts_a_run_at_the_steps_its_cost_allows():
    # none trains 10 steps; "slow" costs twice as much per step on p, so at
    # none's time it has made 5 steps: its error is that of records 0-5
    # (3.0), not the 1.0 it reaches later. The wall times the runs record
    # (1, 2, ... s for both) play no part.
    runs = [
        run("p", "none", 0, [2.0] * 11),
        run("p", "slow", 0, [3.0] * 6 + [1.0] * 5),
        run("p", "sketch_predictor", 0, [2.0] * 11),
    ]
    costs = {"p": {"none": 1.0, "slow": 2.0, "sketch_predictor": 1.0}}
    summary = protocol.summarise(runs, ["slow"], ["p"], costs)
    assert summary["slow"]["steps"]["to_none"] == pytest.approx(0.5)
    assert summary["slow"]["time"]["to_none"] == pytest.approx(1.5)
    assert summary["slow"]["time"]["worse_than_none"] == ["p"]
    # against the published sketch at equal time, each at its own budget:
    # a sketch twice as slow as none is cut at step 5 too
    costs["p"]["sketch_predictor"] = 2.0
    runs[2] = run("p", "sketch_predictor", 0, [4.0] * 6 + [0.1] * 5)
    summary = protocol.summarise(runs, ["slow"], ["p"], costs)
    assert summary["slow"]["time"]["to_published"] == pytest.approx(0.75)


def test_a_diverged_run_is_counted_and_left_out_of_the_ratio():
    runs = hand_runs()  # planned for 5 steps, as every run of a half
    runs += [run("q", "a", 2, [1.0], status="failed", steps=5)]
    runs += [run("q", "none", 2, [1.0] * 5, steps=5)]
    runs += [run("r", "none", 0, [1.0] * 5, steps=5)]
    runs += [run("r", "a", 0, [1.0], status="failed", steps=5)]
    summary = protocol.summarise(runs, ["a"], ["p", "q", "r"])
    steps = summary["a"]["steps"]
    assert summary["a"]["diverged"] == 2 and summary["a"]["runs"] == 6
    # the ratio over the runs that finished: p and q as before
    assert steps["to_none"] == pytest.approx(math.sqrt(0.5 * math.sqrt(0.75)))
    assert steps["per_problem"]["r"] == math.inf
    # a diverged run counts as worse: r (its one seed) is worse than none;
    # q is not (a finished seed is better)
    assert steps["worse_than_none"] == ["r"]
    # a pair whose reference diverged is left out
    runs = hand_runs() + [run("q", "a", 5, [9.0] * 6)]
    runs += [run("q", "none", 5, [1.0], status="failed", steps=5)]
    summary = protocol.summarise(runs, ["a"], ["p", "q"])
    assert summary["a"]["steps"]["per_problem"]["q"] == pytest.approx(
        math.sqrt(0.75)
    )


# ------------------------------------------------------------ the decision
def entry(to_published, high, worst, worse):
    """A summary entry alike at both bases: the ratio to the published
    sketch, its interval's upper end, its worst problem's ratio, and the
    problems worse than none."""
    basis = {
        "to_published": to_published,
        "to_published_interval": (to_published / 2, high),
        "per_problem_published": {"x": worst, "y": to_published},
        "worse_than_none": worse,
    }
    return {"steps": basis, "time": dict(basis)}


def test_decision_applies_the_three_rules_on_both_bases():
    summary = {
        "sketch_predictor": entry(1.0, 1.0, 1.0, ["x"]),
        "interval_above_one": entry(0.9, 1.01, 1.0, []),
        "one_problem_too_far": entry(0.8, 0.95, 1.26, []),
        "worse_more_often": entry(0.5, 0.7, 1.0, ["x", "y"]),
        "passes": entry(0.95, 1.0, 1.25, ["x"]),
        "best": entry(0.7, 0.9, 1.1, []),
    }
    summary["slow"] = entry(0.5, 0.8, 1.0, [])
    summary["slow"]["time"] = entry(1.05, 1.2, 1.0, [])["time"]
    default, checks = protocol.decide(summary, list(summary))
    assert "sketch_predictor" not in checks  # the bar, not a candidate
    passes = {c: all(found.values()) for c, found in checks.items()}
    assert passes == {
        "interval_above_one": False,
        "one_problem_too_far": False,
        "worse_more_often": False,
        "passes": True,
        "best": True,
        "slow": False,  # passes at equal steps, not at equal time
    }
    assert checks["slow"]["a (steps)"] and not checks["slow"]["a (time)"]
    assert default == "best"
    # no candidate passes: the published sketch stays the default
    del summary["best"], summary["passes"]
    assert protocol.decide(summary, list(summary))[0] == "sketch_predictor"


def test_the_published_sketch_is_required_as_the_bar():
    with pytest.raises(ValueError, match="published sketch"):
        protocol.decide({"a": entry(0.5, 0.6, 0.5, [])}, ["a"])


def test_geometric_mean_of_edge_values():
    assert protocol.geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert protocol.geometric_mean([0.0, 8.0]) == 0.0
    assert protocol.geometric_mean([0.0, math.inf]) == math.inf
    assert math.isnan(protocol.geometric_mean([]))


def test_criterion_d_of_the_introductory_half_joins_the_rule():
    """Issue #76's (d): a candidate that passes (a)-(c) but does harm on the
    introductory half is not the default; one without an entry fails (d)."""
    summary = {
        "sketch_predictor": entry(1.0, 1.0, 1.0, ["x"]),
        "harmful": entry(0.7, 0.9, 1.1, []),
        "harmless": entry(0.95, 1.0, 1.25, ["x"]),
        "unmeasured": entry(0.6, 0.8, 1.0, []),
    }
    no_harm = {"harmful": False, "harmless": True}
    default, checks = protocol.decide(summary, list(summary), no_harm)
    assert default == "harmless"
    assert checks["harmful"]["d"] is False and checks["harmless"]["d"]
    assert checks["unmeasured"]["d"] is False
    # without (d) the lowest ratio wins, as before issue #76
    assert protocol.decide(summary, list(summary))[0] == "unmeasured"
