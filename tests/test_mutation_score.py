"""``benchmarks/mutation/mutation_score.py``: the score of a small hand-made
set of mutant statuses, counted by hand, and the equivalents page it
reads."""

import hashlib
import os
import sys
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.mutation import mutation_score  # noqa: E402

STATUSES = {
    "pina_ntk.core.a.x_f__mutmut_1": "killed",
    "pina_ntk.core.a.x_f__mutmut_2": "timeout",
    "pina_ntk.core.a.x_f__mutmut_3": "survived",  # listed as equivalent
    "pina_ntk.core.a.x_f__mutmut_4": "survived",
    "pina_ntk.core.b.xǁCǁm__mutmut_1": "no tests",
    "pina_ntk.core.b.xǁCǁm__mutmut_2": "killed",
    "pina_ntk.core.b.xǁCǁm__mutmut_3": "no tests",  # listed as equivalent
    "pina_ntk.integration.c.x_g__mutmut_1": "killed",
    "pina_ntk.integration.c.x_g__mutmut_2": "killed",
}
EQUIVALENT = [
    "pina_ntk.core.a.x_f__mutmut_3",
    "pina_ntk.core.b.xǁCǁm__mutmut_3",
    "pina_ntk.core.b.xǁCǁm__mutmut_2",  # killed: the listing is stale
    "pina_ntk.core.c.x_g__mutmut_9",  # no such mutant any more
]


def test_summary_counts_by_hand():
    result = mutation_score.summary(STATUSES, EQUIVALENT)
    modules = result["modules"]
    # module a: 4 mutants, 2 detected (killed, timeout), 1 equivalent, 1
    # survived: 2 of 3 counted; module b: 3 mutants, 1 killed, 1 listed
    # equivalent, 1 untested; the killed one listed as equivalent counts as
    # killed: 1 of 2
    a, b = modules["pina_ntk.core.a"], modules["pina_ntk.core.b"]
    assert (a["mutants"], a["detected"], a["equivalent"]) == (4, 2, 1)
    assert (a["timeout"], a["survived"], a["untested"]) == (1, 1, 0)
    assert a["score"] == pytest.approx(2 / 3)
    assert (b["mutants"], b["detected"], b["equivalent"]) == (3, 1, 1)
    assert (b["timeout"], b["survived"], b["untested"]) == (0, 0, 1)
    assert b["score"] == pytest.approx(1 / 2)
    # each layer on its own: the core's a and b, the integration's c
    core = modules["pina_ntk.core"]
    assert (core["mutants"], core["detected"], core["equivalent"]) == (7, 3, 2)
    assert core["score"] == pytest.approx(3 / 5)
    integration = modules["pina_ntk.integration"]
    assert (integration["mutants"], integration["score"]) == (2, 1.0)
    assert result["open"] == [
        "pina_ntk.core.a.x_f__mutmut_4: survived",
        "pina_ntk.core.b.xǁCǁm__mutmut_1: no tests",
    ]
    assert result["stale"] == [
        "pina_ntk.core.b.xǁCǁm__mutmut_2",
        "pina_ntk.core.c.x_g__mutmut_9",
    ]


def part(scope, date="2026-01-01 00:00 UTC"):
    command = "python benchmarks/mutation/mutation_score.py"
    return {"command": command, "date": date, "scope": scope}


def table_rows(document):
    """:return: ``{first cell: [the other cells]}`` of the rendered table
    (the last cell keeps the closing ``|``)."""
    return {
        line.split(" | ")[0][2:]: line.split(" | ")[1:]
        for line in mutation_score.render(document).splitlines()
        if line.startswith("| ")
    }


def test_render_judges_each_module_by_its_layers_target():
    document = {
        "script": "mutation/mutation_score.py",
        "parts": [part("pina_ntk.core"), part("pina_ntk.integration.c")],
        "statuses": STATUSES,
        "equivalent": EQUIVALENT,
    }
    rows = table_rows(document)
    # mutants, killed, timeout, equivalent, survived, untested, score,
    # target, the part that ran it, whether it ran on the present source
    # (no such module exists: no)
    assert rows["**core**"] == [
        "7", "3", "1", "2", "1", "1", "60.0 %", "95 %: **misses**", "1",
        "**no** |"
    ]  # fmt: skip
    assert rows["`pina_ntk.integration.c`"][-4:] == [
        "100.0 %", "90 %: meets", "2", "**no** |"
    ]  # fmt: skip
    # the core's a at 66.7 % misses 95 %; integration's c at 100 % meets 90 %
    assert rows["`pina_ntk.core.a`"][-3] == "95 %: **misses**"
    assert rows["**integration**"][-2] == "2"
    block = mutation_score.render(document)
    assert "- `pina_ntk.core.a.x_f__mutmut_4: survived`" in block


