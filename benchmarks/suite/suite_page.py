"""The problem suite's page: the default the protocol decides on the
confirmation halves together (``suite_protocol.decide``), each half's
summary, step costs and error ratios per problem, and a figure of the
first confirmation half's ratios, seeds as dots; with ``--readme``
README.md's *Choosing a weighting* block. Every sentence that compares
weightings is rendered from the summary.

    python benchmarks/suite/weightings.py --half confirmation \\
        --output-dir docs/suite/confirmation         # the runs
    python benchmarks/suite/weightings.py --step-costs 3 \\
        --output-dir docs/suite/confirmation --workers 1  # equal time
    python benchmarks/suite/suite_page.py --readme   # docs/suite.md, README
    python benchmarks/suite/suite_page.py --quick    # a temporary folder"""

import argparse
import math
import os
import statistics
import sys
from pathlib import Path

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness
from benchmarks.suite import inverse_measures as measures
from benchmarks.suite import suite_protocol as protocol
from benchmarks.suite.suite_census import CENSUS, census_section
from benchmarks.suite.suite_protocol import NONE
from benchmarks.suite.weightings_setup import CAUSAL as CAUSAL_NAMES
from benchmarks.suite.weightings_setup import INVERSE, key, label

SCRIPT = "suite/suite_page.py"
TITLE = "The problem suite: the default decided out of sample"
PAGE, FIGURE = "suite.md", "figures/suite.png"
RESULTS = "suite/{half}/weightings.json"
README_MARKERS = ("<!-- suite -->", "<!-- /suite -->")
#: The candidates to replace the published sketch (the bar) as the
#: default, fixed before the confirmation halves were run.
CANDIDATES = ("sketch_band_4",)
BAND = CANDIDATES[0]
#: The README table's rows, from the first confirmation half (where every
#: weighting ran): the plain sum, PINA's rules, Wang et al.'s exact
#: weights, the band, the published sketch.
README_ROWS = ("none", "pina_self_adaptive", "pina_ntk", "exact")
README_ROWS += ("sketch_band_4", protocol.PUBLISHED)
#: Wang et al.'s exact weights, whose worst case the README states.
EXACT = "exact"
#: PINA's causal solver, measured on the tuning half's time-dependent
#: settings (issue #54; no decision): its results' key and table rows.
CAUSAL = "causal"
CAUSAL_ROWS = ("sketch_predictor", "causal_none", "causal_sketch_predictor")


def combined(documents, halves=protocol.CONFIRMATION):
    """The runs, problems and step costs of ``halves`` as one document."""
    found = [documents[h] for h in halves if h in documents]
    costs = [d.get("step_costs", {}).get("ratios", {}) for d in found]
    return {
        "settings": found[0]["settings"],
        "runs": [r for d in found for r in d["runs"]],
        "problems": [p for d in found for p in d["problems"]],
        "weightings": list(
            dict.fromkeys(w for d in found for w in d["weightings"])
        ),
        "step_costs": {"ratios": {p: c for by in costs for p, c in by.items()}},
    }


def summary_of(document, weightings):
    """The protocol's summary of ``weightings`` on a document's runs."""
    runs, problems = document["runs"], document["problems"]
    costs = protocol.step_costs(document)
    return protocol.summarise(runs, weightings, problems, costs)


def name(weighting, document):
    """A weighting as a user writes it, in backticks (``none``: none)."""
    if weighting == NONE:
        return "no weighting"
    if weighting in CAUSAL_NAMES:  # PINA's causal solver with a weighting
        inner = CAUSAL_NAMES[weighting]
        return "the causal solver, " + name(inner, document)
    every = document["settings"]["update_every"]
    text = label(weighting, every).replace("`", "")
    return "`" + text.replace("PINA ", "").split(", the default")[0] + "`"


def ratio(value, digits=2):
    """A ratio to ``digits`` significant digits; ``∞`` where every run
    diverged, ``—`` where not measured."""
    if math.isnan(value):
        return "—"
    return "∞" if math.isinf(value) else f"{value:.{digits}g}"


def interval(value, bounds, digits=2):
    """A ratio and its interval: ``0.5 (0.3–0.8)``."""
    if math.isnan(value):
        return "—"
    low, high = (ratio(v, digits) for v in bounds)
    return f"{ratio(value, digits)} ({low}–{high})"


def diverged(entry):
    """A weighting's diverged runs, as a count of its runs (or nothing)."""
    count = entry["diverged"]
    return f"diverged on {count} of {entry['runs']} runs" if count else "—"


