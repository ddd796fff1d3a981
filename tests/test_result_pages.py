"""The committed results pages are what their scripts render from the
committed results files.

Each page in ``docs/`` that a benchmark script writes holds a generated
block; rendering that page's JSON with the script's renderer must give the
block exactly, so a number edited on the page, or a results file changed
without re-rendering, fails here. README.md's *Choosing a weighting* table
is checked the same way (when the README has its markers). The pages also
name no local directory.

The checks are functions of the files' paths, so that the tests run them on
the committed files and the self-tests at the end run them on copies with
one number edited, which they must refuse.
"""

import functools
import json
import os
import re
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
sys.path.insert(0, ROOT)

from benchmarks import harness  # noqa: E402
from benchmarks.cost import configurations  # noqa: E402
from benchmarks.estimators import probe_variance  # noqa: E402
from benchmarks.estimators import spaced_samples  # noqa: E402
from benchmarks.inverse import inverse_cost  # noqa: E402
from benchmarks.inverse import inverse_logs  # noqa: E402
from benchmarks.inverse import inverse_page  # noqa: E402
from benchmarks.lbfgs import lbfgs_page  # noqa: E402
from benchmarks.multi_model import multi_model  # noqa: E402
from benchmarks.multi_model import multi_model_cost  # noqa: E402
from benchmarks.mutation import mutation_score  # noqa: E402
from benchmarks.no_harm import (  # noqa: E402
    exact_refresh_cost,
    ramp_300_cost,
    ramp_cost,
)
from benchmarks.scaling import scaling_page  # noqa: E402
from benchmarks.suite import introductory  # noqa: E402
from benchmarks.suite import suite_page  # noqa: E402
from benchmarks.suite import weightings  # noqa: E402
from benchmarks.suite import weightings_page  # noqa: E402
from benchmarks.suite import weightings_setup  # noqa: E402

#: Page, results file, the script that writes it, and its renderer.
PAGES = [
    (f"{name}.md", f"{name}.json", script, configurations.render_results)
    for name, script in (
        ("benchmarks", "cost/overhead.py"),
        ("benchmarks-gpu", "cost/overhead.py"),
        ("step-time", "cost/step_time.py"),
        ("step-time-gpu", "cost/step_time.py"),
    )
] + [
    (
        "spaced-samples.md",
        "spaced-samples.json",
        "estimators/spaced_samples.py",
        None,
    ),
    ("weightings.md", "weightings.json", "suite/weightings.py", None),
    *(
        (f"suite/{half}/weightings.md", f"suite/{half}/weightings.json")
        + ("suite/weightings.py", None)
        for half in ("tuning", "confirmation", "confirmation-2")
        + ("band-diagnosis",)
        + tuple(f"rejections/{half}" for half in suite_page.protocol.HALVES)
    ),
    *(
        (f"{name}.md", f"{name}.json", "suite/weightings.py", None)
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
        (
            f"{name}.md",
            f"{name}.json",
            "cost/step_time.py",
            configurations.render_results,
        )
        for name in (
            "rayleigh-study/step-time",
            "rayleigh-study/band/step-time",
        )
    ),
    (
        "estimators.md",
        "probe-variance.json",
        "estimators/probe_variance.py",
        lambda document, page: probe_variance.render(document),
    ),
    (
        "mutation-testing.md",
        "mutation-testing.json",
        "mutation/mutation_score.py",
        lambda document, page: mutation_score.render(document),
    ),
    (
        "lbfgs.md",
        "lbfgs.json",
        "lbfgs/lbfgs.py",
        lambda document, page: lbfgs_page.render(document),
    ),
    (
        "inverse-problems.md",
        "inverse.json",
        "inverse/inverse.py",
        lambda document, page: inverse_page.render(document),
    ),
    (
        "inverse-problems.md",
        "inverse-logs/run.json",
        "inverse/inverse_logs.py",
        lambda document, page: inverse_logs.render(
            document,
            {
                row: inverse_logs.read_log(
                    os.path.join(DOCS, "inverse-logs", f"{row}.csv")
                )
                for row in document["rows"]
            },
        ),
    ),
    (
        "inverse-problems.md",
        "inverse-cost.json",
        "inverse/inverse_cost.py",
        lambda document, page: inverse_cost.render(document),
    ),
    (
        "multi-model.md",
        "multi-model.json",
        "multi_model/multi_model.py",
        lambda document, page: multi_model.render(document),
    ),
    (
        "multi-model.md",
        "multi-model-cost.json",
        "multi_model/multi_model_cost.py",
        lambda document, page: multi_model_cost.render(document),
    ),
    (
        introductory.PAGE,
        introductory.RESULTS,
        introductory.SCRIPT,
        lambda document, page: introductory.render(document),
    ),
    # the cost studies of issue #76's weightings: one measure, one renderer
    *[
        (
            study.PAGE,
            study.JSON,
            study.SCRIPT,
            lambda document, page: ramp_cost.render(document),
        )
        for study in (ramp_cost, exact_refresh_cost, ramp_300_cost)
    ],
    (
        "scaling.md",
        "scaling.json",
        "scaling/scaling.py",
        # with the default's bookkeeping, beside the results
        lambda document, page: scaling_page.render(
            document, scaling_page.read_bookkeeping(page)
        ),
    ),
]


