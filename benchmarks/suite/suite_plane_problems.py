r"""The suite's problems of the ``confirmation-2`` half (issue #42), each
stationary in ``u`` on the unit square but where not: ``elasticity``,
``nonlinear_disk``, ``advection_diffusion``, ``neumann_cosine`` and
``helmholtz_4d`` manufactured, ``lshape`` Strang & Fix 1973's corner
singularity. Registered with the others in ``suite_problems.py``."""

import math

import torch
from pina import LabelTensor
from pina.domain import CartesianDomain, Union
from pina.equation import Equation
from pina.equation.zoo import FixedValue
from pina.problem import SpatialProblem

from benchmarks.suite.suite_base import PI, _Benchmark, _cols, _conditions, _d
from benchmarks.suite.suite_base import _disc, _equals, _grid_in, _plain

LAME, EPS, K2 = (2.0, 1.0), 0.1, 6 * PI**2
UNIT, BOX_4D = {"x": [0, 1], "y": [0, 1]}, dict.fromkeys("xyzw", [0, 1])


class _Plane(_Benchmark, SpatialProblem):
    """A stationary problem of ``u`` on the unit square but where not."""

    spatial_domain = CartesianDomain(UNIT)
    domains = {"D": spatial_domain, "boundary": spatial_domain.partial()}


def _navier(pts, lam=LAME[0], mu=LAME[1]):
    """:math:`(u, v)`, the force, the traction on :math:`y = 1`."""
    x, y = _cols(pts, "xy")
    sx, cx, sy, cy = (f(PI * v) for v in (x, y) for f in (torch.sin, torch.cos))
    u, v, div = sx * sy, y**2 * sx, PI * cx * sy + 2 * y * sx
    div_x, div_y = 2 * PI * y * cx - PI**2 * u, PI**2 * cx * cy + 2 * sx
    f_x = 2 * mu * PI**2 * u - (lam + mu) * div_x
    f_y = mu * (PI**2 * y**2 - 2) * sx - (lam + mu) * div_y
    shear, normal = mu * PI * (sx * cy + y**2 * cx), lam * div + 4 * mu * y * sx
    return [torch.cat(p, 1) for p in ((u, v), (f_x, f_y), (shear, normal))]


def _stress(i, o, lam=LAME[0], mu=LAME[1]):
    """:math:`\\sigma_{xx}, \\sigma_{xy}, \\sigma_{yy}` of the network."""
    (u_x, u_y), (v_x, v_y) = ([_d(o, i, d, comp=c) for d in "xy"] for c in "uv")
    div, shear = lam * (u_x + v_y), mu * (u_y + v_x)
    stress = [div + 2 * mu * u_x, shear, div + 2 * mu * v_y]
    return LabelTensor(torch.cat(stress, 1), ["xx", "xy", "yy"])


def _balance(i, o):
    """:math:`\\nabla \\cdot \\sigma + \\mathbf{f}`, two columns."""
    s, rows = _stress(i, o), (("xx", "xy"), ("xy", "yy"))
    div = [_d(s, i, "x", comp=a) + _d(s, i, "y", comp=b) for a, b in rows]
    return torch.cat(div, 1) + _navier(i)[1]


class ElasticityProblem(_Plane):
    r"""Linear elasticity :math:`\nabla \cdot \sigma + \mathbf{f} = 0`,
    :math:`\lambda = 2, \mu = 1`, :math:`(u, v) = (\sin\pi x \sin\pi y, y^2
    \sin\pi x)`: clamped on three sides, the traction on :math:`y = 1`."""

    output_variables = ["u", "v"]
    sides = [CartesianDomain(UNIT | {v: s}) for v in UNIT for s in (0, 1)]
    domains = {"D": _Plane.spatial_domain, "clamped": Union(sides[:3])}
    domains["traction"] = sides[3]  # y = 1
    conditions = _conditions(
        D=Equation(_balance),
        clamped=_equals(_navier),
        traction=Equation(
            lambda i, o: _plain(_stress(i, o))[:, 1:] - _navier(i)[2]
        ),
    )
    terms = staticmethod(_navier)
    POINTS = {"D": 400, "clamped": 75, "traction": 25}  # two columns each


