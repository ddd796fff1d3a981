"""How noisy each trace sketch is on the wave tutorial's kernel.

Trains the wave tutorial's unweighted PINN (the defaults of
:class:`pina_ntk.paper.experiments.wave.WaveSettings`: 64 random Fourier
features into a 3×128 tanh MLP, the paper's point counts drawn afresh every
step) for each ``--steps`` value, computes the exact NTK on the last draw of
points (:func:`pina_ntk.core.residual_functions.exact_kernel`, one backward
pass per residual entry) and prints, per condition, the exact trace, the
exact weight and the relative standard deviation ``sqrt(Var) / Tr(K_cc)`` of
*one* sketch of the block trace
(:func:`pina_ntk.core.estimators.sketch_variances`, exact for Gaussian
probes):

* the predictor sketch with a plain probe (Algorithm 2 verbatim,
  ``balanced_probe=False``),
* the predictor sketch with a balanced probe, its scales taken from the
  exact traces (:func:`pina_ntk.core.estimators.balanced_probe_scales`),
* the parameter-space sketch.

A moving average of rate ``alpha`` divides these by about
``sqrt((2 - alpha) / alpha)`` (45 for ``alpha = 1e-3``) once it has run for
``1/alpha`` steps; a warm start of ``N`` samples divides them by
``sqrt(N)``.

:Example:
    Full run, writing ``docs/probe-variance.json`` and the table of
    ``docs/estimators.md``::

        python benchmarks/probe_variance.py --write

    Smoke run (seconds)::

        python benchmarks/probe_variance.py --quick
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
from harness import (  # noqa: E402
    add_run_flags,
    finish,
    header_lines,
    markdown_table,
    provenance,
    read_json,
    write_json,
    write_page,
)


def kernel_statistics(steps, seed, quick):
    """
    Exact traces, weights and single-sketch relative standard deviations
    after ``steps`` unweighted training steps.

    :param int steps: Adam steps of the unweighted PINN.
    :param int seed: Seed of the network, the points and the training.
    :param bool quick: The tutorial's quick settings (tiny network).
    :return: One dict per condition.
    :rtype: list[dict]
    """
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
    """
    The page's block: the run's provenance and the table of its rows.

    :param dict document: The results (``parts``, ``rows``).
    :return: The markdown block.
    :rtype: str
    """
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
        lines += header_lines(part)
    lines += ["", *markdown_table(header, "rlrrrrrr", cells)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    """
    Run the study, print the table and, with ``--write``, write the results
    file and the block of ``docs/estimators.md``.

    :param list argv: Arguments (default ``sys.argv[1:]``).
    :return: The exit status.
    :rtype: int
    """
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
        "--quick", action="store_true", help="tiny network, seconds"
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="write docs/probe-variance.json and the table in "
        "docs/estimators.md",
    )
    add_run_flags(parser, workers=False, combine=False)
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    if args.from_json:
        write_page(PAGE, SCRIPT, render(read_json(args.from_json)), "")
        return 0
    if any(s < 1 for s in args.steps):
        parser.error("argument --steps: every value must be at least 1")
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    part = provenance(
        SCRIPT,
        argv if argv is not None else sys.argv[1:],
        args.machine_label,
        device="cpu",
        threads=args.threads,
    )
    rows = []
    for steps in args.steps:
        rows += kernel_statistics(steps, args.seed, args.quick)
    document = {"script": SCRIPT, "parts": [finish(part, start)], "rows": rows}
    print(
        "Relative standard deviation sqrt(Var)/Tr(K_cc) of one sketch of "
        "each block trace (Gaussian probes, exact):\n"
    )
    print(render(document))
    if args.write:
        write_json(RESULTS, document)
        write_page(PAGE, SCRIPT, render(document), "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
