"""Exact traces from one reverse pass per residual column
(:func:`pina_ntk.core.row_gradients.row_gradient_traces`), against traces
summed from one reverse pass per entry."""

from unittest import mock

import pytest
import torch

from pina_ntk.core import row_gradients
from pina_ntk.core.row_gradients import row_gradient_traces


def _mlp(widths, seed=0):
    torch.manual_seed(seed)
    layers = []
    for fan_in, fan_out in zip(widths[:-1], widths[1:]):
        layers += [torch.nn.Linear(fan_in, fan_out), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers[:-1]).double()


def _laplacian_and_value(model, points):
    """Two columns per point: ``u_xx + u_yy`` (PINA's operators' way, with
    ``torch.autograd.grad`` and ``create_graph``) and ``u - sin x``."""
    x = points.clone().requires_grad_(True)
    u = model(x)
    (du,) = torch.autograd.grad(u.sum(), x, create_graph=True)
    second = [
        torch.autograd.grad(du[:, k].sum(), x, create_graph=True)[0][:, k]
        for k in range(x.shape[1])
    ]
    return torch.stack([sum(second), u[:, 0] - x[:, 0].sin()], dim=1)


def _entry_by_entry(residual, params):
    """``sum_i ||grad R_i||^2`` from one reverse pass per entry."""
    total = 0.0
    for entry in residual.reshape(-1):
        grads = torch.autograd.grad(
            entry, params, retain_graph=True, allow_unused=True
        )
        total += sum(float(g.pow(2).sum()) for g in grads if g is not None)
    return total


def test_equals_the_traces_of_one_pass_per_entry():
    model = _mlp([2, 9, 9, 9, 1])
    residual = _laplacian_and_value(model, torch.rand(13, 2).double())
    params = list(model.parameters())
    expected = _entry_by_entry(residual, params)
    got = row_gradient_traces(residual, params)
    assert float(got) == pytest.approx(expected, rel=1e-12)
    # each column on its own, too: the columns' traces add up
    parts = [row_gradient_traces(residual[:, k], params) for k in range(2)]
    assert float(sum(parts)) == pytest.approx(expected, rel=1e-12)


def test_a_parameter_outside_the_residual_counts_zero():
    model = _mlp([2, 6, 1])
    residual = _laplacian_and_value(model, torch.rand(7, 2).double())[:, 0]
    # the last bias does not enter a Laplacian; an extra weight not at all
    extra = torch.nn.Parameter(torch.ones(3, 3, dtype=torch.float64))
    params = [*model.parameters(), extra]
    got = row_gradient_traces(residual, params)
    assert float(got) == pytest.approx(
        _entry_by_entry(residual, params), rel=1e-12
    )


def test_the_passes_do_not_grow_with_the_points():
    # one pass per entry would make 4x the passes at 4x the points; every
    # pass runs through the residual's last node, which counts them
    model = _mlp([2, 8, 8, 1])
    passes = []
    for points in (10, 40):
        residual = _laplacian_and_value(model, torch.rand(points, 2).double())
        count = []
        residual.grad_fn.register_prehook(lambda grads: count.append(1))
        row_gradient_traces(residual, list(model.parameters()))
        passes.append(len(count))
    # two columns; groups of at most 1/GROUPS of the gradients, packed in
    # order: fewer than 2 GROUPS of them
    assert passes[0] == passes[1] <= 2 * (2 * row_gradients.GROUPS - 1)


class _Scaled(torch.nn.Module):
    """A trainable elementwise scale after a linear layer."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(2, 4).double()
        self.scale = torch.nn.Parameter(torch.ones(4, dtype=torch.float64))

    def forward(self, x):
        return (self.scale * torch.tanh(self.linear(x))).sum(1, keepdim=True)


class _WeightFirst(torch.nn.Module):
    """A weight as the first factor of its product: columns are points."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3, 2).double())

    def forward(self, x):
        return torch.tanh(self.weight @ x.T).sum(0, keepdim=True).T


@pytest.mark.parametrize("model", [_Scaled, _WeightFirst])
def test_a_graph_it_cannot_read_row_by_row_gives_none(model):
    torch.manual_seed(0)
    model = model()
    residual = model(torch.rand(6, 2).double())
    assert row_gradient_traces(residual, list(model.parameters())) is None


def test_a_residual_without_a_graph_has_trace_zero_and_a_scalar_none():
    model = _mlp([2, 3, 1])
    params = list(model.parameters())
    assert float(row_gradient_traces(torch.ones(4, 1), params)) == 0.0
    scalar = model(torch.rand(4, 2).double()).sum()
    assert row_gradient_traces(scalar, params) is None


def test_rows_that_do_not_add_up_to_autograds_gradient_give_none():
    # a missed use (here: every product taken as the forward one) would
    # give wrong norms; the rows' sum no longer matches the gradient
    model = _mlp([2, 5, 5, 1])
    residual = _laplacian_and_value(model, torch.rand(5, 2).double())
    with mock.patch.object(row_gradients, "_TRANSPOSES", ()):
        assert row_gradient_traces(residual, list(model.parameters())) is None


def test_a_flattened_residual_keeps_its_rows():
    # reshape(-1) interleaves the columns; read as one column of 2n rows,
    # the products' n rows would not match and the function would give up
    model = _mlp([2, 7, 7, 1])
    residual = _laplacian_and_value(model, torch.rand(9, 2).double())
    params = list(model.parameters())
    got = row_gradient_traces(residual.reshape(-1), params)
    assert got is not None
    assert float(got) == pytest.approx(
        _entry_by_entry(residual, params), rel=1e-12
    )
    # a column-major flattening has no rows of points: not read row-wise
    assert row_gradient_traces(residual.T.reshape(-1), params) is None
