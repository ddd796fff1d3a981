"""``KernelStatistics``'s state machine, step by step, without PINA or
Lightning: a scripted weighting hands it known samples, and every weight,
trace, count and call is checked against values worked out by hand here.

Two conditions: ``a`` with 3 residual entries, ``b`` with 1; PINA's
``mean`` reduction, so that ``w_c = (sum_d T_d / n) / (T_c / n_c)`` with
``T_c`` the block trace, ``n_c`` its entries and ``n`` all of them.
"""

import math

import pytest
import torch

from pina_ntk.integration.kernel_statistics import (
    KernelStatistics,
    probe_seed,
)

NAMES = ["a", "b"]
#: The blocks of every step: 3 entries of ``a``, 1 of ``b``.
BLOCKS = [torch.tensor([1.0, 2.0, 2.0]), torch.tensor([3.0])]
#: Their squared norm: 1 + 4 + 4 + 9.
RESIDUAL_SQ = 18.0


def sample(a, b):
    """A sample of the two block traces (sums over each block's entries)."""
    return torch.tensor([a, b]), None


class ScriptedRule:
    """A :class:`~pina_ntk.integration.contract.KernelRule` whose samples are
    scripted: ``warm_start`` returns ``warm``, each later sample the next of
    ``later``; every call is recorded in ``calls``."""

    def __init__(self, warm, later, every=2, alpha=0.5, deferred=False):
        self.refresh_every_n_steps = every
        self.alpha = alpha
        self.warmup_samples = len(warm)
        self.full_kernel = False
        self.uses_probe_scales = False
        self.sample_after_backward = deferred
        self.evaluation_chunk_size = None
        self.needs_full_precision = False
        self.seed = 7
        self.safeguard = None
        self.weight_bounds = (1e-6, 1e6)
        self.gradient_band = None
        self.unknowns = "observations_first"
        self.ramp_steps = 0
        self.solver = None
        #: the entry counts of the refreshes whose cost was judged
        self.costed = []
        self.isolates_blocks = False
        self.isolated = torch.zeros(2)
        self.warm, self.later, self.calls = list(warm), list(later), []

    def connect(self, driver):
        self.calls.append(("connect",))

    def set_conditions(self, names, problem):
        self.calls.append(("set_conditions", list(names)))

    def band_applies(self):
        return False

    def is_due(self, step):
        return step % self.refresh_every_n_steps == 0

    def warm_start(self, residual_fn, params, residuals, generator):
        self.calls.append(("warm_start",))
        return self.warm

    def sample(self, residual_fn, params, residuals, generator, scales=None,
               isolated=None):  # fmt: skip
        self.calls.append(("sample", isolated))
        return self.later.pop(0)

    def prepare_sample(self, params, residuals, generator, scales=None,
                       isolated=None):  # fmt: skip
        self.calls.append(("prepare_sample", isolated))
        return {"prepared": len(self.calls)}

    def complete_sample(self, residual_fn, params, prepared, generator):
        self.calls.append(("complete_sample", prepared["prepared"]))
        return self.later.pop(0)

    def isolated_sample(self, params, residuals, generator, blocks):
        # the first draw of the stream it is given
        draw = torch.rand((), generator=generator, device=generator.device)
        draw = draw.item()
        self.calls.append(("isolated_sample", blocks, draw))
        return self.isolated

    def refresh_cost_warning(self, entries, refresh_seconds, step_seconds):
        self.costed.append(entries)
        return None


class Residuals:
    """:class:`~pina_ntk.integration.contract.StepResiduals` of
    :data:`BLOCKS`."""

    device = torch.device("cpu")

    def parameters(self):
        return {"w": torch.ones(1)}

    def blocks(self, names):
        assert names == NAMES
        return [b.clone() for b in BLOCKS]

    def residual_fn(self, names, chunk_size=None):
        return lambda params: self.blocks(names)

    def inputs(self):
        return torch.zeros(4)

    def tap_gradients(self, tap):
        raise AssertionError("no gradient band here")

    def inverse_roles(self, names):
        # a forward problem: no condition has unknowns
        return (False,) * len(names), (False,) * len(names)


