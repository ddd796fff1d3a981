"""How noisy each trace sketch is on the wave tutorial's kernel.

Trains the wave tutorial's unweighted PINN (``WaveSettings()``) for each
``--steps`` value, computes the exact NTK on the last draw of points and
gives, per condition, the exact trace and weight and the relative standard
deviation ``sqrt(Var) / Tr(K_cc)`` of *one* sketch of the block trace
(exact for Gaussian probes,
:func:`pina_ntk.core.estimators.sketch_variances`) for the predictor sketch
with a plain probe (``balanced_probe=False``) and a balanced one (scales
from the exact traces) and for the parameter-space sketch. A moving average
of rate ``alpha`` divides these by about ``sqrt((2 - alpha) / alpha)`` (45
for ``alpha = 1e-3``) once it has run ``1/alpha`` steps; a warm start of
``N`` samples by ``sqrt(N)``.

    python benchmarks/probe_variance.py --write  # docs/probe-variance.json
    python benchmarks/probe_variance.py --quick  # seconds
"""

import argparse
import os
import sys
import time

import torch

from pina_ntk.core.estimators import balanced_probe_scales, sketch_variances
from pina_ntk.core.residual_functions import exact_kernel
from pina_ntk.core.weights import ntk_weights
from pina_ntk.integration.diagnostics import condition_calls
from pina_ntk.integration.pina_adapter import trainable_parameters
from pina_ntk.integration.recording import replay_residual_fn
from pina_ntk.paper.experiments.training import train_pinn
from pina_ntk.paper.experiments.wave import WaveSettings
from pina_ntk.paper.problems import WaveProblem

# The shared harness lies next to this file, also when it is imported by
# path (as the smoke test does) rather than run as a script.
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def kernel_statistics(steps, seed, quick):
    """Per condition: the exact trace and weight and the single-sketch
    relative standard deviations after ``steps`` unweighted steps (with
    ``quick``, of the tutorial's tiny network)."""
    overrides = dict(steps=steps, weightings=("none",), seed=seed)
    settings = (
        WaveSettings.quick(**overrides) if quick else WaveSettings(**overrides)
    )
    solver = train_pinn(WaveProblem(), "none", settings).solver
    calls = condition_calls(solver)
    names = [name for name, _, _ in calls]
    residual_fn = replay_residual_fn(solver, calls, names)
    params = trainable_parameters(solver)
    sizes = torch.tensor([r.numel() for r in residual_fn(params)])
    kernel = exact_kernel(residual_fn, params).double()
    traces = torch.stack(
        [d.sum() for d in kernel.diagonal().split(sizes.tolist())]
    )
    scales = balanced_probe_scales(traces, sizes)
    plain, parameter = sketch_variances(kernel, sizes)
    balanced, _ = sketch_variances(kernel, sizes, scales)
    weights = ntk_weights(traces, sizes)
    return [
        dict(
            steps=steps,
            condition=name,
            entries=int(sizes[c]),
            trace=float(traces[c]),
            weight=float(weights[c]),
            plain=float(plain[c].sqrt() / traces[c]),
            balanced=float(balanced[c].sqrt() / traces[c]),
            parameter=float(parameter[c].sqrt() / traces[c]),
        )
        for c, name in enumerate(names)
    ]


#: The page the table is part of, and the results file next to it.
PAGE = os.path.join(os.path.dirname(__file__), "..", "docs", "estimators.md")
RESULTS = os.path.join(os.path.dirname(PAGE), "probe-variance.json")
SCRIPT = "probe_variance.py"


def render(document):
    """The page's block: the run's provenance and the table of its rows."""
    header = [
        "steps",
        "condition",
        "entries",
        "Tr(K_cc)",
        "exact weight",
        "plain predictor",
        "balanced predictor",
        "parameter-space",
    ]
    cells = [
        [
            r["steps"],
            r["condition"],
            r["entries"],
            f"{r['trace']:.3e}",
            f"{r['weight']:.3g}",
            f"{r['plain']:.2f}",
            f"{r['balanced']:.2f}",
            f"{r['parameter']:.2f}",
        ]
        for r in document["rows"]
    ]
    lines = []
    for part in document["parts"]:
        lines += harness.header_lines(part)
    lines += ["", *harness.markdown_table(header, "rlrrrrrr", cells)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    """Run the study, print the table and, with ``--write``, write the
    results file and the block of ``docs/estimators.md``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps",
        type=int,
        nargs="+",
        default=[1, 2000],
        help="unweighted training steps before each measurement "
        "(default: 1 2000)",
    )
    parser.add_argument("--seed", type=int, default=0, help="default: 0")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (default: 1)"
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="write docs/probe-variance.json and the table in "
        "docs/estimators.md",
    )
    harness.add_run_flags(parser)
    args = parser.parse_args(argv)
    if args.from_json:
        document = harness.read_json(args.from_json)
        harness.write_page(PAGE, SCRIPT, render(document), "")
        return 0
    if any(s < 1 for s in args.steps):
        parser.error("argument --steps: every value must be at least 1")
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    part = harness.provenance(
        SCRIPT, argv, args.machine_label, device="cpu", threads=args.threads
    )
    rows = []
    for steps in args.steps:
        rows += kernel_statistics(steps, args.seed, args.quick)
    part = harness.finish(part, start)
    document = {"script": SCRIPT, "parts": [part], "rows": rows}
    print(
        "Relative standard deviation sqrt(Var)/Tr(K_cc) of one sketch of "
        "each block trace (Gaussian probes, exact):\n"
    )
    print(render(document))
    if args.write:
        harness.write_json(RESULTS, document)
        harness.write_page(PAGE, SCRIPT, render(document), "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
