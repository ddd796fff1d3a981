"""Residual functions of plain vectors and modules, and the exact kernel."""

import re

import pytest
import torch
from torch.func import jacrev

from pina_ntk.core.estimators import (
    exact_block_traces,
    kernel_probe_product,
    predictor_block_traces,
    sample_probe,
)
from pina_ntk.core.residual_functions import (
    as_blocks,
    exact_kernel,
    module_residual_fn,
    residual_jacobian,
    vector_residual_fn,
)

DTYPE = torch.float64


def smooth_blocks(theta):
    """Two blocks of a smooth, nonlinear residual of a 4-vector."""
    a = torch.arange(12, dtype=theta.dtype).reshape(3, 4) / 7.0
    return [torch.sin(a @ theta), (theta[:2] * theta[2:]).reshape(1, 2)]


def test_vector_residual_fn_wraps_tensor_and_list():
    theta = torch.tensor([1.0, 2.0], dtype=DTYPE)
    single = vector_residual_fn(lambda th: th * 3.0)
    assert torch.equal(single({"theta": theta})[0], theta * 3.0)
    several = vector_residual_fn(lambda th: (th, th.sum()[None]))
    blocks = several({"theta": theta})
    assert isinstance(blocks, list) and len(blocks) == 2
    assert torch.equal(blocks[1], torch.tensor([3.0], dtype=DTYPE))


def test_vector_residual_fn_errors_name_the_problem():
    # each message names what was expected and what was given instead
    with pytest.raises(TypeError, match="^fn must be callable, got int\\.$"):
        vector_residual_fn(3)
    residual_fn = vector_residual_fn(lambda th: th)
    with pytest.raises(
        KeyError,
        match=re.escape(
            "A residual function from vector_residual_fn reads the "
            "parameter vector params['theta']; got keys ['weights']."
        ),
    ):
        residual_fn({"weights": torch.zeros(2)})
    returned = re.escape(
        "A residual function must return a tensor or a non-empty list of "
        "tensors, got "
    )
    with pytest.raises(TypeError, match=f"^{returned}float\\.$"):
        vector_residual_fn(lambda th: 1.0)({"theta": torch.zeros(1)})
    with pytest.raises(TypeError, match=f"^{returned}list\\.$"):
        as_blocks([])
    with pytest.raises(TypeError, match=f"^{returned}list\\.$"):
        as_blocks([torch.zeros(1), 2.0])


def test_module_residual_fn_errors_name_the_problem():
    with pytest.raises(
        TypeError, match="^module must be a torch.nn.Module, got function\\.$"
    ):
        module_residual_fn(lambda z: z, lambda model: model)
    with pytest.raises(TypeError, match="^fn must be callable, got str\\.$"):
        module_residual_fn(torch.nn.Linear(1, 1), "forward")


def test_exact_kernel_matches_jacrev_over_blocks():
    theta = torch.tensor([0.3, -1.2, 0.7, 2.0], dtype=DTYPE)

    def flat(th):
        return torch.cat([b.reshape(-1) for b in smooth_blocks(th)])

    jacobian = jacrev(flat)(theta)
    kernel = exact_kernel(vector_residual_fn(smooth_blocks), {"theta": theta})
    torch.testing.assert_close(kernel, jacobian @ jacobian.T)
    assert not theta.requires_grad  # the caller's tensor is untouched


def test_residual_jacobian_takes_a_list_of_parameters():
    # R = (a_0 b, a_1^2) at a = (1, 2), b = (3): rows (3, 0, 1), (0, 4, 0)
    a = torch.tensor([1.0, 2.0], dtype=DTYPE, requires_grad=True)
    b = torch.tensor([3.0], dtype=DTYPE, requires_grad=True)
    jacobian = residual_jacobian([a[:1] * b, a[1:] ** 2], [a, b])
    expected = torch.tensor([[3.0, 0.0, 1.0], [0.0, 4.0, 0.0]], dtype=DTYPE)
    torch.testing.assert_close(jacobian, expected)


