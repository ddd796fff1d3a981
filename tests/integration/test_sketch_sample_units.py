"""``SketchNTKWeighting``'s samples one call at a time, without training:
``prepare_sample`` then ``complete_sample`` on residuals whose kernel is
known in closed form. A linear residual ``R_c = A_c theta - b_c`` has
``K_cd = A_c A_d^T`` and finite differences without error, so each
estimator's mean is the statistic itself; a quadratic residual gives the
forward quotient a bias worked out by hand. Means are judged against five
standard errors of the seeded samples.

Trainings: ``test_sketch_sampling.py``; the core estimators' units:
``tests/core``."""

import pytest
import torch
from pina.solver import PhysicsInformedSingleModelSolver

from pina_ntk import SketchNTKWeighting

from helpers import make_problem, make_trainer, mlp, untouched_line_problem

DTYPE = torch.float64
#: Balanced-probe scales far from 1, so that a scale dropped on one side
#: only (probe or sketch) biases a block by a factor of 9 or 1/4.
SCALES = torch.tensor([3.0, 0.5], dtype=DTYPE)


def linear_residual(sizes=(3, 2), num_params=4, seed=0):
    """``(A, theta, residual_fn)`` of ``R_c = A_c w - b_c``, with ``b_c``
    such that ``R_c(theta)`` is the top eigenvector of ``K_aa`` in the
    first block and the bottom one of ``K_bb`` in the second: the Rayleigh
    statistics ``n_c rho_c`` lie well above and below the traces."""
    generator = torch.Generator().manual_seed(seed)
    draw = lambda *shape: torch.randn(*shape, generator=generator, dtype=DTYPE)
    # blocks of different size: traces far apart
    matrices = [draw(n, num_params) * s for n, s in zip(sizes, (1, 0.3))]
    theta = draw(num_params)
    offsets = []
    for index, a in enumerate(matrices):
        _, vectors = torch.linalg.eigh(a @ a.T)  # ascending eigenvalues
        offsets.append(a @ theta - vectors[:, -1 if index == 0 else 0])

    def residual_fn(params):
        return [a @ params["w"] - b for a, b in zip(matrices, offsets)]

    return matrices, theta, residual_fn


def block_traces(matrices):
    """``Tr(K_cc) = ||A_c||_F^2``."""
    return torch.stack([a.pow(2).sum() for a in matrices])


def effective_rayleigh(matrices, theta, residual_fn):
    """``n_c R_c^T K_cc R_c / ||R_c||^2`` with ``K_cc = A_c A_c^T``."""
    blocks = residual_fn({"w": theta})
    return torch.stack(
        [
            r.numel() * (a.T @ r).pow(2).sum() / r.pow(2).sum()
            for a, r in zip(matrices, blocks)
        ]
    )


def draw_samples(weighting, residual_fn, theta, count, **options):
    """``count`` samples from one seeded stream: ``(traces, kernels)``."""
    generator = torch.Generator().manual_seed(0)
    traces, kernels = [], []
    for _ in range(count):
        params = {"w": theta.clone().requires_grad_(True)}
        residuals = residual_fn(params)
        prepared = weighting.prepare_sample(
            params, residuals, generator, **options
        )
        found, kernel = weighting.complete_sample(
            residual_fn, params, prepared, generator
        )
        traces.append(found)
        kernels.append(kernel)
    return torch.stack(traces), kernels


def assert_mean(samples, expected):
    """The mean over the first axis within 5 standard errors (and a
    rounding margin for samples without spread)."""
    mean = samples.mean(0)
    error = samples.std(0) / samples.shape[0] ** 0.5
    margin = 5 * error + 1e-9 * expected.abs()
    assert torch.all((mean - expected).abs() <= margin), (mean, expected)


