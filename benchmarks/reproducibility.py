"""Where do identical PINA runs differ from one process to the next?

Runs the same seeded computation in several fresh processes (one torch
thread each, Python's hash randomisation left on, as by default) and counts
the distinct results, bit for bit, for each computation:

* ``matmul``: one float32 matrix product (torch alone);
* ``torch-mlp``: the parameter gradient of a tanh MLP's loss (torch alone);
* ``union-domain``: 10 random points of the boundary of PINA's Burgers
  problem, a union of two segments (PINA's ``Union.sample``);
* ``pina``: five steps of unweighted PINA training on the Burgers problem
  (``shuffle=False``, ``torch.use_deterministic_algorithms(True)``): the
  set-up of the issue that asked for this study;
* ``pina-ntk``: the same run with ``SketchNTKWeighting`` (its seed drawn from
  torch's generator), compared by its weights after the last step;

each seeded two ways: ``torch.manual_seed(0)`` only, and
``lightning.seed_everything(0)`` (Python's ``random``, NumPy and torch).
The table shows which computations depend on more than torch's generator:
PINA's union, intersection and exclusion domains pick the order of their
parts with Python's ``random.sample``, so with torch seeded alone the
boundary points, and every training run on them, change from process to
process. ``docs/reproducibility.md`` states what follows for users.

Run ``python benchmarks/reproducibility.py`` (``--processes N``, default 8;
about 8 minutes on 2 cores); it prints a markdown table.
"""

import argparse
import hashlib
import os
import subprocess
import sys

import harness

#: The computations, in the order of the table.
LEVELS = ("matmul", "torch-mlp", "union-domain", "pina", "pina-ntk")
#: How a process seeds its generators.
SEEDINGS = ("torch", "everything")


def digest(tensors):
    """A hex digest of the bytes of ``tensors``."""
    hasher = hashlib.sha256()
    for tensor in tensors:
        hasher.update(tensor.detach().contiguous().numpy().tobytes())
    return hasher.hexdigest()[:16]


def seed(seeding):
    """Seed torch alone, or Python, NumPy and torch (Lightning's way)."""
    import torch

    if seeding == "torch":
        torch.manual_seed(0)
    else:
        import lightning

        lightning.seed_everything(0, verbose=False)


def run_level(level, seeding):
    """Compute ``level`` once and return the digest of its result."""
    import torch

    torch.set_num_threads(1)
    seed(seeding)
    if level == "matmul":
        a, b = torch.randn(301, 257), torch.randn(257, 263)
        return digest([a @ b])
    if level == "torch-mlp":
        x = torch.rand(800, 2)
        net = torch.nn.Sequential(
            torch.nn.Linear(2, 100),
            torch.nn.Tanh(),
            torch.nn.Linear(100, 100),
            torch.nn.Tanh(),
            torch.nn.Linear(100, 1),
        )
        loss = net(x).pow(2).mean()
        return digest(torch.autograd.grad(loss, list(net.parameters())))
    if level == "union-domain":
        from pina.problem.zoo import BurgersProblem

        boundary = BurgersProblem().domains["boundary"]
        return digest([boundary.sample(10, "random").tensor])
    return digest(train_burgers(weighted=level == "pina-ntk"))


def train_burgers(weighted, steps=5):
    """Parameters (or NTK weights) after ``steps`` of PINA training."""
    import logging
    import warnings

    import torch
    from pina import Trainer
    from pina.model import FeedForward
    from pina.problem.zoo import BurgersProblem
    from pina.solver import PhysicsInformedSingleModelSolver

    from pina_ntk import NTKCallback, SketchNTKWeighting

    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    torch.use_deterministic_algorithms(True)
    problem = BurgersProblem()
    problem.discretise_domain(200, "random")
    model = FeedForward(2, 1, inner_size=50, n_layers=2, func=torch.nn.Tanh)
    weighting = SketchNTKWeighting(warmup_samples=4) if weighted else None
    solver = PhysicsInformedSingleModelSolver(
        problem, model, weighting=weighting
    )
    ntk = NTKCallback() if weighted else None
    trainer = Trainer(
        solver,
        max_epochs=steps,
        accelerator="cpu",
        shuffle=False,
        train_size=1.0,
        val_size=0.0,
        test_size=0.0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[ntk] if weighted else [],
    )
    trainer.train()
    if weighted:
        return [torch.tensor(list(ntk.statistics.weights.values()))]
    return list(solver.parameters())


def distinct_results(level, seeding, processes):
    """How many distinct digests ``processes`` fresh processes give."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("PYTHONHASHSEED", None)  # random per process, as by default
    digests = set()
    for _ in range(processes):
        result = subprocess.run(
            [sys.executable, __file__, "--level", level, "--seeding", seeding],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        digests.add(result.stdout.strip().splitlines()[-1])
    return len(digests)


def main(argv=None):
    """Print the table (or, with ``--level``, one digest)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--levels", nargs="+", default=list(LEVELS))
    parser.add_argument("--level", choices=LEVELS, help=argparse.SUPPRESS)
    parser.add_argument(
        "--seeding",
        choices=SEEDINGS,
        default="everything",
        help=argparse.SUPPRESS,
    )
    args = parser.parse_args(argv)
    if args.level is not None:
        print(run_level(args.level, args.seeding))
        return 0
    header = [
        "computation",
        "seeded with `torch.manual_seed(0)`",
        "seeded with `lightning.seed_everything(0)`",
    ]
    rows = [
        [f"`{level}`"]
        + [
            f"{distinct_results(level, s, args.processes)} / {args.processes}"
            for s in SEEDINGS
        ]
        for level in args.levels
    ]
    print(f"Distinct results, bit for bit, of {args.processes} processes:\n")
    print("\n".join(harness.markdown_table(header, "lrr", rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
