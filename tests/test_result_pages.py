"""The committed results pages are what their scripts render from the
committed results files.

Each page in ``docs/`` that a benchmark script writes holds a generated
block; rendering that page's JSON with the script's renderer must give the
block exactly, so a number edited on the page, or a results file changed
without re-rendering, fails here. README.md's *Choosing a weighting* table
is checked the same way (when the README has its markers). The pages also
name no local directory.
"""

import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import configurations  # noqa: E402
import harness  # noqa: E402
import probe_variance  # noqa: E402
import spaced_samples  # noqa: E402
import weightings  # noqa: E402

#: Page, results file, the script that writes it, and its renderer.
PAGES = [
    (f"{name}.md", f"{name}.json", script, configurations.render)
    for name, script in (
        ("benchmarks", "overhead.py"),
        ("benchmarks-gpu", "overhead.py"),
        ("step-time", "step_time.py"),
        ("step-time-gpu", "step_time.py"),
    )
] + [
    ("spaced-samples.md", "spaced-samples.json", "spaced_samples.py", None),
    ("weightings.md", "weightings.json", "weightings.py", None),
    *(
        (f"{name}.md", f"{name}.json", "weightings.py", None)
        for name in (
            "rayleigh-study/weightings",
            "rayleigh-study/conditions/weightings",
            "rayleigh-study/long/weightings",
            "rayleigh-study/band/weightings",
            "rayleigh-study/band-earlier/all/weightings",
            "rayleigh-study/band-earlier/no-initial/weightings",
        )
    ),
    *(
        (f"{name}.md", f"{name}.json", "step_time.py", configurations.render)
        for name in (
            "rayleigh-study/step-time",
            "rayleigh-study/band/step-time",
        )
    ),
    (
        "estimators.md",
        "probe-variance.json",
        "probe_variance.py",
        lambda document, page: probe_variance.render(document),
    ),
]


def render(page, document, renderer):
    """The block the page's script renders from ``document``."""
    if renderer is not None:
        return renderer(document, os.path.join(DOCS, page))
    module = spaced_samples if page.startswith("spaced") else weightings
    return module.render(document)


@pytest.mark.parametrize("page, results, script, renderer", PAGES)
def test_page_is_rendered_from_its_results(page, results, script, renderer):
    document = harness.read_json(os.path.join(DOCS, results))
    assert document["script"] == script
    block = harness.page_block(os.path.join(DOCS, page), script)
    assert block is not None, f"{page} has no block of {script}"
    assert block == render(page, document, renderer)


@pytest.mark.parametrize("page, results, script, renderer", PAGES)
def test_page_states_provenance_without_local_paths(
    page, results, script, renderer
):
    block = harness.page_block(os.path.join(DOCS, page), script)
    for field in ("Command", "Date", "Hardware", "Versions", "Load"):
        assert f"- {field}: " in block, (page, field)
    assert not re.search(r"(?<![\w.])/(work|tmp|root|home|Users)/", block)
    assert "lent" not in block and "development machine" not in block


def test_readme_table_is_rendered_from_the_weightings_results():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    begin, end = weightings.README_MARKERS
    assert begin in readme and end in readme, "README.md lost its table block"
    block = harness.read_block(os.path.join(ROOT, "README.md"), begin, end)
    # the block links the page whose results it renders
    page = re.findall(r"\[(docs/[\w/.-]+\.md)\]", block)[-1]
    results = os.path.join(ROOT, os.path.dirname(page), "weightings.json")
    document = harness.read_json(results)
    assert block == weightings.readme_table(document, page)


def test_an_edited_number_is_caught(tmp_path):
    # The check above compares whole blocks: one changed digit fails it.
    document = harness.read_json(os.path.join(DOCS, "step-time.json"))
    block = configurations.render(document, os.path.join(DOCS, "x.md"))
    document["rows"][0]["time"][0] += 0.1
    assert configurations.render(document, str(tmp_path / "x.md")) != block
