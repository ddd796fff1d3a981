"""Smoke tests of the benchmark scripts in quick mode.

``benchmarks/cost/overhead.py --quick`` (the full report) and each study
on its own (``step_time.py``, ``peak_memory.py``) run end to end and write every row with finite, positive measurements;
``probe_variance.py --quick`` runs; ``weightings.py --quick`` reports every
problem and weighting of its run, each with a finite error or its failure;
``spaced_samples.py`` runs a tiny study; ``bookkeeping.py --quick`` times
the default's calls at every step of a tiny run; the scripts that render
committed results (``suite_page.py``, ``no_harm_page.py``, and
``mutation_score.py``, whose mutmut run takes minutes) write the same
blocks to a temporary folder with ``--quick``. Every page
is re-rendered from the results file its run wrote. The scripts' ``main``
runs in this process (their workers are processes of their own as in a
real run), which saves a start of torch, PINA and Lightning per command.
They do not check the timing or memory targets: those depend on the machine
and belong to the benchmark itself. (The paper's Section 5.1 and 5.2.1
experiments, in ``pina_ntk.paper.experiments``, are run by
``test_reproduction.py``.)
"""

import argparse
import contextlib
import io
import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import helpers  # noqa: E402
from benchmarks import harness  # noqa: E402
from benchmarks.cost import configurations  # noqa: E402
from benchmarks.cost import overhead  # noqa: E402
from benchmarks.cost import peak_memory  # noqa: E402
from benchmarks.cost import step_time  # noqa: E402
from benchmarks.estimators import probe_variance  # noqa: E402
from benchmarks.estimators import spaced_samples  # noqa: E402
from benchmarks.lbfgs import lbfgs, lbfgs_page  # noqa: E402
from benchmarks.mutation import mutation_score  # noqa: E402
from benchmarks.no_harm import no_harm_page  # noqa: E402
from benchmarks.scaling import bookkeeping  # noqa: E402
from benchmarks.suite import introductory, suite_page  # noqa: E402
from benchmarks.suite import suite_protocol  # noqa: E402
from benchmarks.suite import weightings, weightings_page  # noqa: E402

METHOD_DOC = os.path.join(ROOT, "docs", "benchmark-method.md")
#: Row labels of the time-and-memory table, per network.
WEIGHTING_LABELS = (
    "unweighted (PINA default)",
    "exact `NTKWeighting`, every step",
    "exact `NTKWeighting`, every 5 steps",
    'exact `NTKWeighting(statistic="rayleigh")`, every 5 steps',
    "predictor sketch, forward difference, k = 1",
    "predictor sketch, central difference",
    "predictor sketch, `balanced_probe=False`",
    "parameter-space sketch, k = 1",
    "predictor sketch, k = 10 (amortised)",
    "predictor sketch, k = 100 (amortised)",
    "parameter-space sketch, k = 10 (amortised)",
    "parameter-space sketch, k = 100 (amortised)",
    'predictor sketch, `statistic="rayleigh"`, k = 10 (amortised)',
    'parameter-space sketch, `statistic="rayleigh"`, k = 10 (amortised)',
    'predictor sketch, `statistic="boundary"`, k = 10 (amortised)',
    'parameter-space sketch, `statistic="boundary"`, k = 10 (amortised)',
    "predictor sketch, `gradient_band=4`, k = 10 (amortised)",
    "parameter-space sketch, `gradient_band=4`, k = 10 (amortised)",
    "predictor sketch, forward, `sample_after_backward=False`",
    "parameter-space sketch, `sample_after_backward=False`",
    "PINA `NeuralTangentKernelWeighting`",
    "*reference: unweighted + one more residual evaluation*",
    "*reference: unweighted + one more residual evaluation and one "
    "`Jᵀg` backward*",
)
QUICK_NETWORKS = ("3×20",)


def table_rows(document, header_start):
    """The cells of the markdown table whose header starts as given."""
    lines = document.splitlines()
    start = next(
        i for i, line in enumerate(lines) if line.startswith(header_start)
    )
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def as_number(cell):
    """A table cell as a float (``1.23``, ``1.23×``, ``0.9–1.1`` parts)."""
    return float(cell.rstrip("×").replace(",", ""))


def on_cpu(report):
    """Whether a report was measured on the CPU."""
    return "device `cpu`" in report


