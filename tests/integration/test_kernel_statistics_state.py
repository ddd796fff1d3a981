"""``KernelStatistics`` between fits and steps, and what it logs: the state
before ``start``, after ``close``, the probe streams, the seed drawn from
torch's global generator, the refresh cost's entry count, the condition
check's message and the logged values' names and dtypes."""

import hashlib

import pytest
import torch

from pina_ntk import NTKWeighting, SketchNTKWeighting
from pina_ntk.integration.kernel_statistics import KernelStatistics, probe_seed

from helpers import make_solver, make_trainer


def test_a_named_stream_is_a_stream_of_its_own():
    # the key hashed is "seed,rank,step[,stream]" (BLAKE2b, 8 bytes, little
    # endian, one bit dropped): a stream name changes it
    def blake(key):
        digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") >> 1

    assert probe_seed(7, 1, 3) == blake("7,1,3")
    assert probe_seed(7, 1, 3, "isolated") == blake("7,1,3,isolated")
    assert probe_seed(7, 1, 3, "isolated") != probe_seed(7, 1, 3)


def test_before_start_no_step_runs_and_no_stream_exists():
    statistics = KernelStatistics(SketchNTKWeighting(), "mean")
    assert statistics.in_training_step is False
    assert statistics.seed is None and statistics.generator is None
    # no estimate yet: no traces, nothing to log
    assert statistics.traces == {} and statistics.log_values() == {}
    assert statistics.state_dict()["weights_stale"] is False


def test_without_a_seed_start_draws_a_wide_one_from_the_global_generator():
    seeds = []
    for draw in range(2):
        statistics = KernelStatistics(SketchNTKWeighting(), "mean")
        torch.manual_seed(draw)
        expected = int(torch.randint(0, 2**62, (1,)).item())
        torch.manual_seed(draw)
        statistics.start(torch.device("cpu"))
        seeds.append(statistics.seed)
        assert statistics.seed == expected
    # 62 bits, not 2 * 62: distinct draws
    assert seeds[0] != seeds[1] and max(seeds) > 2**32
    assert statistics.generator.device == torch.device("cpu")


def test_a_later_fit_keeps_the_seed_and_a_given_seed_is_used():
    # a second Trainer continues the run: its probes continue the stream
    statistics = KernelStatistics(SketchNTKWeighting(), "mean")
    torch.manual_seed(0)
    statistics.start(torch.device("cpu"))
    first = statistics.seed
    statistics.start(torch.device("cpu"))
    assert statistics.seed == first
    seeded = KernelStatistics(SketchNTKWeighting(seed=11), "mean")
    seeded.start(torch.device("cpu"))
    assert seeded.seed == 11


def test_a_later_fit_on_another_device_takes_the_state_there():
    # a second Trainer on another device: the weights, estimates and counts
    # move with the run (``meta`` stands for a GPU on this machine; no
    # probe is drawn, so the stream's device is not exercised here)
    weighting = trained(NTKWeighting(), steps=2)
    statistics = weighting.driver
    before = statistics.state_dict()
    assert statistics.proposals.weights.device.type == "cpu"
    generators = []
    host_generator = torch.Generator

    def generator(device=None):
        generators.append(device)
        return host_generator()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch, "Generator", generator)
        statistics.start(torch.device("meta"))
        assert generators == [torch.device("meta")]
        assert statistics.proposals.weights.device.type == "meta"
        after = statistics.state_dict()
        assert after["step"] == before["step"] == 2
        assert after["seed"] == before["seed"]
        assert after["names"] == before["names"]
        # the same device again: the state stays where it is
        statistics.start(torch.device("meta"))
        assert statistics.proposals.weights.device.type == "meta"


def test_one_holder_at_a_time_and_a_released_one_is_taken_over():
    statistics = KernelStatistics(NTKWeighting(), "mean")
    first, second = object(), object()
    statistics.acquire(first)
    statistics.acquire(first)  # the same callback again (validate, test)
    with pytest.raises(ValueError) as error:
        statistics.acquire(second)
    assert str(error.value) == (
        "This weighting is driven by another NTKCallback whose Trainer is "
        "still running (two NTKCallbacks in one Trainer, or a second "
        "Trainer started inside the first one's fit). Pass at most one "
        "NTKCallback per Trainer and run one Trainer at a time: a later "
        "Trainer takes the weighting over once the earlier one's fit, "
        "validate or test has returned. To train two solvers side by side, "
        "give each its own weighting."
    )
    statistics.release(second)  # not the holder: nothing changes
    assert statistics.holder is first
    statistics.release(first)
    statistics.acquire(second)
    assert statistics.holder is second


def test_the_condition_check_names_both_batches_and_the_remedy():
    statistics = KernelStatistics(NTKWeighting(), "mean")
    statistics.check_names(["D", "boundary"])
    with pytest.raises(RuntimeError) as error:
        statistics.check_names(["D"])
    assert str(error.value) == (
        "NTK weights compare all conditions within one optimisation step, "
        "but this batch holds ['D'] and an earlier one ['D', 'boundary']. "
        "Use pina.Trainer(batching_mode='common_batch_size') (the default) "
        "so that every batch contains every condition."
    )


def trained(weighting, steps=3):
    """A weighting after ``steps`` steps of a small Poisson problem."""
    make_trainer(make_solver("poisson", weighting, n=10), steps).train()
    return weighting


def test_a_closed_step_is_no_longer_running():
    # each step ends with close(): the flag the weighting reads is a bool
    assert trained(NTKWeighting()).driver.in_training_step is False


def test_logged_counts_are_float32_and_the_safeguard_sum_is_named():
    # Lightning averages logged values across processes: counts are logged
    # as floats, under the documented names
    values = trained(NTKWeighting()).driver.log_values()
    for name in ("accepted", "rejected"):
        assert values[f"ntk_safeguard/{name}"].dtype == torch.float32
    assert "ntk_safeguard/sum" in values
    hits = [k for k in values if k.startswith("ntk_bound_hits/")]
    assert hits and all(values[k].dtype == torch.float32 for k in hits)