def summary_table(summary, document, weightings):
    """The protocol's summary as a markdown table, both bases in one row."""
    header, rows = ["weighting", "problems", "diverged"], []
    for basis in protocol.BASES:
        header += [f"÷ none ({basis})", f"÷ published ({basis})"]
        header += [f"worst ({basis})", f"worse than none ({basis})"]
    for weighting in weightings:
        entry, cells = summary[weighting], [name(weighting, document)]
        cells += [len(entry["steps"]["per_problem"]), diverged(entry)]
        for basis in protocol.BASES:
            found = entry[basis]
            worst, worse = found["worst"], found["worse_than_none"]
            listed = f" ({', '.join(worse)})" if worse else ""
            for to in ("to_none", "to_published"):
                cells.append(interval(found[to], found[f"{to}_interval"]))
            if worst:
                cells.append(f"{worst} ({ratio(found['per_problem'][worst])})")
            else:
                cells.append("—")
            cells.append(f"{len(worse)}{listed}")
        rows.append(cells)
    return harness.markdown_table(header, rows)


def ran(document):
    """The weightings of a document with runs, in its order."""
    found = {r["weighting"] for r in document["runs"]}
    return [w for w in document["weightings"] if w in found]


def complete(document):
    """The weightings with runs paired with ``none`` on every problem."""
    runs, problems = document["runs"], document["problems"]
    paired = protocol.paired
    return [
        w
        for w in ran(document)
        if all(paired(runs, p, w, NONE) for p in problems)
    ]


def ratio_cell(values):
    """The geometric mean of paired ratios, their range after it; ``∞``
    where every run diverged, ``—`` where none was paired."""
    finite = protocol.finite(values)
    if not finite:
        return "∞" if values else "—"
    spread = f" ({ratio(min(values))}–{ratio(max(values))})"
    return ratio(protocol.geometric_mean(finite)) + spread


def per_problem_table(document, basis, against):
    """Per weighting and problem: the geometric mean over seeds of the
    error ratio to ``against`` at ``basis``, the seeds' range after it; an
    inverse setting's ratio of parameter errors beside it."""
    runs, problems, rows = document["runs"], document["problems"], []
    costs = protocol.step_costs(document)
    inverse = measures.inverse_of(document, INVERSE)
    for weighting in [w for w in ran(document) if w != against]:
        row = [name(weighting, document)]
        for problem in problems:
            pairs = protocol.paired(runs, problem, weighting, against)
            found = costs.get(problem)
            row.append(ratio_cell(protocol.problem_ratios(pairs, basis, found)))
            if problem in inverse:
                values = measures.paired_ratios(pairs, basis, found)
                row.append(measures.shown(values, ratio_cell))
        rows.append(row)
    header = [c for p in problems for c in measures.columns(p, inverse)]
    return harness.markdown_table(["weighting", *header], rows)


def cost_cell(ratios):
    """A step-cost cell: ``median (low–high)`` of the rounds' ratios, or a
    dash where none was measured."""
    if not ratios:
        return "—"
    low, high = min(ratios), max(ratios)
    return f"{statistics.median(ratios):.2f} ({low:.2f}–{high:.2f})"


def cost_lines(document):
    """The step costs' provenance and table: each weighting's time per step
    over the plain sum's per setting, median over rounds (range)."""
    found = document.get("step_costs")
    if not found:
        return ["No step costs measured: no equal-time comparison.", ""]
    weightings = [w for w in ran(document) if w != NONE]
    rows = [
        [problem, *(cost_cell(by.get(w)) for w in weightings)]
        for problem, by in found["ratios"].items()
    ]
    header = ["setting", *(name(w, document) for w in weightings)]
    return [
        "Time per step over the plain sum's, the basis of equal time: "
        f"median over {found['rounds']} interleaved rounds (range), each "
        f"run {found['steps']} steps from seed 0, timed over its second "
        "half:",
        "",
        *harness.header_lines(found["part"]),
        "",
        *harness.markdown_table(header, rows),
        "",
    ]


