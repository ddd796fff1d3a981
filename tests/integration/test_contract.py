"""The contract between weighting, driver and training step is code."""

import re
from pathlib import Path

import pytest
import torch
from typing_extensions import get_protocol_members

from pina_ntk import NTKCallback, NTKWeighting, SketchNTKWeighting
from pina_ntk.integration import contract
from pina_ntk.integration.contract import (
    BlockIsolation,
    ChunkedResidualFn,
    KernelRule,
    StepResiduals,
    WeightDriver,
)
from pina_ntk.integration.kernel_statistics import KernelStatistics
from pina_ntk.integration.recording import ResidualRecorder

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
PROTOCOLS = {"KernelRule": KernelRule, "WeightDriver": WeightDriver}
PROTOCOLS["StepResiduals"] = StepResiduals
PROTOCOLS["ChunkedResidualFn"] = ChunkedResidualFn
PROTOCOLS["BlockIsolation"] = BlockIsolation


def documented_members():
    """``{protocol: {member, ...}}`` from the table of architecture.md."""
    rows = re.findall(
        r"^\| `(\w+)` \| `(\w+)` \|", ARCHITECTURE.read_text(), re.M
    )
    table = {}
    for protocol, member in rows:
        table.setdefault(protocol, set()).add(member)
    return table


def test_the_architecture_table_lists_exactly_the_protocol_members():
    table = documented_members()
    assert set(table) == set(PROTOCOLS)
    for name, protocol in PROTOCOLS.items():
        assert table[name] == set(get_protocol_members(protocol)), name


def test_the_contract_module_defines_the_documented_protocols():
    defined = {
        name
        for name, value in vars(contract).items()
        if isinstance(value, type)
        and getattr(value, "_is_protocol", False)
        and value.__module__ == contract.__name__
    }
    assert defined == set(PROTOCOLS)


@pytest.mark.parametrize("weighting", [NTKWeighting, SketchNTKWeighting])
def test_the_weightings_are_kernel_rules(weighting):
    assert isinstance(weighting(), KernelRule)


def test_the_isolating_rules_isolate_blocks():
    # the one rule whose sketches carry cross terms isolates blocks; the
    # parameter-space sketch and exact traces are never negative
    assert SketchNTKWeighting().isolates_blocks
    assert isinstance(SketchNTKWeighting(), BlockIsolation)
    assert not SketchNTKWeighting(estimator="parameter").isolates_blocks
    assert not SketchNTKWeighting(full_kernel=True).isolates_blocks
    assert not NTKWeighting().isolates_blocks


def test_a_weighting_without_a_member_is_not_a_kernel_rule():
    class Incomplete:
        pass

    rule = SketchNTKWeighting()
    partial = Incomplete()
    for member in get_protocol_members(KernelRule) - {"refresh_cost_warning"}:
        setattr(partial, member, getattr(rule, member))
    assert not isinstance(partial, KernelRule)
    partial.refresh_cost_warning = rule.refresh_cost_warning
    assert isinstance(partial, KernelRule)


def test_the_statistics_drive_and_the_recorder_feeds(trained_wave):
    solver, trainer = trained_wave
    (callback,) = [c for c in trainer.callbacks if isinstance(c, NTKCallback)]
    statistics = callback.statistics
    assert isinstance(statistics, KernelStatistics)
    assert isinstance(statistics, WeightDriver)
    assert solver.weighting.driver is statistics
    assert isinstance(ResidualRecorder(solver), StepResiduals)
    recorder = ResidualRecorder(solver)
    assert isinstance(recorder.residual_fn(["D"]), ChunkedResidualFn)


@pytest.fixture
def trained_wave():
    from helpers import make_solver, make_trainer

    solver = make_solver("wave", weighting=SketchNTKWeighting(warmup_samples=2))
    trainer = make_trainer(solver, steps=2, ntk=False)
    trainer.train()
    return solver, trainer


@pytest.mark.parametrize("weighting", [NTKWeighting, SketchNTKWeighting])
def test_pina_calls_every_epoch_and_sums_the_weighted_losses(weighting):
    # PINA's side of the contract: update_weights on every step (when to
    # refresh is decided per optimisation step here) and the weighted
    # losses summed (1 + 2 + 3, not their mean, 2), whatever PINA's defaults
    found = weighting()
    assert found.update_every_n_epochs == 1
    weighted = torch.tensor([1.0, 2.0, 3.0])
    assert float(found.aggregator_fn(weighted)) == 6.0
