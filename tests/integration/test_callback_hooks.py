"""``NTKCallback``'s hooks one by one, with stand-ins for the trainer, the
statistics and the recorder: what each hook calls, in which order and with
what, without training anything."""

from types import SimpleNamespace

import pytest
import torch

from pina_ntk.integration import callback as module
from pina_ntk.integration.callback import NTKCallback, _global_sum


class Calls(list):
    """A log of ``(name, *arguments)``; ``method(name)`` records a call."""

    def method(self, name, result=None):
        def call(*args, **kwargs):
            self.append((name, *args, *kwargs.values()))
            return result

        return call


def statistics_stub(calls, needs=True, values=None, weighting=None):
    return SimpleNamespace(
        weighting=weighting,
        needs_residuals=needs,
        step=4,
        begin_step=calls.method("begin_step"),
        end_step=calls.method("end_step"),
        complete_deferred=calls.method("complete_deferred"),
        log_values=calls.method("log_values", values or {}),
        load_state_dict=calls.method("load_state_dict"),
        state_dict=calls.method("state_dict", {"step": 4}),
        start=calls.method("start"),
        close=calls.method("close"),
        release=calls.method("release"),
    )


def recorder_stub(calls, solver=None):
    return SimpleNamespace(
        solver=solver,
        attach=calls.method("attach"),
        detach=calls.method("detach"),
        start=calls.method("record"),
        stop=calls.method("stop"),
    )


def callback_with(calls, **statistics):
    callback = NTKCallback(log_every_n_steps=2)
    callback.statistics = statistics_stub(calls, **statistics)
    callback._recorder = recorder_stub(calls)
    return callback


TRAINER = SimpleNamespace(global_rank=3)


def test_a_step_records_only_when_the_statistics_read_residuals():
    for needs, recorded in ((True, True), (False, False)):
        calls = Calls()
        callback = callback_with(calls, needs=needs)
        callback.on_train_batch_start(TRAINER, None, None, 0)
        # the batch's index: the RBA solver's attention rows depend on it
        expected = [("attach",), ("record", 0)] if recorded else [("attach",)]
        # the step is handed over with the process's rank and the recorder
        expected.append(("begin_step", 3, callback._recorder))
        assert calls == expected


def test_the_backward_pass_completes_a_deferred_sample_then_stops_recording():
    # a closure optimiser's later evaluations in the step record nothing
    calls = Calls()
    callback_with(calls).on_after_backward(TRAINER, None)
    assert calls == [("complete_deferred",), ("stop",)]


@pytest.mark.parametrize(
    "logging_step,values,logged",
    [(True, {"ntk_weight/a": 1.0}, True), (True, {}, False),
     (False, {"ntk_weight/a": 1.0}, False)],
)  # fmt: skip
def test_a_step_ends_by_logging_on_logging_steps_then_counting(
    monkeypatch, logging_step, values, logged
):
    calls = Calls()
    callback = callback_with(calls, values=values)
    asked = []

    def is_logging_step(trainer, step, every):
        asked.append((trainer, step, every))
        return logging_step

    monkeypatch.setattr(module, "is_logging_step", is_logging_step)
    monkeypatch.setattr(module, "log_values", calls.method("log"))
    monkeypatch.setattr(NTKCallback, "_warn", lambda self: calls.append(("w",)))
    callback.on_train_batch_end(TRAINER, None, None, None, 0)
    # asked at the statistics' step with the callback's own interval
    assert asked == [(TRAINER, 4, 2)]
    expected = [("stop",)]
    if logging_step:
        expected.append(("log_values",))
    if logged:
        expected += [("log", TRAINER, values, 4), ("w",)]
    assert calls == expected + [("end_step",)]


def test_a_checkpoints_state_waits_for_the_device():
    calls = Calls()
    callback = callback_with(calls)
    assert callback.state_dict() == {"step": 4}
    callback.load_state_dict({"step": 9})
    assert calls == [("state_dict",)]  # nothing applied yet
    solver = SimpleNamespace(device=torch.device("cpu"))
    callback.on_train_start(TRAINER, solver)
    assert calls[1:] == [
        ("start", solver.device),
        ("load_state_dict", {"step": 9}, solver.device),
    ]
    # applied once: a later fit of the same callback starts fresh
    callback.on_train_start(TRAINER, solver)
    assert calls[3:] == [("start", solver.device)]


def test_an_empty_state_restores_nothing():
    calls = Calls()
    callback = callback_with(calls)
    callback.load_state_dict({})
    callback.on_train_start(TRAINER, SimpleNamespace(device="cpu"))
    assert calls == [("start", "cpu")]
    assert NTKCallback().state_dict() == {}  # before setup


@pytest.mark.parametrize("hook", ["teardown", "on_exception"])
def test_the_end_of_a_run_detaches_closes_and_releases(hook):
    # a failed run ends in on_exception, without teardown: a later Trainer
    # must still be able to take the weighting over
    calls = Calls()
    callback = callback_with(calls)
    getattr(callback, hook)(TRAINER, None, "fit")
    assert calls == [("detach",), ("close",), ("release", callback)]
    getattr(NTKCallback(), hook)(TRAINER, None, "fit")  # before setup


