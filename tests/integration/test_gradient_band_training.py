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


def step_weights(kind, weighting, step, ntk=True):
    """The weights of a training step of a zoo problem."""
    solver = make_solver(kind, weighting=weighting, seed=1)
    history = WeightHistory()
    make_trainer(solver, steps=step + 1, callbacks=[history], ntk=ntk).train()
    return history.weights[step]


def test_a_wide_band_gives_the_self_adaptive_weights():
    # PINA's SelfAdaptiveWeighting at the first step: sum ||g|| / ||g_c||;
    # the band's factors from that step's gradients turn the NTK weights
    # into these up to one common factor, from the second step on (the
    # gradients are read off the first step's backward pass). The first
    # step has NTK weights in both NTK runs, so both reach the same second
    # step's parameters
    banded = step_weights(
        "poisson",
        NTKWeighting(safeguard=None, weight_bounds=WIDE, gradient_band=1e12),
        step=1,
    )
    adaptive = step_weights("poisson", SelfAdaptiveWeighting(), 0, ntk=False)
    plain = step_weights(
        "poisson", NTKWeighting(safeguard=None, weight_bounds=WIDE), step=1
    )
    names = sorted(adaptive)
    ratios = [banded[c] / adaptive[c] for c in names]
    assert ratios == pytest.approx([ratios[0]] * len(names), rel=1e-4)
    # the NTK weights themselves are far from them (the test can fail)
    plain_ratios = [plain[c] / adaptive[c] for c in names]
    assert max(plain_ratios) / min(plain_ratios) > 2


def test_the_first_step_has_the_ntk_weights():
    # no loss gradient has been read before the first backward pass
    plain = step_weights("poisson", NTKWeighting(safeguard=None), 0)
    banded = step_weights(
        "poisson", NTKWeighting(safeguard=None, gradient_band=4.0), 0
    )
    assert banded == pytest.approx(plain, rel=1e-6)


@pytest.mark.parametrize("band", [2.0, 4.0])
def test_weights_stay_within_the_band_around_the_ntk_weights(band):
    # at the second step: the same parameters (the first step's weights
    # are the same), the factors of the first step's gradients
    plain = step_weights("poisson", NTKWeighting(safeguard=None), 1)
    banded = step_weights(
        "poisson", NTKWeighting(safeguard=None, gradient_band=band), 1
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
    """The weights of each step: the traces of the last refresh, the
    gradients averaged up to the refresh before this step (read off its
    backward pass, they enter from the next step on; none at step 0)."""
    refreshes = list(range(0, steps, every))
    average = averaged(reference.squared, refreshes, every, alpha)
    history = []
    for step in range(steps):
        last = max(r for r in refreshes if r <= step)
        folded = [r for r in refreshes if r < step]
        if not folded:  # factor 1 everywhere: the NTK weights
            gradients, limit = reference.squared[0], 1.0
        else:
            gradients, limit = average[max(folded)], band
        history.append(
            banded_by_hand(
                reference.traces[last], reference.sizes, gradients, limit
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
    factors = [w[c] / p[c] for w, p in zip(expected[1:], plain[1:]) for c in w]
    assert all(1.01 < max(f, 1 / f) < 0.99 * band for f in factors)
    fast = expected_history(reference, steps, every, band, 10 * GRADIENT_ALPHA)
    assert relative_gap(fast, expected) > 10 * tolerance


def test_a_vanishing_loss_keeps_its_ntk_weight():
    # exact weights: the vanishing condition keeps its NTK weight (factor 1,
    # left out of the mean), the others are balanced between themselves (a
    # band wide enough for their factors, about 6, not to be clamped)
    steps, band = 8, 16.0
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
    # unclamped, the two others' weighted gradient norms are equal (the last
    # step's weights take the gradients averaged up to the step before)
    average = averaged(reference.squared, range(steps), 1)[steps - 2]
    last = history.weights[-1]
    balance = [last[c] * math.sqrt(average[c]) for c in ("D", "ends")]
    plain = expected_history(reference, steps, 1, 1.0)[-1]
    factors = [last[c] / plain[c] for c in ("D", "ends")]
    assert all(1.01 / band < f < 0.99 * band for f in factors)
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
    for step, weights in enumerate(history.weights[1:], start=1):
        # the gradients averaged up to the step before
        balance = [
            weights[c] * math.sqrt(average[step - 1][c]) for c in ("D", "ends")
        ]
        assert balance[0] == pytest.approx(balance[1], rel=2e-4), step
        assert weights["vanishing"] == 1.0


class ExtraBackward(lightning.Callback):
    """One more backward pass of the training loss at every step, as the
    band's earlier version took per condition at each refresh."""

    def on_before_backward(self, trainer, pl_module, loss):
        params = [p for p in pl_module.parameters() if p.requires_grad]
        torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)


def backward_passes(weighting, steps=6, callbacks=()):
    """The backward passes through the first layer's output during a short
    Poisson training with ``weighting``: PINA's derivative operators, the
    sketch's ``J^T g``, the training loss's, and any other."""
    solver = make_solver("poisson", weighting=weighting, seed=4)
    first = next(m for m in solver.modules() if isinstance(m, torch.nn.Linear))
    count = [0]

    def count_backward(gradient):
        count[0] += 1

    def hook(module, inputs, output):
        if output.requires_grad:
            output.register_hook(count_backward)

    first.register_forward_hook(hook)
    make_trainer(solver, steps=steps, callbacks=list(callbacks)).train()
    return count[0]


def test_the_band_adds_no_backward_pass():
    # the band reads each condition loss's gradient off the training step's
    # own backward pass: with it, training makes exactly the backward passes
    # it makes without it
    options = dict(sample_every_n_steps=2, warmup_samples=2, seed=0)
    banded = backward_passes(SketchNTKWeighting(gradient_band=4.0, **options))
    plain = backward_passes(SketchNTKWeighting(gradient_band=None, **options))
    assert banded == plain
    # the count sees a backward pass of the loss through the step's graph:
    # one more per step passes both conditions' first-layer outputs
    extra = backward_passes(
        SketchNTKWeighting(gradient_band=None, **options),
        callbacks=[ExtraBackward()],
    )
    assert extra == plain + 2 * 6


class TappedSteps(lightning.Callback):
    """The training steps during which a gradient tap was built."""

    def __init__(self, built):
        super().__init__()
        self.built, self.steps, self._before = built, [], 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, index):
        if len(self.built) > self._before:
            self.steps.append(trainer.global_step - 1)
        self._before = len(self.built)


def test_the_band_taps_refresh_steps_only(monkeypatch):
    # every step but a refresh does the same work with or without the band,
    # which the step-time benchmark's band target relies on
    from pina_ntk.integration import step_schedule

    built = []

    class Tap(step_schedule.ConditionGradientTap):
        def __init__(self, *args):
            super().__init__(*args)
            built.append(self)

    monkeypatch.setattr(step_schedule, "ConditionGradientTap", Tap)
    weighting = SketchNTKWeighting(
        gradient_band=4.0, sample_every_n_steps=3, warmup_samples=2, seed=0
    )
    solver = make_solver("poisson", weighting=weighting, seed=4)
    tapped = TappedSteps(built)
    make_trainer(solver, steps=10, callbacks=[tapped]).train()
    assert tapped.steps == [0, 3, 6, 9]
