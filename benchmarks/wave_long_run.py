"""One long wave-equation run with its error against training time.

The long runs of docs/spaced-samples.md: the wave tutorial's settings for
``--steps`` steps, the learning-rate schedule stretched to ten decays over
the run, the relative L2 error every ``--error-every`` steps with the
training time so far. Run one process per weighting, one thread each; give
the unweighted PINN the steps that take it the weighted run's time.
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--weighting", choices=WEIGHTINGS, required=True)
    add("--steps", type=int, required=True)
    add("--seed", type=int, default=0)
    add("--error-every", type=int, default=1000)
    add("--sample-every", type=int, help="default: SketchNTKWeighting's")
    add("--estimator")
    # the earlier runs' settings, which the committed docs/long-runs used
    add("--paper-settings", action="store_true", help="as pina-ntk's")
    add("--threads", type=int, default=1)
    add("--output", required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    options = dict(sample_every=args.sample_every, estimator=args.estimator)
    options = {k: v for k, v in options.items() if v is not None}
    options.update(steps=args.steps, lr_decay_steps=max(1, args.steps // 10))
    build = WaveSettings.paper if args.paper_settings else WaveSettings
    settings = build(weightings=(args.weighting,), seed=args.seed, **options)
    error = relative_error_fn(*wave_grid(settings.grid)[2:])
    fit = dict(error_fn=error, error_every=args.error_every)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    run = train_pinn(WaveProblem(), args.weighting, settings, **fit)
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
