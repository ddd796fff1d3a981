"""The tutorial notebooks: in sync with their scripts, and runnable."""

import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tutorials"))

import build_notebooks  # noqa: E402

SCRIPTS = build_notebooks.tutorial_scripts(ROOT / "tutorials")
#: Seconds a cell may run before the kernel counts as hung: a guard against a
#: run that never ends, far above a quick-mode cell on a loaded machine; not
#: a time budget (timings belong in benchmarks, not in unit tests).
HANG_GUARD = 600


def test_every_tutorial_has_a_notebook_and_an_index_entry():
    assert {p.parent.name for p in SCRIPTS} >= {"wave", "qtensor"}
    index = (ROOT / "tutorials" / "README.md").read_text()
    for script in SCRIPTS:
        assert script.with_suffix(".ipynb").exists()
        relative = script.with_suffix(".ipynb").relative_to(ROOT / "tutorials")
        assert str(relative) in index


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.parent.name)
def test_committed_notebook_carries_the_outputs_of_a_run(script):
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    outputs = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
    ]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("text/markdown" in o.get("data", {}) for o in outputs)
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.parent.name)
def test_notebook_matches_its_script(script):
    assert build_notebooks.out_of_sync(script) is None


def test_rebuild_keeps_outputs_of_unchanged_notebooks(tmp_path):
    script = tmp_path / "demo.py"
    script.write_text("# %%\nx = 1\n")
    assert build_notebooks.main([str(script)]) == 0
    target = script.with_suffix(".ipynb")
    notebook = nbformat.read(target, as_version=4)
    notebook.cells[0].outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="ran\n")
    ]
    nbformat.write(notebook, target)
    assert build_notebooks.main([str(script)]) == 0
    kept = nbformat.read(target, as_version=4)
    assert kept.cells[0].outputs[0]["text"] == "ran\n"
    script.write_text("# %%\nx = 2\n")
    assert build_notebooks.main([str(script)]) == 0
    rebuilt = nbformat.read(target, as_version=4)
    assert rebuilt.cells[0].source == "x = 2" and not rebuilt.cells[0].outputs


def test_check_reports_a_stale_notebook(tmp_path):
    script = tmp_path / "demo.py"
    script.write_text("# %%\nx = 1\n")
    assert "missing" in build_notebooks.out_of_sync(script)
    assert build_notebooks.main([str(script)]) == 0
    assert build_notebooks.out_of_sync(script) is None
    script.write_text("# %%\nx = 2\n")
    assert "cell 0" in build_notebooks.out_of_sync(script)
    assert build_notebooks.main(["--check", str(script)]) == 1


def test_execute_keeps_a_progress_bar_as_its_final_state(tmp_path):
    # one flushed stream output per update, as tqdm writes them
    script = tmp_path / "demo.py"
    script.write_text(
        "# %%\n"
        "import sys, time\n"
        "for i in range(5):\n"
        "    sys.stderr.write(f'\\rstep {i}/4'); sys.stderr.flush()\n"
        "    time.sleep(0.05)\n"
        "_ = sys.stderr.write('\\n')\n"
    )
    notebook = build_notebooks.notebook_from_script(script)
    build_notebooks.execute(notebook, tmp_path, timeout=60)
    [output] = notebook.cells[0].outputs
    assert (output.name, output.text) == ("stderr", "step 4/4\n")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.parent.name)
def test_notebook_runs_in_quick_mode(script, tmp_path, monkeypatch):
    if script.parent.name == "qtensor":
        pytest.importorskip("skfem")  # the FEM reference: the fem extra
    monkeypatch.setenv("PINA_NTK_QUICK", "1")
    # tiny networks gain nothing from threads, and one thread keeps the
    # kernel from spinning against other processes on a busy machine
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    # CI selects a non-interactive backend; the notebook must still draw
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PINA_NTK_CACHE", str(tmp_path / "cache"))
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    build_notebooks.execute(notebook, script.parent, timeout=HANG_GUARD)
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    ]
    assert not errors
    tables = [
        output["data"]["text/markdown"]
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if "text/markdown" in output.get("data", {})
    ]
    assert tables and "rel" in tables[0].lower()
    images = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if "image/png" in output.get("data", {})
    ]
    assert len(images) >= 2
