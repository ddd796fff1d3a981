"""Unit tests of ``pina_ntk.integration.diagnostics`` (``ntk_traces``,
``solver_ntk_weights``, ``condition_calls``, ``diagnostic_weighting``) and of
``NTKDiagnosticsCallback``'s hooks, driven directly on a tiny float64
Poisson solver with a stand-in trainer; every value is checked against
plain autograd Jacobians (``reference.py``) or a hand derivation."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from helpers import MemoryLogger, make_solver, make_trainer
from pina_ntk import ntk_traces
from pina_ntk.core.estimators import sample_probe
from pina_ntk.integration.diagnostics import (
    condition_calls,
    diagnostic_weighting,
    solver_ntk_weights,
)
from pina_ntk.integration.diagnostics_callback import NTKDiagnosticsCallback
from pina_ntk.integration.pina_adapter import condition_data
from reference import jacobian_blocks, predictor_sample

#: Points in each of Poisson2DSquareProblem's two conditions.
POINTS = 5


def ready_solver(loss=None):
    """A float64 Poisson solver (5 + 5 entries, width 8) whose conditions
    hold their points."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        solver = make_solver("poisson", n=POINTS, width=8, loss=loss)
        make_trainer(solver, steps=1, ntk=False)
    finally:
        torch.set_default_dtype(previous)
    return solver


@pytest.fixture(scope="module")
def solver():
    return ready_solver()


@pytest.fixture(scope="module")
def blocks(solver):
    """``{condition: (n_c, p) float64 Jacobian rows}`` at theta."""
    return jacobian_blocks(solver)


def residual_values(solver):
    """``{condition: flat float64 residual}`` by plain evaluation."""
    return {
        name: evaluate(batch, solver).tensor.reshape(-1)
        for name, evaluate, batch in condition_calls(solver)
    }


def hand_ntk_weights(traces, sizes, reduction):
    """``w_c = (sum_d T_d / sum_d n_d) / (T_c / n_c)``, divided by ``n_c``
    for a ``sum`` reduction (the convention of ``core.weights``)."""
    mean_diag = sum(traces.values()) / sum(sizes.values())
    weights = {n: mean_diag / (t / sizes[n]) for n, t in traces.items()}
    if reduction == "sum":
        weights = {n: w / sizes[n] for n, w in weights.items()}
    return weights


# ------------------------------------------------------------ diagnostics
def test_condition_calls_refuses_a_condition_without_points():
    # the message tells the user what to do before asking for traces
    fake = SimpleNamespace(
        device=torch.device("cpu"),
        problem=SimpleNamespace(conditions={"D": SimpleNamespace(data=None)}),
    )
    with pytest.raises(ValueError) as error:
        condition_calls(fake)
    assert str(error.value) == (
        "Condition 'D' holds no points yet: create pina.Trainer(solver, ...) "
        "first (it moves the problem's discretisation into the conditions)."
    )


def test_condition_calls_move_the_points_to_the_solvers_device(solver):
    # the conditions keep their points on the CPU; the calls carry them on
    # the solver's device (here the meta device stands for an accelerator)
    fake = SimpleNamespace(device=torch.device("meta"), problem=solver.problem)
    calls = condition_calls(fake)
    assert [name for name, _, _ in calls] == ["boundary", "D"]
    for _, _, batch in calls:
        assert batch["input"].device == torch.device("meta")
        assert batch["input"].shape == (POINTS, 2)
    # the conditions' own points stay where they were
    stored = condition_data(solver.problem.conditions["D"])["input"]
    assert stored.device == torch.device("cpu")


def test_diagnostic_weightings_have_no_safeguard_and_100_samples():
    # documented: "with no safeguard"; samples default 100, seed passed on
    exact = diagnostic_weighting("exact")
    assert exact.safeguard is None
    sketch = diagnostic_weighting("sketch")
    assert sketch.safeguard is None
    assert sketch.warmup_samples == 100
    assert sketch.seed is None
    seeded = diagnostic_weighting("sketch", samples=3, seed=17)
    assert (seeded.warmup_samples, seeded.seed) == (3, 17)


