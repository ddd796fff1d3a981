"""``gradient_band`` in training: PINA's self-adaptive weights at a wide
band, the NTK weights within the band otherwise, none on a time-dependent
problem, a vanishing loss."""

import math

import pytest
import torch
from pina.solver import PhysicsInformedSingleModelSolver
from pina.weighting import SelfAdaptiveWeighting

from pina_ntk import NTKWeighting, SketchNTKWeighting
from pina_ntk.core.weights import ntk_weights

from helpers import (
    WeightHistory,
    line_problem,
    make_solver,
    make_trainer,
    mlp,
    ntk_callback,
)

WIDE = (1e-30, 1e30)


def first_weights(kind, weighting, ntk=True):
    """The weights of the first training step of a zoo problem."""
    solver = make_solver(kind, weighting=weighting, seed=1)
    history = WeightHistory()
    make_trainer(solver, steps=1, callbacks=[history], ntk=ntk).train()
    return history.weights[0]


def test_a_wide_band_gives_the_self_adaptive_weights():
    # PINA's SelfAdaptiveWeighting at the same first step: sum ||g|| / ||g_c||
    # for the same losses; without a band the factors turn the NTK weights
    # into these up to one common factor
    banded = first_weights(
        "poisson",
        NTKWeighting(safeguard=None, weight_bounds=WIDE, gradient_band=1e12),
    )
    adaptive = first_weights("poisson", SelfAdaptiveWeighting(), ntk=False)
    plain = first_weights(
        "poisson", NTKWeighting(safeguard=None, weight_bounds=WIDE)
    )
    names = sorted(adaptive)
    ratios = [banded[c] / adaptive[c] for c in names]
    assert ratios == pytest.approx([ratios[0]] * len(names), rel=1e-4)
    # the NTK weights themselves are far from them (the test can fail)
    plain_ratios = [plain[c] / adaptive[c] for c in names]
    assert max(plain_ratios) / min(plain_ratios) > 2


@pytest.mark.parametrize("band", [2.0, 4.0])
def test_weights_stay_within_the_band_around_the_ntk_weights(band):
    plain = first_weights("poisson", NTKWeighting(safeguard=None))
    banded = first_weights(
        "poisson", NTKWeighting(safeguard=None, gradient_band=band)
    )
    factors = torch.tensor([banded[c] / plain[c] for c in plain])
    assert (factors >= (1 - 1e-5) / band).all()
    assert (factors <= band * (1 + 1e-5)).all()
    # they move the weights, around a geometric mean of one
    assert (factors - 1).abs().max() > 0.1
    assert factors.log().mean().item() == pytest.approx(0.0, abs=1e-5)


@pytest.mark.parametrize(
    "weighting",
    [
        lambda band: NTKWeighting(update_every_n_steps=2, gradient_band=band),
        lambda band: SketchNTKWeighting(
            alpha=0.3, warmup_samples=3, seed=5, gradient_band=band
        ),
    ],
    ids=["exact", "predictor"],
)
def test_time_dependent_problems_keep_the_ntk_weights(weighting):
    # a problem with a temporal variable: no factor and no loss gradients,
    # the run is bitwise the one without a band
    runs = []
    for band in (None, 4.0):
        solver = make_solver("wave", weighting=weighting(band), seed=2)
        history = WeightHistory()
        trainer = make_trainer(solver, steps=4, callbacks=[history])
        trainer.train()
        statistics = ntk_callback(trainer).statistics
        assert not statistics.weighting.band_applies()
        assert statistics.state_dict()["gradients"] is None
        runs.append(history.weights)
    assert runs[0] == runs[1]


def vanishing_residual(input_, output_):
    """Exactly zero at every step, yet moved by every parameter: its loss
    and loss gradient vanish, its kernel block does not."""
    u = output_.extract(["u"])
    return u - u.detach()


WEIGHTINGS = {
    "exact": lambda: NTKWeighting(safeguard=None, gradient_band=4.0),
    "predictor": lambda: SketchNTKWeighting(
        sample_every_n_steps=1, warmup_samples=4, seed=0, gradient_band=4.0
    ),
}


@pytest.mark.parametrize("name", sorted(WEIGHTINGS))
def test_a_vanishing_loss_keeps_finite_bounded_weights(name):
    problem = line_problem(vanishing_residual, "vanishing")
    torch.manual_seed(0)
    weighting = WEIGHTINGS[name]()
    solver = PhysicsInformedSingleModelSolver(
        problem, mlp(1, 1), weighting=weighting
    )
    history = WeightHistory()
    trainer = make_trainer(solver, steps=10, callbacks=[history])
    trainer.train()
    statistics = ntk_callback(trainer).statistics
    lower, upper = weighting.weight_bounds
    for weights in history.weights:
        assert all(
            math.isfinite(w) and lower <= w <= upper for w in weights.values()
        )
    # the vanishing condition keeps its NTK weight (factor 1); the others are
    # balanced between themselves, within the band
    if name == "exact":  # no safeguard, latest traces: w = phi * NTK weight
        names = statistics.names
        traces = torch.tensor([statistics.traces[c] for c in names])
        sizes = torch.tensor([16.0, 2.0, 16.0])
        ntk = dict(zip(names, ntk_weights(traces, sizes).tolist()))
        last = history.weights[-1]
        assert last["vanishing"] == pytest.approx(ntk["vanishing"], rel=1e-5)
        factors = [last[c] / ntk[c] for c in ("D", "ends")]
        assert factors[0] * factors[1] == pytest.approx(1.0, rel=1e-4)
        assert all(0.25 * (1 - 1e-5) <= f <= 4 * (1 + 1e-5) for f in factors)