def render(page, document, renderer):
    """The block the page's script renders from ``document``."""
    if renderer is not None:
        return renderer(document, os.path.join(DOCS, page))
    module = spaced_samples if page.startswith("spaced") else weightings_page
    return module.render(document)


def check_page(page, results, script, renderer, docs=DOCS):
    """
    Fail unless ``page`` under ``docs`` holds, as its generated block,
    exactly what ``script`` renders from ``results`` under ``docs``; the
    renderer is given the page's place in DOCS, where its links must work.
    """
    document = harness.read_json(os.path.join(docs, results))
    assert document["script"] == script
    block = harness.page_block(os.path.join(docs, page), script)
    assert block is not None, f"{page} has no block of {script}"
    assert block == render(page, document, renderer), f"{page} has drifted"


def check_readme_table(readme, docs=DOCS):
    """
    Fail unless the README at ``readme`` holds, between its suite markers,
    the block rendered from the problem suite's results under ``docs``.
    """
    block = harness.read_block(readme, *suite_page.README_MARKERS)
    assert block is not None, "the README lost its suite block"
    assert block == suite_readme_block(docs), "table drifted"


@functools.cache
def suite_readme_block(docs):
    """The README block rendered from the suite's results under ``docs``
    (its bootstrap takes seconds: rendered once per folder)."""
    return suite_page.readme_block(suite_page.read_documents(docs))


@pytest.mark.parametrize("page, results, script, renderer", PAGES)
def test_page_is_rendered_from_its_results(page, results, script, renderer):
    check_page(page, results, script, renderer)


@pytest.mark.parametrize("page, results, script, renderer", PAGES)
def test_page_states_provenance_without_local_paths(
    page, results, script, renderer
):
    block = harness.page_block(os.path.join(DOCS, page), script)
    for field in ("Command", "Date", "Hardware", "Versions", "Load"):
        assert f"- {field}: " in block, (page, field)
    assert not re.search(r"(?<![\w.])/(work|tmp|root|home|Users)/", block)
    assert not re.search(r"\blent\b", block)
    assert "development machine" not in block


def test_readme_table_is_rendered_from_the_suite_results():
    check_readme_table(os.path.join(ROOT, "README.md"))


def test_readme_scaling_block_is_rendered_from_the_scaling_results():
    block = harness.read_block(
        os.path.join(ROOT, "README.md"), *scaling_page.README_MARKERS
    )
    document = harness.read_json(os.path.join(DOCS, "scaling.json"))
    assert block == scaling_page.readme_block(document)
    assert os.path.isfile(os.path.join(DOCS, scaling_page.FIGURE))


def test_suite_page_is_rendered_from_the_suite_results():
    block = harness.page_block(
        os.path.join(DOCS, suite_page.PAGE), suite_page.SCRIPT
    )
    documents = suite_page.read_documents(DOCS)
    assert block == suite_page.render(documents), "suite.md has drifted"
    assert os.path.isfile(os.path.join(DOCS, suite_page.FIGURE))
    for part in documents["confirmation"]["parts"]:
        assert f"- Command: `{part['command']}`" in block


