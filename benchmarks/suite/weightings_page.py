"""The weightings benchmark's page, from its results document alone: the
error after the same steps (and an inverse setting's parameter error), the
cost per step, failures, figures per problem."""

import math
import os
import statistics

from pina_ntk.integration.reports import ESTIMATE_REJECTIONS

from benchmarks import harness
from benchmarks.suite import inverse_measures as inverse
from benchmarks.suite.weightings_setup import FIXED_POINTS, INVERSE, PROBLEMS
from benchmarks.suite.weightings_setup import SCRIPT, TITLE, TUTORIAL_NETWORK
from benchmarks.suite.weightings_setup import key, label


def spread(values):
    """``(median, low, high, failed)`` of the finite values."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    failed = len(values) - len(finite)
    if not finite:
        return None, None, None, failed
    return statistics.median(finite), min(finite), max(finite), failed


def error_cell(values):
    """A table cell: ``median (low–high)``, with failed runs counted."""
    median, low, high, failed = spread(values)
    if median is None:
        return f"**failed** ({failed}/{len(values)})"
    cell = f"{median:.2e}"
    if len(values) - failed > 1:
        cell += f" ({low:.2e}–{high:.2e})"
    return cell + (f", **{failed}/{len(values)} failed**" if failed else "")


def short(value):
    """An error in two significant digits, as the summaries show it."""
    for limit, digits in ((10, 0), (1, 1), (0.1, 2)):
        if value >= limit:
            return f"{value:.{digits}f}"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def analyse(runs, problem, weightings):
    """One problem's numbers: per weighting its ``runs``, ``final`` errors,
    final ``parameter`` errors (``None`` where not recorded), median
    ``ms_per_step`` and ``cost_ratio`` to ``none``'s."""
    rows, runs = {}, [r for r in runs if "superseded" not in r]
    for weighting in weightings:
        own = [r for r in runs if key(r)[:2] == (problem, weighting)]
        if not own:
            continue
        own.sort(key=lambda r: r["seed"])
        ok = [r for r in own if r["status"] == "ok"]
        ms = [r["ms_per_step"] for r in (ok or own) if r["ms_per_step"]]
        final = [r["final_error"] if r in ok else math.nan for r in own]
        ms = statistics.median(ms) if ms else None
        rows[weighting] = dict(runs=own, final=final, ms_per_step=ms)
        rows[weighting]["parameter"] = inverse.final_errors(own)
    base = rows.get("none", {}).get("ms_per_step")
    for row in rows.values():
        ms = row["ms_per_step"]
        row["cost_ratio"] = ms / base if ms and base else None
    return {"rows": rows}


def summary_table(document):
    """Median relative L2 after the same steps: problems as columns (an
    inverse setting's median parameter error beside it), weightings as
    rows, the lowest per column in bold."""
    every = document["settings"]["update_every"]
    weightings, runs = document["weightings"], document["runs"]
    analyses = {p: analyse(runs, p, weightings) for p in document["problems"]}
    problems = [p for p in document["problems"] if analyses[p]["rows"]]
    columns = [(p, p, "final") for p in problems]
    found = inverse.inverse_of(document, INVERSE)
    for problem in [p for p in found if p in problems]:
        # the parameter error right after the same setting's solution error
        at = columns.index((problem, problem, "final")) + 1
        columns.insert(at, (inverse.column(problem), problem, "parameter"))
    cells, best, table, not_run = {}, {}, [], (None, 0, 0)
    for header, problem, field in columns:
        for weighting, row in analyses[problem]["rows"].items():
            if row[field] is None:  # a parameter error not recorded
                cells[header, weighting] = inverse.NOT_RECORDED
                continue
            median, _, _, failed = spread(row[field])
            cells[header, weighting] = (median, failed, len(row[field]))
            if median is not None:
                best[header] = min(best.get(header, median), median)
    for weighting in weightings:
        if not any((p, weighting) in cells for p in problems):
            continue
        row = [label(weighting, every)]
        for header, _, _ in columns:
            found = cells.get((header, weighting), not_run)
            if isinstance(found, str):
                row.append(found)
                continue
            median, failed, count = found
            text = "—" if not count else "failed"
            if median is not None:
                text = short(median)
                text = f"**{text}**" if text == short(best[header]) else text
            row.append(text + (f" ({failed}/{count} failed)" if failed else ""))
        table.append(row)
    headers = [header for header, _, _ in columns]
    return harness.markdown_table(["weighting", *headers], table)