def _nonlinear_terms(pts):
    """:math:`u`, :math:`f = 2\\pi^2 (1 + u^2) u - 2 u |\\nabla u|^2`."""
    x, y = _cols(pts, "xy")
    sx, cx, sy, cy = (f(PI * v) for v in (x, y) for f in (torch.sin, torch.cos))
    u, grad2 = sx * sy, PI**2 * ((cx * sy) ** 2 + (sx * cy) ** 2)
    return u, 2 * PI**2 * (1 + u**2) * u - 2 * u * grad2


def _quasilinear(i, o):
    u, (u_x, u_y) = _plain(o), (_d(o, i, v) for v in "xy")
    flux = (1 + u**2) * _d(o, i, "xy", 2) + 2 * u * (u_x**2 + u_y**2)
    return -flux - _nonlinear_terms(i)[1]


class NonlinearDiskProblem(_Plane):
    r"""Quasi-linear :math:`-\nabla \cdot ((1 + u^2) \nabla u) = f` on the
    unit disc, :math:`u = \sin\pi x \sin\pi y`, Dirichlet on the circle."""

    spatial_domain = _disc(1.0)
    domains = {"D": spatial_domain, "boundary": _disc(1.0, surface=True)}
    conditions = _conditions(
        D=Equation(_quasilinear), boundary=_equals(_nonlinear_terms)
    )
    terms = staticmethod(_nonlinear_terms)
    POINTS = {"D": 800, "boundary": 200}
    evaluation_points = _grid_in(lambda x, y: x**2 + y**2 <= 1)


class LShape(Union):
    """A :class:`Union` with ``range`` the box :math:`[-1, 1]^2`."""

    range = property(lambda self: {"x": (-1, 1), "y": (-1, 1)})


def _square(a, b, **fixed):
    return CartesianDomain({"x": [a, a + 1], "y": [b, b + 1]} | fixed)


def _corner_terms(pts):
    """:math:`u`, :math:`\\theta \\in [0, 3\\pi/2]` from the edge :math:`y =
    0, x > 0`: zero on both edges at the re-entrant corner."""
    x, y = _cols(pts, "xy")
    theta = torch.atan2(y, x)
    theta = torch.where(theta < 0, theta + 2 * PI, theta)
    return ((x**2 + y**2) ** (1 / 3) * torch.sin(2 * theta / 3),)


class LShapeProblem(_Plane):
    r"""Laplace :math:`\Delta u = 0` on the L :math:`[-1, 1]^2 \setminus (0,
    1] \times [-1, 0)`, :math:`u = r^{2/3} \sin(2\theta/3)`, Dirichlet on its
    eight sides; PINA's :class:`Union` draws as many points from each part."""

    spatial_domain = LShape([_square(-1, -1), _square(-1, 0), _square(0, 0)])
    sides = [(-1, -1, "x", -1), (-1, -1, "y", -1), (-1, -1, "x", 0)]
    sides += [(-1, 0, "x", -1), (-1, 0, "y", 1), (0, 0, "y", 1), (0, 0, "x", 1)]
    sides = [_square(a, b, **{v: w}) for a, b, v, w in sides + [(0, 0, "y", 0)]]
    domains = {"D": spatial_domain, "boundary": Union(sides)}
    conditions = _conditions(
        D=Equation(lambda i, o: _d(o, i, "xy", 2)),
        boundary=_equals(_corner_terms),
    )
    terms = staticmethod(_corner_terms)
    POINTS = {"D": 750, "boundary": 250}
    evaluation_points = _grid_in(lambda x, y: (x <= 0) | (y >= 0))


