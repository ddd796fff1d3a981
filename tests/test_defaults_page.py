"""docs/weights.md's *Why each default*: the table names each default of
``SketchNTKWeighting`` as the code has it, and the band's default is the
one the protocol decides on the committed confirmation runs."""

import ast
import inspect
import os
import re
import sys

import pytest

from pina_ntk import SketchNTKWeighting

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import harness  # noqa: E402
from benchmarks.inverse import inverse_page  # noqa: E402
from benchmarks.suite import suite_page  # noqa: E402

PAGE = os.path.join(ROOT, "docs", "weights.md")
#: The candidate of the suite that each value of ``gradient_band`` is.
CANDIDATE = {4.0: "sketch_band_4", None: "sketch_predictor"}


def documented_defaults(text):
    """``{option: value}`` of the *Why each default* table."""
    section = text[text.index("## Why each default") :]
    section = section[: section.index("\n## ", 1)]
    rows = re.findall(r"^\| `(\w+)` \| `([^`]+)` \|", section, re.M)
    return {option: ast.literal_eval(value) for option, value in rows}


def check_defaults(documented):
    signature = inspect.signature(SketchNTKWeighting).parameters
    assert documented, "the table lost its rows"
    for option, value in documented.items():
        assert signature[option].default == value, option


def test_the_table_holds_the_code_defaults():
    with open(PAGE, encoding="utf-8") as handle:
        documented = documented_defaults(handle.read())
    assert set(documented) == {
        "gradient_band",
        "sample_every_n_steps",
        "estimator",
        "statistic",
        "safeguard",
        "unknowns",
    }
    check_defaults(documented)


def test_the_band_default_is_the_protocols_decision():
    # on both confirmation halves together, by the protocol's rule
    documents = suite_page.read_documents(os.path.join(ROOT, "docs"))
    assert {"confirmation", "confirmation-2"} <= set(documents)
    band = inspect.signature(SketchNTKWeighting).parameters["gradient_band"]
    assert CANDIDATE[band.default] == suite_page.decision(documents)[2]


def test_a_drifted_table_is_caught():
    with pytest.raises(AssertionError, match="sample_every_n_steps"):
        check_defaults({"sample_every_n_steps": 5})


def test_the_unknowns_default_is_the_inverse_studys_decision():
    # docs/inverse.json: the study's rule, fixed before its run, chooses
    # the row run as SketchNTKWeighting() with today's unknowns default
    document = harness.read_json(os.path.join(ROOT, "docs", "inverse.json"))
    default = inspect.signature(SketchNTKWeighting).parameters["unknowns"]
    shipped = [r for r in document["runs"] if r["weighting"] == "default"]
    assert shipped
    for record in shipped:
        assert record["weighting_options"]["unknowns"] == default.default
    assert inverse_page.decision(document)[1] == "default"