class ScaledLinear(torch.nn.Module):
    """``scale * (w x + b)``: a forward pass with a keyword argument."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(1, 1)

    def forward(self, x, scale=1.0):
        return scale * self.linear(x)


def test_module_residual_fn_passes_keywords_and_a_subset_of_parameters():
    # the keyword reaches forward, and parameters left out of params (the
    # bias) are the module's own: R = 2 (w' x + b) - y, and the kernel with
    # respect to the weight alone is (2 x)(2 x)^T
    torch.manual_seed(0)
    net = ScaledLinear().to(DTYPE)
    x = torch.linspace(0.0, 1.0, 5, dtype=DTYPE)[:, None]
    y = torch.cos(x)
    residual_fn = module_residual_fn(net, lambda model: model(x, scale=2.0) - y)
    weight = torch.tensor([[0.7]], dtype=DTYPE)
    params = {"linear.weight": weight}
    bias = net.linear.bias.detach()
    expected = 2.0 * (0.7 * x + bias) - y
    torch.testing.assert_close(residual_fn(params)[0], expected)
    kernel = exact_kernel(residual_fn, params)
    torch.testing.assert_close(kernel, 4.0 * x @ x.T)


def test_residual_jacobian_unused_parameter_gives_zero_columns():
    theta = torch.tensor([1.0, 2.0], dtype=DTYPE, requires_grad=True)
    unused = torch.zeros(3, dtype=DTYPE, requires_grad=True)
    jacobian = residual_jacobian([theta**2], {"a": theta, "b": unused})
    expected = torch.zeros(2, 5, dtype=DTYPE)
    expected[0, 0], expected[1, 1] = 2.0, 4.0
    torch.testing.assert_close(jacobian, expected)


def test_module_residual_fn_uses_passed_parameters():
    torch.manual_seed(0)
    net = torch.nn.Linear(1, 1).to(DTYPE)
    x = torch.linspace(0.0, 1.0, 6, dtype=DTYPE)[:, None]
    y = torch.cos(x)
    residual_fn = module_residual_fn(net, lambda model: model(x) - y)
    shifted = {name: p.detach() + 1.0 for name, p in net.named_parameters()}
    expected = x * shifted["weight"][0, 0] + shifted["bias"] - y
    torch.testing.assert_close(residual_fn(shifted)[0], expected)
    # u = w x + b: grad_theta u_i = (x_i, 1), so K = x x^T + 1 for any theta
    kernel = exact_kernel(residual_fn, dict(net.named_parameters()))
    torch.testing.assert_close(kernel, x @ x.T + 1.0)


def test_estimators_accept_a_vector_residual_function():
    # R is quadratic in theta, so the central predictor quotient is exactly
    # K g: the sketch must equal the exact kernel product to rounding.
    features = torch.randn(
        7, 3, dtype=DTYPE, generator=torch.Generator().manual_seed(1)
    )
    residual_fn = vector_residual_fn(
        lambda th: [features[:4] @ (th * th), features[4:] @ (th * th) - 1.0]
    )
    theta = torch.tensor([0.5, -1.0, 1.5], dtype=DTYPE, requires_grad=True)
    params = {"theta": theta}
    kernel = exact_kernel(residual_fn, params)
    residuals = residual_fn(params)
    probe = sample_probe(residuals, generator=torch.Generator().manual_seed(2))
    product = kernel_probe_product(
        residual_fn, params, probe, 0.1, "central", residuals
    )
    g = torch.cat(probe)
    torch.testing.assert_close(torch.cat(product), kernel @ g)
    traces = exact_block_traces(residuals, [theta])
    diagonal = torch.diagonal(kernel)
    torch.testing.assert_close(
        traces, torch.stack([diagonal[:4].sum(), diagonal[4:].sum()])
    )
    sketch_traces = predictor_block_traces(probe, product)
    torch.testing.assert_close(
        sketch_traces.sum(), g @ kernel @ g, rtol=1e-10, atol=1e-10
    )
