r"""The introductory half's problems (issue #76): small problems in the style
of PINA's tutorials, which a small network solves or nearly solves without
any weighting. None is one of PINA's tutorial problems; the two tutorials
the half also holds (``tutorial_ode``, ``tutorial_poisson`` and its network
with the extra feature) are set up in ``introductory.py``.

- ``oscillator``: :math:`u'' + \pi^2 u = 0`, :math:`u(0) = 1`,
  :math:`u'(0) = 0` (a second-order ODE, two initial conditions).
- ``riccati``: :math:`u' = -u^2`, :math:`u(0) = 1` (a nonlinear ODE).
- ``variable_coefficient``: :math:`-((1 + x) u')' = f` on :math:`[0, 1]`,
  Dirichlet at both ends (1-D elliptic).
- ``laplace``: :math:`\Delta u = 0` on the unit square, the data on the
  boundary (2-D elliptic, no source).
- ``heat``: :math:`u_t = u_{xx} / \pi^2` (time-dependent).
- ``fourier_bvp``: :math:`-u'' = f` with two frequencies, for a network with
  PINA's Fourier feature embedding (``introductory.py``).

Each has its exact solution (``solution(pts)``, the first of ``terms``),
``POINTS`` (per condition, drawn once as the tutorials draw them: ``MODE``)
and ``STATIONARY``; each instance copies the class's conditions.
"""

import math

import torch
from pina.domain import CartesianDomain
from pina.equation import Equation
from pina.equation.zoo import FixedGradient, FixedValue
from pina import Condition
from pina.problem import SpatialProblem, TimeDependentProblem

from benchmarks.suite.suite_base import PI, _Benchmark, _cols, _d, _equals
from benchmarks.suite.suite_base import _plain


def _oscillator_terms(pts):
    (x,) = _cols(pts, "x")
    return (torch.cos(PI * x),)


class OscillatorProblem(_Benchmark, SpatialProblem):
    r""":math:`u'' + \pi^2 u = 0` on :math:`[0, 1]`, :math:`u(0) = 1`,
    :math:`u'(0) = 0`: :math:`u = \cos \pi x`."""

    spatial_domain = CartesianDomain({"x": [0, 1]})
    domains = {
        "D": spatial_domain,
        "x0": CartesianDomain({"x": 0.0}),
        "slope": CartesianDomain({"x": 0.0}),
    }
    conditions = {
        "D": Condition(
            domain="D",
            equation=Equation(
                lambda i, o: _d(o, i, "x", order=2) + PI**2 * _plain(o)
            ),
        ),
        "x0": Condition(domain="x0", equation=FixedValue(1.0)),
        "slope": Condition(domain="slope", equation=FixedGradient(0.0)),
    }
    terms = staticmethod(_oscillator_terms)
    POINTS = {"D": 30, "x0": 1, "slope": 1}
    MODE = "lh"


def _riccati_terms(pts):
    (x,) = _cols(pts, "x")
    return (1.0 / (1.0 + x),)


class RiccatiProblem(_Benchmark, SpatialProblem):
    r""":math:`u' = -u^2` on :math:`[0, 2]`, :math:`u(0) = 1`:
    :math:`u = 1 / (1 + x)`."""

    spatial_domain = CartesianDomain({"x": [0, 2]})
    domains = {"D": spatial_domain, "x0": CartesianDomain({"x": 0.0})}
    conditions = {
        "D": Condition(
            domain="D",
            equation=Equation(lambda i, o: _d(o, i, "x") + _plain(o) ** 2),
        ),
        "x0": Condition(domain="x0", equation=FixedValue(1.0)),
    }
    terms = staticmethod(_riccati_terms)
    POINTS = {"D": 30, "x0": 1}
    MODE = "lh"


def _variable_terms(pts):
    (x,) = _cols(pts, "x")
    u = torch.sin(PI * x)
    # f = -((1 + x) u')' = -u' - (1 + x) u''
    f = -PI * torch.cos(PI * x) + (1 + x) * PI**2 * u
    return u, f


def _variable_residual(input_, output_):
    (x,) = _cols(input_, "x")
    # ((1 + x) u')' by the product rule
    flux_derivative = (1 + x) * _d(output_, input_, "x", order=2)
    flux_derivative = flux_derivative + _d(output_, input_, "x")
    return -flux_derivative - _variable_terms(input_)[1]


