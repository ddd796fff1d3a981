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


def test_one_row_and_no_rows():
    model = _mlp([2, 5, 1])
    params = list(model.parameters())
    one = _laplacian_and_value(model, torch.rand(1, 2).double())
    assert float(row_gradient_traces(one, params)) == pytest.approx(
        _entry_by_entry(one, params), rel=1e-12
    )
    none = _laplacian_and_value(model, torch.rand(0, 2).double())
    assert row_gradient_traces(none, params) is None


class _TwoHeads(torch.nn.Module):
    """One layer shared by two branches, ``x`` and ``2 x``, and a head per
    branch: column 0 is the first branch, column 1 the second, column 2
    their sum; the shared weight and bias have a use in each branch."""

    def __init__(self):
        super().__init__()
        self.shared = torch.nn.Linear(2, 6)
        self.heads = torch.nn.ModuleList(torch.nn.Linear(6, 1) for _ in "ab")

    def forward(self, x):
        a, b = (
            h(torch.tanh(self.shared(s * x)))
            for h, s in zip(self.heads, (1, 2))
        )
        return torch.cat([a, b, a + b], dim=1)


def test_uses_and_parameters_that_reach_some_columns_only():
    # a head's parameters do not reach the other branch's column, and each
    # branch's use of the shared layer reaches only its own columns
    torch.manual_seed(1)
    model = _TwoHeads().double()
    residual = model(torch.rand(7, 2).double())
    params = list(model.parameters())
    expected = _entry_by_entry(residual, params)
    for k in range(3):
        column = residual[:, k : k + 1]
        assert float(row_gradient_traces(column, params)) == pytest.approx(
            _entry_by_entry(column, params), rel=1e-12
        )
    assert float(row_gradient_traces(residual, params)) == pytest.approx(
        expected, rel=1e-12
    )


def test_a_products_scales_alpha_and_beta():
    torch.manual_seed(2)
    weight = torch.nn.Parameter(torch.randn(4, 2, dtype=torch.float64))
    bias = torch.nn.Parameter(torch.randn(4, dtype=torch.float64))
    head = torch.randn(4, 1, dtype=torch.float64)
    x = torch.rand(6, 2, dtype=torch.float64)
    hidden = torch.addmm(bias, x, weight.t(), beta=3.0, alpha=0.5)
    residual = torch.tanh(hidden) @ head
    params = [weight, bias]
    assert float(row_gradient_traces(residual, params)) == pytest.approx(
        _entry_by_entry(residual, params), rel=1e-12
    )


def test_a_residual_reshaped_from_a_leading_singleton_keeps_its_rows():
    # a view of a (1, n, 2) tensor as (n, 2): its rows are still the points
    model = _mlp([2, 6, 1])
    batched = _laplacian_and_value(model, torch.rand(5, 2).double())[None]
    residual = batched.reshape(5, 2)
    params = list(model.parameters())
    assert float(row_gradient_traces(residual, params)) == pytest.approx(
        _entry_by_entry(residual, params), rel=1e-12
    )


def test_products_whose_rows_are_not_the_points_are_not_read_row_wise():
    # the bias of an addmm whose rows are 3 fixed combinations, and a
    # weight as second factor of a product of a fixed 2-row matrix: whatever
    # the function returns must be the trace (here it cannot read the rows)
    torch.manual_seed(3)
    x = torch.rand(5, 2, dtype=torch.float64)
    bias = torch.nn.Parameter(torch.randn(5, dtype=torch.float64))
    mix = torch.randn(3, 2, dtype=torch.float64)
    by_bias = torch.addmm(bias, mix, x.T).sum(0).unsqueeze(1)
    weight = torch.nn.Parameter(torch.randn(4, 3, dtype=torch.float64))
    fixed = torch.randn(2, 4, dtype=torch.float64)
    by_weight = torch.tanh(x @ (fixed @ weight)).sum(1, keepdim=True)
    for residual, param in ((by_bias, bias), (by_weight, weight)):
        got = row_gradient_traces(residual, [param])
        assert got is None or float(got) == pytest.approx(
            _entry_by_entry(residual, [param]), rel=1e-12
        )


def test_half_precision_is_left_to_the_other_paths():
    model = _mlp([2, 5, 1]).to(torch.bfloat16)
    residual = model(torch.rand(4, 2, dtype=torch.bfloat16))
    assert row_gradient_traces(residual, list(model.parameters())) is None
    # single precision is read row-wise, and its trace keeps its dtype
    model = _mlp([2, 5, 1]).float()
    residual = model(torch.rand(4, 2))
    got = row_gradient_traces(residual, list(model.parameters()))
    assert got.dtype == torch.float32
    expected = _entry_by_entry(residual, list(model.parameters()))
    assert float(got) == pytest.approx(expected, rel=1e-5)