def test_the_defaults_runs_are_the_shipped_default_on_every_setting():
    # the runs the decision reads as the default's are SketchNTKWeighting()
    # as the library ships it now, five seeds on every setting of both
    # confirmation halves: a change of a default without new runs fails
    from pina_ntk import SketchNTKWeighting

    documents = suite_page.read_documents(DOCS)
    default = suite_page.decision(documents)[2]
    split = suite_page.protocol.read_split()
    for half in suite_page.protocol.CONFIRMATION:
        runs = suite_page.protocol.current(documents[half]["runs"])
        runs = [r for r in runs if r["weighting"] == default]
        for entry in split[half]:
            found = {
                r["seed"] for r in runs if r["problem"] == entry["setting"]
            }
            assert found >= set(range(5)), entry["setting"]
        for run in runs:
            shipped = weightings.describe_weighting(
                SketchNTKWeighting(seed=run["seed"])
            )
            recorded = run["weighting_options"]
            if run["problem"] not in weightings_setup.INVERSE:
                # without unknowns the option changes no weight, to the bit
                # (test_inverse_kernels.py): runs made before it existed
                # are the shipped default's on a forward problem
                shipped = {
                    k: v
                    for k, v in shipped.items()
                    if k != "unknowns" or k in recorded
                }
            if "ramp_steps" not in recorded and shipped["ramp_steps"] == 0:
                # runs made before the option existed: at ramp_steps=0 the
                # weights are those of the code before it, to the bit
                # (tests/core/test_ramp.py)
                del shipped["ramp_steps"]
            assert recorded == shipped, run["problem"]


def test_the_band_diagnosis_runs_are_the_tuning_halfs_to_the_bit():
    # docs/weights.md: the diagnosis runs (4,000 steps, with traces) record
    # the errors of the tuning half's runs (3,000 steps) at every step the
    # two record, up to 3,000
    read = harness.read_json
    tuning = read(os.path.join(DOCS, "suite/tuning/weightings.json"))
    found = read(os.path.join(DOCS, "suite/band-diagnosis/weightings.json"))
    earlier = {weightings.key(r): r["history"] for r in tuning["runs"]}
    assert len(found["runs"]) == 12
    for run in found["runs"]:
        history = run["history"]
        assert history["conditions"]["traces"][-1], weightings.key(run)
        before = earlier[weightings.key(run)]
        before = dict(zip(before["steps"], before["errors"]))
        shared = [(s, e) for s, e in zip(history["steps"], history["errors"])
                  if s in before and s <= 3000]  # fmt: skip
        assert len(shared) >= 10
        assert all(before[s] == e for s, e in shared), weightings.key(run)


def test_the_readme_rows_and_divergence_counts_hold_against_the_results():
    # counted here from the results file, not through the protocol: each
    # README row's diverged runs, and the rows the README promises
    block = harness.read_block(
        os.path.join(ROOT, "README.md"), *suite_page.README_MARKERS
    )
    document = suite_page.read_documents(DOCS)["confirmation"]
    runs = suite_page.protocol.current(document["runs"])
    rows = [line for line in block.splitlines() if line.startswith("| ")][1:]
    assert len(rows) == len(suite_page.README_ROWS)
    for row, weighting in zip(rows, suite_page.README_ROWS):
        mine = [r for r in runs if r["weighting"] == weighting]
        failed = sum(r["status"] != "ok" for r in mine)
        cells = [c.strip() for c in row.strip("|").split("|")]
        expected = f"diverged on {failed} of {len(mine)} runs"
        assert cells[-1] == (expected if failed else "—"), weighting
        assert "∞" not in cells


def test_the_first_halfs_band_runs_are_the_earlier_default_made_again():
    # gradient_band=4's live runs in the first confirmation half are those
    # run as `default` (SketchNTKWeighting() when it shipped with the band,
    # made again once the band read its gradients off the training step);
    # the band's own earlier runs stay, superseded; both with one set of
    # options, the band's. On stokes, where the predictor's average of a
    # block turned negative, they were made again with the code that
    # sketches such a block on its own (issue #54).
    path = os.path.join(DOCS, "suite", "confirmation", "weightings.json")
    runs = harness.read_json(path)["runs"]
    band = [r for r in runs if r["weighting"] == "sketch_band_4"]
    live = [r for r in band if "superseded" not in r]
    again = [r for r in live if r.get("run_as") != "default"]
    # made again on their own: stokes (issue #54), and heat_inverse to
    # record its parameter error (issue #69)
    assert len(live) == 30
    assert {r["problem"] for r in again} == {"stokes", "heat_inverse"}
    for problem, issue in (("stokes", "issue #54"), ("heat_inverse", "#69")):
        mine = [r for r in again if r["problem"] == problem]
        assert sorted(r["seed"] for r in mine) == list(range(5))
        reasons = {
            r["superseded"]["reason"]
            for r in band
            if r.get("superseded", {}).get("part") == mine[0]["part"]
        }
        assert len(reasons) == 1 and issue in reasons.pop(), problem
    assert not any(r["weighting"] == "default" for r in runs)
    options = {
        json.dumps({k: v for k, v in r["weighting_options"].items()
                    if k not in ("seed", "unknowns")}, sort_keys=True)
        for r in band
    }  # fmt: skip
    assert len(options) == 1 and '"gradient_band": 4.0' in options.pop()