def test_a_single_sample_is_allowed_and_zero_refused():
    # samples >= 1: one sketch is a valid (if noisy) estimate
    assert diagnostic_weighting("sketch", samples=1).warmup_samples == 1
    with pytest.raises(ValueError, match=r"\bsamples\b"):
        diagnostic_weighting("sketch", samples=0)


def test_exact_traces_match_autograd_jacobians(solver, blocks):
    # Tr(K_cc) = sum of squared Jacobian rows of block c
    got = ntk_traces(solver)
    assert list(got) == ["boundary", "D"]
    for name, rows in blocks.items():
        assert float(got[name]) == pytest.approx(
            float((rows**2).sum()), rel=1e-10
        )


def sketch_reference(solver, blocks, seed):
    """One predictor sketch with the Gaussian probe of a generator seeded
    with ``seed``, against the exact kernel."""
    like = list(residual_values(solver).values())
    probe = sample_probe(like, generator=torch.Generator().manual_seed(seed))
    return predictor_sample(list(blocks.values()), probe)


def test_a_seeded_sketch_uses_the_probe_of_that_seed(solver, blocks):
    # the probe comes from a generator seeded with `seed` (not torch's
    # global one): g_c . (K g)_c with that probe, whatever the global state
    expected = sketch_reference(solver, blocks, seed=11)
    options = dict(
        samples=1,
        seed=11,
        estimator="predictor",
        probe="gaussian",
        balanced_probe=False,
        difference="central",
    )
    for global_seed in (0, 1):
        torch.manual_seed(global_seed)
        got = ntk_traces(solver, method="sketch", **options)
        for value, reference in zip(got.values(), expected):
            assert float(value) == pytest.approx(reference, rel=1e-6)


def test_without_a_seed_the_sketch_draws_a_wide_one(solver):
    # seed=None: one seed drawn as randint(0, 2**62) from torch's global
    # generator, so the result equals the sketch seeded with that draw
    options = dict(samples=1, balanced_probe=False)
    seeds = []
    for draw in (0, 1):
        torch.manual_seed(draw)
        seed = int(torch.randint(0, 2**62, (1,)).item())
        seeds.append(seed)
        torch.manual_seed(draw)
        unseeded = ntk_traces(solver, method="sketch", **options)
        seeded = ntk_traces(solver, method="sketch", seed=seed, **options)
        for name in seeded:
            assert float(unseeded[name]) == float(seeded[name])
    assert max(seeds) > 2**32  # a 62-bit draw, not a narrow one


def test_the_probe_stream_lives_on_the_residuals_device(solver, monkeypatch):
    # a CUDA residual needs a CUDA generator: the stream is created for the
    # residuals' device explicitly (None would mean the CPU)
    devices = []

    class Recorded(torch.Generator):
        def __new__(cls, *args, **kwargs):
            devices.append(kwargs.get("device", args[0] if args else None))
            return super().__new__(cls, *args, **kwargs)

        def __init__(self, *args, **kwargs):
            pass

    monkeypatch.setattr(torch, "Generator", Recorded)
    ntk_traces(solver, method="sketch", samples=1, seed=0)
    assert devices == [torch.device("cpu")]


def test_solver_ntk_weights_are_the_exact_ntk_weights(solver, blocks):
    # default method "exact", mean reduction: w_c = mean diag K / mean diag
    # K_cc, returned as floats per condition
    traces = {n: float((rows**2).sum()) for n, rows in blocks.items()}
    sizes = {n: len(rows) for n, rows in blocks.items()}
    expected = hand_ntk_weights(traces, sizes, "mean")
    got = solver_ntk_weights(solver)
    assert list(got) == ["boundary", "D"]
    for name, value in expected.items():
        assert isinstance(got[name], float)
        assert got[name] == pytest.approx(value, rel=1e-10)


def test_solver_ntk_weights_follow_a_sum_reduction():
    # with reduction="sum" each reduced loss is n_c times larger: the
    # weights are divided by n_c
    solver = ready_solver(loss=torch.nn.MSELoss(reduction="sum"))
    blocks = jacobian_blocks(solver)
    traces = {n: float((rows**2).sum()) for n, rows in blocks.items()}
    sizes = {n: len(rows) for n, rows in blocks.items()}
    expected = hand_ntk_weights(traces, sizes, "sum")
    got = solver_ntk_weights(solver)
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-10)


