"""Where do identical PINA runs differ from one process to the next?

Prints how many distinct results, bit for bit, each computation of
:data:`LEVELS` gives in ``--processes`` fresh processes (default 8; one
torch thread, hash randomisation on), seeded with ``torch.manual_seed(0)``
alone or with ``lightning.seed_everything(0)``: PINA's union domains order
their parts with Python's ``random.sample``, which torch's seed does not
reach (``docs/reproducibility.md``). About 8 minutes on 2 cores;
``--write`` keeps the counts in ``docs/reproducibility.json`` and renders
the page's table from them (``--from-json``: from that file alone).
"""

import argparse
import hashlib
import os
import subprocess
import sys
import time

import harness

SCRIPT = "reproducibility.py"
RESULTS = os.path.join(harness.ROOT, "docs", "reproducibility.json")
PAGE = os.path.join(harness.ROOT, "docs", "reproducibility.md")

#: The computations, in the order of the table (``pina``: the set-up of the
#: issue behind this study).
LEVELS = ("matmul", "torch-mlp", "union-domain", "pina", "pina-ntk")
#: How a process seeds its generators, and the call that does it.
SEEDED = dict(torch="torch.manual_seed", everything="lightning.seed_everything")
SEEDINGS = tuple(SEEDED)


def digest(tensors):
    """:return: A hex digest of the bytes of ``tensors``."""
    data = b"".join(t.detach().contiguous().numpy().tobytes() for t in tensors)
    return hashlib.sha256(data).hexdigest()[:16]


def run_level(level, seeding):
    """:return: The digest of ``level`` computed once, seeded ``seeding``."""
    import torch

    torch.set_num_threads(1)
    if seeding == "torch":
        torch.manual_seed(0)
    else:
        import lightning

        lightning.seed_everything(0, verbose=False)
    if level == "matmul":
        return digest([torch.randn(301, 257) @ torch.randn(257, 263)])
    if level == "torch-mlp":
        x, linear, tanh = torch.rand(800, 2), torch.nn.Linear, torch.nn.Tanh
        net = torch.nn.Sequential(
            linear(2, 100), tanh(), linear(100, 100), tanh(), linear(100, 1)
        )
        loss = net(x).pow(2).mean()
        return digest(torch.autograd.grad(loss, list(net.parameters())))
    if level == "union-domain":
        from pina.problem.zoo import BurgersProblem

        boundary = BurgersProblem().domains["boundary"]
        return digest([boundary.sample(10, "random").tensor])
    import logging
    import warnings

    from pina import Trainer
    from pina.model import FeedForward
    from pina.problem.zoo import BurgersProblem
    from pina.solver import PhysicsInformedSingleModelSolver as PINN

    from pina_ntk import NTKCallback, SketchNTKWeighting

    weighted = level == "pina-ntk"
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    torch.use_deterministic_algorithms(True)
    problem = BurgersProblem()
    problem.discretise_domain(200, "random")
    model = FeedForward(2, 1, inner_size=50, n_layers=2, func=torch.nn.Tanh)
    weighting = SketchNTKWeighting(warmup_samples=4) if weighted else None
    solver = PINN(problem, model, weighting=weighting)
    ntk = NTKCallback() if weighted else None
    options = dict(max_epochs=5, accelerator="cpu", shuffle=False)
    options.update(train_size=1.0, val_size=0.0, test_size=0.0, logger=False)
    options.update(enable_checkpointing=False, enable_progress_bar=False)
    options.update(enable_model_summary=False)
    Trainer(solver, callbacks=[ntk] if weighted else [], **options).train()
    if weighted:
        return digest([torch.tensor(list(ntk.statistics.weights.values()))])
    return digest(solver.parameters())


def distinct_results(level, seeding, processes):
    """:return: How many distinct digests ``processes`` processes give."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("PYTHONHASHSEED", None)  # random per process, as by default
    command = [sys.executable, __file__, "--level", level, "--seeding", seeding]
    digests, options = set(), dict(env=env, stderr=subprocess.PIPE, text=True)
    for _ in range(processes):
        out = subprocess.check_output(command, **options)
        digests.add(out.strip().splitlines()[-1])
    return len(digests)


def render(document):
    """The page's block: the run's provenance and the table of its counts."""
    n = document["processes"]
    header = ["computation"]
    header += [f"seeded with `{SEEDED[s]}(0)`" for s in SEEDINGS]
    rows = [
        [f"`{level}`", *(f"{counts[s]} / {n}" for s in SEEDINGS)]
        for level, counts in document["distinct"].items()
    ]
    lines = harness.header_lines(document["parts"][0])
    lines += ["", f"Distinct results, bit for bit, of {n} processes:", ""]
    return "\n".join(lines + harness.markdown_table(header, rows)) + "\n"


def main(argv=None):
    """Print the table (or, with ``--level``, one digest); with ``--write``,
    keep it."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add, hidden = parser.add_argument, argparse.SUPPRESS
    add("--processes", type=int, default=8)
    add("--levels", nargs="+", default=list(LEVELS), choices=LEVELS)
    add("--write", action="store_true", help="write its JSON and page in docs/")
    add("--level", choices=LEVELS, help=hidden)
    add("--seeding", choices=SEEDINGS, default="everything", help=hidden)
    harness.add_run_flags(parser)
    args = parser.parse_args(argv)
    if args.level is not None:
        print(run_level(args.level, args.seeding))
        return 0
    if args.from_json:
        document = harness.read_json(args.from_json)
    else:
        started, extra = time.perf_counter(), dict(device="cpu", threads=1)
        part = harness.provenance(SCRIPT, argv, args.machine_label, **extra)
        n, levels = args.processes, args.levels
        if args.quick:  # a smoke run
            n, levels = 1, ["matmul"]
        distinct = {
            level: {s: distinct_results(level, s, n) for s in SEEDINGS}
            for level in levels
        }
        part = harness.finish(part, started)
        document = dict(script=SCRIPT, parts=[part], processes=n)
        document["distinct"] = distinct
    block = render(document)
    print(block)
    if args.write and not args.from_json:
        harness.write_json(RESULTS, document)
    if args.write or args.from_json:
        harness.write_page(PAGE, SCRIPT, block, "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
