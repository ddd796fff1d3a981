"""One long wave-equation run with its error against training time.

The long run of the spaced-sample study (docs/spaced-samples.md): the wave
tutorial's settings (:class:`~pina_ntk.paper.experiments.wave.WaveSettings`)
for ``--steps`` Adam steps, the learning-rate schedule stretched to the run
(ten decays by 0.75 over the run, as the tutorial's ten over 10,000 steps),
the relative L2 error on the 101×101 grid recorded every ``--error-every``
steps with the training time spent so far (evaluations excluded). Run one
process per weighting, one thread each; give the unweighted PINN the steps
that take it the weighted run's wall time.

    python benchmarks/wave_long_run.py --weighting sketch --steps 60000 \\
        --output long-sketch.json
"""

import argparse
import json
import os
import time
from pathlib import Path

import torch

import harness

from pina_ntk.paper.experiments.outputs import relative_error_fn
from pina_ntk.paper.experiments.settings import WEIGHTINGS
from pina_ntk.paper.experiments.training import train_pinn
from pina_ntk.paper.experiments.wave import WaveSettings, wave_grid
from pina_ntk.paper.problems import WaveProblem


def long_run_settings(steps, weighting, seed, paper=False, **overrides):
    """
    The tutorial's settings over ``steps`` steps, the schedule stretched.

    :param int steps: Adam steps.
    :param str weighting: ``"none"``, ``"exact"`` or ``"sketch"``.
    :param int seed: The seed.
    :param bool paper: The settings of the earlier runs
        (:meth:`~pina_ntk.paper.experiments.settings.ExperimentSettings.paper`,
        as ``pina-ntk --paper-settings``) instead of the weightings'
        defaults; the committed long runs used them.
    :return: The settings.
    :rtype: WaveSettings
    """
    build = WaveSettings.paper if paper else WaveSettings
    return build(
        steps=steps,
        lr_decay_steps=max(1, steps // 10),
        weightings=(weighting,),
        seed=seed,
        **overrides,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weighting", choices=WEIGHTINGS, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--error-every", type=int, default=1000)
    parser.add_argument(
        "--sample-every",
        type=int,
        default=None,
        help="SketchNTKWeighting(sample_every_n_steps=...) (default: its)",
    )
    parser.add_argument("--estimator", default=None)
    parser.add_argument(
        "--paper-settings",
        action="store_true",
        help="the earlier runs' settings, as pina-ntk --paper-settings "
        "(the committed docs/long-runs were trained with them)",
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    overrides = {}
    if args.sample_every is not None:
        overrides["sample_every"] = args.sample_every
    if args.estimator is not None:
        overrides["estimator"] = args.estimator
    settings = long_run_settings(
        args.steps, args.weighting, args.seed, args.paper_settings, **overrides
    )
    _, _, points, exact = wave_grid(settings.grid)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    run = train_pinn(
        WaveProblem(),
        args.weighting,
        settings,
        error_fn=relative_error_fn(points, exact),
        error_every=args.error_every,
    )
    record = {
        "weighting": args.weighting,
        "settings": settings.as_dict(),
        "started": started,
        "machine": harness.cpu_model(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "wall_time_s": run.wall_time,
        "final_relative_l2": run.error_history["errors"][-1],
        "final_weights": run.final_weights,
        "error_history": run.error_history,
    }
    Path(args.output).write_text(json.dumps(record, indent=2))
    print(
        f"{args.weighting}: {args.steps} steps in {run.wall_time:.0f} s, "
        f"relative L2 {record['final_relative_l2']:.3e}"
    )


if __name__ == "__main__":
    main()
