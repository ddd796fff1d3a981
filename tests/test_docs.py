"""The documentation builds without a warning and has every page it promises.

One Sphinx build of ``docs/`` (``-W --keep-going``, one process, nothing
executed or downloaded) into a temporary folder; then: a page for each name
of ``pina_ntk.__all__`` and of the layer packages' ``__all__`` (each
documented where it is defined, ``api/<module path>/<name>.html``), and the
tutorial pages with every code cell, image output and Markdown table of
their notebooks.
"""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip(
    "sphinx",
    reason="Sphinx is not installed: pip install '.[docs]' builds the docs",
)

import pina_ntk  # noqa: E402
import pina_ntk.core  # noqa: E402
import pina_ntk.integration  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
#: ``(page, notebook)`` of each tutorial, relative to the site and the root.
TUTORIALS = (
    ("tutorials/wave/wave_ntk.html", "tutorials/wave/wave_ntk.ipynb"),
    (
        "tutorials/qtensor/qtensor_ntk.html",
        "tutorials/qtensor/qtensor_ntk.ipynb",
    ),
    (
        "tutorials/your_problem/your_problem.html",
        "tutorials/your_problem/your_problem.ipynb",
    ),
)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The built site's folder; fails with Sphinx's output if the build does."""
    out = tmp_path_factory.mktemp("docs-html")
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-W",
        "--keep-going",
        "-b",
        "html",
        "-q",
        "-j",
        "1",
        DOCS,
        str(out),
    ]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, (
        f"sphinx exited with {result.returncode}:\n"
        f"{result.stdout[-5000:]}\n{result.stderr[-10000:]}"
    )
    return out


def read_page(site, page):
    path = os.path.join(site, page)
    assert os.path.isfile(path), f"no page {page}"
    with open(path, encoding="utf-8") as f:
        return f.read()


def assert_api_page(site, name, obj):
    module = obj.__module__
    page = "api/" + module.removeprefix("pina_ntk.").replace(".", "/")
    html = read_page(site, f"{page}/{name}.html")
    # the anchor autodoc gives the documented object
    assert f'id="{module}.{name}"' in html, f"{name} not documented"


@pytest.mark.parametrize("name", pina_ntk.__all__)
def test_public_api_page(site, name):
    assert_api_page(site, name, getattr(pina_ntk, name))


@pytest.mark.parametrize(
    "package", [pina_ntk.core, pina_ntk.integration], ids=lambda p: p.__name__
)
def test_layer_api_pages(site, package):
    for name in package.__all__:
        assert_api_page(site, name, getattr(package, name))


@pytest.mark.parametrize("page, notebook", TUTORIALS)
def test_tutorial_page(site, page, notebook):
    html = read_page(site, page)
    with open(os.path.join(ROOT, notebook), encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    images = [
        o
        for c in code
        for o in c.get("outputs", [])
        if any(k.startswith("image/") for k in o.get("data", {}))
    ]
    assert html.count('class="cell docutils container"') == len(code)
    # the committed outputs are rendered, not executed
    assert html.count("<img") >= len(images)
    # a Markdown output's tables are tables, not lines of "|"
    tables = [
        o
        for c in code
        for o in c.get("outputs", [])
        if "\n|---" in "".join(o.get("data", {}).get("text/markdown", ""))
    ]
    assert html.count("<table") >= len(tables)


# ------------------------------------------------------- the Works-with table
def works_with_rows():
    """``(row, tests cell)`` of each row of the guide's *Works with*
    table."""
    with open(os.path.join(DOCS, "guide.md")) as handle:
        text = handle.read()
    start = text.index("## Works with")
    lines = text[start : text.index("\n### ", start)].splitlines()
    table = [line for line in lines if line.startswith("|")]
    # the header and its separator first
    return [(r.split("|")[1].strip(), r.split("|")[3]) for r in table[2:]]


def named_tests(cell):
    """``(file, function or None)`` of each ``file.py::name`` or
    ``file.py`` a table cell names."""
    found = []
    for word in cell.replace("`", " ").replace(",", " ").split():
        if ".py" in word:
            name, _, function = word.partition("::")
            found.append((name, function or None))
    return found


def test_every_works_with_row_names_a_test_that_exists():
    rows = works_with_rows()
    assert len(rows) >= 20
    folder = os.path.join(ROOT, "tests", "integration")
    for row, cell in rows:
        tests = named_tests(cell)
        if not tests:  # the row above's tests, or every test
            assert cell.strip() == "the whole suite", row
            continue
        for name, function in tests:
            path = os.path.join(folder, name)
            assert os.path.exists(path), f"{row}: {name}"
            if function is not None:
                with open(path) as handle:
                    assert (
                        f"def {function}(" in handle.read()
                    ), f"{row}: {name}::{function}"