def test_solver_ntk_weights_pass_the_options_on(solver, blocks):
    # statistic="rayleigh": the effective traces n_c R_c^T K_cc R_c/|R_c|^2
    # replace Tr(K_cc) in the weights
    residuals = residual_values(solver)
    traces = {}
    for name, rows in blocks.items():
        r = residuals[name].detach().double().numpy()
        traces[name] = len(r) * float(((rows.T @ r) ** 2).sum()) / (r @ r)
    sizes = {n: len(rows) for n, rows in blocks.items()}
    expected = hand_ntk_weights(traces, sizes, "mean")
    got = solver_ntk_weights(solver, method="exact", statistic="rayleigh")
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-8)


# ------------------------------------------------------- the callback
def condition_batch(solver):
    """The full batch of a training step: ``(name, data)`` pairs."""
    return [
        (name, condition_data(condition))
        for name, condition in solver.problem.conditions.items()
    ]


def run_steps(solver, callback, steps, trainer_every=1):
    """Drive the callback's batch hooks for ``steps`` steps (parameters
    unchanged) with a stand-in trainer; return its logger."""
    logger = MemoryLogger()
    trainer = SimpleNamespace(
        global_step=0, log_every_n_steps=trainer_every, loggers=[logger]
    )
    batch = condition_batch(solver)
    for step in range(steps):
        trainer.global_step = step
        callback.on_train_batch_start(trainer, solver, batch, 0)
        callback.on_train_batch_end(trainer, solver, None, batch, 0)
    return logger


def test_callback_records_and_logs_the_theorys_quantities(
    solver, blocks, monkeypatch
):
    # with weights w = {boundary: 1 (unsaved), D: 2.5}: residual_sq =
    # |R|^2, grad_sq = |grad 1/2 sum_c w_c mean(R_c^2)|^2, the losses, the
    # eigenvalues of J J^T (ascending) and Tr K_cc; logged under
    # ntk_diagnostics/ at the step they belong to, eigenvalues on kernel
    # steps only (every 2nd step here)
    monkeypatch.setattr(
        solver.weighting, "last_saved_weights", lambda: {"D": 2.5}
    )
    weights = {"boundary": 1.0, "D": 2.5}
    residuals = residual_values(solver)
    params = [p for p in solver.parameters() if p.requires_grad]
    half = 0.5 * sum(weights[n] * r.pow(2).mean() for n, r in residuals.items())
    grads = torch.autograd.grad(half, params, allow_unused=True)
    grad_sq = sum(float(g.pow(2).sum()) for g in grads if g is not None)
    residual_sq = sum(
        float(r.detach().pow(2).sum()) for r in residuals.values()
    )
    losses = {n: float(r.detach().pow(2).mean()) for n, r in residuals.items()}
    jac = np.concatenate(list(blocks.values()))
    eigenvalues = np.linalg.eigvalsh(jac @ jac.T)
    assert np.diff(eigenvalues).min() > 1e-6 * eigenvalues.max()  # distinct

    callback = NTKDiagnosticsCallback(max_entries=10, kernel_every_n_steps=2)
    logger = run_steps(solver, callback, steps=2)
    history = callback.history
    assert history["names"] == ["boundary", "D"]
    assert history["step"] == [0, 1]
    assert history["kernel_step"] == [0]
    assert history["residual_sq"] == pytest.approx([residual_sq] * 2)
    assert history["grad_sq"] == pytest.approx([grad_sq] * 2, rel=1e-9)
    assert history["avg_grad_sq"] == pytest.approx([grad_sq] * 2, rel=1e-9)
    assert history["weights"] == {"boundary": [1.0, 1.0], "D": [2.5, 2.5]}
    weighted = sum(weights[n] * losses[n] for n in losses)
    assert history["weighted_loss"] == pytest.approx([weighted] * 2)
    for name, loss in losses.items():
        assert history["condition_loss"][name] == pytest.approx([loss] * 2)
        trace = float((blocks[name] ** 2).sum())
        assert history["kernel_traces"][name] == pytest.approx([trace])
    np.testing.assert_allclose(
        history["eigenvalues"][0], eigenvalues, atol=1e-9 * eigenvalues.max()
    )

    assert [step for step, _ in logger.rows] == [0, 1]
    plain = {
        "residual_sq": residual_sq,
        "grad_sq": grad_sq,
        "avg_residual_sq": residual_sq,
        "avg_grad_sq": grad_sq,
        "weight/boundary": 1.0,
        "weight/D": 2.5,
    }
    kernel = {
        "eig_min": eigenvalues[0],
        "eig_max": eigenvalues[-1],
        **{f"eig/{i}": value for i, value in enumerate(eigenvalues)},
    }
    for (_, row), expected in zip(logger.rows, [{**plain, **kernel}, plain]):
        assert set(row) == {f"ntk_diagnostics/{k}" for k in expected}
        for key, value in expected.items():
            assert row[f"ntk_diagnostics/{key}"] == pytest.approx(
                value, rel=1e-9, abs=1e-9 * eigenvalues.max()
            )


