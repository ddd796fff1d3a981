"""The mutation score of ``pina_ntk/core/`` under ``tests/core`` alone.

Runs ``mutmut`` (configured in ``pyproject.toml``: every module of
``pina_ntk/core/`` mutated, ``tests/core`` run against each mutant), reads
the status of every mutant, and writes ``docs/mutation-testing.json`` and
the generated block of ``docs/mutation-testing.md``. The mutants that
survive yet compute the same result on every valid input are listed, with
the reason, by people in ``docs/mutation-equivalents.md``; the score leaves
them out::

    score = (killed + timed out) / (mutants - equivalent)

    python benchmarks/mutation_score.py              # about 6 min, 2 cores
    python benchmarks/mutation_score.py --no-run     # the last run's statuses
    python benchmarks/mutation_score.py --from-json docs/mutation-testing.json
"""

import argparse
import collections
import glob
import os
import re
import subprocess
import sys
import time

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SCRIPT = "mutation_score.py"
RESULTS = os.path.join(harness.ROOT, "docs", "mutation-testing.json")
PAGE = os.path.join(harness.ROOT, "docs", "mutation-testing.md")
EQUIVALENTS = os.path.join(harness.ROOT, "docs", "mutation-equivalents.md")
#: The statuses that count as detected: a test failed, or the mutant made
#: the tests run past mutmut's time limit.
DETECTED = ("killed", "timeout")
#: The counts of :func:`summary`, in the page's column order.
COUNTS = ("mutants", "detected", "equivalent", "survived", "untested")
#: The target: killed among the non-equivalent mutants.
TARGET = 0.90


def mutant_statuses(cwd=harness.ROOT):
    """``{mutant: status}`` of the last ``mutmut run`` in ``cwd``."""
    listing = subprocess.run(
        ["mutmut", "results", "--all", "true"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    statuses = {}
    for line in listing.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name:
            statuses[name] = status
    return statuses


def equivalent_mutants(path=EQUIVALENTS):
    """The mutants named in the first column of the equivalents page's
    table (a name in backquotes)."""
    with open(path, encoding="utf-8") as handle:
        return re.findall(r"^\| `([^`]+)` \|", handle.read(), re.MULTILINE)


def module_of(mutant):
    """``pina_ntk.core.weights`` of ``pina_ntk.core.weights.x_f__mutmut_3``."""
    return mutant.rsplit(".", 1)[0]


def summary(statuses, equivalent):
    """
    Counts per module and in all: ``mutants``, ``detected``, ``equivalent``
    (surviving mutants listed as equivalent), ``survived`` and ``untested``
    (the others), ``score``; and the names of the mutants still counted as
    surviving or untested, and of listed equivalents that no longer survive.

    :param dict statuses: ``{mutant: mutmut status}``.
    :param list equivalent: Mutants listed as equivalent.
    :rtype: dict
    """
    listed = set(equivalent)
    rows = collections.defaultdict(collections.Counter)
    open_mutants = []
    for name, status in sorted(statuses.items()):
        counts = rows[module_of(name)]
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
    """The page's generated block, from the results document alone."""
    result = summary(document["statuses"], document["equivalent"])
    modules = result["modules"]
    order = sorted(m for m in modules if m != "all") + ["all"]
    rows = [
        [
            f"`{m}`" if m != "all" else "**all**",
            *(modules[m][key] for key in COUNTS),
            f"{100 * modules[m]['score']:.1f} %",
        ]
        for m in order
    ]
    score = modules["all"]["score"]
    verdict = "meets" if score >= TARGET else "misses"
    lines = [*harness.parts_lines(document, lambda i, p: p["date"])]
    lines += harness.markdown_table(
        [
            "module",
            "mutants",
            "killed",
            "equivalent",
            "survived",
            "untested",
            "score",
        ],
        "lrrrrrr",
        rows,
    )
    lines += [
        "",
        f"Score: {100 * score:.1f} % of the non-equivalent mutants killed "
        f"by `tests/core` alone; it {verdict} the target of "
        f"{100 * TARGET:.0f} %. Killed counts timeouts (a mutant that makes "
        "the tests hang); untested: no core test reaches the mutated line.",
        "",
    ]
    if result["open"]:
        lines += ["Mutants not killed and not listed as equivalent:", ""]
        lines += [f"- `{entry}`" for entry in result["open"]] + [""]
    if result["stale"]:
        lines += ["Listed as equivalent, but killed or gone:", ""]
        lines += [f"- `{name}`" for name in result["stale"]] + [""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--workers", type=int, default=2, help="mutmut's --max-children"
    )
    parser.add_argument(
        "--no-run",
        action="store_true",
        help="read the statuses of the last mutmut run; mutate nothing",
    )
    parser.add_argument(
        "--from-json", metavar="JSON", help="render the page from this file"
    )
    args = parser.parse_args(argv)
    if args.from_json:
        document = harness.read_json(args.from_json)
    else:
        started = time.perf_counter()
        part = harness.provenance(
            SCRIPT,
            sys.argv[1:] if argv is None else argv,
            workers=args.workers,
        )
        if args.no_run:
            # the statuses are those of the last run: date them by its end
            metas = glob.glob(
                os.path.join(harness.ROOT, "mutants", "**", "*.meta"),
                recursive=True,
            )
            part["date"] = time.strftime(
                "%Y-%m-%d %H:%M UTC",
                time.gmtime(max(map(os.path.getmtime, metas))),
            )
        else:
            command = ["mutmut", "run", "--max-children", str(args.workers)]
            subprocess.run(command, cwd=harness.ROOT, check=True)
            part = harness.finish(part, started)
        document = {
            "script": SCRIPT,
            "parts": [part],
            "statuses": mutant_statuses(),
            "equivalent": equivalent_mutants(),
        }
        harness.write_json(RESULTS, document)
    harness.write_page(PAGE, SCRIPT, render(document), "Mutation testing")
    print(harness.page_block(PAGE, SCRIPT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
