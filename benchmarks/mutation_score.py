"""The mutation score of ``pina_ntk/core/`` under ``tests/core`` alone.

Runs ``mutmut`` (see ``pyproject.toml``) and writes every mutant's status to
``docs/mutation-testing.json`` and the score, ``(killed + timed out) /
(mutants - equivalent)`` with the equivalents people list in
``docs/mutation-equivalents.md``, to ``docs/mutation-testing.md``::

    python benchmarks/mutation_score.py              # about 6 min, 2 cores
    python benchmarks/mutation_score.py --from-json docs/mutation-testing.json
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import time

import harness

SCRIPT = "mutation_score.py"
RESULTS = os.path.join(harness.ROOT, "docs", "mutation-testing.json")
PAGE = os.path.join(harness.ROOT, "docs", "mutation-testing.md")
EQUIVALENTS = os.path.join(harness.ROOT, "docs", "mutation-equivalents.md")
#: Detected: a test failed, or the tests ran past mutmut's time limit.
DETECTED = ("killed", "timeout")
#: The counts of :func:`summary`, in the page's column order.
COUNTS = ("mutants", "detected", "equivalent", "survived", "untested")
#: The target: killed among the non-equivalent mutants.
TARGET = 0.90


def mutant_statuses():
    """:return: ``{mutant: status}`` of the last ``mutmut run``."""
    command = ["mutmut", "results", "--all", "true"]
    listing = subprocess.check_output(
        command, cwd=harness.ROOT, stderr=subprocess.PIPE, text=True
    )
    lines = (line.strip().rpartition(": ") for line in listing.splitlines())
    return {name: status for name, _, status in lines if name}


def equivalent_mutants(path=EQUIVALENTS):
    """:return: The mutants in the first column of the page's table."""
    with open(path, encoding="utf-8") as handle:
        return re.findall(r"^\| `([^`]+)` \|", handle.read(), re.MULTILINE)


def summary(statuses, equivalent):
    """:return: ``modules``: per module and ``all``, the :data:`COUNTS`
    (``equivalent``: undetected but listed in ``equivalent``; ``untested``,
    ``survived``: the other undetected) and ``score``; ``open``: the other
    undetected mutants; ``stale``: listed ones detected or gone."""
    listed, open_mutants = set(equivalent), []
    rows = collections.defaultdict(collections.Counter)
    for name, status in sorted(statuses.items()):
        counts = rows[name.rsplit(".", 1)[0]]
        counts["mutants"] += 1
        if status in DETECTED:
            counts["detected"] += 1
        elif name in listed:
            counts["equivalent"] += 1
        else:
            counts["untested" if status == "no tests" else "survived"] += 1
            open_mutants.append(f"{name}: {status}")
    rows["all"] = sum(rows.values(), collections.Counter())
    table = {}
    for module, counts in rows.items():
        counted = counts["mutants"] - counts["equivalent"]
        table[module] = {key: counts[key] for key in COUNTS}
        table[module]["score"] = counts["detected"] / counted if counted else 1
    stale = sorted(n for n in listed if statuses.get(n) in DETECTED)
    stale += sorted(n for n in listed if n not in statuses)
    return {"modules": table, "open": open_mutants, "stale": stale}


def render(document):
    """:return: The page's generated block, from the results alone."""
    result = summary(document["statuses"], document["equivalent"])
    modules, rows = result["modules"], []
    score = modules["all"]["score"]
    for m in sorted(m for m in modules if m != "all") + ["all"]:
        name = f"`{m}`" if m != "all" else "**all**"
        counts = [modules[m][key] for key in COUNTS]
        rows.append([name, *counts, f"{100 * modules[m]['score']:.1f} %"])
    header = ["module", "mutants", "killed", *COUNTS[2:], "score"]
    lines = harness.parts_lines(document, lambda i, p: p["date"])
    lines += harness.markdown_table(header, rows)
    lines += [
        "",
        f"Score: {100 * score:.1f} % of the non-equivalent mutants killed "
        "by `tests/core` alone; it "
        f"{'meets' if score >= TARGET else 'misses'} the target of "
        f"{100 * TARGET:.0f} %. Killed counts timeouts (a mutant that makes "
        "the tests hang); untested: no core test reaches the mutated line.",
        "",
    ]
    for title, names in (
        ("Mutants not killed and not listed as equivalent:", result["open"]),
        ("Listed as equivalent, but killed or gone:", result["stale"]),
    ):
        if names:
            lines += [title, "", *(f"- `{name}`" for name in names), ""]
    return "\n".join(lines)


def main(argv=None):
    """Run mutmut, write the results file and the page."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--workers", type=int, default=2, help="mutmut's --max-children")
    add("--from-json", metavar="JSON", help="render the page from this file")
    args = parser.parse_args(argv)
    if args.from_json:
        document = harness.read_json(args.from_json)
    else:
        started = time.perf_counter()
        shown = sys.argv[1:] if argv is None else argv
        part = harness.provenance(SCRIPT, shown, workers=args.workers)
        command = ["mutmut", "run", "--max-children", str(args.workers)]
        subprocess.run(command, cwd=harness.ROOT, check=True)
        part = harness.finish(part, started)
        document = dict(script=SCRIPT, parts=[part], statuses=mutant_statuses())
        document["equivalent"] = equivalent_mutants()
        harness.write_json(RESULTS, document)
    harness.write_page(PAGE, SCRIPT, render(document), "Mutation testing")
    print(harness.page_block(PAGE, SCRIPT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
