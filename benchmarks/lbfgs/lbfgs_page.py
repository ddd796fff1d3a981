"""The L-BFGS study's summaries and page (``lbfgs.py`` runs it): each row's
error ratio to the plain sum per setting at equal steps and equal time,
the suite's verdict on the held candidate against the default, and the
price of an Adam and an L-BFGS step with each weighting."""

import math
import os
import statistics

from benchmarks import harness
from benchmarks.suite import suite_protocol as protocol

SCRIPT = "lbfgs/lbfgs.py"
TITLE = "Adam then L-BFGS: does weighting still pay?"
NONE, DEFAULT, HELD = "none", "sketch_predictor", "sketch_held"
LABELS = {
    NONE: "none (plain sum)",
    DEFAULT: "`SketchNTKWeighting()`, the default",
    HELD: "the default, weights held from the switch on (candidate)",
    "exact_every_step": "`NTKWeighting()`, every step",
    "exact_100": "`NTKWeighting(update_every_n_steps=100)`",
}
PHASES = ("adam", "lbfgs")
#: The study's rows (the priced rows add exact weights).
ROWS = (NONE, DEFAULT, HELD)
#: A relative L2 error at or above 1 is no better than the zero function:
#: where every row ends there, no row solves the setting, and its ratios
#: compare failures, neither a gain nor a loss.
UNSOLVED = 1.0


def phase_ms(run, switch):
    """``(ms per Adam step, ms per L-BFGS step)`` of a run, from its
    records' training time at the switch and at the end."""
    history = run["history"]
    seconds = dict(zip(history["steps"], history["seconds"]))
    end = run["steps"]
    if run.get("status") != "ok" or switch not in seconds:
        return math.nan, math.nan
    adam = seconds[switch] / switch
    return 1e3 * adam, 1e3 * (seconds[end] - seconds[switch]) / (end - switch)


def refresh_period(options, phase, row):
    """Optimisation steps between a priced row's refreshes in a phase: its
    spacing (the sketch's samples, exact updates), 1 for the plain sum and
    for the held candidate under L-BFGS (nothing is due)."""
    if not options or options.get("class") is None:
        return 1
    if phase == "lbfgs" and row == HELD:
        return 1
    keys = ("sample_every_n_steps", "update_every_n_steps")
    return next((options[k] for k in keys if options.get(k)), 1)


def phase_price(durations, window, period):
    """The time of a step over one refresh period in ``window`` (``[start,
    stop)`` step indices): the median of its due steps (``step % period ==
    0``) plus ``period - 1`` times the median of the others, over
    ``period``; the median step for a period of 1; NaN (not measured) for
    a window without a due step or without another."""
    steps = range(*window)
    due = [durations[j] for j in steps if j % period == 0]
    other = [durations[j] for j in steps if j % period]
    if period == 1:
        return statistics.median(durations[slice(*window)])
    if not due or not other:
        return math.nan
    total = statistics.median(due) + (period - 1) * statistics.median(other)
    return total / period


def price_ratios(document):
    """``{setting: {row: {phase: [ratio by round]}}}``: each priced row's
    step price over the mean of its round's two plain-sum runs, and
    ``{setting: {phase: [ms of the plain sum by round]}}``."""
    windows = document["price"]["windows"]
    by_round = {}
    for run in document["prices"]:
        if run["status"] != "ok":
            continue
        found = {}
        for phase in PHASES:
            period = refresh_period(run["options"], phase, run["row"])
            found[phase] = phase_price(run["durations"], windows[phase], period)
        place = by_round.setdefault((run["problem"], run["round"]), {})
        place.setdefault(run["row"], []).append(found)
    ratios, plain = {}, {}
    for (setting, _), rows in sorted(by_round.items()):
        nones = rows.pop(NONE, [])
        none = {p: statistics.fmean(n[p] for n in nones) for p in PHASES}
        for phase in PHASES:
            ms = plain.setdefault(setting, {}).setdefault(phase, [])
            ms.append(1e3 * none[phase])
        for row, (found,) in rows.items():
            place = ratios.setdefault(setting, {}).setdefault(row, {})
            for phase in PHASES:
                place.setdefault(phase, []).append(found[phase] / none[phase])
    return ratios, plain


