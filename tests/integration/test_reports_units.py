"""The run's reports on their own: how :class:`RunReports` counts proposals
of weights, rejections, clamped weights and zero traces, times the first
refresh of a fit, and which warnings it gives, once, from those counts."""

import time
from types import SimpleNamespace

import torch

from pina_ntk.core.weights import usable_traces
from pina_ntk.integration.reports import RunReports, device_clock

NAMES = ["a", "b"]
BOUNDS = (0.1, 10.0)


def propose(reports, traces, accepted=True):
    """Count one proposal formed from ``traces`` as the statistics do: the
    traces' usability decides ``ok``."""
    traces = torch.tensor(traces)
    reports.count_proposal(
        traces, usable_traces(traces), torch.tensor(accepted)
    )


def rejected(reports):
    """``{reason: count}`` of the rejected proposals, as logged."""
    return {
        key.removeprefix("ntk_rejected/"): int(value)
        for key, value in reports.rejection_counts().items()
        if key.startswith("ntk_rejected/")
    }


def blocks(reports):
    """The names of the blocks flagged in a rejected proposal."""
    flags = reports.rejected_blocks.tolist()
    return [n for n, flagged in zip(NAMES, flags) if flagged]


def test_clock_waits_for_the_cuda_queue_of_the_given_device(monkeypatch):
    # timing a refresh on a GPU must wait for the queued kernels of the
    # solver's own device, or the refresh looks free; a CPU needs no wait
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", calls.append)
    device = torch.device("cuda:1")
    assert isinstance(device_clock(device), float)
    assert calls == [device]
    device_clock(torch.device("cpu"))
    assert calls == [device]


def test_fresh_reports_have_no_counts_and_nothing_to_say():
    # before the first refresh nothing is counted (a checkpoint taken then
    # holds no counters), nothing is timed and no message is given
    reports = RunReports()
    for counter in (
        "proposals",
        "rejected",
        "rejected_blocks",
        "formed",
        "dropped",
        "bound_hits",
        "zero_trace",
    ):
        assert getattr(reports, counter) is None, counter
    assert not reports.times_refresh
    assert reports.rejection_counts() == {}
    assert reports.bound_hit_counts(NAMES) == {}
    assert reports.take_messages(NAMES, BOUNDS) == []
    assert reports.take_messages(NAMES, BOUNDS, final=True) == []


def test_only_the_first_refresh_of_each_fit_is_timed():
    # the cost check runs once per fit: the first step of a new report (or
    # of a new fit) is timed, the steps after the check are not
    reports = RunReports()
    reports.start_step(torch.device("cpu"))
    assert reports.times_refresh
    weighting = SimpleNamespace(refresh_cost_warning=lambda *args: None)
    reports.check_refresh_cost(weighting, 10, time.perf_counter(), 0.0)
    assert not reports.times_refresh
    reports.start_step(torch.device("cpu"))
    assert not reports.times_refresh
    reports.start_fit()
    reports.start_step(torch.device("cpu"))
    assert reports.times_refresh


def test_refresh_cost_is_judged_from_the_refresh_and_step_seconds(
    monkeypatch,
):
    # the weighting judges the cost from the refresh's own duration
    # (end - start) against a training step, estimated as 2.5 times the
    # forward pass (step start to refresh start); its warning is given once
    monkeypatch.setattr(time, "perf_counter", lambda: 10.0)
    reports = RunReports()
    reports.start_step(torch.device("cpu"))
    asked = []

    def refresh_cost_warning(entries, refresh_seconds, step_seconds):
        asked.append((entries, refresh_seconds, step_seconds))
        return "refreshes are costly"

    weighting = SimpleNamespace(refresh_cost_warning=refresh_cost_warning)
    reports.check_refresh_cost(weighting, 300, 12.0, 15.5)
    assert asked == [(300, 3.5, 2.5 * 2.0)]
    assert not reports.times_refresh
    assert reports.take_messages(NAMES, BOUNDS) == [
        ("refreshes are costly", UserWarning)
    ]
    assert reports.take_messages(NAMES, BOUNDS) == []