class RecordingSafeguard:
    """A safeguard that accepts or holds back each proposal as ``verdicts``
    says, in turn, and records what it was given (entry weights, residual,
    step)."""

    def __init__(self, verdicts):
        self.verdicts, self.started, self.reviews = list(verdicts), None, []
        self.total = self.accepted = self.rejected = None

    def start(self, proposed, residual_sq):
        self.started = (proposed.tolist(), float(residual_sq))
        self.total = torch.tensor(0.0)
        self.accepted = self.rejected = torch.tensor(0)

    def review(self, proposed, current, residual_sq, t):
        self.reviews.append(
            (proposed.tolist(), current.tolist(), float(residual_sq), t)
        )
        accept = torch.tensor(self.verdicts.pop(0))
        self.accepted = self.accepted + int(accept)
        self.rejected = self.rejected + int(~accept)
        return accept, None

    def state_dict(self):
        return {"verdicts": self.verdicts, "total": self.total,
                "accepted": self.accepted, "rejected": self.rejected}  # fmt: skip

    def load_state_dict(self, state):
        self.verdicts = list(state["verdicts"])
        self.total, self.accepted = state["total"], state["accepted"]
        self.rejected = state["rejected"]


def mean_weights(per_entry, sizes=(3, 1)):
    """``w_c`` of the ``mean`` reduction, by hand, from per-entry traces."""
    traces = [p * n for p, n in zip(per_entry, sizes)]
    mean_diag = sum(traces) / sum(sizes)
    return [mean_diag / p for p in per_entry]


def train_step(statistics, residuals=None, backward=True):
    """One training step as NTKCallback drives it; its weights."""
    statistics.begin_step(0, residuals or Residuals())
    weights = statistics.weights_for_step({n: torch.tensor(1.0) for n in NAMES})
    if backward:
        statistics.complete_deferred()
    statistics.end_step()
    return {n: float(w) for n, w in weights.items()}


def started(rule, global_sum=None):
    """A started driver of ``rule``."""
    kwargs = {} if global_sum is None else {"global_sum": global_sum}
    statistics = KernelStatistics(rule, "mean", **kwargs)
    statistics.start(torch.device("cpu"))
    return statistics


#: The warm start's per-entry traces: (6/3 + 12/3) / 2 and (1 + 3) / 2.
WARM = [sample(6.0, 1.0), sample(12.0, 3.0)]
WARM_PER_ENTRY = [3.0, 2.0]
#: The sample at step 2, per entry (1, 5), folded in at the rate of two
#: steps at alpha 0.5: 1 - 0.5^2 = 0.75.
LATER_PER_ENTRY = [0.25 * 3.0 + 0.75 * 1.0, 0.25 * 2.0 + 0.75 * 5.0]


def test_weights_follow_the_warm_start_then_each_spaced_sample():
    rule = ScriptedRule(WARM, [sample(3.0, 5.0)])
    statistics = started(rule)
    assert statistics.needs_residuals  # step 0: the warm start is due
    first = train_step(statistics)
    assert first == pytest.approx(
        dict(zip(NAMES, mean_weights(WARM_PER_ENTRY)))
    )
    assert statistics.traces == pytest.approx({"a": 9.0, "b": 2.0})
    # step 1: no refresh, no residuals read, the same weights
    assert not statistics.needs_residuals
    assert train_step(statistics) == first
    assert statistics.refreshes == 1
    # step 2: one sample, folded into the average
    second = train_step(statistics)
    expected = mean_weights(LATER_PER_ENTRY)
    assert second == pytest.approx(dict(zip(NAMES, expected)))
    traces = [LATER_PER_ENTRY[0] * 3, LATER_PER_ENTRY[1]]
    assert list(statistics.traces.values()) == pytest.approx(traces)
    assert statistics.trace_buffer.tolist() == pytest.approx(LATER_PER_ENTRY)
    assert statistics.refreshes == 2 and statistics.step == 3
    kinds = [c[0] for c in rule.calls]
    assert kinds == ["set_conditions", "warm_start", "sample"]
    assert rule.calls[-1] == ("sample", None)  # nothing isolated


