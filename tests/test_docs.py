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
import re
import shutil
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


# ----------------------------------------------------- mathematics offline
#: The script every page loads MathJax from: the bundled copy.
MATHJAX = "_static/mathjax/tex-chtml.js"
#: A Chromium that opens pages headless (Debian's ``chromium`` package).
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def remote_scripts(html):
    """The ``src`` of every script a page loads from another host."""
    sources = re.findall(r"<script[^>]*\ssrc=\"([^\"]+)\"", html)
    return [s for s in sources if re.match(r"(https?:)?//", s)]


def test_every_page_loads_its_scripts_from_the_site(site):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 20
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert remote_scripts(html) == [], page.relative_to(site)
    # the math pages load the bundled MathJax, which is there with its fonts
    estimators = read_page(site, "estimators.html")
    assert f'src="{MATHJAX}"' in estimators
    bundle = site / MATHJAX
    assert bundle.is_file() and bundle.stat().st_size > 100_000
    assert (site / "_static/mathjax/output/chtml/fonts/woff-v2").is_dir()


def test_a_page_loading_mathjax_from_a_cdn_is_caught():
    cdn = '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/tex-chtml.js">'
    assert remote_scripts(cdn + '<script src="_static/doctools.js">') == [
        "https://cdn.jsdelivr.net/npm/mathjax@3/tex-chtml.js"
    ]


def rendered_formulas(page):
    """Formulas MathJax rendered on ``page`` in headless Chromium with every
    host name unresolvable and an unreachable proxy: no network."""
    result = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--proxy-server=127.0.0.1:9",
            "--virtual-time-budget=20000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result.stdout.count("<mjx-container")


@pytest.mark.slow
@pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium: apt-get install chromium (docs/testing.md)",
)
def test_the_estimators_page_shows_its_formulas_with_the_network_off(
    site, tmp_path
):
    page = site / "estimators.html"
    html = page.read_text(encoding="utf-8")
    formulas = html.count('class="math notranslate nohighlight"')
    assert formulas > 50
    # every formula a reader sees is typeset: none left as raw \( ... \)
    assert rendered_formulas(page) == formulas
    # the same page loading MathJax from its CDN shows none offline (written
    # outside the site, which the other tests read)
    cdn = tmp_path / "estimators-cdn.html"
    cdn.write_text(
        html.replace(
            f'src="{MATHJAX}"',
            'src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"',
        ),
        encoding="utf-8",
    )
    assert rendered_formulas(cdn) == 0


def test_no_page_holds_a_control_character():
    # a LaTeX command written through a Python string loses its backslash:
    # "\top" becomes a tab and "op", "\nabla" a line break and "abla"
    pages = [
        os.path.join(ROOT, "README.md"),
        os.path.join(ROOT, "CHANGELOG.md"),
    ]
    for folder, _, files in os.walk(DOCS):
        pages += [os.path.join(folder, f) for f in files if f.endswith(".md")]
    for path in pages:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        assert not re.search(r"[\x00-\x09\x0b-\x1f]", text), path
        assert not re.search(r"^(abla|op|rac|eta)\b", text, re.M), path
