"""The wave-problem studies' page, rendered from a results document alone."""

import os

from benchmarks import harness
from benchmarks.harness import markdown_table


def method_link(output):
    """The link to ``docs/benchmark-method.md`` from a page at ``output``:
    relative in the repository, the repository path otherwise."""
    target, page = "docs/benchmark-method.md", os.path.abspath(output or "/")
    if os.path.commonpath([page, harness.ROOT]) != harness.ROOT:
        return target
    method = os.path.join(harness.ROOT, target)
    return os.path.relpath(method, os.path.dirname(page)).replace(os.sep, "/")


def section(title, intro, header, rows, align=None):
    """A section's lines: title, introduction and table."""
    table = markdown_table(header, rows, align)
    return ["", f"## {title}", "", intro, "", *table]


def weighting_section(document, link):
    """The table with a row per network and configuration."""
    rows, depth = document["rows"], document["settings"]["depth"]
    time, memory = (any(k in row for row in rows) for k in ("time", "memory"))
    header = ["network", "weighting"]
    header += ["ms / step", "× unweighted", "range over rounds"] * time
    header += ["peak extra memory (MiB)", "× unweighted"] * memory
    cells = []
    for row in rows:
        count = document["parameters"][str(row["width"])]
        line = [f"{depth}×{row['width']} ({count:,} parameters)", row["label"]]
        if time:
            ms, ratio, low, high = row["time"]
            line += [f"{ms:.1f}", f"{ratio:.2f}", f"{low:.2f}–{high:.2f}"]
        cells.append(line + [f"{v:.2f}" for v in row.get("memory", [])])
    reference = any(r["label"].startswith("*reference") for r in rows)
    text = [
        "Time: median over rounds of the per-round ratio to the same round's "
        f"unweighted runs, and its range ([method]({link}#time-per-step))",
        "memory: ratio to the unweighted run of the same network "
        f"([method]({link}#peak-extra-memory))",
        f"rows in italics are the [reference rows]({link}#reference-rows)",
    ]
    text = [t for t, shown in zip(text, (time, memory, reference)) if shown]
    title = {(1, 1): "Time and memory", (1, 0): "Time per step"}
    title = title.get((time, memory), "Peak extra memory")
    intro = "; ".join(text)
    intro = intro[0].upper() + intro[1:] + "."
    return section(title, intro, header, cells, "ll" + "r" * (len(header) - 2))


def target_section(document, link):
    """The targets table; the reference column only where one is known."""
    checks, depth = document["targets"], document["settings"]["depth"]
    with_reference = any(c.get("reference") is not None for c in checks)
    header = ["network", "quantity", "measured", "90% interval", "target"]
    header += ["verdict"] + ["unavoidable work alone"] * with_reference
    rows = []
    for check in checks:
        measured, limit = check["measured"], check["limit"]
        cells = [f"{depth}×{check['width']}", check["label"]]
        cells.append(f"{measured:.3f}×")
        if check["label"].startswith("memory"):
            # one profiled run, whose allocations repeat exactly: by value
            cells += ["—", f"≤ {limit:g}×"]
            cells.append("pass" if measured <= limit else "**miss**")
        elif "rounds" in check:  # time: by its interval over rounds
            low, high = harness.bootstrap_interval(check["rounds"])
            cells += [f"{low:.3f}–{high:.3f}×", f"≤ {limit:g}×"]
            cells.append(harness.judged(check["rounds"], limit))
        else:  # a results file without the rounds: nothing to resolve by
            cells += ["—", f"≤ {limit:g}×", "not resolved"]
        if with_reference:
            reference = check.get("reference")
            cells.append("—" if reference is None else f"{reference:.3f}×")
        rows.append(cells)
    intro = f"[Targets]({link}#targets), verdicts by the interval over "
    intro += "rounds" + with_reference * (
        "; the last column is the ratio of the matching reference row: the "
        "unavoidable part of the measured ratio"
    )
    align = "llrrrl" + "r" * with_reference
    return section("Targets", intro + ".", header, rows, align)


def render(document, output=None):
    """The markdown block of a study's page.

    :param dict document: The results (``rows`` with ``time`` = [ms, ratio,
        low, high], ``memory`` = [MiB, ratio]; ``targets``).
    :param output: The page's path (for its links), or ``None``."""
    link = method_link(output)
    lines = [
        f"How it measures and what each row means: [benchmark method]({link}).",
        "",
        *harness.header_lines(document["parts"][0]),
        *(f"- {line}" for line in document["lines"]),
    ]
    if document.get("rows"):
        lines += weighting_section(document, link)
    if document.get("targets"):
        lines += target_section(document, link)
    return "\n".join(lines) + "\n"