def test_the_sum_over_processes_divides_by_the_global_entries():
    # two ranks with the same blocks: traces and entry counts both double,
    # so the per-entry traces and the weights are a single process's
    rule = ScriptedRule(WARM, [])
    statistics = started(rule, global_sum=lambda t: 2 * t)
    weights = train_step(statistics)
    assert weights == pytest.approx(dict(zip(NAMES, mean_weights([3.0, 2.0]))))
    assert statistics.traces == pytest.approx({"a": 18.0, "b": 4.0})


def test_the_first_refresh_alone_is_judged_on_the_steps_entries():
    rule = ScriptedRule(WARM, [sample(3.0, 5.0)])
    statistics = started(rule)
    for _ in range(3):
        train_step(statistics)
    assert rule.costed == [sum(b.numel() for b in BLOCKS)] == [4]


def test_a_deferred_sample_enters_at_the_next_step():
    # the warm start at step 0 (no buffer yet: it runs before the backward
    # pass), then a sample prepared at step 0 and completed after its
    # backward pass enters the weights at step 1, between refreshes
    rule = ScriptedRule(WARM, [sample(3.0, 5.0)], every=3, deferred=True)
    statistics = started(rule)
    first = train_step(statistics)
    assert first == pytest.approx(
        dict(zip(NAMES, mean_weights(WARM_PER_ENTRY)))
    )
    assert [c[0] for c in rule.calls][-3:] == [
        "warm_start",
        "prepare_sample",
        "complete_sample",
    ]
    # the completed sample is the one prepared (its call's index)
    assert rule.calls[-1][1] == rule.calls.index(rule.calls[-2]) + 1
    assert statistics.needs_residuals  # step 1 reads its residuals
    second = train_step(statistics)
    # the rate of three steps at alpha 0.5: 1 - 0.5^3 = 0.875
    later = [0.125 * p + 0.875 * q for p, q in zip(WARM_PER_ENTRY, [1, 5])]
    assert second == pytest.approx(dict(zip(NAMES, mean_weights(later))))
    # step 2: neither due nor stale
    assert not statistics.needs_residuals
    assert statistics.refreshes == 1


def test_a_second_backward_pass_in_a_step_completes_nothing_more():
    # a closure optimiser (LBFGS) runs several backward passes per step:
    # the prepared sample is completed after the first, once (the real
    # torch.optim.LBFGS through PINA: test_closure_optimizers.py)
    rule = ScriptedRule(WARM, [sample(3.0, 5.0)], every=3, deferred=True)
    statistics = started(rule)
    statistics.begin_step(0, Residuals())
    statistics.weights_for_step({n: torch.tensor(1.0) for n in NAMES})
    for _ in range(3):
        statistics.complete_deferred()
    statistics.end_step()
    names = [c[0] for c in rule.calls]
    assert names.count("complete_sample") == 1


def test_a_sample_without_a_backward_pass_is_dropped():
    rule = ScriptedRule(WARM, [sample(3.0, 5.0)], deferred=True)
    statistics = started(rule)
    first = train_step(statistics, backward=False)
    assert "complete_sample" not in [c[0] for c in rule.calls]
    assert not statistics.needs_residuals
    assert train_step(statistics, backward=False) == first
    assert rule.later  # never taken


def test_a_non_finite_sample_keeps_the_weights_and_is_counted():
    rule = ScriptedRule(WARM, [sample(math.inf, 1.0), sample(3.0, 5.0)])
    statistics = started(rule)
    first = train_step(statistics)
    train_step(statistics)
    # step 2: the infinite sample is not folded in; the buffer and weights
    # stay; the proposal counts as rejected
    assert train_step(statistics) == first
    assert statistics.trace_buffer.tolist() == pytest.approx(WARM_PER_ENTRY)
    assert statistics.rejections["proposals"] == 2
    assert statistics.rejections["non_finite"] == 1
    assert statistics.rejections["negative"] == 0