class VariableCoefficientProblem(_Benchmark, SpatialProblem):
    r""":math:`-((1 + x) u')' = f` on :math:`[0, 1]`, :math:`u(0) = u(1)
    = 0`, :math:`u = \sin \pi x`."""

    spatial_domain = CartesianDomain({"x": [0, 1]})
    domains = {
        "D": spatial_domain,
        "left": CartesianDomain({"x": 0.0}),
        "right": CartesianDomain({"x": 1.0}),
    }
    conditions = {
        "D": Condition(domain="D", equation=Equation(_variable_residual)),
        "left": Condition(domain="left", equation=FixedValue(0.0)),
        "right": Condition(domain="right", equation=FixedValue(0.0)),
    }
    terms = staticmethod(_variable_terms)
    POINTS = {"D": 50, "left": 1, "right": 1}
    MODE = "grid"


def _laplace_terms(pts):
    x, y = _cols(pts, "xy")
    return (torch.sin(PI * x) * torch.sinh(PI * y) / math.sinh(math.pi),)


class LaplaceProblem(_Benchmark, SpatialProblem):
    r""":math:`\Delta u = 0` on :math:`[0, 1]^2`, :math:`u = \sin \pi x
    \sinh \pi y / \sinh \pi` on the boundary (zero but on the top side)."""

    spatial_domain = CartesianDomain({"x": [0, 1], "y": [0, 1]})
    domains = {"D": spatial_domain, "boundary": spatial_domain.partial()}
    conditions = {
        "D": Condition(
            domain="D",
            equation=Equation(lambda i, o: _d(o, i, "xy", order=2)),
        ),
        "boundary": Condition(
            domain="boundary", equation=_equals(_laplace_terms)
        ),
    }
    terms = staticmethod(_laplace_terms)
    POINTS = {"D": 400, "boundary": 80}
    MODE = "random"


def _heat_terms(pts):
    x, t = _cols(pts, "xt")
    return (torch.exp(-t) * torch.sin(PI * x),)


class HeatProblem(_Benchmark, TimeDependentProblem, SpatialProblem):
    r""":math:`u_t = u_{xx} / \pi^2` on :math:`[0, 1] \times [0, 1]`,
    :math:`u = 0` at :math:`x = 0, 1`, :math:`u(x, 0) = \sin \pi x`:
    :math:`u = e^{-t} \sin \pi x`."""

    spatial_domain = CartesianDomain({"x": [0, 1]})
    temporal_domain = CartesianDomain({"t": [0, 1]})
    domains = {
        "D": CartesianDomain({"x": [0, 1], "t": [0, 1]}),
        "t0": CartesianDomain({"x": [0, 1], "t": 0.0}),
        "left": CartesianDomain({"x": 0.0, "t": [0, 1]}),
        "right": CartesianDomain({"x": 1.0, "t": [0, 1]}),
    }
    conditions = {
        "D": Condition(
            domain="D",
            equation=Equation(
                lambda i, o: _d(o, i, "t") - _d(o, i, "x", order=2) / PI**2
            ),
        ),
        "t0": Condition(domain="t0", equation=_equals(_heat_terms)),
        "left": Condition(domain="left", equation=FixedValue(0.0)),
        "right": Condition(domain="right", equation=FixedValue(0.0)),
    }
    terms = staticmethod(_heat_terms)
    POINTS = {"D": 300, "t0": 40, "left": 20, "right": 20}
    MODE = "lh"


def _fourier_terms(pts):
    (x,) = _cols(pts, "x")
    slow, fast = torch.sin(PI * x), torch.sin(4 * PI * x)
    return slow + 0.5 * fast, PI**2 * slow + 8 * PI**2 * fast


class FourierBVPProblem(_Benchmark, SpatialProblem):
    r""":math:`-u'' = f` on :math:`[0, 1]`, :math:`u(0) = u(1) = 0`,
    :math:`u = \sin \pi x + 0.5 \sin 4 \pi x`."""

    spatial_domain = CartesianDomain({"x": [0, 1]})
    domains = {
        "D": spatial_domain,
        "left": CartesianDomain({"x": 0.0}),
        "right": CartesianDomain({"x": 1.0}),
    }
    conditions = {
        "D": Condition(
            domain="D",
            equation=Equation(
                lambda i, o: -_d(o, i, "x", order=2) - _fourier_terms(i)[1]
            ),
        ),
        "left": Condition(domain="left", equation=FixedValue(0.0)),
        "right": Condition(domain="right", equation=FixedValue(0.0)),
    }
    terms = staticmethod(_fourier_terms)
    POINTS = {"D": 100, "left": 1, "right": 1}
    MODE = "grid"


#: The introductory half's problems by setting.
INTRO_PROBLEMS = {
    "oscillator": OscillatorProblem,
    "riccati": RiccatiProblem,
    "variable_coefficient": VariableCoefficientProblem,
    "laplace": LaplaceProblem,
    "heat": HeatProblem,
    "fourier_bvp": FourierBVPProblem,
}