def expected_statistics(statistic, matrices, theta, residual_fn):
    traces = block_traces(matrices)
    rayleigh = effective_rayleigh(matrices, theta, residual_fn)
    picked = {"trace": (0, 0), "rayleigh": (1, 1), "mixed": (0, 1)}
    return torch.stack(
        [(traces, rayleigh)[p][c] for c, p in enumerate(picked[statistic])]
    )


def weighting_for(statistic, **options):
    """A weighting of ``statistic``; ``"mixed"``: block ``b`` (of conditions
    ``a``, ``b``) takes the Rayleigh statistic, ``a`` the trace."""
    if statistic != "mixed":
        return SketchNTKWeighting(statistic=statistic, **options)
    weighting = SketchNTKWeighting(statistic={"b": "rayleigh"}, **options)
    weighting.set_conditions(["a", "b"], untouched_line_problem())
    return weighting


def test_the_statistics_differ_on_this_residual():
    # the tests below tell a Rayleigh block from a trace block (and a
    # scaled block from an unscaled one) only if the values differ
    matrices, theta, residual_fn = linear_residual()
    traces = block_traces(matrices)
    rayleigh = effective_rayleigh(matrices, theta, residual_fn)
    assert torch.all(torch.maximum(traces / rayleigh, rayleigh / traces) > 1.8)
    assert traces[0] / traces[1] > 10


@pytest.mark.parametrize("statistic", ["rayleigh", "mixed"])
def test_parameter_space_samples_take_each_blocks_statistic(statistic):
    # n_c (u_c . A_c z)^2 along u_c = R_c/||R_c||, mean n_c u_c^T K_cc u_c
    matrices, theta, residual_fn = linear_residual()
    weighting = weighting_for(statistic, estimator="parameter")
    samples, _ = draw_samples(weighting, residual_fn, theta, 4000)
    assert_mean(
        samples, expected_statistics(statistic, matrices, theta, residual_fn)
    )


@pytest.mark.parametrize("statistic", ["trace", "rayleigh", "mixed"])
def test_predictor_samples_with_balanced_scales_stay_unbiased(statistic):
    # the probe is scaled by s_c and each block's sketch divided by s_c^2:
    # a scale dropped on one side biases the block by s_c^2
    matrices, theta, residual_fn = linear_residual()
    weighting = weighting_for(statistic)
    samples, _ = draw_samples(
        weighting, residual_fn, theta, 4000, scales=SCALES
    )
    assert_mean(
        samples, expected_statistics(statistic, matrices, theta, residual_fn)
    )


def test_full_kernel_sketch_with_balanced_scales_is_unbiased():
    matrices, theta, residual_fn = linear_residual()
    weighting = SketchNTKWeighting(full_kernel=True)
    _, kernels = draw_samples(
        weighting, residual_fn, theta, 4000, scales=SCALES
    )
    whole = torch.cat(matrices)
    assert_mean(torch.stack(kernels), whole @ whole.T)


@pytest.mark.parametrize("blocks", [(True, False), (True, True)])
def test_isolated_blocks_are_sketched_alone_with_their_scales(blocks):
    # an isolated block's sketch ||J_c^T v_c||^2 / s_c^2 has no cross
    # terms; the others keep the predictor's, with the isolated probe
    # blocks left out
    matrices, theta, residual_fn = linear_residual()
    weighting = SketchNTKWeighting()
    samples, _ = draw_samples(
        weighting, residual_fn, theta, 4000, scales=SCALES, isolated=blocks
    )
    assert_mean(samples, block_traces(matrices))
    # a sketch without cross terms is never negative
    assert torch.all(samples[:, 0] >= 0)
    if all(blocks):
        assert torch.all(samples >= 0)


