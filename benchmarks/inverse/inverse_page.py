"""The inverse-problem study's summaries and page (``inverse.py`` runs it):
per setting and row, the parameter error (the value a run ends with) and
the solution error's paired ratio to the plain sum; the rule's verdict; and
the identified unknowns over training on ``poisson_source``."""

import math
import os
import statistics

from benchmarks import harness
from benchmarks.suite import suite_protocol as protocol

SCRIPT = "inverse/inverse.py"
TITLE = "Inverse problems"
NONE, DEFAULT = "none", "default"
LABELS = {
    NONE: "none (plain sum)",
    DEFAULT: '`SketchNTKWeighting()`, the default (`unknowns="observations_first"`)',
    "sketch_unknowns_excluded": '`SketchNTKWeighting(unknowns="excluded")`, '
    "the earlier default",
    "sketch_unknowns_kernel": '`SketchNTKWeighting(unknowns="kernel")`',
    "sketch_unweighted_unknowns": "weights on the network's gradient only "
    "(prototype)",
}
#: The figure's setting and rows, and its path from the page.
FIGURE_SETTING, FIGURE_ROWS = "poisson_source", (DEFAULT, NONE)
FIGURE = f"figures/inverse-{FIGURE_SETTING}.png"


def runs_of(document, setting, row):
    """``{seed: run}`` of a setting and row."""
    return {
        run["seed"]: run
        for run in document["runs"]
        if run["problem"] == setting and run["weighting"] == row
    }


def parameter_errors(document, setting, row):
    """``{seed: parameter error}``; infinite for a failed run."""
    return {
        seed: (
            run.get("parameter_error", math.nan)
            if run.get("status") == "ok"
            else math.inf
        )
        for seed, run in runs_of(document, setting, row).items()
    }


def solution_ratios(document, setting, row):
    """``{seed: solution error / none's}``, paired by seed (the suite's
    run error); a seed whose plain-sum run failed is left out."""
    own = runs_of(document, setting, row)
    reference = runs_of(document, setting, NONE)
    found = {}
    for seed, run in own.items():
        if seed in reference and reference[seed].get("status") == "ok":
            base = protocol.run_error(reference[seed])
            found[seed] = protocol.run_error(run) / base
    return found


def parameter_ratios(document, setting, row):
    """``{seed: parameter error / none's}``, paired by seed; a seed whose
    plain-sum run failed is left out."""
    own = parameter_errors(document, setting, row)
    reference = parameter_errors(document, setting, NONE)
    return {
        seed: error / reference[seed]
        for seed, error in own.items()
        if seed in reference and math.isfinite(reference[seed])
    }


def identifies(document, setting, row):
    """The rule: the row's worst seed's parameter error is at most the
    larger of the plain sum's worst seed's and ``identified``."""
    limit = document["recipe"]["identified"]
    worst = max(parameter_errors(document, setting, row).values())
    plain = max(parameter_errors(document, setting, NONE).values())
    return worst <= max(plain, limit)


def rows_of(document):
    """The rows in the results, in the study's order."""
    seen = [run["weighting"] for run in document["runs"]]
    return [row for row in LABELS if row in seen]


def decision(document):
    """``(passing rows, chosen row)``: the weightings that identify no
    worse than none on every setting and, of them, the lowest geometric
    mean over settings of the solution-error ratio to none, the default
    on a tie (``None`` if none passes)."""
    settings = document["recipe"]["settings"]
    # the weightings, the default first: it wins a tie
    candidates = [r for r in rows_of(document) if r != NONE]
    candidates.sort(key=lambda row: row != DEFAULT)
    passing = [
        row
        for row in candidates
        if all(identifies(document, s, row) for s in settings)
    ]

    def overall(row):
        return protocol.geometric_mean(
            protocol.geometric_mean(solution_ratios(document, s, row).values())
            for s in settings
        )

    return passing, min(passing, key=overall, default=None)


def number(value):
    """A number with three significant digits (``—`` for NaN)."""
    if math.isnan(value):
        return "—"
    if math.isinf(value):
        return "failed"
    return f"{value:.3g}"


def percent(value):
    """A fraction as a percentage, two significant digits."""
    if math.isnan(value) or math.isinf(value):
        return number(value)
    return f"{100 * value:.3g} %"


