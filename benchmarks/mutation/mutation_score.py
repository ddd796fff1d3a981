"""``mutmut`` on a layer of ``pina_ntk`` (or ``--module``) in a copy with
:data:`LAYERS`' ``[tool.mutmut]``, ``build/mutation/<layer>``; the statuses
merged into ``docs/mutation-testing.json``; each module's score, ``(killed
+ timed out) / (mutants - equivalent)``, in ``docs/mutation-testing.md``::

    python benchmarks/mutation/mutation_score.py --layer core  # 6 min, 2 cores
    python benchmarks/mutation/mutation_score.py --layer integration \
        --module callback
    python benchmarks/mutation/mutation_score.py \
        --from-json docs/mutation-testing.json
    python benchmarks/mutation/mutation_score.py --quick  # no mutmut run
"""

import argparse
import collections
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness
from benchmarks.harness import ROOT

SCRIPT = "mutation/mutation_score.py"
RESULTS = os.path.join(harness.ROOT, "docs", "mutation-testing.json")
PAGE = os.path.join(harness.ROOT, "docs", "mutation-testing.md")
EQUIVALENTS = os.path.join(harness.ROOT, "docs", "mutation-equivalents.md")
#: Detected: a test failed, or the tests ran past mutmut's time limit.
DETECTED = ("killed", "timeout")
#: The counts of :func:`summary`, in the page's column order.
COUNTS = (
    "mutants",
    "detected",
    "timeout",
    "equivalent",
    "survived",
    "untested",
)
#: Per layer: the modules mutated, the tests run against them (for each
#: mutant mutmut runs those that call its function; not the ``slow``
#: trainings, which would make a mutant take minutes), the target share of
#: the non-equivalent mutants killed. The size test is left out: it
#: measures the source, which mutmut's copy inflates with its trampolines.
SIZE_TEST = "tests/core/test_layers.py::test_no_module_or_class_is_larger_"
SIZE_TEST += "than_the_architecture_page_allows"
LAYERS = {
    "core": (
        ["pina_ntk/core/*"],
        ["tests/core", "--deselect", SIZE_TEST],
        0.95,
    ),
    "integration": (
        ["pina_ntk/integration/*"],
        ["tests/integration", "-m", "not slow"],
        0.90,
    ),
}


def scratch_project(layer):
    """:return: ``build/mutation/<layer>``: the package, tests, docs, the
    benchmarks (tests import them) and ``pyproject.toml`` (the layer's
    ``[tool.mutmut]``) copied afresh; ``mutants/`` of earlier runs kept."""
    scratch = f"{ROOT}/build/mutation/{layer}"
    mutate, tests, _ = LAYERS[layer]
    for name in ("pina_ntk", "tests", "docs", "benchmarks"):
        shutil.rmtree(f"{scratch}/{name}", ignore_errors=True)
        shutil.copytree(f"{ROOT}/{name}", f"{scratch}/{name}")
    text = Path(ROOT, "pyproject.toml").read_text().split("[tool.mutmut]")[0]
    Path(scratch, "pyproject.toml").write_text(
        f"{text}[tool.mutmut]\nsource_paths = ['pina_ntk/']\nalso_copy = "
        f"['docs/', 'benchmarks/']\nonly_mutate = {mutate}\n"
        f"pytest_add_cli_args_test_selection = {tests}\n"
    )
    return scratch


def sources(scope):
    """:return: ``{module: SHA-256 of its source}`` in ``scope``."""
    folder = Path(ROOT, *scope.split(".")[:2])
    found = {f"pina_ntk.{folder.name}.{p.stem}": p for p in folder.glob("*.py")}
    return {
        m: hashlib.sha256(p.read_bytes()).hexdigest()
        for m, p in found.items()
        if f"{m}.".startswith(f"{scope}.")
    }


