"""What NTKCallback logs at every step of a training run: weights, traces,
safeguard counters and refresh counts, for every weighting and problem
kind (the default logging interval: ``test_zero_configuration.py``)."""

import csv
import math
from types import SimpleNamespace

import pytest
import torch
from lightning.pytorch.loggers import CSVLogger

from pina_ntk import NTKWeighting, SketchNTKWeighting
from pina_ntk.integration.lightning_logging import log_values

from helpers import (
    multi_model_solver,
    MemoryLogger,
    WeightHistory,
    make_solver,
    make_trainer,
    ntk_callback,
)

WEIGHTINGS = {
    "exact": lambda: NTKWeighting(),
    "exact-every-3": lambda: NTKWeighting(update_every_n_steps=3),
    "predictor": lambda: SketchNTKWeighting(
        sample_every_n_steps=1, alpha=0.2, warmup_samples=4
    ),
    "predictor-central-rademacher": lambda: SketchNTKWeighting(
        sample_every_n_steps=1,
        alpha=0.2,
        warmup_samples=4,
        difference="central",
        probe="rademacher",
    ),
    "parameter": lambda: SketchNTKWeighting(
        sample_every_n_steps=1,
        alpha=0.2,
        warmup_samples=4,
        estimator="parameter",
    ),
    "parameter-central": lambda: SketchNTKWeighting(
        sample_every_n_steps=1,
        alpha=0.2,
        warmup_samples=4,
        estimator="parameter",
        difference="central",
    ),
    "predictor-full-kernel": lambda: SketchNTKWeighting(
        sample_every_n_steps=1, alpha=0.2, warmup_samples=4, full_kernel=True
    ),
    "predictor-same-step": lambda: SketchNTKWeighting(
        sample_every_n_steps=1,
        alpha=0.2,
        warmup_samples=4,
        sample_after_backward=False,
    ),
    "predictor-plain-probe": lambda: SketchNTKWeighting(
        sample_every_n_steps=1,
        alpha=0.2,
        warmup_samples=4,
        balanced_probe=False,
    ),
    "predictor-every-2": lambda: SketchNTKWeighting(
        alpha=0.05, warmup_samples=8, sample_every_n_steps=2
    ),
    "parameter-every-3": lambda: SketchNTKWeighting(
        alpha=0.2,
        warmup_samples=4,
        estimator="parameter",
        sample_every_n_steps=3,
    ),
    "exact-smoothed-every-2": lambda: NTKWeighting(
        update_every_n_steps=2, alpha=0.3
    ),
}


def read_csv_metrics(logger):
    with open(f"{logger.log_dir}/metrics.csv") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("name", list(WEIGHTINGS))
@pytest.mark.parametrize("kind", ["poisson", "wave", "supervised"])
def test_training_gives_finite_positive_logged_weights(tmp_path, kind, name):
    solver = make_solver(kind, weighting=WEIGHTINGS[name]())
    logger = CSVLogger(tmp_path)
    steps = 5
    trainer = make_trainer(solver, steps=steps, logger=logger)
    trainer.train()
    rows = read_csv_metrics(logger)
    conditions = list(solver.problem.conditions)
    for condition in conditions:
        logged = [
            float(r[f"ntk_weight/{condition}"])
            for r in rows
            if r.get(f"ntk_weight/{condition}")
        ]
        assert len(logged) == steps
        assert all(math.isfinite(w) and w > 0 for w in logged)
        traces = [
            float(r[f"ntk_trace/{condition}"])
            for r in rows
            if r.get(f"ntk_trace/{condition}")
        ]
        assert len(traces) == steps and all(t > 0 for t in traces)
    accepted = [
        float(r["ntk_safeguard/accepted"])
        for r in rows
        if r.get("ntk_safeguard/accepted")
    ]
    rejected = [
        float(r["ntk_safeguard/rejected"])
        for r in rows
        if r.get("ntk_safeguard/rejected")
    ]
    assert len(accepted) == steps and accepted[-1] + rejected[-1] >= 1
    refreshes = [
        float(r["ntk_refreshes"]) for r in rows if r.get("ntk_refreshes")
    ]
    every = solver.weighting.refresh_every_n_steps
    assert refreshes == [float(t // every + 1) for t in range(steps)]
    weights = ntk_callback(trainer).statistics.weights
    assert set(weights) == set(conditions)
    if name == "predictor-full-kernel":
        kernel = ntk_callback(trainer).statistics.kernel
        n = sum(
            len(c.input) * (2 if c.name == "t0" else 1)
            for c in solver.problem.conditions.values()
        )
        assert kernel.shape == (n, n) and torch.allclose(kernel, kernel.T)


@pytest.mark.parametrize(
    "kind",
    ["physics-informed", "physics-informed ensemble", "self-adaptive"]
    + ["competitive"],
)
def test_logged_weights_are_those_of_their_step_beside_its_losses(kind):
    # each step's weights are written at that step, beside PINA's condition
    # losses of the step, and straight to the loggers: nothing enters
    # Lightning's result collection, which full-batch training resets at
    # every step (one epoch each), whatever the logging interval; PINA's
    # multi-model solvers, which optimise by hand, log at the same steps
    weighting = WEIGHTINGS["predictor"]()
    if kind == "physics-informed":
        solver = make_solver("poisson", weighting=weighting)
    else:
        solver = multi_model_solver(kind, weighting)
    history, logger = WeightHistory(), MemoryLogger()
    steps = 4
    trainer = make_trainer(solver, steps, callbacks=[history], logger=logger)
    trainer.train()
    for condition in solver.problem.conditions:
        used = [(t, w[condition]) for t, w in enumerate(history.weights)]
        assert logger.series(f"ntk_weight/{condition}") == used
        losses = logger.series(f"{condition}_loss")
        assert [t for t, _ in losses] == list(range(steps))
    assert not [k for k in trainer.callback_metrics if k.startswith("ntk_")]


def test_nothing_to_log_reaches_no_logger():
    # a step with no value to write (no weights yet) must not hand every
    # logger an empty row: a CSV logger would write a row of blanks
    logger = MemoryLogger()
    trainer = SimpleNamespace(loggers=[logger])
    log_values(trainer, {}, step=3)
    assert logger.rows == []
    log_values(trainer, {"ntk_weight/D": torch.tensor(2.5)}, step=3)
    assert logger.rows == [(3, {"ntk_weight/D": 2.5})]
