"""The kernel of PINA's five multi-model solvers is that of the loss each
minimises, in float64 (derivation: ``docs/estimators.md``, *Solvers with
several models*).

- Ensembles: a condition's loss is the mean over the members of each
  member's loss; the residual concatenates the members' residuals, and the
  kernel, over every member's parameters, is block-diagonal across them.
- Self-adaptive: the loss is ``mean(func(w) * r^2)`` of pointwise weights
  ``w`` that are maximised: the kernel of ``sqrt(func(w)) * r`` over the
  model's parameters alone.
- Competitive: the residual is ``r * d(x)``, ``d`` the discriminator, which
  maximises the loss: the kernel of ``r * d`` over the model's parameters.

The expected traces never use pina-ntk's recording: each member's residual
comes from a single-model solver built on that member's network, the
factors from the solvers' documented rules (checked against the condition
loss PINA computes at the same parameters), and the Jacobian row by row
(``reference.py``). A weighting that took one member, the plain residual,
or the maximisers' parameters fails them.
"""

import math

import numpy as np
import pytest
import torch
from pina.solver import (
    AutoregressiveSingleModelSolver,
    PhysicsInformedSingleModelSolver,
    SupervisedSingleModelSolver,
)

from pina_ntk import (
    NTKWeighting,
    SketchNTKWeighting,
    ntk_traces,
    solver_ntk_weights,
)
from pina_ntk.core.weights import ntk_weights

from helpers import (
    MULTI_MODEL_KINDS,
    first_step_traces,
    make_trainer,
    multi_model_solver,
    pina_condition_loss,
    plain_evaluate,
)
from reference import hutchinson_variances, jacobian_rows, kernel

KINDS = MULTI_MODEL_KINDS
MEMBERS = 3
EPS = 3.0


# every test in float64 (the fixture of conftest.py)
pytestmark = pytest.mark.usefixtures("float64")


def build(kind, weighting):
    """A small solver of ``kind`` with ``weighting``."""
    solver = multi_model_solver(
        kind, weighting, members=MEMBERS, width=5, n=6, eps=EPS
    )
    if kind == "self-adaptive":
        # PINA starts every pointwise weight at sigmoid(0) = 1/2, a factor
        # common to all entries: spread them so that the rows matter
        for weight in solver.weights.parameters():
            weight.data.normal_(0.0, 2.0)
    return solver


def minimisers(solver, kind):
    """The parameters that minimise the loss, by the solver's definition."""
    if kind in ("self-adaptive", "competitive"):
        return list(solver.model.parameters())
    return list(solver.models.parameters())


def member_residuals(solver, kind, name, data):
    """Each member's residual of condition ``name``, from a single-model
    solver on the member's network (no ensemble machinery involved)."""
    single = {
        "physics-informed ensemble": PhysicsInformedSingleModelSolver,
        "supervised ensemble": SupervisedSingleModelSolver,
        "autoregressive ensemble": AutoregressiveSingleModelSolver,
    }[kind]
    return [
        plain_evaluate(single(solver.problem, model), name, dict(data))
        for model in solver.models
    ]


def loss_residual(solver, kind, name, data):
    """The residual of condition ``name``'s loss, ``s`` with ``loss =
    mean(s^2)``, and that loss from ``s``; each member's residual for an
    ensemble (the loss the mean of the members')."""
    if kind.endswith("ensemble"):
        residuals = member_residuals(solver, kind, name, data)
        if kind == "autoregressive ensemble":
            # PINA's rule: a running average of each unrolling step's mean
            # loss, updated after each member's call; the call is weighted
            # by exp(-eps * cumsum of the averages): the k-th member's
            # average is the mean of the first k members' step losses
            steps = [
                (r.detach() ** 2).mean(
                    dim=tuple(range(1, r.dim())), keepdim=True
                )
                for r in residuals
            ]
            residuals = [
                torch.exp(
                    -EPS * torch.cumsum(sum(steps[: k + 1]) / (k + 1), dim=0)
                ).sqrt()
                * r
                for k, r in enumerate(residuals)
            ]
        loss = sum(float((s.detach() ** 2).mean()) for s in residuals)
        return residuals, loss / len(residuals)
    single = PhysicsInformedSingleModelSolver(solver.problem, solver.model)
    residual = plain_evaluate(single, name, dict(data))
    if kind == "self-adaptive":
        factor = solver.weights.func(getattr(solver.weights, name))
        effective = factor.detach().sqrt() * residual
    else:
        bets = solver.discriminator(
            data["input"][solver.problem.input_variables]
        )
        effective = residual * torch.Tensor.as_subclass(bets, torch.Tensor)
    return [effective], float((effective.detach() ** 2).mean())


