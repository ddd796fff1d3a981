"""The introductory half's set-ups (issue #76): per setting, its problem
with the points drawn as PINA's tutorials draw them, the network
(PINA's ``FeedForward`` as the tutorials build it, with tutorial 2's fixed
feature or PINA's Fourier embedding), the optimiser, the epochs and the
Trainer's split of the points. ``introductory.py`` runs them."""

import functools

import torch

from benchmarks import harness
from benchmarks.suite import suite_intro_problems


def feedforward(inputs, layers, activation, extra=None):
    """PINA's ``FeedForward`` as the tutorials build it, with an ``extra``
    module whose output columns are appended to the inputs (tutorial 2's
    fixed feature), or in front of it (a Fourier embedding)."""
    from pina import LabelTensor
    from pina.model import FeedForward

    activation = getattr(torch.nn, activation)
    if extra is None:
        return FeedForward(
            input_dimensions=inputs,
            output_dimensions=1,
            layers=layers,
            func=activation,
        )
    module, width, append = extra

    class WithFeature(FeedForward):
        def __init__(self):
            super().__init__(
                input_dimensions=inputs * append + width,
                output_dimensions=1,
                layers=layers,
                func=activation,
            )
            self.extra = module

        def forward(self, x):
            feature = self.extra(x)
            if append:
                return super().forward(x.append(feature))
            plain = torch.Tensor.as_subclass(feature, torch.Tensor)
            return super().forward(
                LabelTensor(plain, [f"f{i}" for i in range(width)])
            )

    return WithFeature()


class SinSin(torch.nn.Module):
    """Tutorial 2's fixed feature :math:`2\\pi^2 \\sin \\pi x \\sin \\pi y`."""

    def forward(self, pts):
        from pina import LabelTensor

        x, y = pts.extract(["x"]), pts.extract(["y"])
        feature = 2 * torch.pi**2 * torch.sin(x * torch.pi)
        return LabelTensor(feature * torch.sin(y * torch.pi), ["feature"])


class Fourier(torch.nn.Module):
    """PINA's ``FourierFeatureEmbedding`` of the input column ``x``: 16
    features of scale ``sigma = 2`` (drawn once, when built)."""

    def __init__(self):
        super().__init__()
        from pina.model.block import FourierFeatureEmbedding

        self.embedding = FourierFeatureEmbedding(1, 16, 2.0)

    def forward(self, pts):
        plain = torch.Tensor.as_subclass(pts.extract(["x"]), torch.Tensor)
        return self.embedding(plain)


def _tutorial_ode():
    from pina import Condition
    from pina.domain import CartesianDomain
    from pina.equation import Equation
    from pina.equation.zoo import FixedValue
    from pina.operator import grad
    from pina.problem import SpatialProblem

    def ode(input_, output_):
        u_x = grad(output_, input_, components=["u"], d=["x"])
        return u_x - output_.extract(["u"])

    class SimpleODE(SpatialProblem):
        output_variables = ["u"]
        spatial_domain = CartesianDomain({"x": [0, 1]})
        domains = {"x0": CartesianDomain({"x": 0.0}), "D": spatial_domain}
        conditions = {
            "bound_cond": Condition(domain="x0", equation=FixedValue(1.0)),
            "phys_cond": Condition(domain="D", equation=Equation(ode)),
        }

        def solution(self, pts):
            return torch.exp(pts.extract(["x"]))

    problem = SimpleODE()
    problem.discretise_domain(1, "random", domains=["x0"])
    problem.discretise_domain(20, "lh", domains=["D"])
    return problem


def _tutorial_poisson():
    from pina.problem.zoo import Poisson2DSquareProblem

    problem = harness.own_problem(Poisson2DSquareProblem)
    problem.discretise_domain(30, "grid", domains=["D"])
    problem.discretise_domain(100, "grid", domains=["boundary"])
    return problem


def _suite_problem(name):
    problem = suite_intro_problems.INTRO_PROBLEMS[name]()
    for domain, count in problem.POINTS.items():
        problem.discretise_domain(count, problem.MODE, domains=[domain])
    return problem


_ADAM_TUTORIAL = ("Adam", {"lr": 0.006, "weight_decay": 1e-8})
_SHUFFLED = dict(train_size=0.8, test_size=0.2, val_size=0.0, shuffle=True)
_ALL = dict(train_size=1.0, test_size=0.0, val_size=0.0)

#: Per setting: the problem (points drawn), the network's inputs, layers,
#: activation and extra module, the optimiser and its options, the epochs
#: and the Trainer's split of the points.
SETUPS = {
    "tutorial_ode": (
        _tutorial_ode,
        1,
        [10, 10],
        "Tanh",
        None,
        ("RAdam", {"lr": 0.005}),
        1500,
        _ALL,
    ),
    "tutorial_poisson": (
        _tutorial_poisson,
        2,
        [10, 10],
        "Softplus",
        None,
        _ADAM_TUTORIAL,
        1000,
        _SHUFFLED,
    ),
    "tutorial_poisson_feature": (
        _tutorial_poisson,
        2,
        [10, 10],
        "Softplus",
        (SinSin, 1, True),
        _ADAM_TUTORIAL,
        1000,
        _SHUFFLED,
    ),
    "oscillator": (
        functools.partial(_suite_problem, "oscillator"),
        1,
        [10, 10],
        "Tanh",
        None,
        ("Adam", {"lr": 0.01}),
        2000,
        _ALL,
    ),
    "riccati": (
        functools.partial(_suite_problem, "riccati"),
        1,
        [10, 10],
        "Tanh",
        None,
        ("Adam", {"lr": 0.01}),
        1500,
        _ALL,
    ),
    "variable_coefficient": (
        functools.partial(_suite_problem, "variable_coefficient"),
        1,
        [10, 10],
        "Tanh",
        None,
        ("Adam", {"lr": 0.01}),
        1000,
        _ALL,
    ),
    "laplace": (
        functools.partial(_suite_problem, "laplace"),
        2,
        [20, 20],
        "Tanh",
        None,
        ("Adam", {"lr": 0.006}),
        1000,
        _ALL,
    ),
    "heat": (
        functools.partial(_suite_problem, "heat"),
        2,
        [20, 20],
        "Tanh",
        None,
        ("Adam", {"lr": 0.005}),
        2000,
        _ALL,
    ),
    "fourier_bvp": (
        functools.partial(_suite_problem, "fourier_bvp"),
        1,
        [16, 16],
        "Tanh",
        (Fourier, 16, False),
        ("Adam", {"lr": 0.005}),
        1000,
        _ALL,
    ),
}


def assemble(setting):
    """``(problem, model, optimizer)`` of a setting of :data:`SETUPS`, built
    in this order (the problem's points drawn first, then the network's
    weights) from the random state the caller seeded."""
    from pina.optim import TorchOptimizer

    make, inputs, layers, activation, extra, optimiser, _, _ = SETUPS[setting]
    problem = make()
    extra = None if extra is None else (extra[0](), *extra[1:])
    model = feedforward(inputs, layers, activation, extra)
    name, options = optimiser
    optimizer = TorchOptimizer(getattr(torch.optim, name), **options)
    return problem, model, optimizer
