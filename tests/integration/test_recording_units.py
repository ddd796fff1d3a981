"""The recording layer's helpers on their own: how a condition's data is
cut into chunks of points, what a copy of a condition keeps of the
recorder's wrappers, when a recorder records and which one owns a
condition."""

import copy

import pytest
import torch
from pina.solver import (
    AutoregressiveSingleModelSolver,
    PhysicsInformedSingleModelSolver,
)

from pina_ntk.core.gradient_band import ConditionGradientTap
from pina_ntk.integration.pina_adapter import condition_data
from pina_ntk.integration.recording import (
    ResidualRecorder,
    group_blocks,
    point_chunks,
    scaled_chunks,
)

from helpers import (
    make_solver,
    make_trainer,
    mlp,
    series_problem,
    untouched_line_problem,
)


def test_chunks_slice_every_per_point_tensor_and_nothing_else():
    points = torch.arange(5.0).reshape(5, 1).requires_grad_(True)
    target, scale, other = torch.rand(5, 1), torch.tensor(2.0), torch.rand(3)
    batch = {"input": points, "target": target, "scale": scale, "w": other}
    chunks = point_chunks(batch, 2)
    assert [c["input"].detach().reshape(-1).tolist() for c in chunks] == [
        [0.0, 1.0],
        [2.0, 3.0],
        [4.0],
    ]
    assert torch.equal(torch.cat([c["target"] for c in chunks]), target)
    for chunk in chunks:
        # a fresh leaf for PINA's operators to differentiate; the rest as is
        assert chunk["input"].is_leaf and chunk["input"].requires_grad
        assert not chunk["target"].requires_grad
        assert chunk["scale"] is scale and chunk["w"] is other


def test_a_per_point_scale_follows_its_points_into_the_chunks():
    points = torch.arange(5.0).reshape(5, 1)
    per_point = torch.arange(10.0, 15.0).reshape(5, 1)
    chunks = scaled_chunks({"input": points}, 2, (per_point, True))
    # each chunk's rows of the scale are its points' rows
    for chunk, scale in chunks:
        assert torch.equal(scale, chunk["input"].detach() + 10.0)
    assert len(chunks) == 3
    # a scale over another dimension (the autoregressive solver's steps)
    # broadcasts whole; no scale stays none
    steps = torch.rand(4, 1, 1)
    assert all(
        s is steps
        for _, s in scaled_chunks({"input": points}, 2, (steps, False))
    )
    assert all(
        s is None for _, s in scaled_chunks({"input": points}, 2, (None, False))
    )


def test_data_of_graphs_or_of_one_chunk_stays_whole():
    graphs = {"input": ["g0", "g1", "g2"], "target": torch.rand(3, 1)}
    assert point_chunks(graphs, 1) == [graphs]
    small = {"input": torch.rand(3, 2), "target": torch.rand(3, 1)}
    (chunk,) = point_chunks(small, 3)
    assert torch.equal(chunk["input"], small["input"])


def test_a_copied_condition_keeps_its_own_evaluate():
    # PINA's problems share their conditions (class attributes): a problem
    # class of its own, whose conditions no other test's Trainer has turned
    # into input-equation conditions; a deepcopy of a watched condition
    # drops the wrapper: its evaluate is its class's method, bound to the copy
    problem = untouched_line_problem()
    solver = PhysicsInformedSingleModelSolver(problem, mlp(1, 1))
    recorder = ResidualRecorder(solver)
    recorder.attach()
    condition = problem.conditions["D"]
    assert not hasattr(condition.evaluate, "__func__")  # the wrapper
    own = copy.deepcopy(condition)
    assert own.evaluate.__func__ is type(own).evaluate
    assert own.evaluate.__self__ is own
    recorder.detach()
    assert "evaluate" not in condition.__dict__


def _recorded_step(solver, recorder):
    """Both conditions of a Poisson problem evaluated as PINA's step does
    (the trainer turns them into input-equation conditions), while
    ``recorder`` records."""
    make_trainer(solver, steps=1, ntk=False)
    recorder.attach()
    recorder.start()
    for condition in solver.problem.conditions.values():
        condition.evaluate({"input": condition.input.clone()}, solver)


def test_a_stopped_recorder_records_nothing():
    solver = make_solver("poisson")
    recorder = ResidualRecorder(solver)
    _recorded_step(solver, recorder)
    assert [name for name, _, _ in recorder.calls] == ["boundary", "D"]
    recorder.stop()
    condition = solver.problem.conditions["D"]
    condition.evaluate({"input": condition.input.clone()}, solver)
    assert recorder.calls == [] and recorder.residuals == []
    recorder.detach()