def reference_rows(solver, kind, batch):
    """``{condition: Jacobian rows of its loss's residual}`` over the
    minimisers, checking the model of each loss against PINA's."""
    params = minimisers(solver, kind)
    rows = {}
    for name, data in batch.items():
        residuals, loss = loss_residual(solver, kind, name, data)
        if kind == "autoregressive ensemble":
            solver.on_train_epoch_start()  # PINA resets its running averages
        assert pina_condition_loss(solver, name, data) == pytest.approx(
            loss, rel=1e-10
        )
        rows[name] = np.concatenate(
            [jacobian_rows(r, params) for r in residuals]
        )
    return rows


@pytest.mark.parametrize("kind", KINDS)
def test_exact_traces_are_those_of_the_loss_minimised(kind, recwarn):
    solver = build(kind, NTKWeighting(safeguard=None))
    traces, batch = first_step_traces(solver)
    assert not [w for w in recwarn if "couples the points" in str(w.message)]
    rows = reference_rows(solver, kind, batch)
    for name, block in rows.items():
        assert traces[name] == pytest.approx(float((block**2).sum()), rel=1e-6)
    if kind.endswith("ensemble"):
        # every member counts, each with its own residual: not the first
        # member's trace times the members
        first = float((block[: len(block) // MEMBERS] ** 2).sum())
        assert abs(MEMBERS * first - traces[name]) > 0.05 * traces[name]


@pytest.mark.parametrize("kind", KINDS)
def test_the_sketch_mean_is_the_kernels_trace_within_its_error(kind):
    samples = 300
    weighting = SketchNTKWeighting(
        warmup_samples=samples,
        balanced_probe=False,
        safeguard=None,
        seed=11,
    )
    solver = build(kind, weighting)
    traces, batch = first_step_traces(solver)
    rows = reference_rows(solver, kind, batch)
    K, slices = kernel(rows)
    variances = hutchinson_variances(K, slices, "gaussian")
    for name, block in rows.items():
        exact = float((block**2).sum())
        standard_error = math.sqrt(variances[name] / samples)
        assert standard_error < 0.25 * exact  # the check is not vacuous
        assert abs(traces[name] - exact) <= 4.0 * standard_error + 1e-6 * exact


def test_ntk_traces_of_an_ensemble_sum_its_members():
    # outside training (plain residuals): each member's traces from a
    # single-model solver on its network, summed
    solver = build("physics-informed ensemble", NTKWeighting())
    make_trainer(solver, 1, ntk=False)  # the conditions take their points
    traces = ntk_traces(solver)
    members = [
        ntk_traces(PhysicsInformedSingleModelSolver(solver.problem, model))
        for model in solver.models
    ]
    expected = {
        name: sum(float(member[name]) for member in members) for name in traces
    }
    for name, value in traces.items():
        assert float(value) == pytest.approx(expected[name], rel=1e-10)
        assert float(members[0][name]) < 0.9 * expected[name]
    # one weight per condition, from the summed traces and the members'
    # entries together (M n_c with the mean reduction)
    sizes = [
        MEMBERS * len(solver.problem.conditions[name].data.input)
        for name in traces
    ]
    weights = ntk_weights(
        torch.tensor(list(expected.values())), torch.tensor(sizes), "mean"
    )
    found = solver_ntk_weights(solver)
    assert list(found) == list(traces)
    assert list(found.values()) == pytest.approx(weights.tolist(), rel=1e-10)
