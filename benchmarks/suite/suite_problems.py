r"""PINN benchmark problems from the literature, each a PINA problem with an
exact or manufactured solution (``solution(pts)``, as the zoo problems).

- ``stokes``: manufactured from the Taylor–Green vortex (Taylor & Green 1937).
- ``bvp_1d``, ``annulus_robin``: manufactured, as DeepXDE's examples
  (Lu et al. 2021).
- ``poisson_3d``: the method of manufactured solutions (Roache 2002).
- ``multiscale_1d``: Wang, Wang & Perdikaris 2021 (Fourier feature networks).
- ``burgers``: Cole–Hopf (Cole 1951, Hopf 1950; PINN: Raissi et al. 2019).
- ``convection_fast``: Krishnapriyan et al. 2021 (convection failure).
- ``heat_data``, ``heat_inverse``: Raissi et al. 2019 (data and physics;
  data-driven discovery).
- the ``confirmation-2`` half's six (issue #42), from ``elasticity`` on:
  manufactured but ``lshape`` (Strang & Fix 1973's corner singularity).

The ``confirmation-2`` half's six are in ``suite_plane_problems.py``, and
what all share in ``suite_base.py``. Each class has ``POINTS``, the fresh
points per domain condition and step (about 1000 residual entries, with the
100 observations of a ``data`` condition), and ``STATIONARY``; each instance
copies the class's conditions.
"""

import torch
from pina import LabelTensor
from pina.domain import CartesianDomain, Difference, Union
from pina.equation import Equation
from pina.equation.zoo import FixedValue
from pina.operator import div
from pina.problem import InverseProblem, SpatialProblem, TimeDependentProblem

from benchmarks.suite.suite_base import PI, _Benchmark, _cols, _conditions, _d
from benchmarks.suite.suite_base import _disc, _equals, _grid_in, _plain
from benchmarks.suite.suite_plane_problems import AdvectionDiffusionProblem
from benchmarks.suite.suite_plane_problems import ElasticityProblem
from benchmarks.suite.suite_plane_problems import Helmholtz4DProblem
from benchmarks.suite.suite_plane_problems import LShapeProblem
from benchmarks.suite.suite_plane_problems import NeumannCosineProblem
from benchmarks.suite.suite_plane_problems import NonlinearDiskProblem

NU, SHIFT, BETA, KAPPA = 0.05, 1.05, 30.0, 0.1
CUBE = {"x": [0, 1], "y": [0, 1], "z": [0, 1]}


def _stokes_terms(pts):
    """:math:`(u, v, p)`, :math:`(u, v)`, :math:`p`."""
    x, y = _cols(pts, "xy")
    sx, cx, sy, cy = (f(PI * v) for v in (x, y) for f in (torch.sin, torch.cos))
    uv, p = torch.cat([sx * cy, -cx * sy], dim=1), cx * cy
    return torch.cat([uv, p], dim=1), uv, p


def _momentum(i, factor):
    """Equation :math:`-\\Delta u_i + \\partial_i p - f_i`: as
    :math:`\\Delta u_i = -2\\pi^2 u_i` and :math:`\\nabla p = -\\pi (u, -v)`,
    :math:`f_i` is ``factor`` times :math:`u_i`."""

    def residual(input_, output_):
        f = factor * _stokes_terms(input_)[1][:, i : i + 1]
        lap = _d(output_, input_, "xy", order=2, comp="uv"[i])
        return _d(output_, input_, "xy"[i], comp="p") - lap - f

    return Equation(residual)


class StokesProblem(_Benchmark, SpatialProblem):
    r"""Stokes flow :math:`-\Delta \mathbf{u} + \nabla p = \mathbf{f}`,
    :math:`\nabla \cdot \mathbf{u} = 0` on :math:`[0, 1]^2`,
    :math:`(u, v, p) = (\sin\pi x \cos\pi y, -\cos\pi x \sin\pi y, \cos\pi x
    \cos\pi y)`: velocity fixed on the boundary, the pressure (unique up to a
    constant) at the corner :math:`(0, 0)`."""

    output_variables = ["u", "v", "p"]
    spatial_domain = CartesianDomain({"x": [0, 1], "y": [0, 1]})
    domains = dict.fromkeys(
        ["momentum_x", "momentum_y", "continuity"], spatial_domain
    )
    domains["boundary"] = spatial_domain.partial()
    domains["pressure"] = CartesianDomain({"x": 0.0, "y": 0.0})
    conditions = _conditions(
        momentum_x=_momentum(0, 2 * PI**2 - PI),
        momentum_y=_momentum(1, 2 * PI**2 + PI),
        continuity=Equation(
            lambda i, o: _plain(div(o, i, ["u", "v"], ["x", "y"]))
        ),
        boundary=_equals(_stokes_terms, ["u", "v"], index=1),
        pressure=_equals(_stokes_terms, ["p"], index=2),
    )
    terms = staticmethod(_stokes_terms)
    #: ``boundary`` has two residual columns (u, v): 1001 entries in all.
    POINTS = {"momentum_x": 250, "momentum_y": 250, "continuity": 250}
    POINTS.update(boundary=125, pressure=1)


