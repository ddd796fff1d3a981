"""Worker for the distributed tests: trains a small PINN with each named
weighting in turn and dumps the weights.

Run as ``python tests/integration/ddp_worker.py OUT_DIR DEVICES W1,W2,...``
(``W@ensemble``, ``W@self-adaptive``, ``W@competitive``: weighting ``W`` on
that multi-model solver);
with ``DEVICES=2`` Lightning's DDP strategy (gloo on CPU) re-launches this
script for the second rank once, and the later trainings reuse the process
group (one start of torch, PINA and Lightning per rank for all of them).
Every rank writes ``OUT_DIR/<weighting>/weights_rank<r>.json``: the weights
the solver used at each step.
"""

import json
import logging
import sys
import warnings
from pathlib import Path

import lightning
import torch

sys.path.insert(0, str(Path(__file__).parents[1]))  # helpers

from helpers import (  # noqa: E402
    make_solver,
    make_trainer,
    multi_model_solver,
)

from pina_ntk import NTKWeighting, SketchNTKWeighting  # noqa: E402


class Record(lightning.Callback):
    def __init__(self, out_dir):
        self.out_dir = Path(out_dir)
        self.weights = []
        self.sizes = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, idx):
        saved = pl_module.weighting.last_saved_weights()
        self.weights.append({k: float(v) for k, v in saved.items()})
        self.sizes = {name: len(data["input"]) for name, data in batch}

    def on_train_end(self, trainer, pl_module):
        guard = pl_module.weighting.safeguard
        record = {
            "weights": self.weights,
            "points": self.sizes,
            "world_size": trainer.world_size,
            "safeguard_sum": None if guard is None else float(guard.total),
        }
        path = self.out_dir / f"weights_rank{trainer.global_rank}.json"
        path.write_text(json.dumps(record))


def make_weighting(name):
    """:return: The weighting a test names."""
    sketch = dict(alpha=0.3, warmup_samples=4)
    found = {
        "exact": lambda: NTKWeighting(),
        # wide: no factor clamped
        "exact-band": lambda: NTKWeighting(gradient_band=100.0),
        "exact-rayleigh": lambda: NTKWeighting(statistic="rayleigh"),
        "sketch": lambda: SketchNTKWeighting(**sketch),
        "sketch-boundary": lambda: SketchNTKWeighting(
            **sketch, statistic="boundary"
        ),
        "sketch-band": lambda: SketchNTKWeighting(**sketch, gradient_band=2.0),
        "sketch-every-2": lambda: SketchNTKWeighting(
            **sketch, sample_every_n_steps=2
        ),
    }
    return found[name.split("@")[0]]()


#: The multi-model solvers a name may ask for after ``@``.
SOLVERS = {
    "ensemble": "physics-informed ensemble",
    "self-adaptive": "self-adaptive",
    "competitive": "competitive",
}


def main(out_dir, devices, names):
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    for name in names.split(","):
        solver = SOLVERS.get(name.partition("@")[2])
        train(Path(out_dir, name), devices, make_weighting(name), solver)


def train(out_dir, devices, weighting, kind=None):
    """Train the Poisson problem 5 steps with ``weighting``: a
    physics-informed solver, or the multi-model solver ``kind``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if kind is None:
        solver = make_solver("poisson", weighting=weighting, n=20, seed=0)
    else:
        solver = multi_model_solver(kind, weighting, n=20)
    trainer = make_trainer(
        solver,
        5,
        callbacks=[Record(out_dir)],
        devices=devices,
        strategy="ddp" if devices > 1 else "auto",
        shuffle=False,
        # PINA 0.3.2's full-batch loader (batch_size=None) fails under DDP
        # (_ConditionSubset.fetch_from_idx_list is missing), so each rank
        # gets one batch of its share through the DistributedSampler.
        batch_size=20 // devices,
    )
    trainer.train()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
