"""The wave-problem studies' page (``step_time.py``, ``peak_memory.py``,
``sketch_accuracy.py``, ``overhead.py``), rendered from a results document
alone: the time and memory table, the targets and the accuracy section."""

import os

import harness
from harness import fmt, markdown_table


def method_link(output, anchor=""):
    """The link to ``docs/benchmark-method.md`` from a page at ``output``:
    relative in the repository, the repository path otherwise."""
    target = "docs/benchmark-method.md"
    if output is not None:
        folder = os.path.dirname(os.path.abspath(output))
        if os.path.commonpath([folder, harness.ROOT]) == harness.ROOT:
            method = os.path.join(harness.ROOT, target)
            target = os.path.relpath(method, folder).replace(os.sep, "/")
    return target + (f"#{anchor}" if anchor else "")


def weighting_table(document, time, memory):
    """The table with one row per network and configuration."""
    header = ["network", "weighting"]
    header += ["ms / step", "× unweighted", "range over rounds"] * time
    header += ["peak extra memory (MiB)", "× unweighted"] * memory
    depth = document["settings"]["depth"]
    cells = []
    for row in document["rows"]:
        count = document["parameters"][str(row["width"])]
        line = [f"{depth}×{row['width']} ({count:,} parameters)", row["label"]]
        if time:
            ms, ratio, low, high = row["time"]
            line += [fmt(ms, 1), fmt(ratio), f"{fmt(low)}–{fmt(high)}"]
        if memory:
            line += [fmt(row["memory"][0]), fmt(row["memory"][1])]
        cells.append(line)
    return markdown_table(header, "ll" + "r" * (len(header) - 2), cells)


def target_table(document, with_reference):
    """The targets table; the reference column only where one is known."""
    header = ["network", "quantity", "measured", "target", "verdict"]
    header += ["unavoidable work alone"] * with_reference
    rows = []
    for check in document["targets"]:
        row = [
            f"{document['settings']['depth']}×{check['width']}",
            check["label"],
            f"{fmt(check['measured'], 3)}×",
            f"≤ {check['limit']:g}×",
            "pass" if check["measured"] <= check["limit"] else "**fail**",
        ]
        if with_reference:
            reference = check.get("reference")
            row.append("—" if reference is None else f"{fmt(reference, 3)}×")
        rows.append(row)
    return markdown_table(header, "llrrl" + "r" * with_reference, rows)


def accuracy_section(accuracy, output):
    """The accuracy section, from the page's numbers."""
    checkpoints, names = accuracy["checkpoints"], accuracy["names"]
    errors = [
        [label, *(fmt(v, 1) for v in values), fmt(largest, 1)]
        for label, values, largest in accuracy["errors"]
    ]
    weights = [
        [label, *(fmt(v, 3) for v in exact + sketch)]
        for label, exact, sketch in accuracy["weights"]
    ]
    columns = [f"`{n}` exact" for n in names] + [f"`{n}` sketch" for n in names]
    link = method_link(output, "accuracy-of-the-sketched-weights")
    return [
        "## Accuracy of the sketched weights",
        "",
        "Max over conditions of |w_sketch − w_exact| / w_exact in percent, "
        "median over seeds; last column: largest value over steps and "
        f"seeds; [method]({link}).",
        "",
        *markdown_table(
            ["estimator", *(f"step {c}" for c in checkpoints), "max"],
            "l" + "r" * (len(checkpoints) + 1),
            errors,
        ),
        "",
        f"Weights at step {accuracy['step']}, seed {accuracy['seed']} (each "
        "run has its own exact reference):",
        "",
        *markdown_table(
            ["estimator", *columns], "l" + "r" * len(columns), weights
        ),
    ]


def render(document, output=None):
    """
    The page of a wave-problem study, from its results document alone.

    :param dict document: ``script``, ``parts``, ``settings``, ``lines``
        (the settings in words), ``parameters`` and, as measured, ``rows``
        (per network and configuration: ``time`` = [ms, ratio, low, high],
        ``memory`` = [MiB, ratio]), ``targets`` and ``accuracy``.
    :param output: The page's path (for the method links), or ``None``.
    :return: The markdown block.
    :rtype: str
    """
    lines = [
        "How it measures and what each row means: "
        f"[benchmark method]({method_link(output)}).",
        "",
        *harness.header_lines(document["parts"][0]),
        *(f"- {line}" for line in document["lines"]),
    ]
    rows = document.get("rows", [])
    time, memory = (any(k in row for row in rows) for k in ("time", "memory"))
    if rows:
        text = []
        if time:
            text.append(
                "Time: median over rounds of the per-round ratio to the same "
                "round's unweighted runs, and its range ([method]"
                f"({method_link(output, 'time-per-step')}))"
            )
        if memory:
            text.append(
                "memory: ratio to the unweighted run of the same network "
                f"([method]({method_link(output, 'peak-extra-memory')}))"
            )
        if any(r["label"].startswith("*reference") for r in rows):
            text.append(
                f"rows in italics are the [reference rows]"
                f"({method_link(output, 'reference-rows')})"
            )
        title = {(1, 1): "Time and memory", (1, 0): "Time per step"}
        title = title.get((time, memory), "Peak extra memory")
        intro = "; ".join(text)
        lines += ["", f"## {title}", "", intro[0].upper() + intro[1:] + ".", ""]
        lines += weighting_table(document, time, memory)
    if document.get("targets"):
        checks = document["targets"]
        with_reference = any(c.get("reference") is not None for c in checks)
        intro = f"[Targets]({method_link(output, 'targets')})"
        if with_reference:
            intro += (
                "; the last column is the ratio of the matching reference "
                "row: the unavoidable part of the measured ratio"
            )
        table = target_table(document, with_reference)
        lines += ["", "## Targets", "", intro + ".", "", *table]
    if "accuracy" in document:
        lines += ["", *accuracy_section(document["accuracy"], output)]
    return "\n".join(lines) + "\n"
