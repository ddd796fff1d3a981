"""Mixed precision: the kernel statistics run in full precision."""

import pytest
import torch

from pina_ntk import NTKWeighting, SketchNTKWeighting
from pina_ntk.integration.diagnostics import condition_calls
from pina_ntk.integration.pina_adapter import trainable_parameters
from pina_ntk.integration.recording import replay_residual_fn

from helpers import make_solver, make_trainer, ntk_callback

WEIGHTINGS = {
    "exact": lambda: NTKWeighting(safeguard=None),
    "predictor": lambda: SketchNTKWeighting(
        warmup_samples=8, seed=3, safeguard=None
    ),
    "parameter": lambda: SketchNTKWeighting(
        warmup_samples=8, seed=3, estimator="parameter", safeguard=None
    ),
}


def step_zero_traces(name, precision):
    """The traces behind step 0's weights (exact, or the warm start's mean
    of sketches), at the initial parameters, under ``precision``: a
    Lightning precision, or ``"float16-autocast"`` (training inside
    ``torch.autocast("cpu", torch.float16)``: Lightning runs "16-mixed" as
    bfloat16 on a CPU, so this is how float16 autocast is tested here)."""
    solver = make_solver("wave", weighting=WEIGHTINGS[name](), width=32)
    if precision == "float16-autocast":
        trainer = make_trainer(solver, steps=1)
        with torch.autocast("cpu", dtype=torch.float16):
            trainer.train()
    else:
        trainer = make_trainer(solver, steps=1, precision=precision)
        trainer.train()
    return torch.tensor(list(ntk_callback(trainer).statistics.traces.values()))


def traces_under_autocast(name, dtype):
    """Step 0's traces computed as the callback would without its guard:
    the residuals and every sample under ``torch.autocast(dtype)``."""
    weighting = WEIGHTINGS[name]()
    solver = make_solver("wave", weighting=weighting, width=32)
    make_trainer(solver, steps=1, ntk=False)
    calls = condition_calls(solver)
    residual_fn = replay_residual_fn(solver, calls, [n for n, _, _ in calls])
    params = trainable_parameters(solver)
    with torch.autocast("cpu", dtype=dtype):
        residuals = residual_fn(params)
        generator = torch.Generator().manual_seed(3)
        drawn = weighting.warm_start(residual_fn, params, residuals, generator)
    return torch.stack([t for t, _ in drawn]).mean(dim=0).detach()


@pytest.mark.parametrize("precision", ["bf16-mixed", "float16-autocast"])
@pytest.mark.parametrize("name", sorted(WEIGHTINGS))
def test_mixed_precision_traces_match_full_precision(name, precision):
    full = step_zero_traces(name, "32-true")
    mixed = step_zero_traces(name, precision)
    # The same float32 computation at the same parameters and probes: only
    # the order of a few float32 sums may differ (relative 1e-7 each).
    assert torch.allclose(mixed, full, rtol=1e-4, atol=0.0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", sorted(WEIGHTINGS))
def test_the_check_above_would_see_half_precision(name, dtype):
    # Autocast reaching the statistics (what the callback prevents) moves
    # the traces far outside the tolerance used above.
    full = step_zero_traces(name, "32-true")
    half = traces_under_autocast(name, dtype)
    assert torch.isfinite(full).all()
    assert not torch.allclose(half, full, rtol=1e-4, atol=0.0)


@pytest.mark.parametrize("precision", ["bf16-true", "16-true"])
def test_sketch_refuses_half_precision_parameters(precision):
    solver = make_solver("wave", weighting=SketchNTKWeighting())
    trainer = make_trainer(solver, steps=1, precision=precision)
    with pytest.raises(ValueError, match=f"precision='{precision}'"):
        trainer.train()