@pytest.mark.parametrize("isolated", [None, (True, False)])
def test_sample_is_prepare_then_complete(isolated):
    # KernelWeighting.sample hands its scales and isolated blocks on: the
    # same stream gives the same sample along both paths
    _, theta, residual_fn = linear_residual()
    weighting = SketchNTKWeighting(full_kernel=isolated is None)
    by_parts, kernels = draw_samples(
        weighting, residual_fn, theta, 3, scales=SCALES, isolated=isolated
    )
    generator = torch.Generator().manual_seed(0)
    for expected, kernel in zip(by_parts, kernels):
        params = {"w": theta.clone().requires_grad_(True)}
        found, whole = weighting.sample(
            residual_fn,
            params,
            residual_fn(params),
            generator,
            scales=SCALES,
            isolated=isolated,
        )
        assert torch.equal(found, expected)
        # the kernel sketch exactly when full_kernel asks for it
        assert (
            (kernel is None) == (whole is None) == (not weighting.full_kernel)
        )
        if kernel is not None:
            assert torch.equal(whole, kernel)


def test_a_parameter_space_sample_is_the_streams_next_direction():
    # the sketch of a linear residual is ||A_c z||^2 for any eps; z is the
    # next N(0, I_p) draw of the probe stream, nothing drawn before it
    matrices, theta, residual_fn = linear_residual()
    # eps = 1: no cancellation in the forward quotient
    weighting = SketchNTKWeighting(estimator="parameter", step_size=1.0)
    found, _ = draw_samples(weighting, residual_fn, theta, 2)
    generator = torch.Generator().manual_seed(0)
    for sample in found:
        z = torch.randn(theta.shape, generator=generator, dtype=DTYPE)
        expected = torch.stack([(a @ z).pow(2).sum() for a in matrices])
        assert torch.allclose(sample, expected, rtol=1e-10)


def test_an_isolated_sample_takes_the_rayleigh_statistic():
    matrices, theta, residual_fn = linear_residual()
    weighting = SketchNTKWeighting(statistic="rayleigh")
    generator = torch.Generator().manual_seed(0)
    samples = []
    for _ in range(2000):
        params = {"w": theta.clone().requires_grad_(True)}
        samples.append(
            weighting.isolated_sample(
                params, residual_fn(params), generator, (False, True)
            )
        )
    samples = torch.stack(samples)
    expected = effective_rayleigh(matrices, theta, residual_fn)
    assert torch.all(samples[:, 0] == 0)
    # a unit probe along R_b: the sketch is n_b rho_b whatever its sign
    assert torch.allclose(samples[:, 1], expected[1].expand(2000))


def test_every_block_isolated_takes_the_rayleigh_statistic():
    # no probe is left for the predictor: each block's own sketch along its
    # unit residual is n_c rho_c whatever the probe's sign, every sample
    matrices, theta, residual_fn = linear_residual()
    weighting = SketchNTKWeighting(statistic="rayleigh")
    samples, _ = draw_samples(
        weighting, residual_fn, theta, 3, isolated=(True, True)
    )
    expected = effective_rayleigh(matrices, theta, residual_fn)
    assert torch.allclose(samples, expected.expand(3, 2))


def quadratic_residual():
    """``R(theta) = (theta_1)^2 - 1/2`` at ``theta = (1, 0.3)``: ``J = (2,
    0)``, ``K = 4``, and ``R(theta + h) - R(theta) = 2 h_1 + h_1^2``."""

    def residual_fn(params):
        return [params["w"][:1] ** 2 - 0.5]

    return torch.tensor([1.0, 0.3], dtype=DTYPE), residual_fn


def test_predictor_forward_and_central_quotients():
    # v = J^T g = (2g, 0) and R(theta + dt v) - R(theta) = 4 g dt + 4 dt^2:
    # the forward quotient's sketch is 4 + 4 dt g, g = ±1; the central
    # quotient's is 4 exactly
    theta, residual_fn = quadratic_residual()
    options = {"probe": "rademacher", "step_size": 0.5}
    forward, _ = draw_samples(
        SketchNTKWeighting(difference="forward", **options),
        residual_fn,
        theta,
        40,
    )
    central, _ = draw_samples(
        SketchNTKWeighting(difference="central", **options),
        residual_fn,
        theta,
        40,
    )
    values = torch.tensor([2.0, 6.0], dtype=DTYPE)
    found = forward.reshape(-1)
    assert torch.all(
        torch.isclose(found, values[0]) | torch.isclose(found, values[1])
    )
    assert torch.isclose(found, values[0]).any()
    assert torch.isclose(found, values[1]).any()
    assert torch.allclose(central, torch.full_like(central, 4.0))