def losses(summary, default, document, basis):
    """Sentences naming each problem on which the default is behind the
    plain sum or behind another weighting at ``basis``."""
    per = {w: e[basis]["per_problem"] for w, e in summary.items()}
    lines = []
    for problem, value in per[default].items():
        ahead = [
            f"{name(w, document)} ({ratio(v[problem], 3)})"
            for w, v in per.items()
            if w not in (default, NONE) and v.get(problem, math.inf) < value
        ]
        if value > 1:
            ahead.insert(0, "no weighting (1)")
        if ahead:
            ahead = ", ".join(ahead)
            lines.append(
                f"- {problem}: the default's ratio to none is "
                f"{ratio(value, 3)}; lower: {ahead}."
            )
    return lines or ["- none: the default has the lowest ratio on each."]


def half_section(half, document):
    """The page's section of one half: settings, summary, per problem."""
    runs, problems = document["runs"], document["problems"]
    live = protocol.current(runs)
    shown = complete(document)
    summary = summary_of(document, shown)
    seeds = sorted({r["seed"] for r in live})
    failed = sum(r["status"] != "ok" for r in live)
    superseded, settings = len(runs) - len(live), document["settings"]
    latest = {key(r): r["history"]["errors"] for r in live}
    same = sum(
        r["history"]["errors"] == latest.get(key(r))
        for r in runs
        if "superseded" in r
    )
    reruns = [
        f"The errors the {superseded} superseded runs recorded are "
        f"those of their reruns to the bit on {same} of them.",
        "",
    ]
    lines = [
        f"## The {half} half",
        "",
        *harness.parts_lines(document, lambda i, p: p["date"]),
        f"{len(live)} runs ({failed} failed; {superseded} more superseded by "
        f"a rerun, listed on the runs' page): {len(problems)} settings, "
        f"seeds {seeds[0]}–{seeds[-1]}, {settings['steps']} steps each; a "
        f"{settings['depth']}×{settings['width']} tanh network, Adam "
        f"{settings['lr']:g} × {settings['lr_decay']:g} per "
        f"{settings['lr_decay_steps']} steps; the error {settings['records']}"
        f" times on a grid of about {settings['grid']}² points.",
        "",
        *(reruns if superseded else []),
        "The problems each weighting ran on, its diverged runs (left out of "
        "the ratios, counted as worse than none); the geometric mean over "
        "the problems of the paired error ratio with its "
        f"{harness.LEVEL:.0%} paired bootstrap interval (÷ none: to the "
        "plain sum; ÷ published: to `SketchNTKWeighting(gradient_band=None)`"
        "), the worst problem, the problems where a weighting is worse than "
        "none on every seed, at equal steps and at equal time (within the "
        "steps each weighting makes in the plain sum's training time):",
        "",
        *summary_table(summary, document, shown),
        "",
        *cost_lines(document),
    ]
    return lines + per_problem_lines(document, (NONE, protocol.PUBLISHED))


def per_problem_lines(document, references):
    """The per-problem tables against each of ``references``, at equal
    steps and at equal time, and what their parameter columns hold."""
    found = measures.inverse_of(document, INVERSE)
    found = [measures.column(p) for p in found]
    lines = [measures.note(found, measures.RATIOS), ""] if found else []
    for against in references:
        for basis in protocol.BASES:
            lines += [
                f"Per problem: the error ratio to {name(against, document)} "
                f"at equal {basis}, geometric mean over seeds (their range):",
                "",
                *per_problem_table(document, basis, against),
                "",
            ]
    return lines


def causal_section(document):
    """PINA's causal solver with and without the default against the plain
    solver with and without it: what the pair costs and gains."""
    runs, problems = document["runs"], document["problems"]
    shown = [w for w in CAUSAL_ROWS if w in ran(document)]
    live = protocol.current(runs)
    seeds = sorted({r["seed"] for r in live})
    lines = [
        "## PINA's causal solver",
        "",
        "A measurement, not a decision (nothing here is tuned or chosen): "
        "PINA's `CausalPhysicsInformedSingleModelSolver` at its defaults "
        "(`eps=100`, `n_steps=10`, the interior condition regularised), "
        "with no weighting and with the default, against the plain solver "
        "with and without the default, on the tuning half's time-dependent "
        f"settings ({', '.join(problems)}); seeds {seeds[0]}–{seeds[-1]}, "
        f"{document['settings']['steps']} steps each (fewer than the "
        "halves' runs: a causal step costs several plain ones), the rest as "
        "in the halves. The runs, with each weighting's rejected estimates: "
        "[suite/causal/weightings.md](suite/causal/weightings.md).",
        "",
        *harness.parts_lines(document, lambda i, p: p["date"]),
        "÷ none: to the plain solver without weighting; ÷ published: to "
        "the plain solver with the default, paired by seed, as in the "
        "halves' tables:",
        "",
        *summary_table(summary_of(document, shown), document, shown),
        "",
        *cost_lines(document),
    ]
    return lines + per_problem_lines(document, (NONE, "causal_none"))