def test_chunked_replay_gives_the_same_values_without_a_graph():
    torch.manual_seed(0)
    solver = make_solver("poisson", n=10)
    recorder = ResidualRecorder(solver)
    _recorded_step(solver, recorder)
    names, params = ["D", "boundary"], recorder.parameters()
    whole = recorder.residual_fn(names)(params)
    chunked = recorder.residual_fn(names, 3)(params)
    assert all(block.requires_grad for block in whole)
    for a, b in zip(whole, chunked):
        assert not b.requires_grad  # values only: no graph kept
        torch.testing.assert_close(b, a.detach())
    recorder.detach()


def test_chunked_replay_of_trajectories_keeps_the_entries_order():
    # the autoregressive solver's residual is [steps, trajectories, ...]:
    # chunks of trajectories flatten to the whole residual's entries, for
    # the sketch's displaced evaluations and the exact traces' chunks
    torch.manual_seed(0)
    solver = AutoregressiveSingleModelSolver(
        series_problem(), mlp(2, 2, width=6)
    )
    make_trainer(solver, 1, ntk=False)  # the conditions get their data
    recorder = ResidualRecorder(solver)
    recorder.attach()
    recorder.start()
    for condition in solver.problem.conditions.values():
        condition.evaluate(condition_data(condition), solver)
    names, params = ["long", "short"], recorder.parameters()
    blocks = [b.detach() for b in recorder.blocks(names)]
    whole = recorder.residual_fn(names)(params)
    chunked = recorder.residual_fn(names, 2)(params)
    by_chunks = [[], []]
    for index, chunk in recorder.residual_fn(names).chunks(params, 2):
        by_chunks[index].append(chunk.detach())
    for block, a, b, parts in zip(blocks, whole, chunked, by_chunks):
        torch.testing.assert_close(a.detach(), block)
        torch.testing.assert_close(b, block)
        torch.testing.assert_close(torch.cat(parts), block)
        assert len(parts) == 3  # 5 trajectories, 2 a chunk
    recorder.detach()


def test_blocks_of_a_condition_never_recorded_name_it():
    recorder = ResidualRecorder(make_solver("poisson"))
    message = (
        "No residual was recorded for condition 'D': the solver did not "
        "evaluate it through condition.evaluate(...)."
    )
    with pytest.raises(RuntimeError) as raised:
        recorder.blocks(["D"])
    assert str(raised.value) == message


def test_an_attached_recorder_records_only_once_started():
    solver = make_solver("poisson")
    make_trainer(solver, steps=1, ntk=False)
    recorder = ResidualRecorder(solver)
    recorder.attach()
    condition = solver.problem.conditions["D"]
    condition.evaluate({"input": condition.input.clone()}, solver)
    assert recorder.calls == [] and recorder.residuals == []
    recorder.detach()


def test_a_second_recorder_takes_the_conditions_over():
    # problems of one class share their conditions: the recorder attached
    # last owns them, its wrappers named after their conditions
    solver = make_solver("poisson")
    make_trainer(solver, steps=1, ntk=False)
    first, second = ResidualRecorder(solver), ResidualRecorder(solver)
    first.attach()
    second.attach()
    condition = solver.problem.conditions["D"]
    wrapper = condition.evaluate
    assert second.owns(wrapper, "D") and not second.owns(wrapper, "boundary")
    assert not first.owns(wrapper, "D")
    assert not second.owns(lambda batch, solver: None, "D")
    second.start()
    condition.evaluate({"input": condition.input.clone()}, solver)
    assert len(second.calls) == 1 and first.calls == []
    second.detach()


def test_blocks_concatenate_a_conditions_calls_in_their_order():
    a1, b, a2 = torch.rand(2, 1), torch.rand(3), torch.rand(1, 2)
    blocks = group_blocks(["a", "b", "a"], [a1, b, a2], ["b", "a"])
    torch.testing.assert_close(blocks[0], b)
    torch.testing.assert_close(
        blocks[1], torch.cat([a1.reshape(-1), a2.reshape(-1)])
    )


def test_the_taps_views_leave_frozen_parameters_to_the_model():
    # the tap covers the trainable parameters only; a frozen one is the
    # model's own in the tapped evaluation, which equals the plain one
    solver = make_solver("poisson")
    next(solver.model.parameters()).requires_grad_(False)
    make_trainer(solver, steps=1, ntk=False)
    recorder = ResidualRecorder(solver)
    recorder.attach()
    condition = solver.problem.conditions["D"]
    plain = condition.evaluate({"input": condition.input.clone()}, solver)
    recorder.start()
    recorder.tap_gradients(ConditionGradientTap(recorder.parameters()))
    tapped = condition.evaluate({"input": condition.input.clone()}, solver)
    torch.testing.assert_close(tapped, plain)
    recorder.detach()