def run_main(module, *arguments):
    """Run a benchmark script's ``main`` here with ``arguments``; return its
    exit code and what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = module.main([str(a) for a in arguments])
    return code, printed.getvalue()


@pytest.fixture(autouse=True)
def own_environment():
    """The scripts set their workers' thread variables in the environment:
    the tests after them get theirs back (torch's threads: conftest.py)."""
    names = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
    saved = {name: os.environ.get(name) for name in names}
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def run_script(module, tmp_path_factory, *flags):
    """Run a wave-problem study with ``--quick``; return its page. The
    results file it wrote renders the same page with ``--from-json``."""
    folder = tmp_path_factory.mktemp("bench")
    output = folder / "report.md"
    code, printed = run_main(module, "--quick", *flags, "--output", output)
    assert code == 0
    document = output.read_text(encoding="utf-8")
    block = harness.page_block(str(output), module.SCRIPT)
    # the block printed to stdout is the page's
    assert block and block.strip() in printed
    again = folder / "again.md"
    arguments = "--from-json", folder / "report.json", "--output", again
    assert run_main(module, *arguments)[0] == 0
    assert again.read_text(encoding="utf-8") == document
    return document


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    # one network: the pages of several (docs/benchmarks.md) are rendered
    # by tests/test_result_pages.py
    return run_script(overhead, tmp_path_factory, "--widths", "20")


def check_weighting_rows(
    rows, networks, time=True, memory=True, labels=WEIGHTING_LABELS
):
    """Every network and weighting (of ``labels``) once, with finite
    positive numbers."""
    seen = {(row[0].split(" ")[0], row[1]) for row in rows}
    expected = {(n, w) for n in networks for w in labels}
    assert seen == expected
    assert len(rows) == len(expected)
    for row in rows:
        assert len(row) == 2 + 3 * time + 2 * memory, row
        numbers = []
        if time:
            low, high = (as_number(part) for part in row[4].split("–"))
            numbers += [as_number(row[2]), as_number(row[3]), low, high]
            assert low <= as_number(row[3]) <= high, row
        if memory:
            numbers += [as_number(c) for c in row[-2:]]
        assert all(math.isfinite(x) and x > 0 for x in numbers), row
        if row[1] == WEIGHTING_LABELS[0]:
            assert not time or as_number(row[3]) == 1.0
            assert not memory or as_number(row[-1]) == 1.0


def check_target_rows(rows, networks, quantities):
    """Each network's targets, with verdicts matching the numbers: memory by
    its value, time by its interval over rounds (a quick run has one round:
    not resolved)."""
    assert {row[0] for row in rows} == set(networks)
    assert {row[1].split(",")[0] for row in rows} == set(quantities)
    for row in rows:
        assert math.isfinite(as_number(row[2])) and as_number(row[2]) > 0
        limit = as_number(row[4].lstrip("≤ "))
        if row[1].startswith("memory"):
            assert row[3] == "—"
            below = as_number(row[2]) <= limit
            assert row[5] == ("pass" if below else "**miss**")
        else:
            assert row[5] == "not resolved"
        # per-sample time targets carry the ratio of their unavoidable-work
        # row, and their limit is that ratio plus the margin
        if "(reference +" in row[1]:
            reference = as_number(row[6])
            assert math.isfinite(reference) and reference > 0
            assert limit == pytest.approx(reference + 0.15, abs=2e-3)
        elif len(row) > 6:
            assert row[6] == "—"


def test_time_and_memory_table_has_every_row_with_positive_numbers(
    quick_report,
):
    rows = table_rows(quick_report, "| network | weighting |")
    check_weighting_rows(rows, QUICK_NETWORKS)


def test_targets_table_checks_the_network(quick_report):
    rows = table_rows(quick_report, "| network | quantity |")
    check_target_rows(rows, QUICK_NETWORKS, ("time", "memory"))
    assert all(len(row) == 7 for row in rows)


def test_report_states_command_machine_and_method(quick_report):
    command = "python benchmarks/cost/overhead.py --quick --widths 20 --output"
    assert command in quick_report
    assert re.search(r"\d+ logical CPUs", quick_report)
    assert re.search(r"torch 2\.\d+", quick_report)
    assert "- Load: " in quick_report and "/tmp/" not in quick_report
    assert "profile_memory=True" in quick_report or "cuda" in quick_report


def test_report_links_to_sections_of_the_method_page(quick_report):
    with open(METHOD_DOC, encoding="utf-8") as handle:
        method = handle.read()
    anchors = {
        re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(
            " ", "-"
        )
        for line in method.splitlines()
        if line.startswith("#")
    }
    links = re.findall(
        r"\(([^()\s]*benchmark-method\.md)(#[\w-]+)?\)", quick_report
    )
    assert links
    for _, anchor in links:
        assert not anchor or anchor[1:] in anchors, anchor


#: Rows of the studies run alone: a long row, a sample every step and its
#: reference row (the full report measures every row).
ALONE = ("exact_every_step", "predictor_forward", "reference_predictor")


def test_step_time_alone(tmp_path_factory):
    flags = "--widths", "20", "--rows", *ALONE
    report = run_script(step_time, tmp_path_factory, *flags)
    assert "python benchmarks/cost/step_time.py --quick --widths 20" in report
    rows = table_rows(report, "| network | weighting |")
    labels = [configurations.LABELS[k] for k in ("unweighted", *ALONE)]
    check_weighting_rows(rows, QUICK_NETWORKS, memory=False, labels=labels)
    rows = table_rows(report, "| network | quantity |")
    check_target_rows(rows, QUICK_NETWORKS, ("time",))
    # the sample's target against its reference row
    assert [row[1] for row in rows] == [
        "time, predictor sketch, forward difference, k = 1 (reference + 0.15)"
    ]


def test_step_time_rows_times_only_the_rows_named(tmp_path_factory):
    band, reference = "predictor_band_every_10", "predictor_every_10"
    flags = "--widths", "20", "--problem", "poisson", "--rows", band, reference
    report = run_script(step_time, tmp_path_factory, *flags)
    rows = table_rows(report, "| network | weighting |")
    labels = [configurations.LABELS[k] for k in ("unweighted", reference)]
    labels.append(configurations.LABELS[band])
    assert [row[1] for row in rows] == labels
    rows = table_rows(report, "| network | quantity |")
    check_target_rows(rows, ("3×20",), ("time",))
    # the two rows' own amortised targets, no others (the band's target
    # against the sketch without it is retired)
    assert [row[1] for row in rows] == [
        f"time, {configurations.LABELS[key]}" for key in (reference, band)
    ]


ONE_BAND = ["parameter_band_every_10", "parameter_every_10"]


@pytest.mark.parametrize("rows", [None, ONE_BAND + ["predictor_every_10"]])
def test_band_rows_are_rotated_with_the_other_cheap_rows(rows):
    keys = configurations.measured_keys(dict(rows=rows))
    long = [k for k in step_time.LONG_KEYS if k in keys]
    cheap = len(keys) - 1 - len(long)
    orders = [step_time.round_order(keys, index) for index in range(4)]
    for order in orders:
        # unweighted first and after the cheap rows, the long rows last
        assert sorted(set(order)) == sorted(keys)
        assert order[0] == order[cheap + 1] == "unweighted"
        assert order[cheap + 2 :] == long
    # each round's cheap rows, band rows among them, are the last round's
    # moved on by one place
    for before, after in zip(orders, orders[1:]):
        assert after[1 : cheap + 1] == before[2 : cheap + 1] + before[1:2]


def periodic_run(key, ordinary, overhead):
    """A run of 10 steps, refresh at step 0: its ordinary steps take
    ``ordinary`` s, its mean step ``ordinary * (1 + overhead)``."""
    refresh = ordinary * (1 + 10 * overhead)
    return {"key": key, "durations": [refresh] + [ordinary] * 9}


def test_band_rows_are_held_to_their_amortised_targets_alone():
    band, reference = "predictor_band_every_10", "predictor_every_10"
    settings = dict(configurations.QUICK, warmup=0, steps=10, min_periods=1)
    settings["rows"] = [band, reference]
    # the machine's speed changes from run to run (ordinary steps of 1.0,
    # 1.4, 1.0 s and 1.3, 1.0, 1.0 s); the refreshes cost 0.2 of an
    # ordinary step, and the band's 0.01, 0.0 and 0.03 more
    speeds = {reference: (1.0, 1.4, 1.0), band: (1.3, 1.0, 1.0)}
    overheads = {reference: (0.2, 0.2, 0.2), band: (0.21, 0.2, 0.23)}
    rounds = [
        {
            "runs": [{"key": "unweighted", "durations": [1.0] * 10}]
            + [
                periodic_run(key, speeds[key][index], overheads[key][index])
                for key in (reference, band)
            ],
            "parameters": 1,
        }
        for index in range(3)
    ]
    _, time, checks = step_time.numbers({"timing": {20: rounds}}, settings, 20)
    # per-round ratios 1.2, 1.68, 1.2 and 1.573, 1.2, 1.23
    assert time[reference][1] == pytest.approx(1.2)
    assert time[band][1] == pytest.approx(1.23)
    # each row's amortised target and no other: none against the sketch
    # without the band (retired with the band's default)
    labels = [f"time, {configurations.LABELS[k]}" for k in (reference, band)]
    assert [c["label"] for c in checks] == labels
    # the band row's: its own per-round ratios, against the fixed limit
    plain = checks[1]
    assert plain["rounds"] == pytest.approx([1.573, 1.2, 1.23], abs=1e-3)
    assert plain["limit"] == 1.15 and "reference" not in plain


def test_peak_memory_alone(tmp_path_factory, quick_report):
    flags = "--widths", "20", "--rows", *ALONE
    report = run_script(peak_memory, tmp_path_factory, *flags)
    assert "python benchmarks/cost/peak_memory.py --quick --widths 20" in report
    assert "profile_memory=True" in report or "cuda" in report
    rows = table_rows(report, "| network | weighting |")
    labels = [configurations.LABELS[k] for k in ("unweighted", *ALONE)]
    check_weighting_rows(rows, QUICK_NETWORKS, time=False, labels=labels)
    # CPU tensor allocations are deterministic: the same peaks as the
    # memory columns of the full report, measured after the timing runs there
    if on_cpu(report) and on_cpu(quick_report):
        full = table_rows(quick_report, "| network | weighting |")
        assert [row[:2] + row[-2:] for row in rows] == [
            row[:2] + row[-2:] for row in full if row[1] in labels
        ]
    rows = table_rows(report, "| network | quantity |")
    check_target_rows(rows, QUICK_NETWORKS, ("memory",))
    assert all(len(row) == 6 for row in rows)


def test_output_location_of_a_smoke_run(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    page = os.path.join("docs", "benchmarks.md")

    def where(quick, output=None, output_dir=None, default=page):
        args = argparse.Namespace(quick=quick, output=output)
        args.output_dir = output_dir
        flag = "output" if default != "docs" else "output_dir"
        return harness.output_location(args, flag, default)

    # as given; the committed page for a measured run; print only
    assert where(True, output="mine.md") == "mine.md"
    assert where(False) == page and where(True, default=None) is None
    # a smoke run: the same name in a new temporary folder, each run its own
    first, second = where(True), where(True)
    assert os.path.basename(first) == "benchmarks.md" and first != second
    assert os.path.dirname(first).startswith(str(tmp_path))
    folder = where(True, default="docs")
    assert os.path.isdir(folder) and folder.startswith(str(tmp_path))
    assert where(True, output_dir="mine", default="docs") == "mine"


def test_probe_variance_refuses_to_write_a_smoke_run():
    with pytest.raises(SystemExit):
        probe_variance.main(["--quick", "--write"])


def test_probe_variance_quick():
    arguments = "--quick", "--steps", "1"
    code, out = run_main(probe_variance, *arguments)
    assert code == 0
    rows = table_rows(out, "| steps |")
    assert [row[1] for row in rows] == [
        "pde",
        "initial_value",
        "initial_velocity",
        "left",
        "right",
    ]
    for row in rows:
        trace, weight, plain, balanced, parameter = map(as_number, row[3:])
        assert trace > 0 and weight > 0
        # ||K_cc||_F <= Tr(K_cc) for a PSD block: at most sqrt(2)
        assert 0 < parameter <= math.sqrt(2) + 1e-9
        # the plain probe adds every cross term, the balanced one reweighs
        # them; both include the block's own term ||K_cc||_F^2
        assert plain >= parameter / math.sqrt(2) - 1e-9
        assert balanced >= parameter / math.sqrt(2) - 1e-9
    # the boundary blocks, far smaller than the interior, are where the
    # balanced probe pays off (tiny seeded network: 3-17 against 1.1-1.3)
    for row in rows[1:]:
        assert as_number(row[6]) < 0.5 * as_number(row[5])


def committed(folder):
    """``{path: bytes}`` of the committed files directly in ``folder``."""
    return {p: p.read_bytes() for p in Path(folder).iterdir() if p.is_file()}


def test_weightings_quick(tmp_path, monkeypatch):
    """``weightings.py --quick``: every problem and weighting of the quick
    run in the JSON and the page, each run with a finite error or a
    reported failure, one figure per problem, all in a new temporary folder
    (the committed pages untouched); then the page again from its results
    file alone."""

    def run(*arguments):
        code, _ = run_main(weightings, *arguments, "--workers", "1")
        assert code == 0

    docs = committed(Path(harness.ROOT, "docs"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temporary"))
    (tmp_path / "temporary").mkdir()
    run("--quick", "--machine-label", "machine A")
    assert committed(Path(harness.ROOT, "docs")) == docs
    # the rest of the test works in the smoke run's folder
    (tmp_path,) = (tmp_path / "temporary").glob("pina-ntk-quick-*")
    data = harness.read_json(tmp_path / "weightings.json")
    page = (tmp_path / "weightings.md").read_text(encoding="utf-8")
    assert harness.page_block(
        str(tmp_path / "weightings.md"), "suite/weightings.py"
    )
    assert weightings_page.render(data) in page
    problems, weightings_run = data["problems"], data["weightings"]
    assert len(problems) >= 2 and "wave" in problems
    # every weighting but "default", which repeats a sketch by name, and
    # the causal solver's runs (asked for by name)
    expected = set(weightings.WEIGHTINGS) - {"default", *weightings.CAUSAL}
    assert set(weightings_run) == expected
    # the quick problems are all smoothing problems: every weighting
    runs = {(r["problem"], r["weighting"]): r for r in data["runs"]}
    assert set(runs) == {(p, w) for p in problems for w in weightings_run}
    assert len(data["runs"]) == data["planned_runs"]
    for run_record in runs.values():
        errors = run_record["history"]["errors"]
        if run_record["status"] == "ok":
            assert run_record["failure"] is None
            assert errors and all(math.isfinite(e) for e in errors)
            assert run_record["ms_per_step"] > 0
        else:  # a failure is reported with its message
            assert run_record["failure"] and run_record["failure"] in page
    # wave trains with the tutorial's Fourier embedding, the zoo problems
    # without; the page says so per problem
    from pina_ntk.paper.experiments.wave import WaveSettings

    for (problem, _), run_record in runs.items():
        expected = WaveSettings().fourier_features if problem == "wave" else 0
        assert run_record["fourier_features"] == expected, problem
        section = page[page.index(f"## {problem}") :]
        section = section[: section.index("| weighting")]
        assert ("Network of this problem" in section) == (problem == "wave")
    # the summary: a column per problem, the median final error of each
    # weighting (one seed: its error), the lowest in bold
    summary = page[page.index("## Summary") : page.index("## Weightings as")]
    rows = table_rows(summary, "| weighting")
    assert len(rows) == len(weightings_run)
    for column, problem in enumerate(problems, 1):
        medians = {
            w: r["final_error"]
            for (p, w), r in runs.items()
            if p == problem and r["status"] == "ok"
        }
        shown = [row[column].strip("*") for row in rows]
        assert float(shown[0]) == pytest.approx(medians["none"], rel=0.06)
        best = [row[column] for row in rows if row[column].startswith("**")]
        assert float(best[0].strip("*")) == pytest.approx(
            min(medians.values()), rel=0.06
        )
    # the smoothing study's spacing scales with update_every (5 x 5)
    smoothed = runs[("wave", "exact_500_smoothed")]["weighting_options"]
    assert smoothed["update_every_n_steps"] == 25
    assert smoothed["alpha"] == pytest.approx(1e-3)
    assert "`NTKWeighting(update_every_n_steps=25, alpha=0.001)`" in page
    assert "python benchmarks/suite/weightings.py --quick" in page
    assert re.search(r"\d+ logical CPUs", page)
    for problem in problems:
        figure = tmp_path / "figures" / "weightings" / f"{problem}.png"
        assert figure.is_file()

    # the page again from the results alone, in another folder
    again = tmp_path / "again"
    run("--from-json", tmp_path / "weightings.json", "--output-dir", again)
    assert (again / "weightings.md").read_text(encoding="utf-8") == page


def test_combined_results_keep_each_part_and_refuse_a_run_twice():
    def document(label, *seeds):
        runs = [dict(seed=s, part=0) for s in seeds]
        return dict(parts=[dict(machine_label=label)], runs=runs)

    def identity(run):
        return run["seed"]

    found = harness.combine_documents(
        [document("A", 0, 1), document("B", 2)], identity, "the command"
    )
    assert [p["machine_label"] for p in found["parts"]] == ["A", "B"]
    # each run points at its own part, offset by the parts before it
    assert [(r["seed"], r["part"]) for r in found["runs"]] == [
        (0, 0),
        (1, 0),
        (2, 1),
    ]
    assert found["combined_by"] == "the command"
    with pytest.raises(ValueError, match="the run 1 is in both"):
        harness.combine_documents(
            [document("A", 0, 1), document("B", 1)], identity, "again"
        )


def test_spaced_samples_quick(tmp_path, monkeypatch):
    # two tiny sketch runs (k = 1 and 10), written to a new temporary folder
    # (not over the committed page), then the page combining them as the
    # committed one was made
    docs = committed(Path(harness.ROOT, "docs"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    flags = "--estimators", "parameter", "--workers", "1"
    code, _ = run_main(
        spaced_samples, "--quick", *flags, "--machine-label", "this machine"
    )
    assert code == 0
    assert committed(Path(harness.ROOT, "docs")) == docs
    (study,) = tmp_path.glob("pina-ntk-quick-*")
    code, _ = run_main(
        spaced_samples,
        *("--combine", study / "spaced-samples.json"),
        *("--output-dir", tmp_path / "page"),
    )
    assert code == 0
    page = (tmp_path / "page" / "spaced-samples.md").read_text()
    record = json.loads((tmp_path / "page" / "spaced-samples.json").read_text())
    assert {(r["estimator"], r["every"]) for r in record["runs"]} == {
        ("parameter", 1),
        ("parameter", 10),
    }
    assert record["parts"][0]["machine_label"] == "this machine"
    for run in record["runs"]:
        assert math.isfinite(run["relative_l2"]) and run["wall_time_s"] > 0
        # seed 0 tracks the exact weights beside the sketched ones
        tracked = run["tracked"]
        assert tracked["steps"] and len(tracked["exact"]) == len(
            tracked["steps"]
        )
    assert "| parameter | 10 |" in page and "| parameter | 1 |" in page
    assert "| this machine |" in page
    assert "/tmp/" not in page
    assert (
        tmp_path / "page" / "figures" / "spaced-samples-weights.png"
    ).exists()


@pytest.mark.parametrize("problem", ["acoustic_wave", "poisson"])
def test_cost_studies_build_either_problem(problem):
    # --problem poisson times the band where it acts; the rows without a
    # band are the default, gradient_band=None
    task = dict(configurations.QUICK, problem=problem, width=8)
    solver, _ = configurations.build_solver(task, "predictor_band_every_10")
    assert type(solver.problem) is configurations.PROBLEMS[problem]
    domains = solver.problem.discretised_domains
    counts = {name: len(points) for name, points in domains.items()}
    points = dict(zip(configurations.DOMAINS, task["points"]))
    assert counts == {n: points[n] for n in solver.problem.conditions}
    assert solver.weighting.gradient_band == 4.0
    solver, _ = configurations.build_solver(task, "predictor_every_10")
    assert solver.weighting.gradient_band is None
    line = configurations.summarise(
        {"timing": {}, "memory": {}}, dict(task, widths=[]), ()
    )["lines"][0]
    assert configurations.PROBLEMS[problem].__name__ in line
    assert ("t0" in line) == (problem == "acoustic_wave")


def test_suite_confirmation_half_quick(tmp_path):
    """``weightings.py --quick --half confirmation``: every setting of the
    committed split's confirmation half trains, with the network and the
    point regime the split gives it, and the protocol summarises the runs
    paired by seed (here each run against itself: ratio 1)."""
    from benchmarks.suite import suite_protocol

    arguments = "--quick", "--half", "confirmation", "--weightings", "none"
    code, _ = run_main(
        weightings, *arguments, "--workers", "1", "--output-dir", tmp_path
    )
    assert code == 0
    runs = harness.read_json(tmp_path / "weightings.json")["runs"]
    split = suite_protocol.read_split()["confirmation"]
    assert sorted(r["problem"] for r in runs) == sorted(
        e["setting"] for e in split
    )
    by_problem = {r["problem"]: r for r in runs}
    for entry in split:
        record = by_problem[entry["setting"]]
        assert record["status"] == "ok", record["failure"]
        assert record["network"] == entry["network"]
        assert all(math.isfinite(e) for e in record["history"]["errors"])
    fixed = {e["setting"] for e in split if e["points"] == "fixed"}
    assert fixed <= set(weightings.FIXED_POINTS)
    problems = [e["setting"] for e in split]
    both = runs + [dict(r, weighting="sketch_predictor") for r in runs]
    summary = suite_protocol.summarise(both, ["sketch_predictor"], problems)
    assert summary["sketch_predictor"]["steps"]["to_none"] == pytest.approx(1)


def test_lbfgs_quick(tmp_path):
    """``lbfgs.py --quick``: every row trains Adam then L-BFGS to its last
    step; the prices come from one interleaved round (the plain sum twice,
    exact weights on the first setting); the page is its block, rendered
    again the same from the results alone, and the committed results are
    left as they are."""
    committed = Path(ROOT, "docs", "lbfgs.json")
    before = committed.read_bytes() if committed.is_file() else None
    arguments = "--quick", "--rounds", "1", "--workers", "1"
    code, _ = run_main(lbfgs, *arguments, "--output-dir", tmp_path)
    assert code == 0
    document = harness.read_json(tmp_path / "lbfgs.json")
    recipe = document["recipe"]
    steps = recipe["adam"] + recipe["lbfgs"]
    assert {r["weighting"] for r in document["runs"]} == set(lbfgs.STUDY_ROWS)
    for record in document["runs"]:
        assert record["status"] == "ok", record["failure"]
        assert record["history"]["steps"][-1] == steps
        assert all(math.isfinite(e) for e in record["history"]["errors"])
    rows = [p["row"] for p in document["prices"]]
    assert rows[0] == rows[-1] == "none" and rows.count("none") == 2
    assert set(rows) == set(lbfgs.ROWS)
    assert all(p["status"] == "ok" for p in document["prices"])
    page = (tmp_path / "lbfgs.md").read_text(encoding="utf-8")
    assert harness.page_block(str(tmp_path / "lbfgs.md"), "lbfgs/lbfgs.py") == (
        lbfgs_page.render(document)
    )
    assert "python benchmarks/lbfgs/lbfgs.py --quick" in page
    assert "GPU: none (CPU only)" in page
    again = tmp_path / "again"
    code, _ = run_main(
        lbfgs, "--from-json", tmp_path / "lbfgs.json", "--output-dir", again
    )
    assert (again / "lbfgs.md").read_text(encoding="utf-8") == page
    after = committed.read_bytes() if committed.is_file() else None
    assert after == before


def test_causal_runs_train_pinas_causal_solver_and_count_rejections(tmp_path):
    """The causal study's runs: PINA's causal solver with the interior
    condition regularised, fresh points, the default's proposals counted
    (and recorded as not applicable for no weighting); the page shows the
    count beside each weighting."""
    names = ["none", "causal_none", "causal_sketch_predictor"]
    arguments = "--quick", "--problems", "advection", "--weightings", *names
    code, _ = run_main(
        weightings, *arguments, "--workers", "1", "--output-dir", tmp_path
    )
    assert code == 0
    data = harness.read_json(tmp_path / "weightings.json")
    runs = {r["weighting"]: r for r in data["runs"]}
    assert all(r["status"] == "ok" for r in runs.values())
    assert runs["none"]["rejections"] is None
    assert runs["causal_none"]["rejections"] is None
    found = runs["causal_sketch_predictor"]["rejections"]
    # ten quick steps, a sample every ten: the warm start's proposal and
    # that of step 0's (deferred) sample
    assert found["proposals"] == 2 and found["negative"] == 0
    page = (tmp_path / "weightings.md").read_text(encoding="utf-8")
    assert "causal solver, none (plain sum)" in page
    section = page[page.index("## advection") :].splitlines()
    row = next(line for line in section if "causal solver, `" in line)
    assert row.rstrip(" |").endswith("| 0 of 2")


def test_rejection_cells_count_estimates_and_name_isolated_blocks():
    from benchmarks.suite.weightings_page import rejection_cell

    counts = dict(non_finite=1, negative=0, all_zero=2, safeguard=5)
    runs = [
        {"rejections": dict(counts, proposals=10, isolated=["left"])},
        {"rejections": dict(counts, proposals=30, isolated=[])},
    ]
    assert rejection_cell(runs) == "6 of 40; isolated: left (1 seed(s))"
    assert rejection_cell([{"rejections": None}]) == "—"
    assert rejection_cell([{}, *runs]) == "not recorded"


def test_weightings_resume_keeps_every_run_and_its_part(tmp_path):
    # a first part with the plain sum; a second asks for it again beside a
    # second weighting: the first run is kept (not rerun), the second added
    # under a part of its own, and the first part's provenance stays
    flags = "--quick", "--problems", "poisson", "--workers", "1"
    flags += ("--output-dir", tmp_path)
    code, _ = run_main(weightings, *flags, "--weightings", "none")
    assert code == 0
    first = harness.read_json(tmp_path / "weightings.json")
    code, _ = run_main(
        weightings, *flags, "--resume", "--weightings", "none", "pina_ntk"
    )
    assert code == 0
    second = harness.read_json(tmp_path / "weightings.json")
    assert second["parts"][0] == first["parts"][0]
    assert len(second["parts"]) == 2
    assert second["runs"][0] == first["runs"][0]  # kept as it was
    assert [(r["weighting"], r["part"]) for r in second["runs"]] == [
        ("none", 0),
        ("pina_ntk", 1),
    ]
    assert second["weightings"] == ["none", "pina_ntk"]
    # a rerun of the plain sum: added as a third part, the earlier run
    # marked superseded with the reason and left out of the pairing; the
    # step costs measured on the settings are kept
    costs = {"part": first["parts"][0], "rounds": 1, "steps": 4}
    costs["ratios"] = {"poisson": {"pina_ntk": [1.5]}}
    harness.write_json(
        tmp_path / "weightings.json", dict(second, step_costs=costs)
    )
    code, _ = run_main(
        weightings, *flags, "--resume", "--weightings", "none",
        "--rerun", "poisson/none/0", "--rerun-reason", "shared the CPU",
    )  # fmt: skip
    assert code == 0
    third = harness.read_json(tmp_path / "weightings.json")
    assert [(r["weighting"], r["part"]) for r in third["runs"]] == [
        ("none", 0),
        ("pina_ntk", 1),
        ("none", 2),
    ]
    assert third["runs"][0]["superseded"] == {
        "part": 2,
        "reason": "shared the CPU",
    }
    assert "superseded" not in third["runs"][2]
    assert third["step_costs"] == costs
    pairs = suite_protocol.paired(third["runs"], "poisson", "pina_ntk", "none")
    assert pairs == [(third["runs"][1], third["runs"][2])]
    page = (tmp_path / "weightings.md").read_text(encoding="utf-8")
    assert "- poisson, none, seed 0 (part 1): shared the CPU" in page


def test_step_costs_are_measured_in_rounds_and_kept_with_the_runs(tmp_path):
    # a quick run of two weightings on one problem, then --step-costs 2 of
    # 20 steps (400 without --steps): each round times none twice and the
    # other once, fresh from seed 0; the ratios land in the results file
    # beside the runs, which stay
    flags = "--quick", "--problems", "poisson", "--workers", "1"
    flags += ("--output-dir", tmp_path)
    code, _ = run_main(weightings, *flags, "--weightings", "none", "exact")
    assert code == 0
    before = harness.read_json(tmp_path / "weightings.json")
    code, _ = run_main(weightings, *flags, "--step-costs", "2", "--steps", 20)
    assert code == 0
    after = harness.read_json(tmp_path / "weightings.json")
    assert after["runs"] == before["runs"]
    found = after["step_costs"]
    assert (found["rounds"], found["steps"]) == (2, 20)
    ratios = found["ratios"]["poisson"]["exact"]
    assert len(ratios) == 2 and all(0 < r < 100 for r in ratios)
    assert "--step-costs 2 --steps 20" in found["part"]["command"]
    costs = suite_protocol.step_costs(after)["poisson"]
    assert costs["none"] == 1 and costs["exact"] == pytest.approx(
        sorted(ratios)[0] / 2 + sorted(ratios)[1] / 2
    )
    with pytest.raises(SystemExit):
        weightings.main([*map(str, flags), "--step-costs", "0"])
    with pytest.raises(SystemExit):  # no results to time
        weightings.main(
            ["--step-costs", "1", "--output-dir", str(tmp_path / "none")]
        )


def test_workers_are_processes_without_this_ones_torch_state():
    # the jobs run in another process, with one torch thread and torch's
    # state as a fresh start leaves it (a fork of this process would keep
    # its seed); a worker that dies is reported, not raised
    found = {}
    with torch.random.fork_rng():
        torch.manual_seed(12345)
        harness.map_jobs(helpers.worker_state, ["state"], 1, found.__setitem__)
    state = found["state"]
    assert state["pid"] != os.getpid() and state["threads"] == 1
    assert state["seed"] != 12345
    harness.map_jobs(helpers.worker_state, ["exit"], 1, found.__setitem__)
    assert "worker_error" in found["exit"]


def test_bookkeeping_quick(tmp_path, monkeypatch):
    # a smoke run writes its results to a new temporary folder, never over
    # the committed ones, and prints the scaling page's section from them
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    committed = Path(bookkeeping.RESULTS).read_bytes()
    code, printed = run_main(bookkeeping, "--quick")
    assert code == 0
    assert Path(bookkeeping.RESULTS).read_bytes() == committed
    (results,) = tmp_path.glob("pina-ntk-quick-*/scaling-bookkeeping.json")
    document = harness.read_json(results)
    assert printed.strip() == "\n".join(bookkeeping.page_lines(document))
    settings = document["settings"]
    steps = (settings["warmup_periods"] + settings["periods"]) * 10
    (found,) = document["rounds"]
    assert len(found["durations"]) == len(found["calls"]) == steps
    # a step's span holds the calls within it: its plain time is left
    assert all(d > 0 for d in bookkeeping.plain_steps(found))
    # each call timed at the steps it runs: the hooks and update_weights
    # at every step, the sample's work at the sample steps (every 10th) only
    calls = [dict(zip(bookkeeping.NAMES, step)) for step in found["calls"]]
    for index, call in enumerate(calls):
        sample = index % 10 == 0
        assert call["update_weights"] > 0 and call["on_train_batch_end"] > 0
        assert (call["prepare_sample"] > 0) == sample, index
        assert (call["complete_sample"] > 0) == sample, index
        # nested: the sample's calls run within the others (a deferred
        # sample's completion after the backward pass, the warm start's
        # within update_weights)
        outer = call["update_weights"] + call["on_after_backward"]
        assert outer >= call["prepare_sample"] + call["complete_sample"]
    summary = bookkeeping.summarise(document)
    assert summary["periods"] == settings["periods"]
    assert all(v > 0 and math.isfinite(v) for v in summary["parts"].values())
    # the timers are gone once the run is over
    for owner, name in bookkeeping.TIMED:
        assert not hasattr(getattr(owner, name), "__wrapped__"), name
    assert "update_weights" not in vars(bookkeeping.SketchNTKWeighting)


def page_markers(script):
    """The markers of a script's block on its page."""
    return harness.BEGIN.format(script=script), harness.END


#: The scripts that render committed results and run nothing (mutmut's run
#: takes minutes: ``--quick`` scores the committed statuses again): their
#: modules, flags and the blocks they write, ``(path below the root,
#: markers)``.
RENDERERS = {
    "suite_page": (
        suite_page,
        ["--readme"],
        [
            ("docs/suite.md", page_markers(suite_page.SCRIPT)),
            ("README.md", suite_page.README_MARKERS),
        ],
    ),
    "no_harm_page": (
        no_harm_page,
        [],
        [
            ("docs/suite/introductory.md", page_markers(no_harm_page.SCRIPT)),
            ("README.md", introductory.README_MARKERS),
        ],
    ),
    "mutation_score": (
        mutation_score,
        [],
        [("docs/mutation-testing.md", page_markers(mutation_score.SCRIPT))],
    ),
}


@pytest.mark.parametrize("name", list(RENDERERS))
def test_a_renderers_quick_run_writes_a_temporary_folder_only(
    name, tmp_path, monkeypatch
):
    """``--quick`` writes the committed blocks again, the same names below
    a new temporary folder, and leaves the committed files as they are."""
    module, flags, blocks = RENDERERS[name]
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    committed = {path: Path(ROOT, path).read_bytes() for path, _ in blocks}
    code, _ = run_main(module, "--quick", *flags)
    assert code == 0
    [folder] = tmp_path.iterdir()
    for path, markers in blocks:
        found = harness.read_block(str(folder / path), *markers)
        assert found == harness.read_block(os.path.join(ROOT, path), *markers)
        assert found
        assert Path(ROOT, path).read_bytes() == committed[path]