def test_a_dropped_sample_rejects_the_next_proposal_for_its_blocks():
    # a sample with a non-finite entry is not folded in; every block any
    # sample since the last proposal dropped is named, once
    reports = RunReports()
    nan = float("nan")
    reports.note_samples(torch.tensor([[nan, 1.0], [2.0, 3.0]]))
    reports.note_samples(torch.tensor([[1.0, 2.0], [3.0, float("inf")]]))
    propose(reports, [1.0, 2.0])
    assert rejected(reports)["non_finite"] == 1
    assert blocks(reports) == ["a", "b"]
    # the next proposal starts afresh: a clean sample rejects nothing
    reports.note_samples(torch.tensor([[1.0, 2.0]]))
    propose(reports, [1.0, 2.0])
    assert rejected(reports)["non_finite"] == 1


def test_each_rejected_proposal_counts_under_its_one_reason():
    # a zero trace beside positive ones is a valid estimate (the condition
    # gets a fixed weight); all zero, negative, non-finite and a safeguard
    # veto are rejections, and only broken blocks (non-finite or negative)
    # are named, never zero ones
    reports = RunReports()
    propose(reports, [0.0, 1.0])
    assert rejected(reports) == {
        "non_finite": 0,
        "negative": 0,
        "all_zero": 0,
        "safeguard": 0,
    }
    propose(reports, [0.0, 0.0])
    assert rejected(reports)["all_zero"] == 1
    assert blocks(reports) == []
    propose(reports, [2.0, -1.0])
    propose(reports, [float("nan"), -1.0])  # non-finite is checked first
    propose(reports, [1.0, 2.0], accepted=False)
    assert rejected(reports) == {
        "non_finite": 1,
        "negative": 1,
        "all_zero": 1,
        "safeguard": 1,
    }
    assert blocks(reports) == ["a", "b"]
    assert int(reports.proposals) == 5


def test_counters_are_integers_on_the_solver_device():
    # counting stays on the device (no host round trip on the training
    # path) and in integers, which count exactly where float32 would stop
    # at 2**24; the meta device stands for an accelerator here
    reports = RunReports()
    traces = torch.tensor([1.0, -2.0], device="meta")
    ok = torch.ones((), dtype=torch.bool, device="meta")
    reports.count_proposal(traces, ok, ok)
    assert reports.proposals.device.type == "meta"
    assert reports.rejected.device.type == "meta"
    assert reports.proposals.dtype == torch.long
    assert reports.rejected.dtype == torch.long


def test_rejection_counts_are_logged_as_float_tensors():
    # Lightning reduces logged values in floating point (it warns about and
    # converts integer ones): the counts are given as float32 already
    reports = RunReports()
    propose(reports, [1.0, 2.0])
    propose(reports, [1.0, -2.0])
    counts = reports.rejection_counts()
    assert sorted(counts) == [
        "ntk_proposals",
        "ntk_rejected/all_zero",
        "ntk_rejected/negative",
        "ntk_rejected/non_finite",
        "ntk_rejected/safeguard",
    ]
    for value in counts.values():
        assert value.dtype == torch.float32 and value.dim() == 0
    assert counts["ntk_proposals"].item() == 2.0
    assert counts["ntk_rejected/negative"].item() == 1.0


def test_rejection_warning_names_counts_share_reasons_and_blocks():
    # the user reads how many of the proposals were unusable, their share,
    # each reason with its count and the blocks at fault
    reports = RunReports()
    propose(reports, [1.0, 2.0])
    propose(reports, [1.0, 2.0])
    propose(reports, [float("nan"), 2.0])
    propose(reports, [1.0, -2.0])
    message = reports.rejection_message(NAMES, final=False)
    assert message.startswith(
        "2 of 4 NTK weight proposals so far (50%) had unusable trace "
        "estimates (1 non finite, 1 negative; blocks ['a', 'b']), and each "
        "time the previous weights were kept."
    )


