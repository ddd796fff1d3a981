"""Degenerate conditions: constant residuals, zero residuals, binding
weight bounds, exact traces too expensive for the run."""

import warnings

import pytest
import torch
from pina.solver import PhysicsInformedSingleModelSolver

from pina_ntk import NTKWeighting, SketchNTKWeighting

from helpers import (
    MemoryLogger,
    WeightHistory,
    line_problem,
    make_solver,
    make_trainer,
    mlp,
    ntk_callback,
)


def no_parameter_residual(input_, output_):
    """A residual the network does not enter: ``x + 1``, never zero."""
    return input_.extract(["x"]) + 1.0


def zero_residual(input_, output_):
    """A residual that is exactly zero and stays so: ``0 * u``."""
    return 0.0 * output_.extract(["u"])


WEIGHTINGS = {
    "exact": lambda: NTKWeighting(),
    "predictor": lambda: SketchNTKWeighting(
        sample_every_n_steps=1, warmup_samples=4, seed=0
    ),
    "parameter": lambda: SketchNTKWeighting(
        sample_every_n_steps=1, warmup_samples=4, seed=0, estimator="parameter"
    ),
}


def train_line(extra, name, steps=20):
    torch.manual_seed(0)
    solver = PhysicsInformedSingleModelSolver(
        line_problem(extra), mlp(1, 1), weighting=WEIGHTINGS[name]()
    )
    history = WeightHistory()
    trainer = make_trainer(solver, steps=steps, callbacks=[history])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        trainer.train()
    return ntk_callback(trainer), history, record


def messages(record, text):
    return [str(w.message) for w in record if text in str(w.message)]


@pytest.mark.parametrize("name", sorted(WEIGHTINGS))
@pytest.mark.parametrize(
    "extra", [no_parameter_residual, zero_residual], ids=["constant", "zero"]
)
def test_condition_without_parameters_gets_weight_one(name, extra):
    callback, history, record = train_line(extra, name)
    assert callback.statistics.traces["extra"] == 0.0
    # the others are still NTK weights: positive, finite, not all one
    for weights in history.weights:
        assert weights["extra"] == 1.0
        assert all(0 < w < float("inf") for w in weights.values())
    assert history.weights[-1]["D"] != 1.0
    # one warning that names the condition; no "unusable estimate"
    (warning,) = messages(record, "is exactly zero")
    assert "'extra'" in warning
    assert not messages(record, "NTK trace estimate")
    guard = callback.statistics.weighting.safeguard
    assert torch.isfinite(guard.total)


def test_zero_trace_weights_leave_the_others_formula_intact():
    # With the mean reduction the others keep Tr(K)/n / (Tr(K_cc)/n_c),
    # Tr(K) summed over every condition, the zero one included.
    callback, history, _ = train_line(no_parameter_residual, "exact", steps=1)
    traces = callback.statistics.traces
    sizes = {"D": 16, "ends": 2, "extra": 16}
    mean_diag = sum(traces.values()) / sum(sizes.values())
    for name in ("D", "ends"):
        expected = mean_diag / (traces[name] / sizes[name])
        assert history.weights[0][name] == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("name", ["exact", "parameter"])
def test_binding_bounds_are_counted_logged_and_reported(name):
    bounds = (0.99, 1.01)  # tighter than the spread of the wave weights
    weighting = {
        "exact": lambda: NTKWeighting(safeguard=None, weight_bounds=bounds),
        "parameter": lambda: SketchNTKWeighting(
            sample_every_n_steps=1,
            warmup_samples=4,
            seed=0,
            estimator="parameter",
            safeguard=None,
            weight_bounds=bounds,
        ),
    }[name]()
    solver = make_solver("wave", weighting=weighting)
    history, logger = WeightHistory(), MemoryLogger()
    trainer = make_trainer(solver, steps=5, callbacks=[history], logger=logger)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        trainer.train()
    hits = ntk_callback(trainer).statistics.bound_hits
    clamped = torch.tensor(bounds).tolist()  # as the float32 weights hold them
    expected = {c: sum(w[c] in clamped for w in history.weights) for c in hits}
    assert hits == expected
    assert sum(hits.values()) > 0  # the wave problem's traces bind here
    for condition, count in hits.items():
        assert logger.last(f"ntk_bound_hits/{condition}") == count
    assert len(messages(record, "clamped to weight_bounds")) == 1


def test_wide_bounds_never_bind():
    solver = make_solver("wave", weighting=NTKWeighting(safeguard=None))
    trainer = make_trainer(solver, steps=3)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        trainer.train()
    assert set(ntk_callback(trainer).statistics.bound_hits.values()) == {0}
    assert not messages(record, "clamped to weight_bounds")


def test_exact_update_cost_is_estimated_from_the_entry_count():
    weighting = NTKWeighting(update_every_n_steps=10)
    message = weighting.refresh_cost_warning(1000, 10.0, 0.01)
    assert "1000 residual entries" in message
    assert "update_every_n_steps=1000" in message  # 10 s / 0.01 s
    assert "99%" in message
    assert weighting.refresh_cost_warning(1000, 0.05, 0.01) is None  # 33%
    assert (
        SketchNTKWeighting(sample_every_n_steps=1).refresh_cost_warning(
            1000, 10.0, 0.01
        )
        is None
    )


@pytest.mark.parametrize("period,warns", [(1, True), (10**6, False)])
def test_expensive_exact_updates_warn_before_training(period, warns):
    # 100 points of the wave problem: a few hundred residual entries, each
    # differentiated on its own through the whole batch at every update
    # (chunk_size=None; the default's passes per column cost about a step)
    weighting = NTKWeighting(update_every_n_steps=period, chunk_size=None)
    solver = make_solver("wave", weighting=weighting, n=100)
    trainer = make_trainer(solver, steps=2)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        trainer.train()
    found = messages(record, "Exact NTK updates would take")
    assert len(found) == (1 if warns else 0)