def test_parameter_space_forward_and_central_quotients():
    # theta + eps z moves R by 2 eps y + eps^2 y^2, y = z_1 ~ N(0, 1): the
    # forward sketch (2y + eps y^2)^2 has mean 4 + 3 eps^2 (odd moments
    # vanish), the central sketch (2y)^2 has mean 4
    theta, residual_fn = quadratic_residual()
    eps = 1.0
    means = {}
    for difference, expected in (("forward", 4 + 3 * eps**2), ("central", 4)):
        weighting = SketchNTKWeighting(
            estimator="parameter", difference=difference, step_size=eps
        )
        samples, _ = draw_samples(weighting, residual_fn, theta, 4000)
        assert_mean(samples, torch.tensor([expected], dtype=DTYPE))
        means[difference] = samples.mean()
    assert means["forward"] - means["central"] > 2


@pytest.mark.parametrize("estimator", ["predictor", "parameter"])
@pytest.mark.parametrize("statistic", ["trace", "rayleigh", "mixed"])
def test_a_seeded_sample_leaves_the_global_generator_alone(
    estimator, statistic
):
    # every draw comes from the weighting's own stream: PINA's sampling and
    # the model's initialisation see the same global stream with and
    # without NTK weights
    _, theta, residual_fn = linear_residual()
    weighting = weighting_for(statistic, estimator=estimator)
    before = torch.get_rng_state()
    draw_samples(weighting, residual_fn, theta, 3, scales=SCALES)
    assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (
            {"full_kernel": True, "estimator": "parameter"},
            "full_kernel=True needs estimator='predictor': the "
            "parameter-space estimator gives block traces only.",
        ),
        (
            {"full_kernel": True, "statistic": "rayleigh"},
            "full_kernel=True needs statistic='trace': a probe along the "
            "residual sketches one direction of the kernel, not all.",
        ),
    ],
)
def test_incompatible_options_are_explained(kwargs, message):
    with pytest.raises(ValueError) as raised:
        SketchNTKWeighting(**kwargs)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    "kwargs",
    [
        {"warmup_samples": 1},
        {"evaluation_chunk_size": 1},
        {"step_size": 1e-3},
        {"difference": "central"},
    ],
)
def test_the_smallest_valid_arguments_are_kept(kwargs):
    ((name, value),) = kwargs.items()
    assert getattr(SketchNTKWeighting(**kwargs), name) == value


class BatchSizes(torch.nn.Module):
    """A model that records the points of each of its evaluations."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.sizes = set()

    def forward(self, x):
        self.sizes.add(len(x))
        return self.model(x)


@pytest.mark.parametrize("chunk,sizes", [(3, {3, 12}), (None, {12})])
def test_evaluations_next_to_the_graph_come_in_chunks(chunk, sizes):
    # the warm start (and every sample with sample_after_backward=False)
    # runs next to the training graph: evaluation_chunk_size bounds the
    # points per evaluation; None evaluates each condition (12 points, as
    # in the training step) at once
    weighting = SketchNTKWeighting(
        warmup_samples=2,
        sample_after_backward=False,
        evaluation_chunk_size=chunk,
    )
    model = BatchSizes(mlp(2, 1))
    solver = PhysicsInformedSingleModelSolver(
        make_problem("poisson", n=12), model, weighting=weighting
    )
    make_trainer(solver, steps=2).train()
    assert model.sizes == sizes
