"""The README: its example runs as printed, and it stays a short page.

Each check is a function of the README's text or of the example's output,
so that the tests below run it on the README and the self-tests at the end
run the same function on an edited copy, which it must refuse.
"""

import ast
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
MARKER = "<!-- readme-example -->"
#: Lines the README may have: beyond them it is a manual, not a front page.
MAX_LINES = 250
#: The quick start rounds its weights to four decimals.
PRINTED_TOLERANCE = 1e-4

# Appended to the shortened example (whose names, solver and problem, it
# uses): the problem's conditions and the weights the trained solver holds,
# for the test to compare the printed line with.
RECORD = """
import json

saved = solver.weighting.last_saved_weights()
with open("record.json", "w") as handle:
    json.dump(
        {
            "conditions": list(problem.conditions),
            "saved": {name: float(weight) for name, weight in saved.items()},
        },
        handle,
    )
"""

#: What RECORD wrote on a run of the example, to five decimals (the input of
#: the self-tests).
RECORDED = {
    "conditions": ["boundary", "t0", "D"],
    "saved": {"boundary": 0.79843, "t0": 1.40819, "D": 0.75341},
}


def fenced_block_after(text, marker, language):
    """The first ``language`` fenced block after ``marker`` in ``text``."""
    assert marker in text, f"the README lost its {marker} marker"
    tail = text[text.index(marker) :]
    match = re.search(rf"```{language}\n(.*?)```", tail, re.DOTALL)
    assert match, f"no {language} block after {marker}"
    return match.group(1)


def short_example(text):
    """The README's example, checked, with a few steps for its thousands."""
    code = fenced_block_after(text, MARKER, "python")
    assert "lightning.seed_everything(0)" in code
    assert "weighting=SketchNTKWeighting()" in code
    short, count = re.subn(r"max_epochs=\d+", "max_epochs=3", code)
    assert count == 1
    return short


def check_printed_weights(stdout, record):
    """
    The example's last line is one weight per condition of the problem, as
    plain positive numbers: the weights the trained solver holds.
    """
    last = stdout.strip().splitlines()[-1]
    try:
        # a literal, so no tensor(...) nor any other object
        printed = ast.literal_eval(last)
    except (ValueError, SyntaxError):
        raise AssertionError(f"no literal of numbers: {last}") from None
    assert isinstance(printed, dict), last
    assert sorted(printed) == sorted(record["conditions"]), last
    for name, weight in printed.items():
        assert type(weight) is float, (name, weight)
        assert math.isfinite(weight) and weight > 0, (name, weight)
        assert math.isclose(
            weight, record["saved"][name], abs_tol=PRINTED_TOLERANCE
        ), (name, weight, record["saved"][name])


def check_short(text):
    """The README stays a front page."""
    assert len(text.splitlines()) <= MAX_LINES


def test_readme_example_runs(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", short_example(README) + RECORD],
        cwd=tmp_path,  # whatever Lightning writes lands here
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((tmp_path / "record.json").read_text())
    check_printed_weights(result.stdout, record)


def check_landing_page(readme, example, index):
    """The docs' landing page includes the one quick start: the file
    ``examples/quickstart.py`` holds the README's example to the letter."""
    assert example == fenced_block_after(readme, MARKER, "python")
    assert ".. literalinclude:: ../examples/quickstart.py" in index


def test_docs_landing_page_shows_the_readme_example():
    example = (ROOT / "examples" / "quickstart.py").read_text()
    index = (ROOT / "docs" / "index.rst").read_text()
    check_landing_page(README, example, index)


def test_readme_is_a_short_page():
    check_short(README)


# The self-tests: each edit below is one the checks above exist to catch.


def output(line):
    """The example's output, ending in the line it prints."""
    return "`Trainer.fit` stopped: `max_epochs=3` reached.\n" + line + "\n"


def test_the_recorded_run_passes_the_check():
    # the self-tests' edits fail the check, not their starting point
    weights = {k: round(v, 4) for k, v in RECORDED["saved"].items()}
    check_printed_weights(output(repr(weights)), RECORDED)


@pytest.mark.parametrize(
    "line",
    [
        # the example before this check: tensors, not numbers
        "{'boundary': tensor(0.7984), 't0': tensor(1.4082), "
        "'D': tensor(0.7534)}",
        # the weights printed as text
        "{'boundary': '0.7984', 't0': '1.4082', 'D': '0.7534'}",
        # a diverged run (nan is no literal); a sign error
        "{'boundary': nan, 't0': 1.4082, 'D': 0.7534}",
        "{'boundary': -0.7984, 't0': 1.4082, 'D': 0.7534}",
        # a condition left out; the weights without their conditions
        "{'boundary': 0.7984, 't0': 1.4082}",
        "[0.7984, 1.4082, 0.7534]",
        # numbers other than the solver's: rounded too far, another step's,
        # or given to the wrong conditions
        "{'boundary': 0.8, 't0': 1.41, 'D': 0.75}",
        "{'boundary': 0.7834, 't0': 1.4082, 'D': 0.7534}",
        "{'boundary': 1.4082, 't0': 0.7984, 'D': 0.7534}",
    ],
)
def test_an_edited_printed_line_is_caught(line):
    with pytest.raises(AssertionError):
        check_printed_weights(output(line), RECORDED)


@pytest.mark.parametrize(
    "old, new",
    [
        # unseeded, the printed weights are not the reader's
        ("lightning.seed_everything(0)  #", "#"),
        # the example no longer shows the sketch
        ("weighting=SketchNTKWeighting()", "weighting=None"),
        # no step count the test can shorten: it would train for hours
        ("max_epochs=1000,", ""),
        # the test no longer finds the example
        (MARKER, "<!-- example -->"),
    ],
)
def test_an_edited_example_is_caught(old, new):
    assert old in README
    short_example(README)  # the README itself passes
    with pytest.raises(AssertionError):
        short_example(README.replace(old, new))


def test_a_longer_readme_is_caught():
    check_short(README)
    with pytest.raises(AssertionError):
        check_short(README + "\n" * MAX_LINES)


def test_a_second_quick_start_is_caught():
    example = (ROOT / "examples" / "quickstart.py").read_text()
    index = (ROOT / "docs" / "index.rst").read_text()
    with pytest.raises(AssertionError):  # the example drifts from the page
        edited = example.replace("max_epochs=1000", "max_epochs=2000")
        check_landing_page(README, edited, index)
    with pytest.raises(AssertionError):  # the page shows another file
        edited = index.replace("examples/quickstart.py", "examples/other.py")
        check_landing_page(README, example, edited)