def decision(documents):
    """``(both, summary, default, checks)``: the confirmation halves as one
    document, the summary of every weighting run there, and the decision."""
    both = combined(documents)
    summary = summary_of(both, [*dict.fromkeys([*ran(both), *CANDIDATES])])
    return both, summary, *protocol.decide(summary, CANDIDATES)


def decision_lines(documents):
    """The decision on the confirmation halves together, from their runs."""
    both, summary, default, checks = decision(documents)
    halves = [h for h in protocol.CONFIRMATION if h in documents]
    header, rows = ["weighting", "basis", "÷ published", "worst problem"], []
    header += ["worse than none", "(a)", "(b)", "(c)"]
    bar = summary[protocol.PUBLISHED]
    for weighting in (*CANDIDATES, protocol.PUBLISHED):
        for basis in protocol.BASES:
            found = summary[weighting][basis]
            worst = found["per_problem_published"]
            top = max(worst, key=worst.get, default=None)
            row = [name(weighting, both), basis]
            published = found["to_published"], found["to_published_interval"]
            row.append(interval(*published, 3))
            row.append(f"{top} ({ratio(worst[top])})" if top else "—")
            row.append(str(len(found["worse_than_none"])))
            verdicts = checks.get(weighting, {})
            for rule in "abc":
                if not verdicts:
                    row.append("the bar")
                elif verdicts[f"{rule} ({basis})"]:
                    row.append("pass")
                else:
                    row.append("**fail**")
            rows.append(row)
    lines = [
        "## The decision",
        "",
        f"On the {' and '.join(halves)} halves together "
        f"({len(both['problems'])} settings, every run of each weighting), "
        "by the protocol's rule: (a) the ratio to the published sketch "
        f"below 1, the upper end of its {harness.LEVEL:.0%} interval at most "
        f"1; (b) no problem above {protocol.WORST_PROBLEM:g}×; (c) worse "
        "than none on no more problems.",
        "",
        *harness.markdown_table(header, rows),
        "",
        f"The default: **{name(default, both)}** "
        f"(`SketchNTKWeighting()`; worse than none on "
        f"{len(bar['steps']['worse_than_none'])} of "
        f"{len(both['problems'])} problems at equal steps, "
        f"{len(bar['time']['worse_than_none'])} at equal time).",
        "",
    ]
    for basis in protocol.BASES:
        lines += [
            f"Where the default still loses (equal {basis}; every weighting "
            "run on the problem):",
            "",
            *losses(summary, default, both, basis),
            "",
        ]
    return lines, default


def render(documents):
    """The page's block from ``{half: document}``."""
    lines = [f"![each weighting's ratio]({FIGURE})", ""]
    if "confirmation" in documents:
        lines += decision_lines(documents)[0]
    for half in protocol.HALVES:
        if half in documents:
            lines += half_section(half, documents[half])
    lines += census_section(documents)
    if CAUSAL in documents:
        lines += causal_section(documents[CAUSAL])
    return "\n".join(lines)


