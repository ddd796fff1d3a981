r"""Two more inverse settings, committed before any run on them: PINA
``InverseProblem`` classes whose unknowns the runs identify, each scored on
its solution (``solution(pts)``) and on its parameter error
(``inverse_measures.py``).

- ``poisson_source``: PINA's inverse-problem tutorial (tutorial 7): the
  centre :math:`(\mu_1, \mu_2)` of a Gaussian source of Poisson's equation,
  from observations of :math:`u` on a grid. The solution has no closed
  form: a second-order finite-difference solve stands for it
  (:func:`reference`).
- ``wave_speed``: the speed :math:`c` of the 1-D wave equation, a
  coefficient of a time-dependent problem, with a closed-form solution.

They are not in :data:`suite_problems.SUITE_PROBLEMS`, the registry of the
split's settings (``suite-split.toml``), whose tests hold each problem to
about 1000 residual entries per step: the tutorial's 2500 observations
exceed it. :data:`INVERSE_PROBLEMS` is their registry, and
:data:`INVERSE_SETTINGS` gives each the network and points the runner
trains it with, as the split's entries do.
"""

import functools
import math

import numpy as np
import torch
from pina import Condition, LabelTensor
from pina.domain import CartesianDomain
from pina.equation import Equation
from pina.equation.zoo import FixedValue
from pina.problem import InverseProblem, SpatialProblem, TimeDependentProblem

from benchmarks.suite.suite_base import PI, _Benchmark, _cols, _conditions, _d
from benchmarks.suite.suite_base import _plain
from benchmarks.suite.suite_problems import _space_time

#: ``poisson_source``: the square's half side, the true source centre and
#: the finite-difference grid's points per side.
HALF_SIDE, MU, FD_POINTS = 2.0, (0.5, 0.5), 201
#: ``wave_speed``: the true speed.
SPEED = 1.5


def _source(x, y, mu1, mu2, exp=np.exp):
    """The tutorial's source :math:`e^{-2(x - \\mu_1)^2 - 2(y - \\mu_2)^2}`
    (``exp``: numpy's or torch's)."""
    return exp(-2 * (x - mu1) ** 2 - 2 * (y - mu2) ** 2)


@functools.lru_cache(maxsize=4)
def reference(n=FD_POINTS):
    """:math:`u` with :math:`\\Delta u = f` (the true source) on
    :math:`[-2, 2]^2` and :math:`u = 0` on the boundary, by the 5-point
    Laplacian on an ``n`` x ``n`` grid (second order), computed once per
    ``n`` and process.

    :return: ``(axis, u)``: the grid's ``n`` coordinates per side and the
        ``(n, n)`` values, ``u[i, j]`` at ``(axis[i], axis[j])``, both
        read-only (they are cached).
    """
    # scipy only here: importing the suite's problems does not need it
    import scipy.sparse
    import scipy.sparse.linalg

    axis = np.linspace(-HALF_SIDE, HALF_SIDE, n)
    h, inner = axis[1] - axis[0], n - 2
    second = scipy.sparse.diags([1.0, -2.0, 1.0], [-1, 0, 1], (inner, inner))
    eye = scipy.sparse.identity(inner)
    laplacian = scipy.sparse.kron(second, eye) + scipy.sparse.kron(eye, second)
    x, y = np.meshgrid(axis[1:-1], axis[1:-1], indexing="ij")
    rhs = h**2 * _source(x, y, *MU).ravel()
    u = np.zeros((n, n))
    inside = scipy.sparse.linalg.spsolve(laplacian.tocsc(), rhs)
    u[1:-1, 1:-1] = inside.reshape(inner, inner)
    axis.setflags(write=False)
    u.setflags(write=False)
    return axis, u


@functools.lru_cache(maxsize=1)
def _interpolator():
    """Bilinear interpolation of :func:`reference` on its grid."""
    from scipy.interpolate import RegularGridInterpolator

    axis, u = reference()
    return RegularGridInterpolator((axis, axis), u, method="linear")


def _poisson_source(input_, output_, params_):
    """Equation :math:`\\Delta u - f`, the source centred at the unknowns
    ``mu1``, ``mu2`` of ``params_`` (``None``: the true centre)."""
    mu = MU if params_ is None else (params_["mu1"], params_["mu2"])
    x, y = _cols(input_, "xy")
    force = _source(x, y, *mu, exp=torch.exp)
    return _d(output_, input_, "xy", order=2) - force


