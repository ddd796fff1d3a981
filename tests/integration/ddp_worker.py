"""Worker for the distributed tests: trains a small PINN and dumps weights.

Run as ``python tests/integration/ddp_worker.py OUT_DIR DEVICES WEIGHTING``; with
``DEVICES=2`` Lightning's DDP strategy (gloo on CPU) re-launches this script
for the second rank. Every rank writes ``weights_rank<r>.json``: the
weights the solver used at each step.
"""

import json
import logging
import sys
import warnings
from pathlib import Path

import lightning
import torch

sys.path.insert(0, str(Path(__file__).parents[1]))  # helpers

from helpers import make_solver  # noqa: E402
from pina import Trainer  # noqa: E402

from pina_ntk import NTKCallback, NTKWeighting, SketchNTKWeighting  # noqa: E402


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


def main(out_dir, devices, weighting):
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    if weighting == "exact":
        weighting = NTKWeighting()
    elif weighting == "exact-band":
        weighting = NTKWeighting(gradient_band=100.0)  # wide: no factor clamped
    elif weighting == "exact-rayleigh":
        weighting = NTKWeighting(statistic="rayleigh")
    elif weighting == "sketch-boundary":
        weighting = SketchNTKWeighting(
            alpha=0.3, warmup_samples=4, statistic="boundary"
        )
    elif weighting == "sketch-band":
        weighting = SketchNTKWeighting(
            alpha=0.3, warmup_samples=4, gradient_band=2.0
        )
    elif weighting == "sketch-every-2":
        weighting = SketchNTKWeighting(
            alpha=0.3, warmup_samples=4, sample_every_n_steps=2
        )
    else:
        weighting = SketchNTKWeighting(alpha=0.3, warmup_samples=4)
    solver = make_solver("poisson", weighting=weighting, n=20, seed=0)
    trainer = Trainer(
        solver,
        max_epochs=5,
        accelerator="cpu",
        devices=devices,
        strategy="ddp" if devices > 1 else "auto",
        callbacks=[Record(out_dir), NTKCallback(log_every_n_steps=1)],
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        enable_checkpointing=False,
        train_size=1.0,
        val_size=0.0,
        test_size=0.0,
        shuffle=False,
        # PINA 0.3.2's full-batch loader (batch_size=None) fails under DDP
        # (_ConditionSubset.fetch_from_idx_list is missing), so each rank
        # gets one batch of its share through the DistributedSampler.
        batch_size=20 // devices,
    )
    trainer.train()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