# The self-tests: each edit below is one the checks above exist to catch.


def copy_docs(tmp_path, *names):
    """Copies of the named files of DOCS under ``tmp_path``, in their
    folders."""
    for name in names:
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(os.path.join(DOCS, name), target)
    return tmp_path


def edit_a_table_number(path, begin, end):
    """Change one digit of the first table cell with a decimal number (or
    a count ``k / n``) between the markers of the file at ``path``."""
    text = path.read_text(encoding="utf-8")
    start = text.index(begin)
    row = re.compile(r"^\|.*?(?:\d\.(\d)|(\d) / \d)", re.MULTILINE)
    match = row.search(text, start, text.index(end, start))
    assert match, f"{path} has no table number to edit"
    group = 1 if match.group(1) is not None else 2
    digit = str((int(match.group(group)) + 1) % 10)
    path.write_text(
        text[: match.start(group)] + digit + text[match.end(group) :],
        encoding="utf-8",
    )


@pytest.mark.parametrize("page, results, script, renderer", PAGES)
def test_an_edited_page_is_caught(page, results, script, renderer, tmp_path):
    docs = copy_docs(tmp_path, page, results)
    check_page(page, results, script, renderer, docs)  # the copy passes
    begin = harness.BEGIN.format(script=script)
    edit_a_table_number(docs / page, begin, harness.END)
    with pytest.raises(AssertionError, match="has drifted"):
        check_page(page, results, script, renderer, docs)


def test_results_changed_without_a_new_page_are_caught(tmp_path):
    page, results = "step-time.md", "step-time.json"
    docs = copy_docs(tmp_path, page, results)
    check_page(page, results, "cost/step_time.py", configurations.render, docs)
    document = harness.read_json(docs / results)
    # a rerun's step time, its page not re-rendered
    document["rows"][0]["time"][0] += 0.1
    (docs / results).write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(AssertionError, match="has drifted"):
        check_page(
            page, results, "cost/step_time.py", configurations.render, docs
        )


def test_raw_step_times_not_the_stored_summary_make_the_page(tmp_path):
    page = "rayleigh-study/band/step-time.md"
    results = "rayleigh-study/band/step-time.json"
    docs = copy_docs(tmp_path, page, results)
    check = configurations.render_results
    check_page(page, results, "cost/step_time.py", check, docs)
    document = harness.read_json(docs / results)
    # a summary edited by hand is summarised anew from the raw step times
    document["targets"] = []
    (docs / results).write_text(json.dumps(document), encoding="utf-8")
    check_page(page, results, "cost/step_time.py", check, docs)
    # a raw step time changed without a new page is caught
    runs = document["raw"]["timing"]["100"][0]["runs"]
    band = next(r for r in runs if r["key"] == "predictor_band_every_10")
    band["durations"] = [1.5 * d for d in band["durations"]]
    (docs / results).write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(AssertionError, match="has drifted"):
        check_page(page, results, "cost/step_time.py", check, docs)


def test_an_edited_readme_table_is_caught(tmp_path):
    readme = tmp_path / "README.md"
    shutil.copyfile(os.path.join(ROOT, "README.md"), readme)
    check_readme_table(readme)  # the copy passes
    edit_a_table_number(readme, *suite_page.README_MARKERS)
    with pytest.raises(AssertionError, match="table drifted"):
        check_readme_table(readme)


def test_readme_introductory_block_is_rendered_from_its_results():
    block = harness.read_block(
        os.path.join(ROOT, "README.md"), *introductory.README_MARKERS
    )
    document = harness.read_json(os.path.join(DOCS, introductory.RESULTS))
    assert block == introductory.readme_block(document)


def test_the_no_harm_decision_is_rendered_from_the_results():
    from benchmarks.no_harm import no_harm_page

    block = harness.page_block(
        os.path.join(DOCS, introductory.PAGE), no_harm_page.SCRIPT
    )
    documents = suite_page.read_documents(DOCS)
    intro = harness.read_json(os.path.join(DOCS, introductory.RESULTS))
    costs = no_harm_page.read_costs(DOCS)
    assert block == no_harm_page.render(documents, intro, costs)