def test_the_safeguard_reviews_entry_weights_and_keeps_a_held_back_one():
    rule = ScriptedRule(WARM, [sample(3.0, 5.0), sample(3.0, 5.0)])
    rule.safeguard = RecordingSafeguard([False, True])
    statistics = started(rule)
    first = train_step(statistics)
    # started with the first weights per entry (mean: w_c / n_c) and the
    # step's squared residual norm
    w = mean_weights(WARM_PER_ENTRY)
    proposed, residual_sq = rule.safeguard.started
    assert proposed == pytest.approx([w[0] / 3, w[1] / 1])
    assert residual_sq == pytest.approx(RESIDUAL_SQ)
    train_step(statistics)
    # step 2: reviewed at t = step - 1 against the current weights, and
    # held back: the weights stay, though the sample is in the average
    assert train_step(statistics) == first
    new = mean_weights(LATER_PER_ENTRY)
    proposed, current, residual_sq, t = rule.safeguard.reviews[0]
    assert t == 1 and residual_sq == pytest.approx(RESIDUAL_SQ)
    assert proposed == pytest.approx([new[0] / 3, new[1]])
    assert current == pytest.approx([w[0] / 3, w[1]])
    assert statistics.trace_buffer.tolist() == pytest.approx(LATER_PER_ENTRY)
    assert statistics.rejections["safeguard"] == 1
    train_step(statistics)
    # step 4: accepted, against the weights still in use (the first)
    later = [0.25 * p + 0.75 * q for p, q in zip(LATER_PER_ENTRY, [1, 5])]
    accepted = train_step(statistics)
    assert accepted == pytest.approx(dict(zip(NAMES, mean_weights(later))))
    _, current, _, t = rule.safeguard.reviews[1]
    assert t == 3 and current == pytest.approx([w[0] / 3, w[1]])
    values = statistics.log_values()
    assert float(values["ntk_safeguard/accepted"]) == 1
    assert float(values["ntk_safeguard/rejected"]) == 1
    assert float(values["ntk_proposals"]) == 3
    assert float(values["ntk_rejected/safeguard"]) == 1


def restarted_at_step_2(later, isolated):
    """Three steps of a rule that isolates blocks, with the isolated
    sketches ``isolated``: ``(rule, statistics, the weights of step 2)``."""
    rule = ScriptedRule(WARM, later)
    rule.isolates_blocks = True
    rule.isolated = torch.tensor(isolated)
    statistics = started(rule)
    train_step(statistics)
    train_step(statistics)
    return rule, statistics, train_step(statistics)


def test_a_negative_average_restarts_the_block_on_its_own():
    # b's average turns negative at step 2 (0.25 * 2 + 0.75 * -4 = -2.5):
    # it restarts from the mean of warmup_samples isolated sketches (the
    # scripted 0.8 per entry) and is sketched on its own from then on
    later = [sample(3.0, -4.0), sample(3.0, 5.0)]
    rule, statistics, weights = restarted_at_step_2(later, [0.0, 0.8])
    per_entry = [LATER_PER_ENTRY[0], 0.8]
    assert weights == pytest.approx(dict(zip(NAMES, mean_weights(per_entry))))
    assert statistics.isolated_blocks == ["b"]
    isolated = [c for c in rule.calls if c[0] == "isolated_sample"]
    assert [c[:2] for c in isolated] == [("isolated_sample", (False, True))] * 2
    # from the stream of (seed 7, rank 0, step 2, "isolated"), drawn in turn
    stream = torch.Generator().manual_seed(probe_seed(7, 0, 2, "isolated"))
    expected = [torch.rand((), generator=stream).item() for _ in range(2)]
    assert [c[2] for c in isolated] == expected
    assert statistics.rejections["negative"] == 0
    train_step(statistics)
    train_step(statistics)
    # step 4: the next sample is told which block to sketch on its own;
    # b per entry: 0.25 * 0.8 + 0.75 * 5
    assert rule.calls[-1] == ("sample", (False, True))
    b = 0.25 * 0.8 + 0.75 * 5.0
    a = 0.25 * LATER_PER_ENTRY[0] + 0.75 * 1.0
    assert statistics.trace_buffer.tolist() == pytest.approx([a, b])


