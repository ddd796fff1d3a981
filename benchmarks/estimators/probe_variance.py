"""How noisy each trace sketch is on the wave tutorial's kernel.

Per condition of the exact NTK after ``--steps`` unweighted steps: trace,
weight and the relative standard deviation ``sqrt(Var) / Tr(K_cc)`` of *one*
sketch of the block trace (exact for Gaussian probes) for the predictor
sketch with a plain and a balanced probe and for the parameter-space sketch;
a moving average of rate ``alpha`` divides it by ``sqrt((2 - alpha) / alpha)``.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import torch
from pina_ntk.core import exact_kernel, ntk_weights
from pina_ntk.core.estimators import balanced_probe_scales, sketch_variances
from pina_ntk.integration.diagnostics import condition_calls
from pina_ntk.integration.pina_adapter import trainable_parameters
from pina_ntk.integration.recording import replay_residual_fn
from pina_ntk.paper.experiments.training import train_pinn
from pina_ntk.paper.experiments.wave import WaveSettings
from pina_ntk.paper.problems import WaveProblem

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness

#: The page the table is part of, and the results file next to it.
PAGE = os.path.join(harness.ROOT, "docs", "estimators.md")
RESULTS = os.path.join(os.path.dirname(PAGE), "probe-variance.json")
SCRIPT = "estimators/probe_variance.py"
#: The table's header and each row's cells.
HEADER = (
    "steps|condition|entries|Tr(K_cc)|exact weight|plain predictor|"
    "balanced predictor|parameter-space"
).split("|")
CELLS = (
    "{steps}|{condition}|{entries}|{trace:.3e}|{weight:.3g}|{plain:.2f}|"
    "{balanced:.2f}|{parameter:.2f}"
).split("|")


def kernel_statistics(steps, seed, quick):
    """Per condition: the exact trace and weight and each sketch's relative
    standard deviation after ``steps`` unweighted steps (``quick``: tiny)."""
    make = WaveSettings.quick if quick else WaveSettings
    settings = make(steps=steps, weightings=("none",), seed=seed)
    solver = train_pinn(WaveProblem(), "none", settings).solver
    calls = condition_calls(solver)
    names = [name for name, _, _ in calls]
    residual_fn = replay_residual_fn(solver, calls, names)
    params = trainable_parameters(solver)
    sizes = torch.tensor([r.numel() for r in residual_fn(params)])
    kernel = exact_kernel(residual_fn, params).double()
    blocks = kernel.diagonal().split(sizes.tolist())
    traces = torch.stack([d.sum() for d in blocks])
    scales = balanced_probe_scales(traces, sizes)
    plain, parameter = sketch_variances(kernel, sizes)
    balanced, _ = sketch_variances(kernel, sizes, scales)
    weights = ntk_weights(traces, sizes)
    columns = dict(entries=sizes, trace=traces, weight=weights)
    spreads = dict(plain=plain, balanced=balanced, parameter=parameter)
    columns.update({k: v.sqrt() / traces for k, v in spreads.items()})
    rows = zip(*(column.tolist() for column in columns.values()))
    return [
        dict(steps=steps, condition=name, **dict(zip(columns, row)))
        for name, row in zip(names, rows)
    ]


def render(document):
    """The page's block: the run's provenance and the table of its rows."""
    lines = sum((harness.header_lines(p) for p in document["parts"]), [])
    cells = [[cell.format(**r) for cell in CELLS] for r in document["rows"]]
    lines += ["", *harness.markdown_table(HEADER, cells, "rlrrrrrr")]
    return "\n".join(lines) + "\n"


def main(argv=None):
    """Run the study and print its table (with ``--write``, save it too)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--steps", type=int, nargs="+", help="default 1 2000; --quick: 1 20")
    add("--seed", type=int, default=0, help="default: 0")
    add("--write", action="store_true", help="write its JSON and page in docs/")
    harness.add_run_flags(parser)
    args = parser.parse_args(argv)
    if args.quick and args.write:  # a smoke run never overwrites results
        parser.error("--write writes the committed results: not with --quick.")
    if args.from_json:
        document = harness.read_json(args.from_json)
        page = harness.quick_path(args, PAGE)
        harness.write_page(page, SCRIPT, render(document), "")
        return 0
    args.steps = args.steps or ([1, 20] if args.quick else [1, 2000])
    if any(s < 1 for s in args.steps):
        parser.error("argument --steps: every value must be at least 1")
    start = time.perf_counter()
    extra = dict(device="cpu", threads=torch.get_num_threads())
    part = harness.provenance(SCRIPT, argv, args.machine_label, **extra)
    rows = []
    for steps in args.steps:
        rows += kernel_statistics(steps, args.seed, args.quick)
    part = harness.finish(part, start)
    document = {"script": SCRIPT, "parts": [part], "rows": rows}
    print(
        "Relative standard deviation sqrt(Var)/Tr(K_cc) of one sketch of "
        f"each block trace (Gaussian probes, exact):\n\n{render(document)}"
    )
    if args.write:
        harness.write_json(RESULTS, document)
        harness.write_page(PAGE, SCRIPT, render(document), "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
