"""What a replay of a recorded step evaluates: the step's unknowns (PINA
clamps them in place after the step's residuals), the solver's loss scales,
and, through a gradient tap, the live unknowns; and what a recorder reads
of a step without unknowns or without a batch index."""

import lightning
import pytest
import torch
from pina.solver import (
    CausalPhysicsInformedSingleModelSolver,
    PhysicsInformedSingleModelSolver,
    RBAPhysicsInformedSingleModelSolver,
)

from pina_ntk.core.gradient_band import ConditionGradientTap
from pina_ntk.integration.diagnostics import condition_calls
from pina_ntk.integration.recording import (
    UNKNOWN_PREFIX,
    ResidualRecorder,
    group_blocks,
)

from helpers import (
    inverse_line_problem,
    make_problem,
    make_trainer,
    mlp,
    multi_model_solver,
    plain_evaluate,
)

NAMES = ["D", "left", "data"]
MU = UNKNOWN_PREFIX + "mu"


def recorded_step(solver, unknowns="observations_first"):
    """A started recorder of ``solver``, each condition evaluated once."""
    recorder = ResidualRecorder(solver, unknowns=unknowns)
    recorder.attach()
    recorder.start()
    for name, _, batch in condition_calls(solver):
        solver.problem.conditions[name].evaluate(batch, solver)
    return recorder


def recorded_line_step(unknowns):
    """The inverse line problem, ``mu`` at 3 above its domain's 2, each
    condition evaluated once through a started recorder."""
    lightning.seed_everything(1, verbose=False)
    solver = PhysicsInformedSingleModelSolver(
        inverse_line_problem(2.0, 3.0), mlp(1, 1)
    )
    make_trainer(solver, 0, ntk=False).train()  # PINA's set-up
    return solver, recorded_step(solver, unknowns)


def blocks_by_chunks(function, params, points):
    """``function.chunks`` concatenated back into blocks."""
    found = [[] for _ in NAMES]
    for index, chunk in function.chunks(params, points):
        found[index].append(chunk.detach())
    return [torch.cat(parts) for parts in found]


@pytest.mark.parametrize("unknowns", ["excluded", "kernel"])
def test_every_replay_of_a_clamped_step_evaluates_at_its_unknowns(unknowns):
    solver, recorder = recorded_line_step(unknowns)
    recorded = [block.detach() for block in recorder.blocks(NAMES)]
    mu = solver.problem.unknown_parameters["mu"]
    with torch.no_grad():
        mu.clamp_(max=2.0)  # as PINA does before the step's backward pass
    # at the clamped mu the interior residual is another one
    live = plain_evaluate(solver, "D", dict(condition_calls(solver)[0][2]))
    assert not torch.allclose(live.reshape(-1), recorded[0])
    params = recorder.parameters()
    assert (MU in params) == (unknowns == "kernel")
    function = recorder.residual_fn(NAMES)
    replays = {
        "whole": [block.detach() for block in function(params)],
        "values in chunks": recorder.residual_fn(NAMES, 3)(params),
        "chunks": blocks_by_chunks(function, params, 3),
    }
    for kind, blocks in replays.items():
        for name, block, expected in zip(NAMES, blocks, recorded):
            torch.testing.assert_close(block, expected, msg=f"{kind} {name}")
    recorder.detach()


def test_the_tap_evaluates_at_the_live_unknowns_and_takes_their_gradient():
    # the kernel includes mu: the tapped evaluation runs through the tap's
    # view of mu, with its live value, and its row holds dL/dmu
    solver, recorder = recorded_line_step("kernel")
    name, _, batch = condition_calls(solver)[0]
    assert name == "D"
    plain = plain_evaluate(solver, name, dict(batch))
    params = recorder.parameters()
    values = list(params.values())
    # the output layer's bias does not reach a Laplacian: a zero column
    found = torch.autograd.grad(plain.pow(2).mean(), values, allow_unused=True)
    expected = [
        torch.zeros_like(p) if g is None else g for g, p in zip(found, values)
    ]
    recorder.start()
    tap = ConditionGradientTap(params)
    recorder.tap_gradients(tap)
    tapped = solver.problem.conditions[name].evaluate(dict(batch), solver)
    torch.testing.assert_close(
        torch.Tensor.as_subclass(tapped, torch.Tensor), plain
    )
    loss = tapped.pow(2).mean()
    tap.watch_losses({name: loss})
    (2.0 * loss).backward()
    row = tap.rows([name])[0]
    torch.testing.assert_close(
        row, torch.cat([g.reshape(-1) for g in expected])
    )
    assert float(row[-1]) != 0.0  # mu's column: mu enters the interior
    recorder.detach()