def make_figure(document, path, default):
    """Per problem, each weighting's error ratio to none at equal steps on
    a log scale: a dot per seed, a bar at the geometric mean; the default
    drawn in black."""
    from matplotlib.figure import Figure

    runs, problems = document["runs"], document["problems"]
    shown = [w for w in complete(document) if w != NONE]
    fig = Figure(figsize=(9.0, 4.0))
    ax = fig.subplots()
    width = 0.8 / len(shown)
    for index, weighting in enumerate(shown):
        colour = "black" if weighting == default else f"C{index}"
        for column, problem in enumerate(problems):
            pairs = protocol.paired(runs, problem, weighting, NONE)
            values = protocol.problem_ratios(pairs, "steps")
            x = column - 0.4 + width * (index + 0.5)
            finite = [v for v in values if math.isfinite(v)]
            ax.plot([x] * len(finite), finite, ".", color=colour, ms=4)
            if finite:
                mean = protocol.geometric_mean(finite)
                ends = [x - width / 2, x + width / 2]
                ax.plot(ends, [mean] * 2, color=colour, lw=2.5)
        text = name(weighting, document).strip("`")
        text += ", the default" if weighting == default else ""
        ax.plot([], [], ".-", color=colour, label=text)
    ax.axhline(1.0, color="0.5", lw=1.0, ls="--", label="no weighting")
    ax.set_xticks(range(len(problems)), problems, rotation=15, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("error ÷ error without weighting")
    ax.grid(True, axis="y", which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    harness.save_figure(fig, path)


def readme_block(documents, page=f"docs/{PAGE}"):
    """README.md's block: the figure, a table of the first confirmation
    half's summary for :data:`README_ROWS` and the decision's numbers."""
    document = documents["confirmation"]
    both, overall, default, checks = decision(documents)
    shown = [w for w in README_ROWS if w in complete(document)]
    summary, rows = summary_of(document, shown), []
    for w in shown:
        steps, time = summary[w]["steps"], summary[w]["time"]
        text = name(w, document) + (", the default" if w == default else "")
        cells = [text, ratio(steps["to_none"]), ratio(time["to_none"])]
        cells += [str(len(found["worse_than_none"])) for found in (steps, time)]
        rows.append(cells + [diverged(summary[w])])
    header = ["weighting", "÷ none, equal steps", "÷ none, equal time"]
    header += ["worse than none (steps)", "worse than none (time)", "diverged"]
    failed = [rule for rule, ok in checks[BAND].items() if not ok]
    failed, found = ", ".join(failed) or "none", overall[BAND]["steps"]
    exact = ""
    if overall.get(EXACT, {}).get("runs"):  # Wang et al.'s worst case
        found_exact = overall[EXACT]["steps"]
        worst = found_exact["worst"]
        exact = (
            f" Wang et al.'s {name(EXACT, both)} over both halves: worst on "
            f"{worst} ({ratio(found_exact['per_problem'][worst])} × none at "
            f"equal steps), worse than none on "
            f"{len(found_exact['worse_than_none'])} of "
            f"{len(both['problems'])} problems, diverged on "
            f"{overall[EXACT]['diverged']} of {overall[EXACT]['runs']} runs."
        )
    published = interval(
        found["to_published"], found["to_published_interval"], 3
    )
    text = (
        "Geometric mean over the first confirmation half's "
        f"{len(document['problems'])} problems of the error ratio to no "
        "weighting, paired by seed (diverged runs counted, not in the "
        "ratio); worse than none: on how many problems on every seed. Over "
        f"both confirmation halves ({len(both['problems'])} problems), "
        f"{name(CANDIDATES[0], both)} ÷ the published sketch is {published}"
        f" at equal steps ({harness.LEVEL:.0%} interval); of the rule's "
        f"conditions it fails {failed}, so the default is "
        f"{name(default, both)}.{exact} Set-up, rule and every problem the "
        f"default still loses: [{page}]({page})."
    )
    figure = f"![each weighting's error ratio per problem](docs/{FIGURE})"
    table = harness.markdown_table(header, rows)
    return "\n".join([figure, "", *table, "", text]) + "\n"


def read_documents(docs):
    """``{half: document}`` of the halves, the causal solver's study
    (:data:`CAUSAL`) and the default's census per half (:data:`CENSUS`)
    whose results exist."""
    found = {}
    census = (CENSUS.format(half=half) for half in protocol.HALVES)
    for half in (*protocol.HALVES, CAUSAL, *census):
        path = os.path.join(docs, RESULTS.format(half=half))
        if os.path.isfile(path):
            found[half] = harness.read_json(path)
    return found


def main(argv=None):
    """Render the page, the figure and, with ``--readme``, the README."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", default=os.path.join(harness.ROOT, "docs"))
    readme = os.path.join(harness.ROOT, "README.md")
    parser.add_argument("--readme", nargs="?", metavar="FILE", const=readme)
    text = "write the page, figure (and README) to a new temporary folder"
    parser.add_argument("--quick", action="store_true", help=text)
    args = parser.parse_args(argv)
    documents = read_documents(args.docs)
    if "confirmation" not in documents:
        parser.error(
            f"no {RESULTS.format(half='confirmation')} under "
            f"{args.docs}: run the confirmation half first."
        )
    out = harness.quick_path(args, args.docs)
    path = os.path.join(out, PAGE)
    harness.write_page(path, SCRIPT, render(documents), TITLE)
    default = decision(documents)[2]
    figure = os.path.join(out, FIGURE)
    make_figure(documents["confirmation"], figure, default)
    if args.readme:
        block = readme_block(documents)
        harness.write_quick_block(args, args.readme, *README_MARKERS, block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