def equal_time_step(adam, lbfgs, q, adam_cost, lbfgs_cost):
    """The step a row reaches in the plain sum's training time: ``adam``
    Adam then ``lbfgs`` L-BFGS steps, an L-BFGS step of the plain sum ``q``
    times its Adam step, the row's steps ``adam_cost`` and ``lbfgs_cost``
    times the plain sum's."""
    budget = adam + lbfgs * q  # in the plain sum's Adam steps
    if adam * adam_cost >= budget:
        return budget / adam_cost
    return adam + (budget - adam * adam_cost) / (q * lbfgs_cost)


def time_costs(document):
    """``{setting: {row: cost}}`` for the protocol's equal time: the cost
    whose ``steps / cost`` is :func:`equal_time_step`, from the priced
    rows' medians over rounds and the plain sum's L-BFGS step over its
    Adam step in the study's own runs (median over seeds); empty without
    prices."""
    recipe = document["recipe"]
    adam, lbfgs = recipe["adam"], recipe["lbfgs"]
    ratios, _ = price_ratios(document)
    runs, costs = protocol.current(document["runs"]), {}
    for setting, rows in ratios.items():
        plain = [
            phase_ms(r, adam)
            for r in runs
            if r["problem"] == setting and r["weighting"] == NONE
        ]
        q = statistics.median(b / a for a, b in plain if math.isfinite(a))
        costs[setting] = {NONE: 1.0}
        for row, found in rows.items():
            medians = [statistics.median(found[p]) for p in PHASES]
            if all(map(math.isfinite, medians)):  # else no equal time
                step = equal_time_step(adam, lbfgs, q, *medians)
                costs[setting][row] = (adam + lbfgs) / step
    return costs


def seed_ratios(runs, setting, row, basis, costs):
    """A row's error ratios to the plain sum on one setting, paired by
    seed (the protocol's pairing and equal time)."""
    pairs = protocol.paired(runs, setting, row, NONE)
    return protocol.problem_ratios(pairs, basis, costs.get(setting))


def setting_rows(document):
    """Per setting and study row: the geometric means over seeds of the
    error at the switch and at the end (the protocol's metric), the ms per
    Adam and per L-BFGS step (medians over seeds) and, per basis, the
    geometric mean and the worst of the ratios to the plain sum."""
    runs, costs = protocol.current(document["runs"]), time_costs(document)
    switch, found = document["recipe"]["adam"], {}
    for setting in document["recipe"]["settings"]:
        for row in ROWS:
            mine = [
                r
                for r in runs
                if r["problem"] == setting and r["weighting"] == row
            ]
            ms = [phase_ms(r, switch) for r in mine]
            entry = {
                "runs": len(mine),
                "failed": sum(r["status"] != "ok" for r in mine),
                "at_switch": protocol.geometric_mean(
                    protocol.run_error(r, switch) for r in mine
                ),
                "at_end": protocol.geometric_mean(
                    map(protocol.run_error, mine)
                ),
                "ms": [
                    statistics.median(p) if p else math.nan for p in zip(*ms)
                ],
            }
            for basis in protocol.BASES:
                ratios = seed_ratios(runs, setting, row, basis, costs)
                entry[basis] = (
                    protocol.geometric_mean(ratios),
                    max(ratios, default=math.nan),
                    bool(ratios) and min(ratios) > 1,
                )
            found[(setting, row)] = entry
    return found


def verdict(document):
    """The suite's rule on the held candidate against the default over the
    study's settings: ``(winner, checks, summary)``."""
    costs = time_costs(document)
    settings = document["recipe"]["settings"]
    summary = protocol.summarise(document["runs"], ROWS, settings, costs)
    winner, checks = protocol.decide(summary, [HELD])
    return winner, checks, summary


def number(value, digits=3):
    """A value to ``digits`` significant digits; a dash for NaN."""
    return "—" if math.isnan(value) else f"{value:.{digits}g}"


def times(value):
    """A ratio as ``1.23×``."""
    return "—" if math.isnan(value) else f"{value:.2f}×"


def unsolved(found):
    """The settings no row solves: every row's error at the end at or
    above :data:`UNSOLVED`."""
    settings = dict.fromkeys(s for s, _ in found)
    return [
        s
        for s in settings
        if all(e["at_end"] >= UNSOLVED for (t, _), e in found.items() if t == s)
    ]