def test_a_larger_block_restarts_from_its_sketches_per_entry():
    # a's average turns negative at step 2 (0.25 * 3 + 0.75 * -12 / 3 =
    # -2.25); its isolated sketches sum its 3 entries, 2.4: it restarts at
    # 0.8 per entry (not 2.4 * 3), and the message names it
    later = [sample(-12.0, 5.0)]
    rule, statistics, weights = restarted_at_step_2(later, [2.4, 0.0])
    per_entry = [0.8, LATER_PER_ENTRY[1]]
    assert weights == pytest.approx(dict(zip(NAMES, mean_weights(per_entry))))
    assert statistics.isolated_blocks == ["a"]
    messages = statistics.reports.take_messages(NAMES, rule.weight_bounds)
    assert any("averaged trace of ['a'] turned" in m for m, _ in messages)


def test_a_restart_makes_every_tensor_on_the_blocks_device():
    # on a GPU a tensor made without a device lands on the host and the
    # restart fails; the same mismatch here: the blocks stay on the host while
    # the default device is "meta", so a tensor made on the default device
    # cannot meet them (the weights are those of the restart above)
    later = [sample(3.0, -4.0), sample(3.0, 5.0)]
    rule = ScriptedRule(WARM, later)
    rule.isolates_blocks = True
    rule.isolated = torch.tensor([0.0, 0.8])
    statistics = started(rule)
    with torch.device("meta"):
        steps = [train_step(statistics) for _ in range(3)]
    per_entry = [LATER_PER_ENTRY[0], 0.8]
    assert steps[2] == pytest.approx(dict(zip(NAMES, mean_weights(per_entry))))
    assert statistics.trace_buffer.device == torch.device("cpu")
    assert statistics.local_sizes(BLOCKS).device == torch.device("cpu")


def test_what_a_restart_sums_over_processes_is_in_the_blocks_dtype():
    # DDP sums one dtype on every rank: isolated sketches that come back in
    # double precision are summed, and divided, in the blocks' single one
    summed = []

    def recording_sum(tensor):
        summed.append(tensor.dtype)
        return tensor

    rule = ScriptedRule(WARM, [sample(3.0, -4.0)])
    rule.isolates_blocks = True
    rule.isolated = torch.tensor([0.0, 0.8], dtype=torch.float64)
    statistics = started(rule, global_sum=recording_sum)
    for _ in range(3):
        train_step(statistics)
    assert statistics.isolated_blocks == ["b"]
    assert summed and set(summed) == {torch.float32}


def test_the_probe_stream_is_made_on_the_solvers_device(monkeypatch):
    # probes drawn on a GPU need a generator of that GPU; no second device
    # exists here, so the device the stream is made for is recorded
    made, host_generator = [], torch.Generator

    def generator(device=None):
        made.append(device)
        return host_generator()

    monkeypatch.setattr(torch, "Generator", generator)
    started(ScriptedRule(WARM, [])).start(torch.device("cuda", 1))
    assert made[-1] == torch.device("cuda", 1)


def test_a_resumed_state_continues_as_the_run_would():
    def run(resume_at):
        later = [sample(3.0, 5.0), sample(9.0, 0.5), sample(1.5, 2.0)]
        rule = ScriptedRule(WARM, later, deferred=True)
        rule.safeguard = RecordingSafeguard([True] * 6)
        statistics, weights = started(rule), []
        for step in range(6):
            if step == resume_at:
                state = statistics.state_dict()
                rule = ScriptedRule(WARM, rule.later, deferred=True)
                rule.safeguard = RecordingSafeguard([])
                statistics = KernelStatistics(rule, "mean")
                statistics.start(torch.device("cpu"))
                statistics.load_state_dict(state, torch.device("cpu"))
            weights.append(train_step(statistics))
        return weights, statistics

    straight, at_end = run(resume_at=None)
    # resumed at step 3, between a completed sample and its weights
    resumed, after = run(resume_at=3)
    assert resumed == straight
    assert after.step == at_end.step == 6
    assert after.refreshes == at_end.refreshes == 3
    assert after.rejections == at_end.rejections


