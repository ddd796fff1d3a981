"""The README: its example runs as printed, and it stays a short page."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def fenced_block_after(marker, language):
    """The first ``language`` fenced block after ``marker`` in the README."""
    tail = README[README.index(marker) :]
    match = re.search(rf"```{language}\n(.*?)```", tail, re.DOTALL)
    assert match, f"no {language} block after {marker}"
    return match.group(1)


def test_readme_example_runs(tmp_path):
    code = fenced_block_after("<!-- readme-example -->", "python")
    assert "lightning.seed_everything(0)" in code
    assert "weighting=SketchNTKWeighting()" in code
    # a few steps instead of the example's thousands
    short, count = re.subn(r"max_epochs=\d+", "max_epochs=3", code)
    assert count == 1
    result = subprocess.run(
        [sys.executable, "-c", short],
        cwd=tmp_path,  # whatever Lightning writes lands here
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("{") and "tensor(" in last, result.stdout


def test_readme_is_a_short_page():
    assert len(README.splitlines()) <= 250