def losses(found, row, basis):
    """The settings some row solves where ``row``'s ratio to the plain sum
    is above 1, each marked where it is above 1 on every seed."""
    failures = unsolved(found)
    return [
        f"`{s}`" + " (on every seed)" * e[basis][2]
        for (s, r), e in found.items()
        if r == row and e[basis][0] > 1 and s not in failures
    ]


def study_lines(document):
    """The table of the study's rows and the sentences of what they lose."""
    found = setting_rows(document)
    header = ["setting", "row", "error at switch", "error at end"]
    header += ["÷ none, equal steps (worst seed)", "÷ none, equal time (worst)"]
    header += ["ms / Adam step", "ms / L-BFGS step"]
    rows = []
    for (setting, row), entry in found.items():
        cells = [f"`{setting}`", LABELS[row]]
        cells += [number(entry["at_switch"]), number(entry["at_end"])]
        for basis in protocol.BASES:
            mean, worst, _ = entry[basis]
            cells.append(f"{times(mean)} ({times(worst)})")
        cells += [f"{ms:.1f}" for ms in entry["ms"]]
        rows.append(cells)
    failed = sum(e["failed"] for e in found.values())
    total = sum(e["runs"] for e in found.values())
    lines = harness.markdown_table(header, rows) + [""]
    lines += [f"- Runs that failed: {failed} of {total}."]
    failures = ", ".join(f"`{s}`" for s in unsolved(found)) or "none"
    lines.append(
        f"- Solved by no row (every row's error at the end at or above "
        f"{UNSOLVED:g}, no better than zero): {failures}; their ratios "
        "compare failures and count as neither gains nor losses."
    )
    for row in (DEFAULT, HELD):
        for basis in protocol.BASES:
            lost = losses(found, row, basis)
            named = ", ".join(lost) or "no setting"
            lines.append(
                f"- {LABELS[row][0].upper()}{LABELS[row][1:]}, equal "
                f"{basis}: worse than none on {named}."
            )
    return lines


def verdict_lines(document):
    """The suite's verdict on the held candidate against the default."""
    winner, checks, summary = verdict(document)
    held = summary[HELD]
    rows = []
    for basis in protocol.BASES:
        entry = held[basis]
        low, high = entry["to_published_interval"]
        per = ", ".join(
            f"`{s}` {times(v)}"
            for s, v in entry["per_problem_published"].items()
        )
        marks = [checks[HELD][f"{k} ({basis})"] for k in "abc"]
        rows.append(
            [basis, times(entry["to_published"]), f"{low:.2f}–{high:.2f}", per]
            + ["yes" if m else "**no**" for m in marks]
        )
    header = ["basis", "held ÷ default", "interval", "per setting"]
    header += ["(a) below 1", "(b) none above 1.25×", "(c) no more losses"]
    decided = "the held candidate" if winner == HELD else "the default"
    count = len(summary[HELD]["steps"]["per_problem"])
    level = f"{round(100 * harness.LEVEL)} % bootstrap"
    values = dict(count=count, decided=decided, level_text=level)
    lines = harness.paragraphs(RULE, values)
    return (
        lines[:1]
        + [""]
        + harness.markdown_table(header, rows, "lrrlrrr")
        + [
            "",
            lines[1],
        ]
    )


RULE = """The suite's rule (`suite_protocol.decide`), here on the {count}
settings of this study: the candidate replaces the default only if, at
equal steps and at equal time, (a) its geometric-mean error ratio to the
default is below 1 with the {level_text} interval's upper end at most 1,
(b) no setting has it above 1.25 times the default and (c) it is worse
than none on every seed on no more settings than the default.

By that rule the winner is **{decided}**."""


def price_cell(values):
    """A price's median over rounds and its interval, or a dash where a
    round did not measure it (no refresh in its window)."""
    if not all(map(math.isfinite, values)):
        return "—"
    low, high = harness.bootstrap_interval(values, harness.LEVEL)
    return f"{statistics.median(values):.2f}× ({low:.2f}–{high:.2f})"


def price_lines(document):
    """The table of step prices: medians over rounds with their intervals."""
    ratios, plain = price_ratios(document)
    rows = []
    for setting, by_row in ratios.items():
        ms = [statistics.median(plain[setting][p]) for p in PHASES]
        cells = [f"`{setting}`", LABELS[NONE] + ": ms per step"]
        rows.append(cells + [f"{m:.1f} ms" for m in ms])
        for row, found in by_row.items():
            cells = [f"`{setting}`", LABELS[row]]
            for phase in PHASES:
                cells.append(price_cell(found[phase]))
            rows.append(cells)
    header = ["setting", "row", "Adam step ÷ none", "L-BFGS step ÷ none"]
    return harness.markdown_table(header, rows)