def network_text(settings):
    """The network and optimiser of some settings, in words."""
    features, embedding = settings["fourier_features"], ""
    if features:
        scale = f"(scale {settings['fourier_scale']:g})"
        embedding = f"{features} random Fourier features {scale} into "
    return (
        f"{embedding}a tanh MLP with {settings['depth']} hidden layers of "
        f"{settings['width']}; Adam, learning rate {settings['lr']:g}, "
        f"multiplied by {settings['lr_decay']:g} every "
        f"{settings['lr_decay_steps']} steps (smoothly, per step)"
    )


def options_text(runs, weighting):
    """The constructor options a weighting ran with, as recorded."""
    for run in runs:
        options = run.get("weighting_options")
        if run["weighting"] == weighting and options:
            shown = [
                f"`{k}={v if str(v).startswith('<') else repr(v)}`"
                for k, v in options.items()
                if k != "class"
            ]
            return ", ".join(shown) or "—"
    return "—"


#: What a figure draws against training time: the history's key, the
#: axis's label and the title's word (an inverse setting's parameter error
#: is its second).
ERROR = ("errors", "relative L2 error", "error")
PARAMETER_ERROR = ("parameter_errors", "parameter error", "parameter error")


def make_figure(problem, analysis, every, path, names=None, measure=ERROR):
    """Error (``measure``) against training time, a colour per weighting:
    thin lines the seeds, thick the median over seeds; ``names``
    (``{weighting: text}``) labels the curves as a user writes them, the
    legend outside them. Runs without ``measure`` are left out."""
    from matplotlib.figure import Figure

    field, axis, what = measure
    fig = Figure(figsize=(9.5 if names else 7.0, 4.2))
    ax = fig.subplots()
    for index, (weighting, row) in enumerate(analysis["rows"].items()):
        colour = f"C{index}"
        drawn = [r for r in row["runs"] if field in r["history"]]
        for run in drawn:
            curve = run["history"]["seconds"], run["history"][field]
            ax.plot(*curve, color=colour, lw=0.7, alpha=0.35)
        ok = [r["history"] for r in drawn if r["status"] == "ok"]
        if ok:
            length = min(len(h[field]) for h in ok)
            median = [
                [statistics.median(h[k][i] for h in ok) for i in range(length)]
                for k in ("seconds", field)
            ]
            ax.plot(*median, color=colour, lw=2.0)
        text = label(weighting, every).replace("`", "")
        text = names[weighting] if names else text
        ax.plot([], [], color=colour, lw=2.0, label=text)
    ax.set_yscale("log")
    ax.set_xlabel("training time (s, evaluations excluded)")
    ax.set_ylabel(axis)
    ax.set_title(f"{problem}: {what} against training time")
    ax.grid(True, which="both", alpha=0.25)
    outside = dict(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.legend(fontsize=7, **(outside if names else dict(loc="best")))
    harness.save_figure(fig, path)


#: README.md's headline figure: the wave problem with no weighting, PINA's
#: rules and the default, which there trains as the sketch without the
#: band (the band does not act on a time-dependent problem).
HEADLINE = ("wave", "figures/weightings/wave-headline.png")
HEADLINE_ROWS = ("none", "pina_self_adaptive", "pina_ntk", "sketch_predictor")


def headline_names(every):
    """The headline's curves as a user writes them."""
    names = {w: label(w, every).replace("`", "") for w in HEADLINE_ROWS}
    names = {w: text.replace("PINA ", "") for w, text in names.items()}
    names.update(none="no weighting", sketch_predictor="SketchNTKWeighting()")
    return names


def make_condition_figure(problem, analysis, every, path):
    """Seed 0 of each weighting: each condition's weight relative to the
    interior condition's (the one with most points), and its loss, against
    the steps; a colour per weighting, a line style per condition."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10.0, 4.2))
    left, right = fig.subplots(1, 2)
    styles = ("-", "--", ":", "-.", (0, (5, 1, 1, 1)))
    for index, (weighting, row) in enumerate(analysis["rows"].items()):
        run = min(row["runs"], key=lambda r: r["seed"])
        found = run["history"].get("conditions")
        if not found or not found["steps"]:
            continue
        colour, counts = f"C{index}", run["counts"]
        interior = max(counts, key=counts.get)
        for style, condition in zip(styles * 2, counts):
            losses = [step[condition] for step in found["losses"]]
            right.plot(found["steps"], losses, color=colour, ls=style, lw=1)
            if condition != interior and found["weights"][-1]:
                ratio = [w[condition] / w[interior] for w in found["weights"]]
                left.plot(found["steps"], ratio, color=colour, ls=style, lw=1)
        text = label(weighting, every).replace("`", "")
        left.plot([], [], color=colour, label=text)
    first = next(iter(analysis["rows"].values()))["runs"][0]["counts"]
    for style, condition in zip(styles * 2, first):
        right.plot([], [], color="0.3", ls=style, label=condition)
    interior = max(first, key=first.get)
    left.set_ylabel(f"weight / weight of {interior}")
    right.set_ylabel("condition loss (mean squared residual)")
    for ax in (left, right):
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=6, loc="best")
    fig.suptitle(f"{problem}: weights and condition losses, seed 0")
    harness.save_figure(fig, path)


def has_parameter_history(analysis):
    """Whether a run recorded its parameter error's history."""
    rows = analysis["rows"].values()
    return any(
        PARAMETER_ERROR[0] in run["history"]
        for row in rows
        for run in row["runs"]
    )


def has_condition_history(analysis):
    """Whether the runs recorded their condition losses and weights."""
    rows = analysis["rows"].values()
    return any(
        run["history"].get("conditions", {}).get("steps")
        for row in rows
        for run in row["runs"]
    )


def rejection_cell(runs):
    """Proposals of weights whose estimate was unusable (non-finite,
    negative, all zero) over all proposals of the runs, and the blocks
    sketched on their own (with their seeds)."""
    if any("rejections" not in r for r in runs):
        return "not recorded"
    found = [r["rejections"] for r in runs if r["rejections"]]
    if not found:
        return "—"
    bad = sum(f[k] for f in found for k in ESTIMATE_REJECTIONS)
    cell = f"{bad} of {sum(f['proposals'] for f in found)}"
    isolated = [b for f in found for b in f["isolated"]]
    blocks = {b: isolated.count(b) for b in dict.fromkeys(isolated)}
    isolated = ", ".join(f"{b} ({n} seed(s))" for b, n in blocks.items())
    return cell + (f"; isolated: {isolated}" if isolated else "")


def problem_section(document, problem):
    """One problem's section: its set-up, table, failures and figure."""
    runs, parts = document["runs"], document["parts"]
    every = document["settings"]["update_every"]
    analysis = analyse(runs, problem, document["weightings"])
    if not analysis["rows"]:
        return []
    first = next(iter(analysis["rows"].values()))["runs"]
    own = [r for r in runs if r["problem"] == problem]
    machines = {parts[r.get("part", 0)]["machine_label"] for r in own}
    counts = ", ".join(f"{c} {n}" for c, n in first[0]["counts"].items())
    drawn = "drawn once" if problem in FIXED_POINTS else "per step"
    lines = [
        "",
        f"## {problem}",
        "",
        f"`{PROBLEMS[problem][0]}`; points {drawn}: {counts}; "
        f"{first[0]['steps']} steps, {len(first)} seed(s); ran on "
        f"{'; '.join(sorted(machines))}.",
    ]
    if any(first[0][k] != document["settings"][k] for k in TUTORIAL_NETWORK):
        lines += ["", f"Network of this problem: {network_text(first[0])}."]
    table, notes = [], []
    parameter = problem in inverse.inverse_of(document, INVERSE)
    for weighting, row in analysis["rows"].items():
        name = label(weighting, every)
        ms, ratio = row["ms_per_step"], row["cost_ratio"]
        weights = [w for r in row["runs"] for w in r["final_weights"].values()]
        finite = [w for w in weights if math.isfinite(w)]
        shown = f"{min(finite):.2g}–{max(finite):.2g}" if finite else "—"
        if len(finite) < len(weights):
            shown += " **non-finite**"
        ms = "—" if ms is None else f"{ms:.1f}"
        ratio = "—" if ratio is None else f"{ratio:.2f}×"
        rejected = rejection_cell(row["runs"])
        row_cells = [name, error_cell(row["final"]), ms, ratio, shown]
        if parameter:  # the parameter error beside the solution's
            row_cells.insert(2, inverse.shown(row["parameter"], error_cell))
        table.append(row_cells + [rejected])
        for run in row["runs"]:
            start = (run["history"]["errors"] or [None])[0]
            note = run["failure"]
            if run["status"] == "ok" and run["final_error"] >= start:
                note = (
                    f"final error above the untrained network's ({start:.2e})"
                )
            if note:
                notes.append(f"- {name}, seed {run['seed']}: {note}")
    header = ["weighting", f"rel. L2 at step {first[0]['steps']}"]
    if parameter:
        header.insert(2, f"parameter error at step {first[0]['steps']}")
    header += ["ms/step", "cost per step"]
    header += ["final weights", "rejected estimates"]
    lines += ["", *harness.markdown_table(header, table)]
    if parameter:
        what = "the final value, median over seeds (their range)"
        lines += ["", inverse.note(header[2:3], what)]
    if notes:
        lines += ["", "Failures and notes:", "", *notes]
    figure = f"figures/weightings/{problem}.png"
    lines += ["", f"![{problem}: error against time]({figure})"]
    if has_parameter_history(analysis):
        figure = f"figures/weightings/{problem}-parameter.png"
        lines += ["", f"![{problem}: parameter error against time]({figure})"]
    if has_condition_history(analysis):
        figure = f"figures/weightings/{problem}-conditions.png"
        lines += ["", f"![{problem}: weights and condition losses]({figure})"]
    return lines


def superseded_lines(runs):
    """The runs superseded by a rerun, each with the reason (they stay in
    the results file and out of the tables)."""
    found = [
        f"- {r['problem']}, {r['weighting']}, seed {r['seed']} (part "
        f"{r['part'] + 1}): {r['superseded']['reason']}"
        for r in runs
        if "superseded" in r
    ]
    head = ["Superseded by a rerun, left out of the tables:", ""]
    return [*head, *found, ""] if found else []


def summary_note(document):
    """The summary's sentence on its parameter columns, if it has any."""
    found = inverse.inverse_of(document, INVERSE)
    found = [inverse.column(p) for p in found]
    what = "the median over seeds of the final parameter error"
    return [inverse.note(found, what), ""] if found else []


def render(document):
    """The page's generated block, from the results document alone."""
    runs, settings = document["runs"], document["settings"]

    def problems_of(index, part):
        mine = {r["problem"] for r in runs if r.get("part", 0) == index}
        return ", ".join(sorted(mine))

    failed = sum(r["status"] != "ok" for r in runs)
    steps = ", ".join(map(str, sorted({r["steps"] for r in runs})))
    every = settings["update_every"]
    recorded = [
        [label(w, every), options_text(runs, w)] for w in document["weightings"]
    ]
    lines = harness.parts_lines(document, problems_of) + [
        f"Runs: {len(runs)} of {document['planned_runs']} planned ({failed} "
        "failed). Network and optimiser unless a problem says otherwise: "
        f"{network_text(settings)}. Error: relative L2 on a "
        f"{settings['grid']}² grid of the input box, {settings['records']} "
        "times per run. Rejected estimates: proposals of weights (one per "
        "sample, the warm start's included) whose averaged trace estimate "
        "was non-finite, negative or all zero, of all proposals of the "
        "seeds (`ntk_rejected/*`); isolated: blocks sketched on their own "
        "after their average turned negative; not recorded: runs made "
        "before the count existed.",
        "",
        *superseded_lines(runs),
        "## Summary",
        "",
        "Median relative L2 over seeds; per problem the lowest in bold; — "
        "where the weighting was not run.",
        "",
        f"After the same number of steps ({steps}):",
        "",
        *summary_table(document),
        "",
        *summary_note(document),
        "## Weightings as recorded",
        "",
        *harness.markdown_table(["weighting", "options"], recorded, "ll"),
    ]
    for problem in document["problems"]:
        lines += problem_section(document, problem)
    return "\n".join(lines) + "\n"


def write_outputs(document, output_dir):
    """Write the JSON, the page and the figures."""
    harness.write_json(os.path.join(output_dir, "weightings.json"), document)
    page = os.path.join(output_dir, "weightings.md")
    harness.write_page(page, SCRIPT, render(document), TITLE)
    folder = os.path.join(output_dir, "figures", "weightings")
    every = document["settings"]["update_every"]
    for problem in document["problems"]:
        analysis = analyse(document["runs"], problem, document["weightings"])
        if not analysis["rows"]:
            continue
        path, rows = os.path.join(folder, f"{problem}.png"), analysis["rows"]
        make_figure(problem, analysis, every, path)
        if problem == HEADLINE[0] and set(HEADLINE_ROWS) <= set(rows):
            headline = dict(analysis, rows={w: rows[w] for w in HEADLINE_ROWS})
            path = os.path.join(output_dir, HEADLINE[1])
            make_figure(problem, headline, every, path, headline_names(every))
        if has_condition_history(analysis):
            path = os.path.join(folder, f"{problem}-conditions.png")
            make_condition_figure(problem, analysis, every, path)
        if has_parameter_history(analysis):
            path = os.path.join(folder, f"{problem}-parameter.png")
            measure = PARAMETER_ERROR
            make_figure(problem, analysis, every, path, measure=measure)