class PoissonSourceProblem(_Benchmark, SpatialProblem, InverseProblem):
    r"""PINA's inverse-problem tutorial: :math:`\Delta u = e^{-2(x -
    \mu_1)^2 - 2(y - \mu_2)^2}` on :math:`[-2, 2]^2`, :math:`u = 0` on the
    boundary, the source's centre :math:`(\mu_1, \mu_2) \in [-1, 1]^2`
    unknown (true :math:`(0.5, 0.5)`), learnt from the equation, the
    boundary and :math:`u` observed on a 50 x 50 grid of the square,
    boundary included (``data``). The solution is the finite-difference
    :func:`reference`, interpolated bilinearly."""

    spatial_domain = CartesianDomain(
        {"x": [-HALF_SIDE, HALF_SIDE], "y": [-HALF_SIDE, HALF_SIDE]}
    )
    unknown_parameter_domain = CartesianDomain({"mu1": [-1, 1], "mu2": [-1, 1]})
    TRUE_PARAMETERS = {"mu1": MU[0], "mu2": MU[1]}
    domains = {"D": spatial_domain, "boundary": spatial_domain.partial()}
    conditions = _conditions(
        D=Equation(_poisson_source), boundary=FixedValue(0.0)
    )
    #: The tutorial's counts: 400 interior points (it takes a 20 x 20 grid;
    #: the runner draws them at random, once) and 1000 random boundary
    #: points, beside the 2500 observations.
    POINTS = {"D": 400, "boundary": 1000}
    OBSERVED = 50**2

    def solution(self, pts):
        """The reference at ``pts``, interpolated bilinearly (not
        differentiable: for scoring and observations only), in ``pts``'s
        dtype, labelled ``u``."""
        xy = torch.cat(_cols(pts, "xy"), 1).detach().cpu().double().numpy()
        values = torch.as_tensor(_interpolator()(xy))
        values = values.to(pts.dtype).reshape(-1, 1)
        return LabelTensor(values, self.output_variables)

    def observations(self, n, seed=0):
        """``Condition(input=..., target=...)``: the solution on the
        ``sqrt(n)`` x ``sqrt(n)`` grid of the square, boundary included
        (the tutorial's 50 x 50 for :data:`OBSERVED`); ``seed`` is unused:
        the grid is the same every call."""
        side = math.isqrt(n)
        axis = torch.linspace(-HALF_SIDE, HALF_SIDE, side)
        pts = LabelTensor(torch.cartesian_prod(axis, axis), ["x", "y"])
        return Condition(input=pts, target=self.solution(pts))


def _wave_terms(pts, speed=SPEED):
    """:math:`u = \\sin\\pi x \\cos c\\pi t` at speed ``speed``."""
    x, t = _cols(pts, "xt")
    return (torch.sin(PI * x) * torch.cos(speed * PI * t),)


def _wave(input_, output_, params_):
    """Equation :math:`u_{tt} - c^2 u_{xx}`, :math:`c` the unknown ``c`` of
    ``params_`` (``None``: the true speed)."""
    speed = SPEED if params_ is None else params_["c"]
    u_tt = _d(output_, input_, "t", order=2)
    return u_tt - speed**2 * _d(output_, input_, "x", order=2)


def _at_rest(input_, output_):
    """Equation of the initial condition, two columns: :math:`u - \\sin\\pi
    x` and :math:`u_t` (released from rest)."""
    (x,) = _cols(input_, "x")
    value = _plain(output_) - torch.sin(PI * x)
    return torch.cat([value, _d(output_, input_, "t")], dim=1)


class WaveSpeedProblem(
    _Benchmark, SpatialProblem, TimeDependentProblem, InverseProblem
):
    r""":math:`u_{tt} = c^2 u_{xx}` on :math:`[0, 1]^2`, :math:`u = 0` at
    :math:`x = 0, 1`, :math:`u(x, 0) = \sin\pi x`, :math:`u_t(x, 0) = 0`,
    :math:`u = \sin\pi x \cos c\pi t`, the speed :math:`c \in [0.5, 3]`
    unknown (true 1.5), learnt from the equation, the conditions and 100
    noise-free observations at seeded random points (``data``)."""

    spatial_domain = CartesianDomain({"x": [0, 1]})
    temporal_domain = CartesianDomain({"t": [0, 1]})
    unknown_parameter_domain = CartesianDomain({"c": [0.5, 3]})
    TRUE_PARAMETERS = {"c": SPEED}
    domains = _space_time(spatial_domain)
    conditions = _conditions(
        D=Equation(_wave), boundary=FixedValue(0.0), t0=Equation(_at_rest)
    )
    terms = staticmethod(_wave_terms)
    OBSERVED = 100
    #: ``t0`` has two residual columns: 1000 entries with the observations.
    POINTS = {"D": 500, "boundary": 100, "t0": 150}


INVERSE_PROBLEMS = {
    "poisson_source": PoissonSourceProblem,
    "wave_speed": WaveSpeedProblem,
}
#: How the runner trains each, as the split's entries (``suite-split.toml``):
#: the input-scaled tanh MLP, the points drawn once (as the tutorial's, and
#: as ``heat_inverse``'s).
INVERSE_SETTINGS = [
    dict(
        setting=name,
        stationary=cls.STATIONARY,
        network="benchmark",
        points="fixed",
    )
    for name, cls in INVERSE_PROBLEMS.items()
]