def test_a_module_is_credited_only_to_runs_of_it_or_of_its_layer():
    # `diagnostics` is a prefix of `diagnostics_callback`'s name, but a run
    # of one module is not a run of the other
    statuses = {
        "pina_ntk.integration.d.x_f__mutmut_1": "killed",
        "pina_ntk.integration.d_cb.x_f__mutmut_1": "killed",
    }
    parts = [part("pina_ntk.integration.d"), part("pina_ntk.integration.d_cb"),
             part("pina_ntk.integration")]  # fmt: skip
    document = {"script": "mutation/mutation_score.py", "parts": parts,
                "statuses": statuses, "equivalent": []}  # fmt: skip
    rows = table_rows(document)
    assert rows["`pina_ntk.integration.d`"][-2] == "1, 3"
    assert rows["`pina_ntk.integration.d_cb`"][-2] == "2, 3"
    assert rows["**integration**"][-2] == "1, 2, 3"


def test_a_module_runs_on_the_present_code_only_while_its_source_is_unchanged():
    # a part records each module's SHA-256; the page says "yes" where it is
    # the present file's, and a layer only where every module's is
    def digest(module):
        path = os.path.join(ROOT, "pina_ntk", "integration", f"{module}.py")
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()

    assert mutation_score.sources("pina_ntk.integration.callback") == {
        "pina_ntk.integration.callback": digest("callback")
    }
    layer = mutation_score.sources("pina_ntk.integration")
    assert layer["pina_ntk.integration.recording"] == digest("recording")
    assert "pina_ntk.core.checks" not in layer
    statuses = {f"pina_ntk.integration.{m}.x_f__mutmut_1": "killed"
                for m in ("callback", "recording")}  # fmt: skip
    runs = [dict(part(f"pina_ntk.integration.{m}"),
                 sources={f"pina_ntk.integration.{m}": h})
            for m, h in (("callback", digest("callback")),
                         ("recording", digest("callback")))]  # fmt: skip
    document = {"script": "mutation/mutation_score.py", "parts": runs,
                "statuses": statuses, "equivalent": []}  # fmt: skip
    rows = table_rows(document)
    assert rows["`pina_ntk.integration.callback`"][-1] == "yes |"
    assert rows["`pina_ntk.integration.recording`"][-1] == "**no** |"
    assert rows["**integration**"][-1] == "**no** |"
    # a later run of recording on its present source
    runs.append(dict(part("pina_ntk.integration.recording"),
                     sources={"pina_ntk.integration.recording":
                              digest("recording")}))  # fmt: skip
    rendered = mutation_score.render(document)
    assert "| **integration** |" in rendered
    assert all(line.endswith("| yes |") for line in rendered.splitlines()
               if line.startswith("| **integration**")
               or line.startswith("| `pina_ntk"))  # fmt: skip


def test_render_names_each_layers_modules_without_results():
    # the integration layer's real modules against a run of callback only
    document = {
        "script": "mutation/mutation_score.py",
        "parts": [part("pina_ntk.integration.callback")],
        "statuses": {"pina_ntk.integration.callback.x_f__mutmut_1": "killed"},
        "equivalent": [],
    }
    lines = mutation_score.render(document).splitlines()
    found = [l for l in lines if l.startswith("Modules of `pina_ntk.")]
    expected = [
        f"`{name[:-3]}`"  # in file-name order
        for name in sorted(
            os.listdir(os.path.join(ROOT, "pina_ntk", "integration"))
        )
        if name.endswith(".py") and name not in ("__init__.py", "callback.py")
    ]
    assert "`kernel_statistics`" in expected and "`callback`" not in expected
    # the core has no results at all: every one of its modules is named
    assert found[0].startswith("Modules of `pina_ntk.core` with no mutant")
    assert "`row_gradients`" in found[0] and "`estimators`" in found[0]
    assert found[1] == (
        "Modules of `pina_ntk.integration` with no mutant in the results "
        f"(not run yet, or nothing to mutate): {', '.join(expected)}."
    )


