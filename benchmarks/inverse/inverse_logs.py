r"""PINA's inverse-problem tutorial, trained as a user would, the unknowns
logged through Lightning: no weighting against the default.

The tutorial's set-up (``poisson_source``'s problem, a ``FeedForward`` of
three layers of 20 with Softplus, Adam at 0.005, the interior on a 20 x 20
grid, 1,000 random boundary points, one step an epoch for
:data:`EPOCHS` epochs, seed :data:`SEED`), once with no weighting and once
with ``SketchNTKWeighting()``, and once with the earlier default
``SketchNTKWeighting(unknowns="excluded")``. A callback logs each unknown
with ``solver.log`` at every epoch; Lightning's ``CSVLogger`` writes them.
The logs are kept (``inverse-logs/<row>.csv``, the columns ``epoch``,
``mu1``, ``mu2``) and the figure is drawn from them alone
(``figures/inverse-tutorial-logs.png``), with the page's block of
``inverse-problems.md`` that states the run.

    python benchmarks/inverse/inverse_logs.py   # docs/inverse-logs/, figure
    python benchmarks/inverse/inverse_logs.py --quick   # a temporary folder
    python benchmarks/inverse/inverse_logs.py \
        --from-json docs/inverse-logs/run.json
"""

import argparse
import csv
import os
import sys
import tempfile
import time
from pathlib import Path

import lightning
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger
from pina import Trainer
from pina.model import FeedForward
from pina.optim import TorchOptimizer
from pina.solver import PhysicsInformedSingleModelSolver
from pina_ntk import SketchNTKWeighting

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness
from benchmarks.suite.suite_inverse_problems import PoissonSourceProblem

SCRIPT = "inverse/inverse_logs.py"
EPOCHS, SEED = 1500, 883
#: Rows: the weighting's options (``None``: no weighting).
ROWS = {
    "none": None,
    "default": {},
    "excluded": {"unknowns": "excluded"},
}
LABELS = {
    "none": "no weighting",
    "default": "SketchNTKWeighting()",
    "excluded": 'unknowns="excluded" (earlier default)',
}
FIGURE = "figures/inverse-tutorial-logs.png"
BEGIN = harness.BEGIN.format(script=SCRIPT)


class LogUnknowns(Callback):
    """Logs each unknown parameter at the end of every epoch."""

    def on_train_epoch_end(self, trainer, solver):
        for name, value in solver.problem.unknown_parameters.items():
            solver.log(name, float(value.detach()), on_epoch=True)


def tutorial_solver(weighting, problem_class=PoissonSourceProblem):
    """The tutorial's solver of a fresh ``problem_class`` with ``weighting``
    (``None``: none): its points (the interior on a 20 x 20 grid, 1,000
    random boundary points), its network and its optimiser."""
    problem = problem_class()
    problem.discretise_domain(20, "grid", domains=["D"])
    problem.discretise_domain(1000, "random", domains="boundary")
    model = FeedForward(
        input_dimensions=2,
        output_dimensions=1,
        layers=[20, 20, 20],
        func=torch.nn.Softplus,
    )
    return PhysicsInformedSingleModelSolver(
        problem,
        model,
        weighting=weighting,
        optimizer=TorchOptimizer(torch.optim.Adam, lr=0.005),
    )


def train(row, epochs, folder):
    """Train one row; return its logged ``[(epoch, {name: value})]``."""
    lightning.seed_everything(SEED, verbose=False)
    options = ROWS[row]
    weighting = None if options is None else SketchNTKWeighting(**options)
    solver = tutorial_solver(weighting)
    logger = CSVLogger(folder, name=row, version=0)
    Trainer(
        solver,
        max_epochs=epochs,
        accelerator="cpu",
        callbacks=[LogUnknowns()],
        logger=logger,
        log_every_n_steps=1,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        train_size=1.0,
        val_size=0.0,
        test_size=0.0,
    ).train()
    return read_log(os.path.join(logger.log_dir, "metrics.csv"))


