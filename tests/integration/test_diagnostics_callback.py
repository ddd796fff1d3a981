"""NTKDiagnosticsCallback: exact eigenvalues, time averages, checkpoints."""

import json

import numpy as np
import pytest
import torch

from helpers import MemoryLogger, assert_figure, make_solver, make_trainer
from pina_ntk import NTKWeighting
from pina_ntk.integration.diagnostics import condition_calls
from pina_ntk.integration.diagnostics_callback import NTKDiagnosticsCallback
from pina_ntk.paper.figures import loglog_slope, plot_diagnostics

#: Poisson2DSquareProblem with 5 points in each of its two domains.
POINTS = 5
ENTRIES = 2 * POINTS


def reference_residuals(solver):
    """Residual blocks at the solver's own parameters, plain autograd."""
    return [
        evaluate(batch, solver).tensor.reshape(-1)
        for _, evaluate, batch in condition_calls(solver)
    ]


def reference_kernel(solver):
    """``J J^T`` from per-entry backward passes on the live parameters."""
    params = [p for p in solver.parameters() if p.requires_grad]
    flat = torch.cat(reference_residuals(solver))
    rows = []
    for entry in flat:
        grads = torch.autograd.grad(
            entry, params, retain_graph=True, allow_unused=True
        )
        rows.append(
            torch.cat(
                [
                    (torch.zeros_like(p) if g is None else g).reshape(-1)
                    for g, p in zip(grads, params)
                ]
            )
        )
    jacobian = torch.stack(rows).double()
    return (jacobian @ jacobian.T).numpy()


def train(steps, weighting=None, callback=None, **trainer_options):
    """A Poisson solver trained ``steps`` full-batch steps with diagnostics."""
    solver = make_solver("poisson", weighting, n=POINTS, width=8)
    callback = callback or NTKDiagnosticsCallback(max_entries=ENTRIES)
    trainer = make_trainer(
        solver,
        steps,
        callbacks=[callback],
        ntk=weighting is not None,
        **trainer_options,
    )
    return solver, trainer, callback


def test_eigenvalues_and_weights_match_an_independent_kernel():
    solver, trainer, callback = train(3, NTKWeighting(safeguard=None))
    expected = np.linalg.eigvalsh(reference_kernel(solver))  # at theta_0
    trainer.train()
    history = callback.history
    assert history["kernel_step"] == [0, 1, 2]
    measured = np.asarray(history["eigenvalues"][0])
    # float32 residuals: agreement to rounding relative to the largest
    np.testing.assert_allclose(
        measured, expected, rtol=0, atol=1e-4 * expected.max()
    )
    # exact NTK weights without safeguard: w_c = mean diag K / mean diag K_cc
    traces = {n: np.asarray(v) for n, v in history["kernel_traces"].items()}
    total = sum(traces.values())
    for name, weights in history["weights"].items():
        expected_weights = (total / ENTRIES) / (traces[name] / POINTS)
        np.testing.assert_allclose(weights, expected_weights, rtol=1e-4)


def test_unweighted_averages_match_an_independent_gradient():
    solver, trainer, callback = train(2)
    blocks = reference_residuals(solver)
    params = [p for p in solver.parameters() if p.requires_grad]
    # PINA's loss sum_c mean(R_c^2) is 2 G with unit weights
    half_loss = 0.5 * sum(b.pow(2).mean() for b in blocks)
    grads = torch.autograd.grad(half_loss, params, allow_unused=True)
    grad_sq = sum(float(g.pow(2).sum()) for g in grads if g is not None)
    residual_sq = sum(float(b.detach().pow(2).sum()) for b in blocks)
    trainer.train()
    history = callback.history
    assert set(history["weights"]) == {"boundary", "D"}
    assert all(w == 1.0 for v in history["weights"].values() for w in v)
    assert history["residual_sq"][0] == pytest.approx(residual_sq, rel=1e-5)
    assert history["grad_sq"][0] == pytest.approx(grad_sq, rel=1e-4)
    mean = 0.5 * (history["residual_sq"][0] + history["residual_sq"][1])
    assert history["avg_residual_sq"][1] == pytest.approx(mean, rel=1e-12)


def test_vector_jacobian_path_matches_kernel_path():
    _, trainer, every = train(4, NTKWeighting())
    trainer.train()
    _, trainer, sparse = train(
        4,
        NTKWeighting(),
        NTKDiagnosticsCallback(max_entries=ENTRIES, kernel_every_n_steps=2),
    )
    trainer.train()
    assert sparse.history["kernel_step"] == [0, 2]
    np.testing.assert_allclose(
        sparse.history["grad_sq"], every.history["grad_sq"], rtol=1e-4
    )


def test_refuses_kernels_above_max_entries():
    _, trainer, _ = train(
        1, callback=NTKDiagnosticsCallback(max_entries=ENTRIES - 1)
    )
    with pytest.raises(
        ValueError, match=f"{ENTRIES} residual entries.*max_entries"
    ):
        trainer.train()


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"max_entries": 0}, "max_entries"),
        ({"kernel_every_n_steps": 1.5}, "kernel_every_n_steps"),
        ({"log_every_n_steps": 0}, "log_every_n_steps"),
    ],
)
def test_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        NTKDiagnosticsCallback(**kwargs)


def test_histories_survive_a_checkpoint_round_trip(tmp_path):
    path = str(tmp_path / "half.ckpt")
    _, trainer, uninterrupted = train(4, NTKWeighting())
    trainer.train()
    _, trainer, first = train(2, NTKWeighting())
    trainer.train()
    trainer.save_checkpoint(path)
    _, trainer, resumed = train(4, NTKWeighting())
    trainer.train(ckpt_path=path)
    history, reference = resumed.history, uninterrupted.history
    assert history["step"] == [0, 1, 2, 3]
    assert history["residual_sq"][:2] == first.history["residual_sq"]
    for key in ("residual_sq", "avg_residual_sq", "avg_grad_sq"):
        np.testing.assert_allclose(history[key], reference[key], rtol=1e-4)
    # the state is plain data: JSON-serialisable and copied, not shared
    state = first.state_dict()
    json.dumps(state)
    restored = NTKDiagnosticsCallback(max_entries=ENTRIES)
    restored.load_state_dict(state)
    state["history"]["step"].append(99)
    assert restored.history == first.history


@pytest.mark.slow
def test_logs_to_the_loggers_and_plots(tmp_path):
    callback = NTKDiagnosticsCallback(max_entries=ENTRIES, log_every_n_steps=1)
    logger = MemoryLogger()
    _, trainer, callback = train(3, NTKWeighting(), callback, logger=logger)
    trainer.train()
    history = callback.history
    # each step's values at that step: eigenvalues on kernel steps only
    assert [s for s, _ in logger.series("ntk_diagnostics/residual_sq")] == (
        history["step"]
    )
    eig_max = logger.series("ntk_diagnostics/eig_max")
    assert eig_max[-1][1] == pytest.approx(history["eigenvalues"][-1][-1])
    for key in (
        "avg_residual_sq",
        "avg_grad_sq",
        "weight/D",
        f"eig/{ENTRIES - 1}",
    ):
        assert logger.series(f"ntk_diagnostics/{key}")
    path = tmp_path / "diagnostics.png"
    plot_diagnostics(callback.history, str(path))
    assert_figure(path)
    with pytest.raises(ValueError, match="no recorded steps"):
        plot_diagnostics({"step": []})


def test_loglog_slope():
    assert loglog_slope([1, 10, 100], [2.0, 0.2, 0.02]) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="positive"):
        loglog_slope([1, 2], [1.0, 0.0])