def setting_table(document, setting):
    """The lines of one setting's table."""
    limit = document["recipe"]["identified"]
    header = [
        "weighting",
        "parameter error: median (worst seed)",
        f"seeds within {percent(limit)}",
        "parameter error ÷ none: geometric mean (seeds above none)",
        "solution error ÷ none: geometric mean (worst seed)",
        "identifies no worse than none",
    ]
    rows = []
    for row in rows_of(document):
        errors = list(parameter_errors(document, setting, row).values())
        within = sum(e <= limit for e in errors)
        ratios = list(solution_ratios(document, setting, row).values())
        ratio = parameter = "1 (reference)"
        if row != NONE:
            mean = protocol.geometric_mean(ratios)
            ratio = f"{number(mean)} ({number(max(ratios))})"
            own = list(parameter_ratios(document, setting, row).values())
            above = sum(r > 1 for r in own)
            mean = protocol.geometric_mean(own)
            parameter = f"{number(mean)} ({above} of {len(own)})"
        rows.append(
            [
                LABELS[row],
                f"{percent(statistics.median(errors))} "
                f"({percent(max(errors))})",
                f"{within} of {len(errors)}",
                parameter,
                ratio,
                "yes" if identifies(document, setting, row) else "**no**",
            ]
        )
    return harness.markdown_table(header, rows)


def figure_runs(document):
    """The runs the figure draws: :data:`FIGURE_ROWS`' on
    :data:`FIGURE_SETTING` that recorded their unknowns."""
    return [
        run
        for row in FIGURE_ROWS
        for run in runs_of(document, FIGURE_SETTING, row).values()
        if run.get("history", {}).get("parameters")
    ]


def figure(document, path):
    """Draw the identified unknowns over training on
    :data:`FIGURE_SETTING`, one panel per unknown, each seed a line."""
    runs = figure_runs(document)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted(runs[0]["history"]["parameters"][0])
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3.2))
    # none dashed, on top: where the two agree both stay visible
    styles = {NONE: ("tab:grey", "--"), DEFAULT: ("tab:blue", "-")}
    for axis, name in zip(axes, names):
        for row in FIGURE_ROWS:
            chosen = runs_of(document, FIGURE_SETTING, row).values()
            for index, run in enumerate(chosen):
                history = run["history"]
                values = [p[name] for p in history["parameters"]]
                label = LABELS[row].split(",")[0].strip("`")
                colour, line = styles[row]
                axis.plot(
                    history["steps"],
                    values,
                    color=colour,
                    linestyle=line,
                    label=label if index == 0 else None,
                )
        true = document["true_parameters"][FIGURE_SETTING][name]
        axis.axhline(true, color="black", linestyle=":", label="true value")
        axis.set_xlabel("step")
        axis.set_title(name)
    axes[0].legend(fontsize=7)
    harness.save_figure(fig, path)
    plt.close(fig)


def render(document):
    """The page's generated block."""
    lines = []
    for part in document["parts"]:
        lines += harness.header_lines(part)
    recipe = document["recipe"]
    network = recipe.get("network", {})
    size = "the suite's network and learning rate"
    if network:
        size = (
            f"a {network['depth']}×{network['width']} tanh `FeedForward`, "
            f"Adam at {network['lr']:g} × 0.9 per 1000 steps"
        )
    lines += [
        "",
        f"{recipe['seeds']} seeds, {recipe['steps']} Adam steps, {size}, "
        "the suite's points; the parameter error is the largest relative "
        "error of the unknowns at the end; the solution error is the "
        "suite's (the median of the last five records), paired by seed "
        "with none's.",
    ]
    for setting in recipe["settings"]:
        lines += ["", f"### `{setting}`", ""]
        lines += setting_table(document, setting)
    passing, chosen = decision(document)
    lines += ["", "### Verdict", ""]
    names = ", ".join(LABELS[row] for row in passing) or "none"
    lines.append(
        "Weightings that identify no worse than none on every setting: "
        f"{names}."
    )
    if chosen is None:
        lines.append("No row passes: the rule chooses nothing.")
    else:
        lines.append(
            f"Chosen by the rule (the lowest solution-error ratio to none "
            f"among them): {LABELS[chosen]}."
        )
        shipped = "is" if chosen == DEFAULT else "is **not**"
        lines.append(f"The shipped default {shipped} the chosen row.")
    if figure_runs(document):
        lines += [
            "",
            f"![Identified unknowns on {FIGURE_SETTING}, every seed]"
            f"({FIGURE})",
        ]
    return "\n".join(lines) + "\n"


def write_outputs(document, output_dir):
    """Write the figure and the page's block (the results file is written
    by the run)."""
    if figure_runs(document):
        figure(document, os.path.join(output_dir, FIGURE))
    path = os.path.join(output_dir, "inverse-problems.md")
    harness.write_page(path, SCRIPT, render(document), TITLE)
    json_path = os.path.join(output_dir, "inverse.json")
    if not os.path.isfile(json_path):
        harness.write_json(json_path, document)