def test_a_module_run_replaces_only_that_modules_statuses_and_part(
    tmp_path, monkeypatch
):
    results = tmp_path / "results.json"
    old = {
        "script": "mutation/mutation_score.py",
        "parts": [part("pina_ntk.core"), part("pina_ntk.integration.c")],
        "statuses": dict(STATUSES),
        "equivalent": [],
    }
    mutation_score.harness.write_json(str(results), old)
    found = {
        "pina_ntk.integration.c.x_g__mutmut_1": "survived",  # made again
        "pina_ntk.integration.d.x_h__mutmut_1": "killed",  # another module
    }
    calls = []
    monkeypatch.setattr(mutation_score, "RESULTS", str(results))
    monkeypatch.setattr(mutation_score, "PAGE", str(tmp_path / "page.md"))
    monkeypatch.setattr(mutation_score, "scratch_project", lambda l: "S/" + l)
    monkeypatch.setattr(mutation_score, "mutant_statuses", lambda f: found)
    monkeypatch.setattr(
        mutation_score.subprocess, "run", lambda c, **k: calls.append((c, k))
    )
    monkeypatch.setattr(mutation_score.harness, "write_page", lambda *a: None)
    monkeypatch.setattr(mutation_score.harness, "page_block", lambda *a: "")
    argv = ["--layer", "integration", "--module", "c", "--workers", "1"]
    assert mutation_score.main(argv) == 0
    [(command, options)] = calls
    assert command == ["mutmut", "run", "--max-children", "1",
                       "pina_ntk.integration.c.*"]  # fmt: skip
    assert options["cwd"] == "S/integration"
    new = mutation_score.harness.read_json(str(results))
    # c's mutants are the new run's (mutmut_2 is gone from it); d's status
    # belongs to no run of this scope; the core's are kept
    assert {k: v for k, v in new["statuses"].items() if ".c." in k} == {
        "pina_ntk.integration.c.x_g__mutmut_1": "survived"
    }
    assert not [k for k in new["statuses"] if ".d." in k]
    core = {k: v for k, v in STATUSES.items() if k.startswith("pina_ntk.core")}
    assert {k: v for k, v in new["statuses"].items() if ".core." in k} == core
    scopes = [p["scope"] for p in new["parts"]]
    assert scopes == ["pina_ntk.core", "pina_ntk.integration.c"]
    assert new["parts"][-1]["command"].endswith("--workers 1")


def test_equivalents_page_names_only_mutants_of_the_layers(tmp_path):
    listed = mutation_score.equivalent_mutants()
    layers = tuple(f"pina_ntk.{layer}." for layer in mutation_score.LAYERS)
    assert all(name.startswith(layers) for name in listed)
    assert len(listed) == len(set(listed))
    # the parser reads the first column of table rows only
    page = tmp_path / "equivalents.md"
    page.write_text(
        "Some `pina_ntk.core.a.x_f__mutmut_1` in prose.\n\n"
        "| mutant | change | reason |\n|---|---|---|\n"
        "| `pina_ntk.core.a.x_f__mutmut_3` | `a` -> `b` | same |\n",
        encoding="utf-8",
    )
    assert mutation_score.equivalent_mutants(str(page)) == [
        "pina_ntk.core.a.x_f__mutmut_3"
    ]


def stub_mutmut_runs(tmp_path, monkeypatch, scratch_project):
    """``mutation_score.main`` on empty results in ``tmp_path``, with
    ``scratch_project`` for the scratch copy, mutmut's runs and statuses
    and the page stubbed out."""
    results = tmp_path / "results.json"
    mutation_score.harness.write_json(
        str(results),
        {"script": "mutation/mutation_score.py", "parts": [], "statuses": {},
         "equivalent": []},
    )  # fmt: skip
    monkeypatch.setattr(mutation_score, "RESULTS", str(results))
    monkeypatch.setattr(mutation_score, "scratch_project", scratch_project)
    monkeypatch.setattr(mutation_score, "mutant_statuses", lambda f: {})
    monkeypatch.setattr(mutation_score.subprocess, "run", lambda c, **k: 0)
    monkeypatch.setattr(mutation_score.harness, "write_page", lambda *a: None)
    monkeypatch.setattr(mutation_score.harness, "page_block", lambda *a: "")


def test_a_whole_layer_runs_from_scratch_and_a_module_reuses_its_copy(
    tmp_path, monkeypatch
):
    stub_mutmut_runs(tmp_path, monkeypatch, lambda l: "S/" + l)
    removed = []
    monkeypatch.setattr(
        mutation_score.shutil, "rmtree", lambda p, **k: removed.append(p)
    )
    mutation_score.main(["--layer", "integration", "--module", "callback"])
    assert removed == []  # the named mutants are made again anyway
    mutation_score.main(["--layer", "core"])
    # earlier results would stand, and the run time would be a rerun's
    assert removed == ["S/core/mutants"]


@pytest.mark.parametrize("keep", [False, True])
def test_a_module_run_maps_the_tests_afresh_unless_told_to_keep(
    tmp_path, monkeypatch, keep
):
    # mutmut adds only new tests to a kept map of which tests call which
    # function: a function it newly mutates would have none
    stats = tmp_path / "integration" / "mutants" / "mutmut-stats.json"
    stats.parent.mkdir(parents=True)
    stats.write_text("{}")
    stub_mutmut_runs(tmp_path, monkeypatch, lambda l: str(tmp_path / l))
    argv = ["--layer", "integration", "--module", "callback"]
    mutation_score.main(argv + (["--keep-stats"] if keep else []))
    assert stats.exists() == keep


def test_the_core_layer_leaves_out_the_size_test_only():
    # the size test reads the source, which mutmut's copy inflates
    _, tests, _ = mutation_score.LAYERS["core"]
    assert tests[0] == "tests/core"
    assert tests[1:] == ["--deselect", mutation_score.SIZE_TEST]
    path, name = mutation_score.SIZE_TEST.split("::")
    source = (Path(mutation_score.ROOT) / path).read_text()
    assert f"def {name}(" in source