def test_callback_logs_every_n_steps_of_its_own(solver):
    # log_every_n_steps=2 overrides the trainer's 1: steps 0 and 2 only
    callback = NTKDiagnosticsCallback(max_entries=10, log_every_n_steps=2)
    assert callback.log_every_n_steps == 2
    logger = run_steps(solver, callback, steps=3, trainer_every=1)
    assert [step for step, _ in logger.rows] == [0, 2]
    assert callback.history["step"] == [0, 1, 2]


def test_a_batch_end_without_its_start_records_nothing(solver):
    # nothing pending (a fresh callback): the end hook is a no-op
    callback = NTKDiagnosticsCallback(max_entries=10)
    logger = MemoryLogger()
    trainer = SimpleNamespace(
        global_step=0, log_every_n_steps=1, loggers=[logger]
    )
    batch = condition_batch(solver)
    callback.on_train_batch_end(trainer, solver, None, batch, 0)
    assert callback.history["step"] == [] and logger.rows == []


def test_a_single_entry_kernel_is_allowed():
    # max_entries >= 1: a one-entry batch is a valid kernel
    assert NTKDiagnosticsCallback(max_entries=1).max_entries == 1


def record(step, residual_sq, grad_sq, loss):
    """A step record as ``on_train_batch_end`` builds it (no kernel)."""
    return {
        "step": step,
        "residual_sq": residual_sq,
        "grad_sq": grad_sq,
        "condition_loss": {"D": loss},
        "weighted_loss": 2.0 * loss,
        "weights": {"D": 2.0},
    }


def test_running_means_are_means_over_the_recorded_steps():
    # avg_x[T-1] = (1/T) sum_{t<T} x_t, from a zero start
    callback = NTKDiagnosticsCallback()
    callback._append(record(0, 4.0, 3.0, 0.5))
    callback._append(record(1, 2.0, 5.0, 0.25))
    callback._append(record(2, 6.0, 1.0, 0.125))
    history = callback.history
    assert history["avg_residual_sq"] == pytest.approx([4.0, 3.0, 4.0])
    assert history["avg_grad_sq"] == pytest.approx([3.0, 4.0, 3.0])
    assert history["weighted_loss"] == [1.0, 0.5, 0.25]
    assert history["condition_loss"] == {"D": [0.5, 0.25, 0.125]}
    assert history["kernel_step"] == []


def test_step_weights_default_to_one_in_the_residuals_dtype():
    # no weighting (or a condition it has not saved): weight 1; saved
    # weights are taken as they are, cast to the residual's dtype
    like = torch.zeros(3, dtype=torch.float64)
    names = ["boundary", "D"]
    unweighted = NTKDiagnosticsCallback._step_weights(
        SimpleNamespace(), names, like
    )
    assert unweighted.dtype == torch.float64
    assert unweighted.tolist() == [1.0, 1.0]
    weighting = SimpleNamespace(
        last_saved_weights=lambda: {"D": torch.tensor(0.1)}
    )
    weighted = NTKDiagnosticsCallback._step_weights(
        SimpleNamespace(weighting=weighting), names, like
    )
    assert weighted.dtype == torch.float64
    assert weighted.tolist() == [1.0, float(torch.tensor(0.1))]
    none = NTKDiagnosticsCallback._step_weights(
        SimpleNamespace(weighting=None), names, like
    )
    assert none.tolist() == [1.0, 1.0]