def read_log(path):
    """``[(epoch, {"mu1": ..., "mu2": ...})]`` of a Lightning CSV log (or
    of a kept one): Lightning's epoch index, from 0."""
    rows = []
    with open(path, newline="", encoding="utf-8") as handle:
        for line in csv.DictReader(handle):
            if line.get("mu1"):
                values = {k: float(line[k]) for k in ("mu1", "mu2")}
                rows.append((int(line["epoch"]), values))
    return rows


def write_log(path, rows):
    """Keep a row's log as ``epoch,mu1,mu2``."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["epoch", "mu1", "mu2"])
        for epoch, values in rows:
            writer.writerow([epoch, values["mu1"], values["mu2"]])


def draw(logs, path):
    """The logged unknowns against the epoch, one panel per unknown."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    for axis, name in zip(axes, ("mu1", "mu2")):
        for row, rows in logs.items():
            axis.plot(
                [epoch + 1 for epoch, _ in rows],  # epochs trained
                [v[name] for _, v in rows],
                label=LABELS[row],
            )
        axis.axhline(0.5, color="black", linestyle=":", label="true value")
        axis.set_xlabel("epochs trained")
        axis.set_title(name)
    axes[0].legend(fontsize=7)
    harness.save_figure(fig, path)
    plt.close(fig)


def render(document, logs):
    """The page's block: the run and each row's unknowns at the end."""
    lines = harness.header_lines(document["part"])
    lines += [
        "",
        f"Seed {document['seed']}, {document['epochs']} epochs; the "
        "unknowns at the end, from the logs (true: 0.5, 0.5):",
        "",
    ]
    table = []
    for row, rows in logs.items():
        epoch, values = rows[-1]
        error = max(abs(v - 0.5) / 0.5 for v in values.values())
        table.append(
            [
                LABELS[row],
                f"({values['mu1']:.3f}, {values['mu2']:.3f})",
                f"{100 * error:.3g} %",
            ]
        )
    lines += harness.markdown_table(
        ["weighting", "(mu1, mu2) at the end", "largest relative error"],
        table,
    )
    lines += ["", f"![The logged unknowns over training]({FIGURE})"]
    return "\n".join(lines) + "\n"


def write_outputs(document, logs_dir, output_dir):
    """The figure and the block, from the logs kept in ``logs_dir``."""
    logs = {
        row: read_log(os.path.join(logs_dir, f"{row}.csv"))
        for row in document["rows"]
    }
    draw(logs, os.path.join(output_dir, FIGURE))
    page = os.path.join(output_dir, "inverse-problems.md")
    harness.write_block(
        page,
        BEGIN,
        harness.END,
        render(document, logs),
        f"# Inverse problems\n\n{BEGIN}\n{harness.END}\n",
    )


def main(argv=None):
    """Train and keep the logs, or re-render; the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    docs = os.path.join(harness.ROOT, "docs")
    harness.add_run_flags(parser, docs)
    args = parser.parse_args(argv)
    args.output_dir = harness.output_location(args, "output_dir", docs)
    if args.from_json:
        document = harness.read_json(args.from_json)
        logs_dir = os.path.dirname(os.path.abspath(args.from_json))
        write_outputs(document, logs_dir, args.output_dir)
        return 0
    torch.set_num_threads(1)
    epochs = 3 if args.quick else EPOCHS
    part = harness.provenance(SCRIPT, argv, args.machine_label, threads=1)
    document = dict(script=SCRIPT, part=part, seed=SEED, epochs=epochs)
    document["rows"] = list(ROWS)
    logs_dir = os.path.join(args.output_dir, "inverse-logs")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for row in ROWS:
            write_log(
                os.path.join(logs_dir, f"{row}.csv"), train(row, epochs, folder)
            )
    harness.finish(part, started)
    harness.write_json(os.path.join(logs_dir, "run.json"), document)
    write_outputs(document, logs_dir, args.output_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