def _interval(sign, terms):
    """Spatial domain, domains and conditions of :math:`\\pm u'' = f` on
    :math:`[0, 1]` (``terms``: :math:`u`, :math:`f`), each Dirichlet end on
    one point (``x`` fixed; PINA draws ``n`` copies of it)."""

    def residual(input_, output_):
        return sign * _d(output_, input_, "x", order=2) - terms(input_)[1]

    ends = {"left": CartesianDomain({"x": 0.0})}
    ends["right"] = CartesianDomain({"x": 1.0})
    domains = {"D": CartesianDomain({"x": [0, 1]}), **ends}
    ends = dict.fromkeys(ends, _equals(terms))
    return domains["D"], domains, _conditions(D=Equation(residual), **ends)


def _bvp_terms(pts, k=1.5 * PI):
    (x,) = _cols(pts, "x")
    sin, cos = torch.sin(k * x), torch.cos(k * x)
    return torch.exp(x) * sin, torch.exp(x) * ((1 - k**2) * sin + 2 * k * cos)


class BVP1DProblem(_Benchmark, SpatialProblem):
    r""":math:`u'' = f` on :math:`[0, 1]`, :math:`u = e^x \sin(3\pi x/2)`
    (:math:`u(0) = 0`, :math:`u(1) = -e`), each Dirichlet end a condition on
    one point."""

    spatial_domain, domains, conditions = _interval(1.0, _bvp_terms)
    terms = staticmethod(_bvp_terms)
    POINTS = {"D": 998, "left": 1, "right": 1}


def _multiscale_terms(pts):
    (x,) = _cols(pts, "x")
    slow, fast = torch.sin(2 * PI * x), torch.sin(50 * PI * x)
    return slow + 0.1 * fast, 4 * PI**2 * slow + 250 * PI**2 * fast


class Multiscale1DProblem(_Benchmark, SpatialProblem):
    r""":math:`-u'' = f` on :math:`[0, 1]`, :math:`u = \sin 2\pi x + 0.1 \sin
    50\pi x`, each Dirichlet end a condition on one point."""

    spatial_domain, domains, conditions = _interval(-1.0, _multiscale_terms)
    terms = staticmethod(_multiscale_terms)
    POINTS = {"D": 998, "left": 1, "right": 1}


class Annulus(Difference):
    """PINA's :class:`Difference` of concentric :class:`EllipsoidDomain` discs
    of radii ``inner`` and ``outer``, its rejection sampling vectorised (PINA
    tests the points one by one: about 1 s for 600, too slow to draw at every
    step), its ``range`` the bounding box, as a :class:`CartesianDomain`'s."""

    def __init__(self, inner, outer):
        self.radii = (inner, outer)
        super().__init__([_disc(outer), _disc(inner)])

    range = property(lambda self: self.geometries[0].range)

    def sample(self, n, mode="random", variables="all"):
        """``n`` uniform random points of the annulus (``mode``: ``"random"``,
        the only mode)."""
        variables = self._validate_sampling(n, mode, variables)
        kept, found = [], 0
        while found < n:
            pts = self.geometries[0].sample(2 * n, mode)
            x, y = _cols(pts, "xy")
            kept.append(pts[(x**2 + y**2 >= self.radii[0] ** 2).flatten()])
            found += len(kept[-1])
        return LabelTensor.cat(kept, dim=0)[:n][variables]


def _annulus_terms(pts):
    """:math:`u = \\sin\\pi x \\cos\\pi y + x^2`, :math:`-\\Delta u` and
    :math:`g = \\partial u/\\partial n + u` on the inner circle, with its
    normal :math:`-(x, y)/r` (out of the annulus, to the origin)."""
    x, y = _cols(pts, "xy")
    u = torch.sin(PI * x) * torch.cos(PI * y) + x**2
    u_x = PI * torch.cos(PI * x) * torch.cos(PI * y) + 2 * x
    u_y = -PI * torch.sin(PI * x) * torch.sin(PI * y)
    g = u - (x * u_x + y * u_y) / torch.sqrt(x**2 + y**2)
    return u, 2 * PI**2 * torch.sin(PI * x) * torch.cos(PI * y) - 2, g


