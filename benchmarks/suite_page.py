"""The problem suite's page: the protocol's summary of each half's runs
(``suite_protocol.summarise``), the default it decides on the confirmation
half, each weighting's error ratio to the plain sum per problem, and a
figure of those ratios, seeds as dots; with ``--readme`` README.md's
*Choosing a weighting* block. Every sentence that compares weightings is
rendered from the summary.

    python benchmarks/weightings.py --half confirmation \\
        --output-dir docs/suite/confirmation         # the runs
    python benchmarks/suite_page.py --readme         # docs/suite.md, README
"""

import argparse
import math
import os
import sys

import harness
import suite_protocol as protocol
from suite_protocol import NONE
from weightings_setup import key, label

SCRIPT = "suite_page.py"
TITLE = "The problem suite: the default decided out of sample"
PAGE, FIGURE = "suite.md", "figures/suite.png"
RESULTS = "suite/{half}/weightings.json"
README_MARKERS = ("<!-- suite -->", "<!-- /suite -->")
#: The candidate defaults the confirmation half decides between, fixed
#: before it was run (the published sketch is also the bar).
CANDIDATES = ("sketch_band_4", "sketch_predictor")
#: The runs of ``SketchNTKWeighting()`` as shipped after the decision.
DEFAULT = "default"
#: What the README's block shows where run on every problem: the plain
#: sum, PINA's rules and Wang et al.'s exact weights, then the default.
README_ROWS = ("none", "pina_self_adaptive", "pina_ntk", "exact")


def decided(document):
    """The candidate the protocol decides for on a half's runs."""
    runs, problems = document["runs"], document["problems"]
    summary = protocol.summarise(runs, complete(document), problems)
    return protocol.decide(summary, CANDIDATES)[0]


def the_default(document):
    """The default's runs: ``default`` where run, else :func:`decided`."""
    return DEFAULT if DEFAULT in complete(document) else decided(document)


def name(weighting, document):
    """A weighting as a user writes it, in backticks (``none``: none)."""
    if weighting == NONE:
        return "no weighting"
    every = document["settings"]["update_every"]
    text = label(weighting, every).replace("`", "")
    return "`" + text.replace("PINA ", "").split(", the default")[0] + "`"


def ratio(value, digits=2):
    """A ratio to ``digits`` significant digits; ``∞`` for a failed run."""
    return "∞" if math.isinf(value) else f"{value:.{digits}g}"


def summary_table(summary, document, weightings):
    """The protocol's summary as a markdown table, both bases in one row."""
    header, rows = ["weighting", "problems"], []
    for basis in protocol.BASES:
        header += [f"÷ none ({basis})", f"÷ published ({basis})"]
        header += [f"worst ({basis})", f"worse than none ({basis})"]
    for weighting in weightings:
        entry, cells = summary[weighting], [name(weighting, document)]
        cells.append(len(entry["steps"]["per_problem"]))
        for basis in protocol.BASES:
            found = entry[basis]
            worst, worse = found["worst"], found["worse_than_none"]
            listed = f" ({', '.join(worse)})" if worse else ""
            cells += [ratio(found["to_none"]), ratio(found["to_published"])]
            cells.append(f"{worst} ({ratio(found['per_problem'][worst])})")
            cells.append(f"{len(worse)}{listed}")
        rows.append(cells + [ratio(entry["time_to_none"])])
    header.append("time to none's error")
    return harness.markdown_table(header, rows)


def ran(document):
    """The weightings of a document with runs, in its order."""
    found = {r["weighting"] for r in document["runs"]}
    return [w for w in document["weightings"] if w in found]


def complete(document):
    """The weightings with runs paired with ``none`` on every problem."""
    runs, problems = document["runs"], document["problems"]
    return [
        w
        for w in ran(document)
        if all(protocol.paired(runs, p, w, NONE) for p in problems)
    ]


