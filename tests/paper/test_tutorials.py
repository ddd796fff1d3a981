"""The tutorial notebooks: in sync with their scripts, and runnable."""

import os
import re
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


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.parent.name)
def test_notebook_outputs_were_made_by_the_shipped_library(script):
    # any change to pina_ntk's source since the notebook was executed
    assert build_notebooks.stale_outputs(script) is None


def text_outputs(notebook):
    """``(kind, text)`` of every output: streams by name, data by type."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                yield output.name, output.text
            for kind, text in output.get("data", {}).items():
                if kind.startswith("text/"):
                    yield kind, text


#: An absolute path of this machine or another: a home, a temporary or a
#: system folder, an installed package, a Windows drive.
MACHINE_PATH = re.compile(
    r"(?<![\w.])/(home|work|tmp|usr|opt|root|Users|var)/|site-packages"
    r"|\b[A-Z]:\\"
)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.parent.name)
def test_outputs_carry_no_machine_path_and_no_warning(script):
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    found = list(text_outputs(notebook))
    assert found
    assert not [t for _, t in found if MACHINE_PATH.search(t)]
    assert not [t for k, t in found if k == "stderr" and "Warning" in t]


def test_machine_paths_are_recognised():
    for text in (
        "logs in /tmp/pina-ntk-x",
        "/work/main/x.py: RuntimeWarning",
        "/usr/lib/python3/site-packages/y",
        r"C:\\Users\\me",
    ):
        assert MACHINE_PATH.search(text), text
    for text in ("docs/suite.md", "ntk_weight/interior", "a/b/c", "1/2/3"):
        assert not MACHINE_PATH.search(text), text


def write_package(root, files):
    """A package of ``{relative path: text}`` below ``root``."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_fingerprint_follows_every_source_byte_and_name(tmp_path):
    files = {"a.py": "x = 1\n", "core/b.py": "y = 2\n"}
    first = build_notebooks.library_fingerprint(
        write_package(tmp_path / "one", files)
    )
    # the same sources elsewhere: the same fingerprint
    assert first == build_notebooks.library_fingerprint(
        write_package(tmp_path / "two", files)
    )
    # not Python: not the library's source
    (tmp_path / "two" / "notes.txt").write_text("anything")
    assert first == build_notebooks.library_fingerprint(tmp_path / "two")
    for changed in (
        {"a.py": "x = 2\n", "core/b.py": "y = 2\n"},  # one byte
        {"a.py": "x = 1\n", "core/c.py": "y = 2\n"},  # a renamed file
        {"a.py": "x = 1\ny = 2\n", "core/b.py": ""},  # text moved across
        {**files, "core/new.py": ""},  # an empty new module
    ):
        root = write_package(tmp_path / str(len(os.listdir(tmp_path))), changed)
        assert build_notebooks.library_fingerprint(root) != first, changed


def test_check_reports_outputs_of_another_library(tmp_path):
    library = write_package(tmp_path / "lib", {"m.py": "x = 1\n"})
    script = tmp_path / "demo.py"
    script.write_text("# %%\nx = 1\n")
    assert build_notebooks.main([str(script)]) == 0
    # written without outputs: no fingerprint, so stale
    assert "another library source (None)" in build_notebooks.stale_outputs(
        script, library
    )
    notebook = build_notebooks.notebook_from_script(script)
    notebook.metadata[build_notebooks.FINGERPRINT_KEY] = (
        build_notebooks.library_fingerprint(library)
    )
    nbformat.write(notebook, script.with_suffix(".ipynb"))
    assert build_notebooks.stale_outputs(script, library) is None
    (library / "m.py").write_text("x = 2\n")
    assert build_notebooks.stale_outputs(script, library) is not None


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
    # the run records the library that made its outputs
    fingerprint = notebook.metadata[build_notebooks.FINGERPRINT_KEY]
    assert fingerprint == build_notebooks.library_fingerprint()


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
