"""Bad constructor and function arguments raise errors naming the argument.

The core's own argument checks are with their units in ``tests/core``."""

import pytest
from pina.solver import PhysicsInformedSingleModelSolver

from pina_ntk import (
    NTKCallback,
    NTKWeighting,
    SketchNTKWeighting,
    SpacedUpdateSafeguard,
    ntk_traces,
)

from helpers import make_solver, make_trainer, mlp, untouched_line_problem


@pytest.mark.parametrize(
    "kwargs,argument",
    [
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 1.5}, "alpha"),
        ({"alpha": -0.1}, "alpha"),
        ({"alpha": "0.1"}, "alpha"),
        ({"warmup_samples": 0}, "warmup_samples"),
        ({"warmup_samples": 2.5}, "warmup_samples"),
        ({"step_size": 0.0}, "step_size"),
        ({"step_size": -1e-3}, "step_size"),
        ({"step_size": "small"}, "step_size"),
        ({"step_size": float("inf")}, "step_size"),
        ({"estimator": "hutchinson"}, "estimator"),
        ({"difference": "backward"}, "difference"),
        ({"probe": "uniform"}, "probe"),
        ({"full_kernel": "yes"}, "full_kernel"),
        ({"full_kernel": True, "estimator": "parameter"}, "full_kernel"),
        ({"balanced_probe": "yes"}, "balanced_probe"),
        ({"statistic": "gradient"}, "statistic"),
        ({"full_kernel": True, "statistic": "rayleigh"}, "statistic"),
        ({"full_kernel": True, "statistic": "boundary"}, "statistic"),
        ({"safeguard": 3.0}, "safeguard"),
        ({"weight_bounds": (1.0, 0.5)}, "weight_bounds"),
        ({"weight_bounds": (1.0, 1.0)}, "weight_bounds"),
        ({"weight_bounds": (0.0, 1.0)}, "weight_bounds"),
        ({"weight_bounds": 5}, "weight_bounds"),
        ({"seed": -1}, "seed"),
        ({"evaluation_chunk_size": 0}, "evaluation_chunk_size"),
        ({"sample_after_backward": "yes"}, "sample_after_backward"),
        ({"sample_after_backward": 1}, "sample_after_backward"),
        ({"sample_every_n_steps": 0}, "sample_every_n_steps"),
        ({"sample_every_n_steps": 2.5}, "sample_every_n_steps"),
        ({"sample_every_n_steps": True}, "sample_every_n_steps"),
        ({"gradient_band": 0.5}, "gradient_band"),
        ({"gradient_band": "4"}, "gradient_band"),
        ({"ramp_steps": -1}, "ramp_steps"),
        ({"ramp_steps": 2.5}, "ramp_steps"),
        ({"ramp_steps": None}, "ramp_steps"),
        ({"unknowns": "joint"}, "unknowns"),
    ],
)
def test_sketch_weighting_arguments(kwargs, argument):
    # the argument's name as a word: "XXalphaXX" would not do
    with pytest.raises(ValueError, match=rf"\b{argument}\b"):
        SketchNTKWeighting(**kwargs)


@pytest.mark.parametrize(
    "kwargs,argument",
    [
        ({"update_every_n_steps": 0}, "update_every_n_steps"),
        ({"update_every_n_steps": 1.0}, "update_every_n_steps"),
        ({"update_every_n_steps": True}, "update_every_n_steps"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"safeguard": "strict"}, "safeguard"),
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 1.5}, "alpha"),
        ({"statistic": "Rayleigh"}, "statistic"),
        ({"gradient_band": 0.0}, "gradient_band"),
        ({"gradient_band": float("nan")}, "gradient_band"),
        ({"ramp_steps": -5}, "ramp_steps"),
        ({"ramp_steps": True}, "ramp_steps"),
        ({"unknowns": "kernels"}, "unknowns"),
    ],
)
def test_exact_weighting_arguments(kwargs, argument):
    with pytest.raises(ValueError, match=rf"\b{argument}\b"):
        NTKWeighting(**kwargs)


def test_safeguard_forms_accepted():
    assert NTKWeighting(safeguard=None).safeguard is None
    assert isinstance(NTKWeighting().safeguard, SpacedUpdateSafeguard)
    budget = lambda t: 1.0  # noqa: E731
    assert NTKWeighting(safeguard=budget).safeguard.budget is budget


@pytest.mark.parametrize("value", [0, -3, 1.5, True])
def test_callback_log_interval(value):
    # the message starts with the argument's name, as the user spelt it
    with pytest.raises(ValueError, match=r"^log_every_n_steps must be"):
        NTKCallback(log_every_n_steps=value)


@pytest.mark.parametrize(
    "kwargs,argument",
    [
        ({"method": "lanczos"}, "method"),
        ({"method": "sketch", "samples": 0}, "samples"),
        ({"method": "sketch", "estimator": "x"}, "estimator"),
        ({"method": "sketch", "difference": "x"}, "difference"),
        ({"method": "sketch", "probe": "x"}, "probe"),
        ({"method": "sketch", "balanced_probe": 1}, "balanced_probe"),
    ],
)
def test_ntk_traces_arguments(kwargs, argument):
    solver = make_solver("poisson")
    make_trainer(solver, steps=1, ntk=False)
    with pytest.raises(ValueError, match=rf"\b{argument}\b"):
        ntk_traces(solver, **kwargs)


def test_ntk_traces_before_trainer_explains():
    solver = PhysicsInformedSingleModelSolver(
        untouched_line_problem(), mlp(1, 1)
    )
    with pytest.raises(ValueError, match="pina.Trainer"):
        ntk_traces(solver)
