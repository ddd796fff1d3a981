"""The conformance command (``conformance/run.py``) and its pytest plugin:
PINA's own tests run without a weighting, with ``SketchNTKWeighting()`` and
with ``NTKWeighting()`` injected, and a failure only a weighting causes is
reported by cause and fails the command.

The vendored PINA tests themselves run in CI (the README's test command),
not here: they take minutes.
"""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance"


def load_runner():
    spec = importlib.util.spec_from_file_location(
        "conformance_run", CONFORMANCE / "run.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run = load_runner()


def results(kind, injected=3, **tests):
    """A run's results as the plugin writes them: ``name=cause`` (a failed
    test) or ``name=None`` (a passed one)."""
    return {
        "kind": kind,
        "injected": injected,
        "tests": {
            name: {
                "outcome": "passed" if cause is None else "failed",
                "cause": cause,
            }
            for name, cause in tests.items()
        },
    }


def test_a_failure_only_with_a_weighting_is_new_and_grouped_by_cause():
    done = {
        "none": (1, results("none", injected=0, a=None, b=None, c="E: pina")),
        "sketch": (
            1,
            results("sketch", a="E: one", b="E: one", c="E: pina"),
        ),
        "exact": (1, results("exact", a="E: two", b=None, c="E: pina")),
    }
    problems, lines = run.compare(done, {"c": "PINA's own"})
    report = "\n".join(lines)
    # c fails everywhere: PINA's own, listed, not new
    assert problems == 3
    assert (
        "sketch: 3 tests with SketchNTKWeighting() injected into 3 solvers, "
        "2 new failures\n  2 x E: one\n    a\n    b"
    ) in report
    assert (
        "exact: 3 tests with NTKWeighting() injected into 3 solvers, "
        "1 new failures\n  1 x E: two\n    a"
    ) in report


def test_a_clean_run_passes_and_a_listed_failure_that_passed_is_named():
    done = {
        "none": (0, results("none", injected=0, a=None, b=None)),
        "sketch": (0, results("sketch", a=None, b=None)),
    }
    problems, lines = run.compare(done, {"b": "fixed in PINA"})
    assert problems == 0
    assert "    b" in lines  # named as passing, to be removed from the list


@pytest.mark.parametrize(
    "sketch, what",
    [
        ((2, None), "the run broke off (exit status 2)"),
        ((0, results("sketch", injected=0, a=None)), "no weighting was"),
        ((0, results("sketch", a=None, extra=None)), "ran in only one of"),
    ],
)
def test_a_run_that_tested_nothing_comparable_is_a_problem(sketch, what):
    done = {"none": (0, results("none", injected=0, a=None)), "sketch": sketch}
    problems, lines = run.compare(done, {})
    assert problems == 1
    assert what in "\n".join(lines)


def test_an_unlisted_failure_without_a_weighting_is_a_problem():
    done = {
        "none": (1, results("none", injected=0, a="E: new in PINA", b=None)),
        "sketch": (1, results("sketch", a="E: new in PINA", b=None)),
    }
    problems, lines = run.compare(done, {})
    assert problems == 1
    assert "    a: E: new in PINA" in lines


def test_every_listed_failure_has_a_cause_and_is_a_vendored_test():
    known = run.load_known()
    assert known and all(cause.strip() for cause in known.values())
    for test in known:
        path = test.split("::")[0]
        assert path.startswith(run.SUITES), test
        assert (run.PINA_TESTS.parent / path).is_file(), test


@pytest.mark.slow
def test_the_guide_counts_the_vendored_tests_and_known_failures(tmp_path):
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"]
        + list(run.SUITES),
        cwd=run.PINA_TESTS.parent,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONWARNINGS="ignore"),
    )
    count = sum("::" in line for line in collected.stdout.splitlines())
    guide = (CONFORMANCE.parent / "docs" / "guide.md").read_text()
    assert f"callback tests ({count} at PINA 0.3.2)" in guide
    assert f"{len(run.load_known())} of PINA's tests fail without" in guide
    readme = (CONFORMANCE / "README.md").read_text()
    assert f"callback tests ({count} at PINA 0.3.2)" in readme


#: A stand-in for PINA's tests: real PINA solvers, one test per behaviour the
#: command must tell apart.
PINA_LIKE_TESTS = """
import pytest
import torch
from pina.model import FeedForward
from pina.problem.zoo import SupervisedProblem
from pina.solver import SupervisedSingleModelSolver
from pina.weighting import ScalarWeighting


def solver(weighting=None):
    x, y = torch.rand(4, 1), torch.rand(4, 1)
    problem = SupervisedProblem(x, y)
    return SupervisedSingleModelSolver(
        problem, FeedForward(1, 1), weighting=weighting
    )


def test_passes_with_any_weighting():
    solver()


def test_assumes_no_weighting():
    assert type(solver().weighting).__name__ == "_NoWeighting"


def test_keeps_a_given_weighting():
    assert isinstance(solver(ScalarWeighting(2.0)).weighting, ScalarWeighting)


def test_fails_in_pina_itself():
    raise KeyError("data")
"""


@pytest.fixture
def pina_like(tmp_path, monkeypatch):
    """``run`` pointed at :data:`PINA_LIKE_TESTS`, with the last test
    listed as PINA's own failure."""
    tests = tmp_path / "vendored" / "tests"
    (tests / "test_solver").mkdir(parents=True)
    (tests / "test_solver" / "test_stand_in.py").write_text(PINA_LIKE_TESTS)
    known = tmp_path / "known-failures.toml"
    known.write_text(textwrap.dedent("""\
            [[failure]]
            cause = "raised by the test"
            tests = [
                "tests/test_solver/test_stand_in.py::test_fails_in_pina_itself",
            ]
            """))
    monkeypatch.setattr(run, "PINA_TESTS", tests)
    monkeypatch.setattr(run, "SUITES", ("tests/test_solver",))
    monkeypatch.setattr(run, "KNOWN_FAILURES", known)
    monkeypatch.setattr(run.load_known, "__defaults__", (known,))
    return tmp_path


@pytest.mark.slow
def test_the_command_reports_a_new_failure_and_exits_non_zero(
    pina_like, capsys
):
    status = run.main(
        ["--kinds", "sketch", "--jobs", "2", "--keep", str(pina_like / "out")]
    )
    report = capsys.readouterr().out
    assert status == 1
    assert "none: 4 tests, 1 failed, 1 of them listed as PINA's own" in report
    assert (
        "sketch: 4 tests with SketchNTKWeighting() injected into 2 solvers, "
        "1 new failures\n  1 x AssertionError: assert '"
    ) in report
    assert "test_stand_in.py::test_assumes_no_weighting" in report
    # the plugin injected nothing into the reference run, and kept the
    # weighting a test passed
    none = json.loads((pina_like / "out/none/results.json").read_text())
    sketch = json.loads((pina_like / "out/sketch/results.json").read_text())
    assert none["injected"] == 0
    keeps = "tests/test_solver/test_stand_in.py::test_keeps_a_given_weighting"
    assert sketch["tests"][keeps]["outcome"] == "passed"
    # each kind ran in a folder of its own, where PINA's logs would go
    assert (pina_like / "out/none/tests").is_dir()
    assert (pina_like / "out/sketch/tests").is_dir()
