"""The problem suite page's section on the default's rejected samples
(issue #54): per setting, seed 0 of ``SketchNTKWeighting()`` with the code
that counts its proposals not used, beside the half's own run of that seed
(``suite_page.py`` renders the page)."""

from pina_ntk.integration.reports import ESTIMATE_REJECTIONS

from benchmarks import harness
from benchmarks.suite import inverse_measures as measures
from benchmarks.suite import suite_protocol as protocol
from benchmarks.suite.weightings_setup import INVERSE, key

#: The default's rejected estimates, seed 0 of every setting with the code
#: that counts them (issue #54): per half, its results' key.
CENSUS = "rejections/{half}"


def census_section(documents):
    """The default's proposals and rejected estimates per setting (seed 0,
    the code that counts them), and its error beside the half's own run of
    that seed: where the code that isolates drowned blocks changed the run
    and where it did not."""
    rows = []
    for half in protocol.HALVES:
        census = documents.get(CENSUS.format(half=half))
        if census is None or half not in documents:
            continue
        own = {key(r): r for r in protocol.current(documents[half]["runs"])}
        for run in protocol.current(census["runs"]):
            found, earlier = run["rejections"], own.get(key(run))
            bad = sum(found[k] for k in ESTIMATE_REJECTIONS)
            same = (
                earlier
                and earlier["history"]["errors"] == run["history"]["errors"]
            )
            rows.append(
                [
                    half,
                    run["problem"],
                    found["proposals"],
                    bad,
                    found["safeguard"],
                    ", ".join(found["isolated"]) or "—",
                    measures.census_error(run, INVERSE),
                    measures.census_error(earlier, INVERSE) if earlier else "—",
                    "yes" if same else "no",
                ]
            )
    if not rows:
        return []
    what = "an inverse setting's final parameter error, after its error"
    inverse = any(row[1] in INVERSE for row in rows)
    note = [measures.note(["(parameter: …)"], what), ""] if inverse else []
    header = ["half", "setting", "proposals", "rejected estimates"]
    header += ["rejected by the safeguard", "isolated blocks", "error"]
    header += ["error of the half's run", "the same run to the bit"]
    return [
        "## Rejected samples",
        "",
        "`SketchNTKWeighting()` on every setting, seed 0, with the code that "
        "counts each proposal of weights not used and sketches a block on "
        "its own once its averaged estimate turns negative (isolated); "
        "before, such a block's proposals were rejected and the previous "
        "weights kept. The error beside that of the half's run of the same "
        "seed, which the tables above use (the runs: `suite/rejections/`); "
        "a run without an isolated block can differ where the half's run "
        "was made by an earlier version of the library (the dates are in "
        "the provenance), and a setting with one may have been run again "
        "(its runs page lists the runs superseded, with the reason):",
        "",
        *harness.markdown_table(header, rows),
        "",
        *note,
    ]