def steps_text(window):
    """A window ``[start, stop)`` of step indices, in words."""
    return f"{window[0]} to {window[1] - 1}"


def recipe_lines(document):
    """The recipe, settings and seeds, and where the numbers come from."""
    recipe, price = document["recipe"], document["price"]
    options = ", ".join(
        f'{k}="{v}"' if isinstance(v, str) else f"{k}={v}"
        for k, v in recipe["lbfgs_options"].items()
    )
    s = document["settings"]
    settings = ", ".join(f"`{name}`" for name in recipe["settings"])
    gpus = {part.get("gpu") for part in document["parts"]} - {None}
    values = dict(
        adam=recipe["adam"],
        lbfgs=recipe["lbfgs"],
        options=options,
        settings=settings,
        every=recipe["every"],
        width=s["width"],
        depth=s["depth"],
        lr=s["lr"],
        decay=s["lr_decay"],
        decay_steps=s["lr_decay_steps"],
        grid=s["grid"],
        gpu=", ".join(sorted(gpus)) or "none (CPU only)",
        rounds=price["rounds"],
        switch=price["switch"],
        plbfgs=price["lbfgs"],
        adam_window=steps_text(price["windows"]["adam"]),
        lbfgs_window=steps_text(price["windows"]["lbfgs"]),
        level=round(100 * harness.LEVEL),
        last=recipe["seeds"] - 1,
        span=(protocol.LAST_RECORDS - 1) * recipe["every"],
    )
    return harness.paragraphs(RECIPE, values)


RECIPE = """Recipe: the suite's tuning-half settings ({width}×{depth} tanh
network, Adam with learning rate {lr} decaying ×{decay} per {decay_steps}
steps) for {adam} steps, then PINA's `SwitchOptimizer` to
`TorchOptimizer(torch.optim.LBFGS, {options})` for {lbfgs} more
optimisation steps. {adam} and {lbfgs} were fixed in `benchmarks/lbfgs/lbfgs.py`
before the run whose numbers these are. Settings: {settings} (the tuning
half's settings whose points are drawn once: L-BFGS needs a fixed
objective); seeds 0–{last} per row, paired by seed. GPU: {gpu}.

Error: the suite's metric, the median of a run's last five recorded
relative L2 errors on the {grid}×{grid} grid, recorded every {every} steps
(so over the last {span} steps); at the switch, the same over the records up
to it. Equal time, as the suite measures it: each run's records within the
steps its row makes in the plain sum's training time, from its Adam and
L-BFGS steps' prices over the plain sum's (below) and the plain sum's
L-BFGS step over its Adam step (median over its seeds' runs). The ms per
step: the runs' own training time (two runs at once), median over seeds.

Prices: {rounds} interleaved rounds, one process, one thread, nothing else
running; per round and setting, the rows in an order rotated by the round
between two plain-sum runs, seed 0, {switch} Adam then {plbfgs} L-BFGS
steps. A row's price in a phase is its step time over one refresh period
(the median of its refresh steps plus the period less one times the median
of the others, over the period) in the window of steps {adam_window} (Adam)
or {lbfgs_window} (L-BFGS), over the mean of the round's two plain-sum
runs; median over rounds with its {level} % bootstrap interval; a dash
where the window holds none of the row's refreshes."""


def render(document):
    """The page's block, from the results alone."""
    describe = lambda index, part: part.get("what", "")  # noqa: E731
    lines = harness.parts_lines(document, describe)
    lines += [p + "\n" for p in recipe_lines(document)]
    lines += ["## Error ratios to the plain sum", ""]
    lines += study_lines(document)
    if document["prices"]:
        lines += ["", "## Held weights against the default", ""]
        lines += verdict_lines(document)
        lines += ["", "## The price of a step", ""]
        lines += price_lines(document)
    return "\n".join(lines) + "\n"


def write_outputs(document, output_dir):
    """Write the page's block (the results file is written by the run)."""
    path = os.path.join(output_dir, "lbfgs.md")
    harness.write_page(path, SCRIPT, render(document), TITLE)
    json_path = os.path.join(output_dir, "lbfgs.json")
    if not os.path.isfile(json_path):
        harness.write_json(json_path, document)