def test_rejection_warning_says_when_no_weights_were_ever_formed():
    # if no estimate has been usable yet, the user is told that training
    # runs unweighted; once weights were formed this is not said
    reports = RunReports()
    propose(reports, [float("nan"), 2.0])
    message = reports.rejection_message(NAMES, final=False)
    assert message.startswith(
        "The NTK weighting has formed no weights yet: the weights are 1, "
        "and training is unweighted until an estimate is usable. 1 of 1 NTK "
        "weight proposals so far (100%)"
    )
    reports = RunReports()
    propose(reports, [1.0, 2.0])
    propose(reports, [1.0, 2.0])
    propose(reports, [1.0, 2.0])
    propose(reports, [float("nan"), 2.0])
    message = reports.rejection_message(NAMES, final=False)
    assert message.startswith("1 of 4 NTK weight proposals so far (25%)")


def test_rejections_are_warned_first_and_at_the_end_if_more_came():
    # the first rejection is warned at the next logging step; later ones
    # only at the end of training (not at every logging step), with the
    # totals; nothing new at the end means no second warning
    reports = RunReports()
    propose(reports, [1.0, 2.0])
    propose(reports, [float("nan"), 2.0])
    ((message, category),) = reports.take_messages(NAMES, BOUNDS)
    assert category is RuntimeWarning
    assert message.startswith("1 of 2 NTK weight proposals so far (50%)")
    propose(reports, [1.0, -2.0])
    assert reports.take_messages(NAMES, BOUNDS) == []
    ((message, category),) = reports.take_messages(NAMES, BOUNDS, final=True)
    assert category is RuntimeWarning
    assert message.startswith(
        "2 of 3 NTK weight proposals so far (67%) had unusable trace "
        "estimates (1 non finite, 1 negative; blocks ['a', 'b'])"
    )
    assert reports.take_messages(NAMES, BOUNDS, final=True) == []


def test_isolated_blocks_are_told_once_as_information():
    # isolating blocks is information (category None), given once
    reports = RunReports()
    reports.note_isolated(["b"])
    ((message, category),) = reports.take_messages(NAMES, BOUNDS)
    assert category is None
    assert message.startswith(
        "The predictor sketch's averaged trace of ['b'] turned negative"
    )
    assert reports.take_messages(NAMES, BOUNDS) == []


def test_clamped_weights_and_zero_traces_are_counted_and_warned_once():
    # a weight at a bound counts as clamped for its condition, unless its
    # trace is zero (a fixed weight, warned of on its own); the warning
    # gives the bounds and the clamped conditions with their counts
    names = ["a", "b", "c"]
    reports = RunReports()
    ok = torch.tensor(True)
    traces = torch.tensor([5.0, 0.0, 1e-3])
    reports.count(torch.tensor([10.0, 1.0, 0.1]), traces, ok, BOUNDS)
    reports.count(torch.tensor([10.0, 1.0, 0.5]), traces, ok, BOUNDS)
    # unusable traces keep the previous weights: nothing is clamped
    reports.count(torch.tensor([10.0, 1.0, 0.1]), traces, ~ok, BOUNDS)
    assert reports.bound_hit_counts(names) == {"a": 2, "b": 0, "c": 1}
    messages = reports.take_messages(names, BOUNDS)
    assert [category for _, category in messages] == [RuntimeWarning] * 2
    zero, bounds = (message for message, _ in messages)
    assert zero.startswith(
        "The NTK trace of ['b'] is exactly zero: no trainable parameter "
        "moves their residual"
    )
    assert bounds.startswith(
        "NTK weights were clamped to weight_bounds=(0.1, 10.0) (weight "
        "updates per condition: {'a': 2, 'c': 1})"
    )
    reports.count(torch.tensor([10.0, 1.0, 0.1]), traces, ok, BOUNDS)
    assert reports.take_messages(names, BOUNDS, final=True) == []