def per_problem_table(runs, document, problems):
    """Per weighting and problem: the geometric mean over seeds of the
    error ratio to ``none`` at equal steps, the seeds' range after it."""
    rows = []
    for weighting in [w for w in ran(document) if w != NONE]:
        row = [name(weighting, document)]
        for problem in problems:
            pairs = protocol.paired(runs, problem, weighting, NONE)
            values = protocol.problem_ratios(pairs, "steps")
            if not values:
                row.append("—")
                continue
            spread = f" ({ratio(min(values))}–{ratio(max(values))})"
            row.append(ratio(protocol.geometric_mean(values)) + spread)
        rows.append(row)
    return harness.markdown_table(["weighting", *problems], rows)


def losses(summary, decided, document):
    """Sentences, from the summary, naming the problems on which the
    default (the shipped default's runs where made, else the decided
    candidate's) is behind the plain sum or behind another weighting at
    equal steps."""
    per = {w: e["steps"]["per_problem"] for w, e in summary.items()}
    own, lines = per[DEFAULT if DEFAULT in per else decided], []
    for problem, value in own.items():
        ahead = [
            f"{name(w, document)} ({ratio(v[problem], 3)})"
            for w, v in per.items()
            if w not in (decided, DEFAULT) and v.get(problem, 1.0) < value
        ]
        if value > 1:
            ahead.insert(0, "no weighting (1)")
        if ahead:
            lines.append(
                f"- {problem}: the default's ratio to none is "
                f"{ratio(value, 3)}; lower: {', '.join(ahead)}."
            )
    return lines or ["- none: the default has the lowest ratio on each."]


def half_section(half, document):
    """The page's section of one half: settings, summary, per problem."""
    runs, problems = document["runs"], document["problems"]
    live = protocol.current(runs)
    shown = complete(document)
    summary = protocol.summarise(runs, shown, problems)
    partial = []
    for weighting in [w for w in ran(document) if w not in shown]:
        paired = [protocol.paired(runs, p, weighting, NONE) for p in problems]
        seeds = [f"{p}, {len(n)} seeds" for p, n in zip(problems, paired) if n]
        partial.append(f"{name(weighting, document)} ({', '.join(seeds)})")
    if partial:
        partial = [
            "Ran on some problems only, so left out of the summary and the "
            "figure: " + "; ".join(partial) + ".",
            "",
        ]
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
        f"The errors the {superseded} superseded runs recorded are those "
        f"of their reruns to the bit on {same} of them.",
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
        *partial,
        "The problems each weighting ran on; the geometric mean over them "
        "of the paired error ratio (÷ none: to the plain sum; ÷ published: "
        "to `SketchNTKWeighting(gradient_band=None)`), the worst problem, "
        "the problems where a weighting is worse than none on every seed, "
        "at equal steps and at equal time (within the paired `none` run's "
        "training time), and the time to reach none's error over none's time:",
        "",
        *summary_table(summary, document, shown),
        "",
        "Per problem: the error ratio to none at equal steps, geometric "
        "mean over seeds (the seeds' range):",
        "",
        *per_problem_table(runs, document, problems),
        "",
    ]
    return lines, summary


def decision_lines(summary, document):
    """The decision on the confirmation half, rendered from its summary."""
    decided, passes = protocol.decide(summary, CANDIDATES)
    lines = ["## The decision", ""]
    for candidate in CANDIDATES:
        verdict = "passes" if passes[candidate] else "fails"
        lines.append(f"- {name(candidate, document)} {verdict}.")
    if DEFAULT in summary:  # the shipped code's own runs, by the same test
        passes_too = protocol.decide(summary, [DEFAULT])[1][DEFAULT]
        own, bar = (
            summary[w]["steps"]["to_none"]
            for w in (DEFAULT, protocol.PUBLISHED)
        )
        lines.append(
            "- `SketchNTKWeighting()` as shipped (runs `default`) "
            f"{'passes' if passes_too else 'fails'} the same test: "
            f"{ratio(own)} at equal steps, the published sketch {ratio(bar)}."
        )
    lines += [
        "",
        "A candidate passes when, at equal steps and at equal time, its "
        "geometric-mean ratio to none is at most the published sketch's "
        "and it is worse than none on no more problems; of those that pass "
        "the lowest ratio at equal steps is the default: "
        f"**{name(decided, document)}**.",
        "",
        *shipped_lines(document, decided),
        "Where the default still loses (equal steps):",
        "",
        *losses(summary, decided, document),
        "",
    ]
    return lines, decided