def test_a_replay_carries_the_solvers_loss_scales():
    # the causal solver's time factors, exp(-eps cumsum of the slices'
    # losses), scale its residual: the replay at the step's parameters is
    # the scaled residual, the loss's own
    lightning.seed_everything(0, verbose=False)
    solver = CausalPhysicsInformedSingleModelSolver(
        make_problem("wave", n=6),
        mlp(2, 1, width=6),
        eps=50.0,
        n_steps=3,
        regularized_conditions=["D"],
    )
    make_trainer(solver, 1, ntk=False).train()
    recorder = ResidualRecorder(solver)
    recorder.attach()
    recorder.start()
    condition = solver.problem.conditions["D"]
    solver._compute_condition_loss(condition, condition_calls(solver)[0][2], 0)
    scales = [scale for scale, _ in recorder.loss_scales()]
    assert min(float(s.min()) for s in scales) < 0.9  # the factors matter
    scaled = [block.detach() for block in recorder.blocks(["D"])]
    replayed = recorder.residual_fn(["D"])(recorder.parameters())
    torch.testing.assert_close(replayed[0].detach(), scaled[0])
    plain = torch.cat([r.detach().reshape(-1) for r in recorder.residuals])
    assert not torch.allclose(plain, scaled[0])
    recorder.detach()


def test_a_recorder_started_without_an_index_reads_the_first_batchs_rows():
    # RBA's attention weights, one row per point, after a step's update:
    # a call of four of the eight points at batch 0 reads rows 0 to 3
    lightning.seed_everything(0, verbose=False)
    solver = RBAPhysicsInformedSingleModelSolver(
        make_problem("poisson", n=8), mlp(2, 1, width=6), eta=0.5, gamma=0.9
    )
    make_trainer(solver, 1, ntk=False).train()
    recorder = ResidualRecorder(solver)
    recorder.attach()
    recorder.start()
    condition = solver.problem.conditions["D"]
    condition.evaluate({"input": condition.input[:4].clone()}, solver)
    buffer = getattr(solver, solver.weight_buffers["D"]).detach()
    assert not torch.allclose(buffer[:4], buffer[4:8])
    scale, per_point = recorder.loss_scales()[0]
    assert per_point
    torch.testing.assert_close(scale, buffer[:4].sqrt())
    recorder.detach()


def test_without_unknowns_no_condition_is_entered():
    lightning.seed_everything(0, verbose=False)
    solver = PhysicsInformedSingleModelSolver(
        make_problem("poisson", n=8), mlp(2, 1, width=6)
    )
    make_trainer(solver, 0, ntk=False).train()
    recorder = recorded_step(solver)
    entered, observed = recorder.inverse_roles(["D", "boundary"])
    # bools, as observations_first reads them
    assert entered == (False, False) and observed == (False, False)
    assert all(type(flag) is bool for flag in entered)
    recorder.detach()


def test_the_competitive_solvers_bets_follow_their_points_into_chunks():
    # the discriminator's bet on each point scales that point's residual:
    # a replay in chunks of points takes each chunk's own bets
    solver = multi_model_solver("competitive", None, n=10)
    make_trainer(solver, 1, ntk=False).train()
    recorder = recorded_step(solver)
    names = ["D", "boundary"]
    params = recorder.parameters()
    scaled = [block.detach() for block in recorder.blocks(names)]
    owners = [name for name, _, _ in recorder.calls]
    plain = group_blocks(owners, recorder.residuals, names)
    for a, b in zip(plain, scaled):  # the bets matter here
        assert not torch.allclose(a.detach(), b)
    whole = recorder.residual_fn(names)(params)
    chunked = recorder.residual_fn(names, 3)(params)
    for block, a, b in zip(scaled, whole, chunked):
        torch.testing.assert_close(a.detach(), block)
        torch.testing.assert_close(b, block)
    recorder.detach()