def mutant_statuses(folder):
    """:return: ``{mutant: status}`` of the last ``mutmut run`` there."""
    listing = subprocess.check_output(
        ["mutmut", "results", "--all", "true"],
        cwd=folder,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = (line.strip().rpartition(": ") for line in listing.splitlines())
    return {name: status for name, _, status in lines if name}


def equivalent_mutants(path=EQUIVALENTS):
    """:return: The mutants in the first column of the page's table."""
    text = Path(path).read_text(encoding="utf-8")
    return re.findall(r"^\| `([^`]+)` \|", text, re.MULTILINE)


def summary(statuses, equivalent):
    """:return: ``modules``: per module and layer, the :data:`COUNTS`
    (``detected`` includes ``timeout``; ``equivalent``: undetected, listed)
    and ``score``; ``open``: the other undetected; ``stale``: listed ones
    detected or gone."""
    listed, open_mutants = set(equivalent), []
    rows = collections.defaultdict(collections.Counter)
    for name, status in sorted(statuses.items()):
        counts = rows[name.rsplit(".", 1)[0]]
        counts["mutants"] += 1
        counts["timeout"] += status == "timeout"
        if status in DETECTED:
            counts["detected"] += 1
        elif name in listed:
            counts["equivalent"] += 1
        else:
            counts["untested" if status == "no tests" else "survived"] += 1
            open_mutants.append(f"{name}: {status}")
    for layer in LAYERS:
        found = [c for m, c in rows.items() if m.split(".")[1] == layer]
        rows[f"pina_ntk.{layer}"] = sum(found, collections.Counter())
    table = {}
    for module, counts in rows.items():
        counted = counts["mutants"] - counts["equivalent"]
        table[module] = {key: counts[key] for key in COUNTS}
        table[module]["score"] = counts["detected"] / counted if counted else 1
    stale = sorted(n for n in listed if statuses.get(n) in DETECTED)
    stale += sorted(n for n in listed if n not in statuses)
    return {"modules": table, "open": open_mutants, "stale": stale}


def render(document):
    """:return: The page's generated block, from the results alone: each
    module's counts, score and target, the part (run) that made them, and
    whether it mutated the modules' present source."""
    result = summary(document["statuses"], document["equivalent"])
    modules, rows, parts = result["modules"], [], document["parts"]
    judged = {m: h for p in parts for m, h in p.get("sources", {}).items()}
    present = {**sources("pina_ntk.core"), **sources("pina_ntk.integration")}
    for m in sorted(m for m in modules if modules[m]["mutants"]):
        layer = m.split(".")[1]
        target = LAYERS[layer][2]
        score = modules[m]["score"]
        whole = m == f"pina_ntk.{layer}"
        scopes = [p["scope"] for p in parts]
        runs = [
            str(i + 1)
            for i, s in enumerate(scopes)
            if f"{m}.".startswith(f"{s}.") or f"{s}.".startswith(f"{m}.")
        ]
        current = all(
            judged.get(k) == present.get(k, "gone")
            for k in modules
            if k.count(".") == 2 and f"{k}.".startswith(f"{m}.")
        )
        meets = "meets" if score >= target else "**misses**"
        rows.append(
            [
                f"**{layer}**" if whole else f"`{m}`",
                *(modules[m][key] for key in COUNTS),
                f"{100 * score:.1f} %",
                f"{100 * target:.0f} %: {meets}",
                ", ".join(runs),
                "yes" if current else "**no**",
            ]
        )
    header = ["module", "mutants", "killed", *COUNTS[2:], "score", "target"]
    header += ["part", "present code"]
    lines = harness.parts_lines(document, lambda i, p: f"`{p['scope']}`")
    lines += harness.markdown_table(header, rows)
    lines += [
        "",
        "Killed counts timeouts (a mutant that makes the tests hang); "
        "untested: no test of the layer reaches the mutated function.",
        "",
    ]
    for layer, (paths, _, _) in LAYERS.items():  # a module not run
        files = sorted(Path(ROOT, paths[0]).parent.glob("[!_]*.py"))
        absent = [
            f"`{f.stem}`"
            for f in files
            if f"pina_ntk.{layer}.{f.stem}" not in modules
        ]
        if absent:
            lines += [
                f"Modules of `pina_ntk.{layer}` with no mutant in the "
                f"results (not run yet, or nothing to mutate): "
                f"{', '.join(absent)}.",
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
    """Run mutmut on a layer or module, merge its statuses, write the page."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--layer", choices=LAYERS, default="core", help="default core")
    add("--module", help="one module of the layer (default: all)")
    add("--workers", type=int, default=2, help="mutmut's --max-children")
    add("--from-json", metavar="JSON", help="render the page from this file")
    text = "keep the last run's map of which tests call which function "
    text += "(only when no function of the package changed since)"
    add("--keep-stats", action="store_true", help=text)
    text = "a smoke run in seconds: no mutmut run (a layer takes minutes); "
    text += "the committed statuses scored again, the results and page "
    text += "written to a new temporary folder"
    add("--quick", action="store_true", help=text)
    args = parser.parse_args(argv)
    results, page = (harness.quick_path(args, p) for p in (RESULTS, PAGE))
    if args.from_json:
        document = harness.read_json(args.from_json)
    elif args.quick:
        document = harness.read_json(RESULTS)
        document["equivalent"] = equivalent_mutants()
        harness.write_json(results, document)
    else:
        started, scope = time.perf_counter(), f"pina_ntk.{args.layer}"
        scope += f".{args.module}" if args.module else ""
        shown = sys.argv[1:] if argv is None else argv
        part = harness.provenance(SCRIPT, shown, workers=args.workers)
        part["sources"] = sources(scope)
        scratch = scratch_project(args.layer)
        if not args.module:  # a whole layer from scratch: its own run time
            shutil.rmtree(f"{scratch}/mutants", ignore_errors=True)
        if not args.keep_stats:
            # which tests call which function, afresh: mutmut adds only new
            # tests to a kept map, not functions it could not mutate before
            stats = Path(scratch, "mutants", "mutmut-stats.json")
            stats.unlink(missing_ok=True)
        command = ["mutmut", "run", "--max-children", str(args.workers)]
        command += [f"{scope}.*"] if args.module else []
        subprocess.run(command, cwd=scratch, check=True)
        part = dict(harness.finish(part, started), scope=scope)
        found = {
            k: v
            for k, v in mutant_statuses(scratch).items()
            if k.startswith(scope + ".")
        }
        document, ours = harness.read_json(RESULTS), scope + "."
        parts = [
            p
            for p in document["parts"]
            if not (p["scope"] + ".").startswith(ours)
        ]
        statuses = {**document["statuses"], **found}
        statuses = {
            k: v
            for k, v in statuses.items()
            if not k.startswith(ours) or k in found
        }
        document.update(parts=parts + [part], statuses=statuses)
        document["equivalent"] = equivalent_mutants()
        harness.write_json(results, document)
    harness.write_page(page, SCRIPT, render(document), "Mutation testing")
    print(harness.page_block(page, SCRIPT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