def robin(normal_sign):
    """Equation :math:`\\partial u/\\partial n + u - g`, the normal
    ``normal_sign * (x, y) / r`` (``-1`` on the annulus's inner circle)."""

    def residual(input_, output_):
        x, y = _cols(input_, "xy")
        dn = x * _d(output_, input_, "x") + y * _d(output_, input_, "y")
        dn = normal_sign * dn / torch.sqrt(x**2 + y**2)
        return dn + _plain(output_) - _annulus_terms(input_)[2]

    return Equation(residual)


class AnnulusRobinProblem(_Benchmark, SpatialProblem):
    r""":math:`-\Delta u = f` on the annulus :math:`0.5 \le r \le 1`,
    :math:`u = \sin\pi x \cos\pi y + x^2`: Dirichlet on the outer circle,
    Robin :math:`\partial u/\partial n + u = g` on the inner one."""

    spatial_domain = Annulus(0.5, 1.0)
    domains = {"D": spatial_domain, "outer": _disc(1.0, surface=True)}
    domains["inner"] = _disc(0.5, surface=True)
    conditions = _conditions(
        D=Equation(lambda i, o: -_d(o, i, "xy", 2) - _annulus_terms(i)[1]),
        outer=_equals(_annulus_terms),
        inner=robin(-1.0),
    )
    terms = staticmethod(_annulus_terms)
    POINTS = {"D": 700, "outer": 200, "inner": 100}
    evaluation_points = _grid_in(
        lambda x, y: (x**2 + y**2 >= 0.5**2) & (x**2 + y**2 <= 1.0**2)
    )


def _cube_terms(pts):
    """:math:`u = \\sin\\pi x \\sin\\pi y \\sin\\pi z + x y z^2`,
    :math:`-\\Delta u`, :math:`\\partial u/\\partial z`."""
    x, y, z = _cols(pts, "xyz")
    sxy = torch.sin(PI * x) * torch.sin(PI * y)
    u = sxy * torch.sin(PI * z) + x * y * z**2
    f = 3 * PI**2 * sxy * torch.sin(PI * z) - 2 * x * y
    return u, f, PI * sxy * torch.cos(PI * z) + 2 * x * y * z


class Poisson3DProblem(_Benchmark, SpatialProblem):
    r""":math:`-\Delta u = f` on :math:`[0, 1]^3`, the non-separable
    :math:`u = \sin\pi x \sin\pi y \sin\pi z + x y z^2`: Dirichlet on five
    faces, Neumann :math:`\partial u/\partial z = g` on :math:`z = 1`."""

    spatial_domain = CartesianDomain(CUBE)
    faces = [CartesianDomain(CUBE | {v: s}) for v in CUBE for s in (0, 1)]
    domains = {"D": spatial_domain, "dirichlet": Union(faces[:-1])}
    domains["neumann"] = faces[-1]  # z = 1
    conditions = _conditions(
        D=Equation(lambda i, o: -_d(o, i, "xyz", 2) - _cube_terms(i)[1]),
        dirichlet=_equals(_cube_terms),
        neumann=Equation(lambda i, o: _d(o, i, "z") - _cube_terms(i)[2]),
    )
    terms = staticmethod(_cube_terms)
    POINTS = {"D": 700, "dirichlet": 250, "neumann": 50}


def _space_time(space, initial=True):
    """Domains ``D``, ``boundary`` (of space) and ``t0``, for t in [0, 1]."""
    time = CartesianDomain({"t": [0, 1]})
    domains = {"D": space.update(time)}
    domains["boundary"] = space.partial().update(time)
    if initial:
        domains["t0"] = space.update(CartesianDomain({"t": 0.0}))
    return domains


def _burgers_terms(pts):
    x, t = _cols(pts, "xt")
    decay = torch.exp(-NU * PI**2 * t)
    phi = SHIFT + decay * torch.cos(PI * x)
    return (2 * NU * PI * decay * torch.sin(PI * x) / phi,)


def burgers(nu):
    """Equation :math:`u_t + u u_x - \\nu u_{xx}` of viscosity ``nu``."""

    def residual(input_, output_):
        u, u_x = _plain(output_), _d(output_, input_, "x")
        u_xx = _d(output_, input_, "x", order=2)
        return _d(output_, input_, "t") + u * u_x - nu * u_xx

    return Equation(residual)


class BurgersProblem(_Benchmark, SpatialProblem, TimeDependentProblem):
    r"""Viscous Burgers :math:`u_t + u u_x = \nu u_{xx}`, :math:`\nu = 0.05`, on
    :math:`[0, 2] \times [0, 1]`, the Cole–Hopf solution :math:`u = -2\nu
    \phi_x/\phi`, :math:`\phi = 1.05 + e^{-\nu\pi^2 t} \cos\pi x` (at
    :math:`t = 0` a front of width about 0.1 at :math:`x = 1`), zero at
    :math:`x = 0, 2`.
    """

    spatial_domain = CartesianDomain({"x": [0, 2]})
    temporal_domain = CartesianDomain({"t": [0, 1]})
    domains = _space_time(spatial_domain)
    conditions = _conditions(
        D=burgers(NU), t0=_equals(_burgers_terms), boundary=FixedValue(0.0)
    )
    terms = staticmethod(_burgers_terms)
    POINTS = {"D": 700, "t0": 150, "boundary": 150}