def tensors_of(value):
    """Every tensor inside a state (dicts, lists and tuples opened)."""
    if torch.is_tensor(value):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_of(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors_of(item)


def run_with_everything():
    """Three steps with a safeguard, a gradient fold and checked points:
    every part of the state is set."""
    rule = ScriptedRule(WARM, [sample(3.0, 5.0)])
    rule.safeguard = RecordingSafeguard([True])
    statistics = started(rule)
    for _ in range(3):
        train_step(statistics)
    statistics.fold_gradients(torch.tensor([[3.0, 4.0], [1.0, 0.0]]))
    statistics.check_fixed_points(torch.tensor([0.5, 0.25]))
    return statistics


def restored(state, device="cpu", verdicts=()):
    rule = ScriptedRule(WARM, [])
    if verdicts is not None:  # None: a rule without a safeguard
        rule.safeguard = RecordingSafeguard(verdicts)
    statistics = KernelStatistics(rule, "mean")
    statistics.load_state_dict(state, torch.device(device))
    return statistics


def test_a_restored_state_is_moved_whole_to_the_solvers_device():
    # the meta device stands for a GPU: every tensor of the state must go
    state = run_with_everything().state_dict()
    assert all(t.device.type == "cpu" for t in tensors_of(state))
    moved = restored(state, "meta").state_dict()
    found = list(tensors_of(moved))
    assert len(found) == len(list(tensors_of(state)))
    assert all(t.device.type == "meta" for t in found)


def test_a_restored_state_reads_as_the_saved_one_before_any_step():
    original = run_with_everything()
    statistics = restored(original.state_dict())
    assert statistics.weights == original.weights  # names restored too
    assert statistics.traces == original.traces
    assert statistics.bound_hits == original.bound_hits == {"a": 0, "b": 0}
    assert statistics.rejections == original.rejections
    assert statistics.refreshes == 2 and statistics.step == 3
    # the points of the full-kernel check came back: others are refused
    message = (
        "full_kernel=True needs the same points at every step, but they "
        r"changed \(resampling or several batches per epoch\). Use "
        "full_kernel=False, which keeps per-condition traces only."
    )
    with pytest.raises(ValueError, match=message):
        statistics.check_fixed_points(torch.tensor([0.5, 0.3]))
    statistics.check_fixed_points(torch.tensor([0.5, 0.25]))


def test_a_state_saved_before_the_first_sample_restores_an_empty_run():
    empty = started(ScriptedRule(WARM, [])).state_dict()
    # one format before and after the first sample
    assert set(empty) == set(run_with_everything().state_dict())
    statistics = restored(empty)
    assert statistics.trace_buffer is None and statistics.weights == {}
    assert statistics.step == 0 and statistics.log_values() == {}
    # and it goes on as a fresh run would
    statistics.start(torch.device("cpu"))
    first = train_step(statistics)
    assert first == pytest.approx(
        dict(zip(NAMES, mean_weights(WARM_PER_ENTRY)))
    )


def test_the_gradients_of_all_processes_are_averaged_before_their_norms():
    # two ranks with the same gradients: the all-reduce sums them and the
    # count of ranks; their mean is one rank's, squared norms 25 and 1
    statistics = started(ScriptedRule(WARM, []), global_sum=lambda t: 2 * t)
    statistics.names = NAMES
    statistics.fold_gradients(torch.tensor([[3.0, 4.0], [1.0, 0.0]]))
    value = statistics.state_dict()["gradients"]["value"]
    assert value.tolist() == [25.0, 1.0]


def test_a_state_without_a_safeguard_leaves_a_new_one_unstarted():
    # saved without a safeguard, resumed with one: it starts afresh
    rule = ScriptedRule(WARM, [])
    statistics = started(rule)
    train_step(statistics)
    again = restored(statistics.state_dict())
    assert again.weighting.safeguard.total is None
    assert "ntk_safeguard/sum" not in again.log_values()


def test_a_dropped_sample_saved_before_its_weights_is_still_counted():
    # a deferred non-finite sample completed at step 0 is counted when the
    # weights take it in, at step 1, also across a resume in between
    rule = ScriptedRule(WARM, [sample(math.nan, 1.0)], every=3, deferred=True)
    statistics = started(rule)
    train_step(statistics)
    state = statistics.state_dict()
    assert all(t.device.type == "meta" for t in tensors_of(
        restored(state, "meta").state_dict()))  # fmt: skip
    again = restored(state, verdicts=None)
    train_step(again)
    assert again.rejections["non_finite"] == 1
    assert again.rejections["proposals"] == 2