def shipped_lines(document, decided):
    """Whether the runs of ``SketchNTKWeighting()`` as shipped (``default``)
    recorded the decided candidate's errors, seed by seed."""
    runs = protocol.current(document["runs"])
    errors = {
        (r["problem"], r["seed"]): r["history"]["errors"]
        for r in runs
        if r["weighting"] == decided
    }
    shipped = [r for r in runs if r["weighting"] == DEFAULT]
    if not shipped:
        return []
    same = sum(
        r["history"]["errors"] == errors.get((r["problem"], r["seed"]))
        for r in shipped
    )
    return [
        f"The {len(shipped)} runs of `SketchNTKWeighting()` as shipped (key "
        f"`default`) recorded the errors of {name(decided, document)} to "
        f"the bit on {same} of them.",
        "",
    ]


def render(documents):
    """The page's block from ``{half: document}``."""
    lines, decided = [], None
    for half in protocol.HALVES:
        if half in documents:
            section, summary = half_section(half, documents[half])
            lines += section
            if half == "confirmation":
                more, decided = decision_lines(summary, documents[half])
                lines = more + lines
    return "\n".join([f"![each weighting's ratio]({FIGURE})", ""] + lines)


def make_figure(document, path):
    """Per problem, each weighting's error ratio to none at equal steps on
    a log scale: a dot per seed, a bar at the geometric mean; the default
    drawn in black."""
    from matplotlib.figure import Figure

    runs, problems = document["runs"], document["problems"]
    shown = [w for w in complete(document) if w != NONE]
    default = the_default(document)
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
            if values:
                mean = protocol.geometric_mean(values)
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
    """README.md's block: the figure and a short table of the confirmation
    half's summary for :data:`README_ROWS`."""
    document = documents["confirmation"]
    runs, problems = document["runs"], document["problems"]
    default = the_default(document)
    shown = [w for w in README_ROWS if w in complete(document)] + [default]
    summary = protocol.summarise(runs, shown, problems)
    rows = []
    for w in shown:
        steps, time = summary[w]["steps"], summary[w]["time"]
        text = name(w, document) + (", the default" if w == default else "")
        rows.append([text, ratio(steps["to_none"]), ratio(time["to_none"])])
        rows[-1].append(f"{len(steps['worse_than_none'])} of {len(problems)}")
    header = ["weighting", "÷ none, equal steps", "÷ none, equal time"]
    header.append("worse than none on every seed")
    return "\n".join([
        f"![each weighting's error ratio per problem](docs/{FIGURE})",
        "",
        *harness.markdown_table(header, rows),
        "",
        "Geometric mean over the confirmation problems of the error ratio "
        f"to no weighting, paired by seed; set-up and criteria: [{page}]"
        f"({page}).",
    ]) + "\n"  # fmt: skip


def read_documents(docs):
    """``{half: document}`` of the halves whose results exist."""
    found = {}
    for half in protocol.HALVES:
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
    args = parser.parse_args(argv)
    documents = read_documents(args.docs)
    if "confirmation" not in documents:
        parser.error(
            f"no {RESULTS.format(half='confirmation')} under "
            f"{args.docs}: run the confirmation half first."
        )
    path = os.path.join(args.docs, PAGE)
    harness.write_page(path, SCRIPT, render(documents), TITLE)
    make_figure(documents["confirmation"], os.path.join(args.docs, FIGURE))
    if args.readme:
        block = readme_block(documents)
        harness.write_block(args.readme, *README_MARKERS, block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