def _convection_terms(pts):
    x, t = _cols(pts, "xt")
    return (torch.sin(x - BETA * t),)


class ConvectionProblem(_Benchmark, SpatialProblem, TimeDependentProblem):
    r""":math:`u_t + \beta u_x = 0`, :math:`\beta = 30`, on :math:`[0, 2\pi]
    \times [0, 1]`, :math:`u = \sin(x - \beta t)`. The periodic boundary
    :math:`u(0, t) = u(2\pi, t)` needs the network at two inputs, which
    PINA's ``Equation(input_, output_)`` does not have: the boundary is
    Dirichlet with the exact values at :math:`x = 0, 2\pi` instead."""

    spatial_domain = CartesianDomain({"x": [0, 2 * PI]})
    temporal_domain = CartesianDomain({"t": [0, 1]})
    domains = _space_time(spatial_domain)
    conditions = _conditions(
        D=Equation(lambda i, o: _d(o, i, "t") + BETA * _d(o, i, "x")),
        t0=_equals(_convection_terms),
        boundary=_equals(_convection_terms),
    )
    terms = staticmethod(_convection_terms)
    POINTS = {"D": 700, "t0": 200, "boundary": 100}


def _heat_terms(pts):
    x, t = _cols(pts, "xt")
    decay = torch.exp(-KAPPA * PI**2 * t)
    return (decay * torch.sin(PI * x) + 0.5 * decay**4 * torch.sin(2 * PI * x),)


def _heat(input_, output_, params_):
    """Equation :math:`u_t - \\kappa u_{xx}`, :math:`\\kappa` the unknown
    parameter of ``params_`` (``None``: ``KAPPA``)."""
    kappa = KAPPA if params_ is None else params_["kappa"]
    return _d(output_, input_, "t") - kappa * _d(output_, input_, "x", order=2)


class _Heat(_Benchmark, SpatialProblem, TimeDependentProblem):
    """What the two heat problems share."""

    spatial_domain = CartesianDomain({"x": [0, 1]})
    temporal_domain = CartesianDomain({"t": [0, 1]})
    terms = staticmethod(_heat_terms)
    OBSERVED = 100


class HeatDataProblem(_Heat):
    r""":math:`u_t = \kappa u_{xx}`, :math:`\kappa = 0.1`, on :math:`[0, 1]^2`,
    :math:`u = e^{-\kappa\pi^2 t} \sin\pi x + \frac12 e^{-4\kappa\pi^2 t}
    \sin 2\pi x`, zero ends and, instead of an initial condition, 100 fixed
    observations of the solution (``data``)."""

    domains = _space_time(_Heat.spatial_domain, initial=False)
    conditions = _conditions(D=Equation(_heat), boundary=FixedValue(0.0))
    POINTS = {"D": 800, "boundary": 100}  # and 100 in data


class HeatInverseProblem(_Heat, InverseProblem):
    r"""The heat problem of :class:`HeatDataProblem` with the diffusivity
    :math:`\kappa \in [0.01, 1]` unknown (true 0.1), learnt from 100
    noise-free observations (``data``), the equation, zero ends and the
    initial values."""

    unknown_parameter_domain = CartesianDomain({"kappa": [0.01, 1]})
    TRUE_PARAMETERS = {"kappa": KAPPA}
    domains = _space_time(_Heat.spatial_domain)
    conditions = _conditions(
        D=Equation(_heat), boundary=FixedValue(0.0), t0=_equals(_heat_terms)
    )
    POINTS = {"D": 600, "boundary": 100, "t0": 200}  # and 100 in data


SUITE_PROBLEMS = {
    "stokes": StokesProblem,
    "bvp_1d": BVP1DProblem,
    "annulus_robin": AnnulusRobinProblem,
    "poisson_3d": Poisson3DProblem,
    "multiscale_1d": Multiscale1DProblem,
    "burgers": BurgersProblem,
    "convection_fast": ConvectionProblem,
    "heat_data": HeatDataProblem,
    "heat_inverse": HeatInverseProblem,
    # the confirmation-2 half (issue #42)
    "elasticity": ElasticityProblem,
    "nonlinear_disk": NonlinearDiskProblem,
    "lshape": LShapeProblem,
    "advection_diffusion": AdvectionDiffusionProblem,
    "neumann_cosine": NeumannCosineProblem,
    "helmholtz_4d": Helmholtz4DProblem,
}