def test_messages_go_to_info_or_warnings_by_their_category(monkeypatch):
    calls = Calls()
    callback = callback_with(calls)
    callback.statistics.names = ["a"]
    callback.statistics.weighting = SimpleNamespace(weight_bounds=(1, 2))
    taken = []

    def take_messages(names, bounds, final):
        taken.append((names, bounds, final))
        return [("note", None), ("trouble", RuntimeWarning)]

    callback.statistics.reports = SimpleNamespace(take_messages=take_messages)
    monkeypatch.setattr(module, "rank_zero_info", calls.method("info"))
    monkeypatch.setattr(module, "rank_zero_warn", calls.method("warn"))
    callback.on_train_end(TRAINER, None)
    assert taken == [(["a"], (1, 2), True)]
    assert calls == [("info", "note"), ("warn", "trouble", RuntimeWarning)]
    callback._warn()
    assert taken[-1] == (["a"], (1, 2), False)


class WeightingStub(SimpleNamespace):
    """A weighting whose ``connect`` records and keeps its driver."""

    def __init__(self, calls):
        super().__init__(driver=None, unknowns="observations_first")
        self._calls = calls

    def connect(self, driver):
        self._calls.append(("connect", driver))
        self.driver = driver


def test_setup_takes_over_the_weightings_statistics(monkeypatch):
    calls = Calls()
    weighting = WeightingStub(calls)
    made = []

    class Statistics:
        def __init__(self, rule, reduction, global_sum):
            made.append((rule, reduction))
            self.weighting = rule

        def acquire(self, holder):
            calls.append(("acquire", holder))

    class Recorder:
        def __init__(self, solver, unknowns):
            made.append(("recorder", solver, unknowns))
            self.solver = solver

        def attach(self):
            calls.append(("attach",))

    monkeypatch.setattr(
        module, "check_kernel_training", lambda t, s: s.weighting
    )
    monkeypatch.setattr(module, "solver_reduction", lambda s: "sum")
    monkeypatch.setattr(module, "KernelStatistics", Statistics)
    monkeypatch.setattr(module, "ResidualRecorder", Recorder)
    monkeypatch.setattr(module, "rank_zero_info", calls.method("info"))
    solver = SimpleNamespace(
        trainer=SimpleNamespace(world_size=1), weighting=weighting
    )
    trainer = SimpleNamespace(log_every_n_steps=0)
    callback = NTKCallback()
    callback.setup(trainer, solver, "fit")
    first = callback.statistics
    assert made == [
        (weighting, "sum"),
        ("recorder", solver, "observations_first"),
    ]
    assert calls[:3] == [("acquire", callback), ("connect", first), ("attach",)]
    # PINA's full-batch trainer drops log_every_n_steps: say so
    assert calls[3][0] == "info" and "log_every_n_steps" in calls[3][1]
    callback.setup(SimpleNamespace(log_every_n_steps=5), solver, "fit")
    assert callback.statistics is first and len(made) == 2
    assert calls[4:] == [("acquire", callback), ("connect", first), ("attach",)]
    # a later Trainer's callback takes the same statistics over
    later = NTKCallback(log_every_n_steps=3)
    calls.clear()
    later.setup(trainer, solver, "fit")
    assert later.statistics is first and len(made) == 3  # its own recorder
    assert calls == [("acquire", later), ("connect", first), ("attach",)]
    # another weighting (a new solver): new statistics and recorder
    other = SimpleNamespace(
        trainer=solver.trainer, weighting=WeightingStub(calls)
    )
    callback.setup(trainer, other, "fit")
    assert callback.statistics is not first
    assert made[3:] == [
        (other.weighting, "sum"),
        ("recorder", other, "observations_first"),
    ]
    # an interval of the callback's own: no message
    calls.clear()
    NTKCallback(log_every_n_steps=3).setup(trainer, other, "fit")
    assert [c for c in calls if c[0] == "info"] == []


def test_the_global_sum_is_the_identity_on_one_process():
    solver = SimpleNamespace(trainer=SimpleNamespace(world_size=1))
    tensor = torch.tensor([1.0, 2.0])
    assert _global_sum(solver)(tensor) is tensor


def test_the_global_sum_reduces_a_copy_over_the_processes():
    reduced = []

    def reduce(tensor, reduce_op):
        reduced.append((tensor, reduce_op))
        return tensor.mul_(2)  # in place, as Lightning's all-reduce

    strategy = SimpleNamespace(reduce=reduce)
    trainer = SimpleNamespace(world_size=2, strategy=strategy)
    tensor = torch.tensor([1.0, 2.0])
    total = _global_sum(SimpleNamespace(trainer=trainer))(tensor)
    assert total.tolist() == [2.0, 4.0]
    assert tensor.tolist() == [1.0, 2.0]  # the caller's tensor is kept
    [(sent, op)] = reduced
    assert op == "sum" and sent is not tensor