def test_the_widths_the_groups_budget_are_those_of_the_captured_gradients():
    # every use's output gradient, caught in one reverse pass, has as many
    # columns as the width _groups holds it at
    model = _mlp([2, 9, 5, 1])
    residual = _laplacian_and_value(model, torch.rand(4, 2).double())
    params = list(model.parameters())
    uses = row_gradients._parameter_uses(residual.grad_fn, params)
    caught, handles = {}, []
    for found in uses:
        for use in found:
            node = use[0]

            def hook(grads, node=node):
                caught.setdefault(node, grads[0])

            handles.append(node.register_prehook(hook))
    torch.autograd.grad(residual.sum(), params, allow_unused=True)
    for handle in handles:
        handle.remove()
    widths = [
        (caught[use[0]].shape[1], row_gradients._gradient_width(p, use))
        for p, found in zip(params, uses)
        for use in found
    ]
    assert len(widths) > len(params)  # forward and derivative uses
    assert all(got == budgeted for got, budgeted in widths)
    assert {got for got, _ in widths} >= {9, 5}  # both orientations met


@pytest.mark.parametrize("sizes", [[1] * 8, [3, 1, 1, 2, 1, 4, 1, 1, 2]])
def test_groups_are_consecutive_and_hold_at_most_a_quarter(sizes):
    # a bias of n entries has gradient width n; packed in order, no group
    # of two or more exceeds a quarter of the widths, and no two
    # neighbouring groups would fit in one
    pairs = [(torch.zeros(n), [(None, "bias", False, 1.0)]) for n in sizes]
    groups = row_gradients._groups(pairs)
    budget = sum(sizes) / row_gradients.GROUPS
    assert [p for g in groups for p in g] == pairs
    held = [sum(p.shape[0] for p, _ in g) for g in groups]
    assert all(h <= budget for h, g in zip(held, groups) if len(g) > 1)
    assert all(a + b > budget for a, b in zip(held, held[1:]))


_EPS = torch.finfo(torch.float64).eps


@pytest.mark.parametrize(
    "rows_sum, summed, expected",
    [
        # within 1e3 eps of the larger magnitude, and exactly at it
        ([1.0], [1.0 + 100 * _EPS], True),
        ([1.0 - 1000 * _EPS], [1.0], True),
        ([1.0 - 1000.5 * _EPS], [1.0], False),
        # relative, not absolute: small gradients are held to their size
        ([1e-6], [1e-6 * (1 + 1e-12)], False),
        ([1e6], [1e6 * (1 + 1e-12)], False),
        ([1e6], [1e6 * (1 + 1e-14)], True),
        # below 1e-30 the tolerance is 1e3 eps of 1e-30
        ([1e-35], [1e-35 + 1e-44], True),
        ([1e-35], [1e-35 + 1e-42], False),
        # shapes differ: not the gradient, whatever the values
        ([1.0, 1.0], [[1.0, 1.0]], False),
    ],
)
def test_the_rows_add_up_within_a_thousand_rounding_units(
    rows_sum, summed, expected
):
    a, b = (torch.tensor(v, dtype=torch.float64) for v in (rows_sum, summed))
    assert row_gradients._adds_up(a, b) is expected
    assert row_gradients._adds_up(b, a) is expected  # symmetric


def test_a_bias_whose_rows_miss_a_use_gives_none():
    # one of the shared bias's two uses dropped: its rows no longer add up
    torch.manual_seed(1)
    model = _TwoHeads().double()
    residual = model(torch.rand(5, 2).double())[:, 2:]
    uses_of = row_gradients._uses_of

    def dropping(leaf, consumers, param):
        found = uses_of(leaf, consumers, param)
        return found[:1] if param is model.shared.bias else found

    with mock.patch.object(row_gradients, "_uses_of", dropping):
        assert row_gradient_traces(residual, [model.shared.bias]) is None
    assert row_gradient_traces(residual, [model.shared.bias]) is not None


def test_the_tolerance_is_taken_at_the_larger_of_the_two_magnitudes():
    # float32, q = 2^-23 (the spacing in [1, 2)): r = 1 + 7550 q and
    # s = r + 1001 q; 1e3 eps of r is 1000.9 q, of s 1001.02 q, so the
    # difference, 1001 q, is within the tolerance of s alone
    q = 2.0**-23
    r = torch.tensor([1 + 7550 * q], dtype=torch.float32)
    s = torch.tensor([1 + 8551 * q], dtype=torch.float32)
    assert float(s - r) == 1001 * q
    assert 1000 * q * float(r) < 1001 * q <= 1000 * q * float(s)
    assert row_gradients._adds_up(r, s) and row_gradients._adds_up(s, r)