def _layer_terms(pts):
    """:math:`u = g(x) g(y)`, :math:`f = g(x) + g(y)`; :math:`g(s) = s -
    (e^{(s-1)/\\varepsilon} - e^{-1/\\varepsilon}) / (1 - e^{-1/\\varepsilon})`
    solves :math:`-\\varepsilon g'' + g' = 1`, :math:`g(0) = g(1) = 0`."""
    x, y, e = *_cols(pts, "xy"), math.exp(-1 / EPS)
    g_x, g_y = (s - (torch.exp((s - 1) / EPS) - e) / (1 - e) for s in (x, y))
    return g_x * g_y, g_x + g_y


def _advection_diffusion(i, o):
    laplace, (u_x, u_y) = _d(o, i, "xy", 2), (_d(o, i, v) for v in "xy")
    return u_x + u_y - EPS * laplace - _layer_terms(i)[1]


class AdvectionDiffusionProblem(_Plane):
    r"""Steady :math:`-\varepsilon \Delta u + u_x + u_y = f`,
    :math:`\varepsilon = 0.1`, :math:`u = g(x) g(y)`, zero on the boundary:
    boundary layers of width :math:`\varepsilon` at :math:`x, y = 1`."""

    conditions = _conditions(
        D=Equation(_advection_diffusion), boundary=FixedValue(0.0)
    )
    terms = staticmethod(_layer_terms)
    POINTS = {"D": 800, "boundary": 200}


def _cosine_terms(pts):
    x, y = _cols(pts, "xy")
    u = torch.cos(6 * PI * x) * torch.cos(4 * PI * y)
    return u, 52 * PI**2 * u


def _zero_flux(i, o):
    """:math:`\\pm \\partial u/\\partial n`: u_x at x = 0, 1, else u_y."""
    (x,) = _cols(i, "x")
    return torch.where((x == 0) | (x == 1), _d(o, i, "x"), _d(o, i, "y"))


class NeumannCosineProblem(_Plane):
    r""":math:`-\Delta u = f`, :math:`u = \cos 6\pi x \cos 4\pi y`: zero flux
    on the whole boundary, so unique up to a constant, fixed by :math:`u(0,
    0) = 1` on one point (``pin``)."""

    domains = _Plane.domains | {"pin": CartesianDomain({"x": 0.0, "y": 0.0})}
    conditions = _conditions(
        D=Equation(lambda i, o: -_d(o, i, "xy", 2) - _cosine_terms(i)[1]),
        boundary=Equation(_zero_flux),
        pin=_equals(_cosine_terms),
    )
    terms = staticmethod(_cosine_terms)
    POINTS = {"D": 800, "boundary": 199, "pin": 1}


def _helmholtz_terms(pts):
    """:math:`u`, :math:`f = \\Delta u + k^2 u`."""
    cols = _cols(pts, "xyzw")
    waves, corner = math.prod(torch.sin(PI * c) for c in cols), math.prod(cols)
    return waves + corner, (K2 - 4 * PI**2) * waves + K2 * corner


def _helmholtz(i, o):
    return _d(o, i, "xyzw", 2) + K2 * _plain(o) - _helmholtz_terms(i)[1]


class Helmholtz4DProblem(_Plane):
    r"""Indefinite Helmholtz :math:`\Delta u + k^2 u = f` on :math:`[0,
    1]^4`, :math:`k^2 = 6\pi^2` (between eigenvalues of :math:`-\Delta`),
    :math:`u = \prod_i \sin\pi x_i + x y z w`: Dirichlet on the 8 faces."""

    spatial_domain = CartesianDomain(BOX_4D)
    faces = [CartesianDomain(BOX_4D | {v: s}) for v in BOX_4D for s in (0, 1)]
    domains = {"D": spatial_domain, "boundary": Union(faces)}
    conditions = _conditions(
        D=Equation(_helmholtz), boundary=_equals(_helmholtz_terms)
    )
    terms = staticmethod(_helmholtz_terms)
    POINTS = {"D": 600, "boundary": 400}
