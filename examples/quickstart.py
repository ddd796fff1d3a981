"""Train a PINN on PINA's wave problem with sketched NTK weights.

Run: ``python examples/quickstart.py``.
Prints the sketched weights next to exact weights at the final parameters.
"""

import argparse
import logging
import warnings

import lightning
import torch
from pina import Trainer
from pina.model import FeedForward
from pina.problem.zoo import AcousticWaveProblem
from pina.solver import PhysicsInformedSingleModelSolver

from pina_ntk import SketchNTKWeighting, solver_ntk_weights


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--points", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", module="lightning")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    lightning.seed_everything(args.seed, verbose=False)

    problem = AcousticWaveProblem()
    problem.discretise_domain(args.points, "random")
    model = FeedForward(2, 1, inner_size=32, n_layers=3, func=torch.nn.Tanh)
    weighting = SketchNTKWeighting(alpha=0.05, warmup_samples=16)
    solver = PhysicsInformedSingleModelSolver(
        problem, model, weighting=weighting
    )
    # the weighting brings its NTKCallback: no callbacks to pass
    trainer = Trainer(
        solver,
        max_epochs=args.steps,
        accelerator="cpu",
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        enable_checkpointing=False,
        train_size=1.0,
        val_size=0.0,
        test_size=0.0,
    )
    trainer.train()

    exact = solver_ntk_weights(solver)
    print(f"\nweights after {args.steps} steps (sketch vs exact at final θ):")
    for name, w_exact in exact.items():
        sketch = float(solver.weighting.last_saved_weights()[name])
        print(f"  {name:>10s}: sketch {sketch:.4f}  exact {w_exact:.4f}")
    print(f"final loss: {float(trainer.callback_metrics['train_loss']):.4e}")


if __name__ == "__main__":
    main()
