"""``gradient_band`` in training: PINA's self-adaptive weights at a wide
band, the NTK weights within the band otherwise, none on a time-dependent
problem, a vanishing loss."""

import math

import lightning
import pytest
import torch
from pina.solver import PhysicsInformedSingleModelSolver
from pina.weighting import SelfAdaptiveWeighting

from pina_ntk import NTKWeighting, SketchNTKWeighting
from pina_ntk.integration.diagnostics import condition_calls

from reference import jacobian_blocks

from helpers import (
    WeightHistory,
    line_problem,
    make_solver,
    make_trainer,
    mlp,
    ntk_callback,
)

WIDE = (1e-30, 1e30)
# docs/weights.md: the squared gradient norms are averaged at this rate per
# optimisation step (about 100 steps), whatever the refresh spacing
GRADIENT_ALPHA = 1e-2


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


class BandReference(lightning.Callback):
    """At the start of every step, at the step's parameters: the block traces
    of the Jacobian assembled row by row (``reference.jacobian_blocks``) and
    each condition loss's squared gradient norm by plain autograd; neither
    pina_ntk's estimators nor its band code take part."""

    def __init__(self):
        self.traces = []
        self.squared = []
        self.sizes = None

    def on_train_batch_start(self, trainer, pl_module, batch, idx):
        blocks = jacobian_blocks(pl_module)
        self.traces.append({c: float((j**2).sum()) for c, j in blocks.items()})
        self.sizes = {c: len(j) for c, j in blocks.items()}
        params = [p for p in pl_module.parameters() if p.requires_grad]
        squared = {}
        for name, evaluate, data in condition_calls(pl_module):
            residual = evaluate(data, pl_module)
            # PINA's MSELoss: the mean over the condition's residual entries
            loss = torch.Tensor.as_subclass(residual, torch.Tensor).pow(2)
            grads = torch.autograd.grad(loss.mean(), params, allow_unused=True)
            squared[name] = sum(
                float(g.double().pow(2).sum()) for g in grads if g is not None
            )
        self.squared.append(squared)


def averaged(squared, refreshes, every, alpha=GRADIENT_ALPHA):
    """The moving average of the squared gradient norms after each refresh:
    the first fold takes the sample, each later one moves towards it by
    ``1 - (1 - alpha)^every``, ``alpha`` per optimisation step."""
    rate = 1 - (1 - alpha) ** every
    value, out = None, {}
    for step in refreshes:
        sample = squared[step]
        if value is None:
            value = dict(sample)
        else:
            value = {c: value[c] + rate * (sample[c] - value[c]) for c in value}
        out[step] = value
    return out


def banded_by_hand(traces, sizes, squared, band, bounds=(1e-6, 1e6)):
    """``docs/weights.md``: the NTK weights ``mean diag K / mean diag K_cc``
    times ``exp(clamp(mean_d u_d - u_c, -log b, log b))``, ``u_c = log(w_c
    ||g_c||)`` over the conditions with a nonzero gradient (factor 1
    elsewhere), clamped to the weight bounds."""
    mean_diag = sum(traces.values()) / sum(sizes.values())
    ntk = {c: mean_diag * sizes[c] / traces[c] for c in traces}
    u = {
        c: math.log(ntk[c]) + 0.5 * math.log(squared[c])
        for c in traces
        if squared[c] > 0
    }
    mean = sum(u.values()) / len(u)
    limit = math.log(band)
    weights = {}
    for c in traces:
        factor = math.exp(min(max(mean - u[c], -limit), limit)) if c in u else 1
        weights[c] = min(max(ntk[c] * factor, bounds[0]), bounds[1])
    return weights


def expected_history(reference, steps, every, band, alpha=GRADIENT_ALPHA):
    """The weights of each step: formed at the last refresh, kept between."""
    refreshes = list(range(0, steps, every))
    average = averaged(reference.squared, refreshes, every, alpha)
    history = []
    for step in range(steps):
        last = max(r for r in refreshes if r <= step)
        history.append(
            banded_by_hand(
                reference.traces[last], reference.sizes, average[last], band
            )
        )
    return history


