"""``WeightProposals`` on its own: what the safeguard is given, with either
reduction and with a residual in half precision. The safeguard is a
stand-in that records its arguments; the real one is reviewed in
``tests/core/test_safeguard.py`` and in training in ``tests/integration``."""

from types import SimpleNamespace

import pytest
import torch

from pina_ntk.integration.reports import RunReports
from pina_ntk.integration.weight_proposals import WeightProposals


class ArgumentsSafeguard:
    """Accepts every proposal and keeps what it was given."""

    def __init__(self):
        self.started, self.reviews = None, []
        self.total = torch.tensor(0.0)
        self.accepted = self.rejected = torch.tensor(0)

    def start(self, proposed, residual_sq):
        self.started = (proposed.clone(), residual_sq.clone())

    def review(self, proposed, current, residual_sq, t):
        self.reviews.append((proposed.clone(), current.clone(), t))
        return torch.tensor(True), None


def proposals(reduction):
    guard = ArgumentsSafeguard()
    weighting = SimpleNamespace(
        weight_bounds=(1e-6, 1e6),
        gradient_band=None,
        ramp_steps=0,
        unknowns="excluded",
        safeguard=guard,
    )
    found = WeightProposals(weighting, reduction, lambda t: t, RunReports())
    return found, guard


SIZES = torch.tensor([2, 4])
RESIDUALS = [torch.ones(6)]
NO_ROLES = ((False, False), (False, False))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_the_safeguard_is_given_the_weight_of_one_entry(reduction):
    # PINA's loss weighs each entry by w_c / n_c with the mean reduction
    # and by w_c with the sum; the safeguard compares those
    made, guard = proposals(reduction)
    made.propose(torch.tensor([1.0, 4.0]), RESIDUALS, SIZES, 0, None, NO_ROLES)
    first = made.weights.clone()
    per_entry = first / SIZES if reduction == "mean" else first
    torch.testing.assert_close(guard.started[0], per_entry)
    made.propose(torch.tensor([3.0, 1.0]), RESIDUALS, SIZES, 1, None, NO_ROLES)
    proposed, current, step = guard.reviews[0]
    second = made.weights
    assert not torch.allclose(second, first)
    torch.testing.assert_close(current, per_entry)
    expected = second / SIZES if reduction == "mean" else second
    torch.testing.assert_close(proposed, expected)
    assert step == 0


def test_a_half_precision_residual_is_summed_in_the_traces_precision():
    # under mixed precision the step's residual may be float16: 300^2 + 300^2
    # is 180,000, beyond float16's largest value (65,504)
    made, guard = proposals("mean")
    residual = [torch.full((2,), 300.0, dtype=torch.float16)]
    traces = torch.tensor([1.0, 4.0])
    made.propose(traces, residual, torch.tensor([1, 1]), 0, None, NO_ROLES)
    residual_sq = guard.started[1]
    assert residual_sq.dtype == torch.float32
    assert float(residual_sq) == 180_000.0
