"""Smoke test of ``benchmarks/overhead.py --quick``.

It checks that the benchmark runs end to end and writes every row with
finite, positive measurements. It does not check the timing or memory
targets: those depend on the machine and belong to the benchmark itself.
"""

import math
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "overhead.py")
#: Row labels of the time-and-memory table, per network.
WEIGHTING_LABELS = (
    "unweighted (PINA default)",
    "exact `NTKWeighting`, every step",
    "exact `NTKWeighting`, every 5 steps",
    "predictor sketch, forward difference",
    "predictor sketch, central difference",
    "predictor sketch, `balanced_probe=False`",
    "parameter-space sketch",
    "predictor sketch, forward, `sample_after_backward=False`",
    "parameter-space sketch, `sample_after_backward=False`",
    "PINA `NeuralTangentKernelWeighting`",
    "*reference: unweighted + one more residual evaluation*",
    "*reference: unweighted + one more residual evaluation and one "
    "`Jᵀg` backward*",
)
ACCURACY_LABELS = WEIGHTING_LABELS[3:7]
QUICK_NETWORKS = ("3×20", "3×40")


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


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    output = tmp_path_factory.mktemp("bench") / "benchmarks.md"
    completed = subprocess.run(
        [sys.executable, SCRIPT, "--quick", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    document = output.read_text(encoding="utf-8")
    # the table printed to stdout is the file's content
    assert document.strip() in completed.stdout
    return document


def test_time_and_memory_table_has_every_row_with_positive_numbers(
    quick_report,
):
    rows = table_rows(quick_report, "| network | weighting |")
    seen = {(row[0].split(" ")[0], row[1]) for row in rows}
    expected = {(n, w) for n in QUICK_NETWORKS for w in WEIGHTING_LABELS}
    assert seen == expected
    assert len(rows) == len(expected)
    for row in rows:
        low, high = (as_number(part) for part in row[4].split("–"))
        numbers = [as_number(c) for c in (row[2], row[3], row[5], row[6])]
        numbers += [low, high]
        assert all(math.isfinite(x) and x > 0 for x in numbers), row
        assert low <= as_number(row[3]) <= high, row
        if row[1] == WEIGHTING_LABELS[0]:
            assert as_number(row[3]) == 1.0 and as_number(row[6]) == 1.0


def test_targets_table_checks_both_networks(quick_report):
    rows = table_rows(quick_report, "| network | quantity |")
    assert {row[0] for row in rows} == set(QUICK_NETWORKS)
    for row in rows:
        assert math.isfinite(as_number(row[2])) and as_number(row[2]) > 0
        assert row[4] in ("pass", "**fail**")
        verdict = as_number(row[2]) <= as_number(row[3].lstrip("≤ "))
        assert (row[4] == "pass") == verdict
        # time targets carry the ratio of their unavoidable-work row
        if row[1].startswith("time"):
            reference = as_number(row[5])
            assert math.isfinite(reference) and reference > 0
        else:
            assert row[5] == "—"


def test_accuracy_table_has_finite_errors_for_each_estimator(quick_report):
    rows = table_rows(quick_report, "| estimator | step")
    drift_label = "*for scale: exact weights' own change since step 0*"
    assert [row[0] for row in rows] == [*ACCURACY_LABELS, drift_label]
    for row in rows:
        errors = [as_number(cell) for cell in row[1:]]
        assert len(errors) == 3  # steps 0 and 5 (medians), largest value
        assert all(math.isfinite(e) and e >= 0 for e in errors), row
        assert errors[-1] >= max(errors[:-1])
    # the exact weights have not moved at step 0, and the sketches' warm
    # start is a 32-sample estimate, not the exact value
    assert as_number(rows[-1][1]) == 0.0
    assert all(as_number(row[1]) > 0 for row in rows[:-1])


def test_report_states_command_machine_and_method(quick_report):
    assert "python benchmarks/overhead.py --quick --output" in quick_report
    assert re.search(r"\d+ logical CPUs", quick_report)
    assert re.search(r"torch 2\.\d+", quick_report)
    assert "profile_memory=True" in quick_report or "cuda" in quick_report


def test_probe_variance_quick(capsys):
    import importlib.util

    path = os.path.join(ROOT, "benchmarks", "probe_variance.py")
    spec = importlib.util.spec_from_file_location("probe_variance", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick", "--steps", "1", "--threads", "1"]) == 0
    out = capsys.readouterr().out
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