def relative_gap(first, second):
    """The largest relative difference between two weight histories."""
    return max(abs(a[c] / b[c] - 1) for a, b in zip(first, second) for c in a)


@pytest.mark.parametrize("every", [1, 3])
def test_exact_band_weights_by_hand(every):
    # at every refresh, NTK weights from brute-force traces times the band's
    # factors, from the moving average of brute-force squared gradient norms
    # at GRADIENT_ALPHA per step; between refreshes the weights stay
    steps, band, tolerance = 12, 100.0, 2e-4
    weighting = NTKWeighting(
        safeguard=None, update_every_n_steps=every, gradient_band=band
    )
    solver = make_solver("poisson", weighting=weighting, seed=3)
    reference, history = BandReference(), WeightHistory()
    make_trainer(solver, steps=steps, callbacks=[reference, history]).train()
    expected = expected_history(reference, steps, every, band)
    assert relative_gap(history.weights, expected) < tolerance
    # the check can fail: the band acts inside its limits (neither 1 nor
    # clamped), and the average at ten times the rate gives other weights
    plain = expected_history(reference, steps, every, 1.0)
    factors = [w[c] / p[c] for w, p in zip(expected, plain) for c in w]
    assert all(1.01 < max(f, 1 / f) < 0.99 * band for f in factors)
    fast = expected_history(reference, steps, every, band, 10 * GRADIENT_ALPHA)
    assert relative_gap(fast, expected) > 10 * tolerance


def test_a_vanishing_loss_keeps_its_ntk_weight():
    # exact weights: the vanishing condition keeps its NTK weight (factor 1,
    # left out of the mean), the others are balanced between themselves
    steps, band = 8, 4.0
    problem = line_problem(vanishing_residual, "vanishing")
    torch.manual_seed(0)
    weighting = NTKWeighting(safeguard=None, gradient_band=band)
    solver = PhysicsInformedSingleModelSolver(
        problem, mlp(1, 1), weighting=weighting
    )
    reference, history = BandReference(), WeightHistory()
    make_trainer(solver, steps=steps, callbacks=[reference, history]).train()
    assert all(s["vanishing"] == 0 for s in reference.squared)
    expected = expected_history(reference, steps, 1, band)
    assert relative_gap(history.weights, expected) < 2e-4
    # unclamped, the two others' weighted gradient norms are equal
    average = averaged(reference.squared, range(steps), 1)[steps - 1]
    last = history.weights[-1]
    balance = [last[c] * math.sqrt(average[c]) for c in ("D", "ends")]
    plain = expected_history(reference, steps, 1, 1.0)[-1]
    if all(1 / band < last[c] / plain[c] < band for c in ("D", "ends")):
        assert balance[0] == pytest.approx(balance[1], rel=2e-4)


def test_a_vanishing_loss_under_the_sketch_balances_the_others():
    # sketched traces are random, but a wide band makes the weights of the
    # conditions with a gradient equalise their weighted gradient norms
    # whatever the traces: w_D ||g_D|| = w_ends ||g_ends||, with the moving
    # average of the brute-force squared norms. The vanishing residual is
    # zero at every parameter, so the sketch's finite differences see a zero
    # trace: a uniform kernel's weight, 1 (weights.md), and factor 1
    steps = 8
    problem = line_problem(vanishing_residual, "vanishing")
    torch.manual_seed(0)
    weighting = SketchNTKWeighting(
        sample_every_n_steps=1,
        warmup_samples=4,
        seed=0,
        gradient_band=1e6,
        safeguard=None,
        weight_bounds=WIDE,
    )
    solver = PhysicsInformedSingleModelSolver(
        problem, mlp(1, 1), weighting=weighting
    )
    reference, history = BandReference(), WeightHistory()
    trainer = make_trainer(solver, steps=steps, callbacks=[reference, history])
    with pytest.warns(RuntimeWarning, match=r"\['vanishing'\] is exactly zero"):
        trainer.train()
    average = averaged(reference.squared, range(steps), 1)
    for step, weights in enumerate(history.weights):
        balance = [
            weights[c] * math.sqrt(average[step][c]) for c in ("D", "ends")
        ]
        assert balance[0] == pytest.approx(balance[1], rel=2e-4), step
        assert weights["vanishing"] == 1.0
