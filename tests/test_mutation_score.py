"""``benchmarks/mutation_score.py``: the score of a small hand-made set of
mutant statuses, counted by hand, and the equivalents page it reads."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import mutation_score  # noqa: E402

STATUSES = {
    "pina_ntk.core.a.x_f__mutmut_1": "killed",
    "pina_ntk.core.a.x_f__mutmut_2": "timeout",
    "pina_ntk.core.a.x_f__mutmut_3": "survived",  # listed as equivalent
    "pina_ntk.core.a.x_f__mutmut_4": "survived",
    "pina_ntk.core.b.xǁCǁm__mutmut_1": "no tests",
    "pina_ntk.core.b.xǁCǁm__mutmut_2": "killed",
    "pina_ntk.core.b.xǁCǁm__mutmut_3": "no tests",  # listed as equivalent
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
    assert (a["survived"], a["untested"]) == (1, 0)
    assert a["score"] == pytest.approx(2 / 3)
    assert (b["mutants"], b["detected"], b["equivalent"]) == (3, 1, 1)
    assert (b["survived"], b["untested"]) == (0, 1)
    assert b["score"] == pytest.approx(1 / 2)
    total = modules["all"]
    assert (total["mutants"], total["detected"], total["equivalent"]) == (
        7,
        3,
        2,
    )
    assert total["score"] == pytest.approx(3 / 5)
    assert result["open"] == [
        "pina_ntk.core.a.x_f__mutmut_4: survived",
        "pina_ntk.core.b.xǁCǁm__mutmut_1: no tests",
    ]
    assert result["stale"] == [
        "pina_ntk.core.b.xǁCǁm__mutmut_2",
        "pina_ntk.core.c.x_g__mutmut_9",
    ]


def test_render_states_the_score_and_the_open_mutants():
    document = {
        "script": "mutation_score.py",
        "parts": [
            {
                "command": "python benchmarks/mutation_score.py",
                "date": "2026-01-01 00:00 UTC",
            }
        ],
        "statuses": STATUSES,
        "equivalent": EQUIVALENT,
    }
    block = mutation_score.render(document)
    assert "| **all** | 7 | 3 | 2 | 1 | 1 | 60.0 % |" in block
    assert "it misses the target of 90 %" in block
    assert "- `pina_ntk.core.a.x_f__mutmut_4: survived`" in block
    # a module at 100 %: every counted mutant killed
    done = dict(document, statuses={"pina_ntk.core.a.x_f__mutmut_1": "killed"})
    assert "it meets the target" in mutation_score.render(done)


def test_equivalents_page_names_only_mutants_of_the_core(tmp_path):
    listed = mutation_score.equivalent_mutants()
    assert all(name.startswith("pina_ntk.core.") for name in listed)
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
