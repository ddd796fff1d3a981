"""Finite-element reference solution of the Q-tensor gradient flow.

With ``Q = [[q1, q2], [q2, -q1]]`` (symmetric and trace-free by
construction) the equation ``Q_t = L ΔQ - a Q - c tr(Q^2) Q`` reads, per
component, ``q_t = L Δq - a q - 2c |q|^2 q (+ f)`` with ``|q|^2 = q1^2 +
q2^2``; it is the ``L^2`` gradient flow (up to a factor 2) of the free
energy::

    E(Q) = ∫ L/2 |∇Q|^2 + a/2 tr(Q^2) + c/4 tr(Q^2)^2
         = ∫ L |∇q|^2 + a |q|^2 + c |q|^4.

Space: continuous P1 or P2 triangles (scikit-fem) on a uniform mesh of the
square, ``q = 0`` on the boundary. Time: Eyre's convex splitting, the
convex part ``L |∇q|^2 + max(a, 0) |q|^2 + c |q|^4`` implicit and the
concave part ``min(a, 0) |q|^2`` explicit, which makes every step decrease
``E`` whatever the step size (for ``f = 0``). The implicit cubic term is
resolved by a fixed-point iteration around one factorised linear operator
(shared by both components), which contracts with factor about
``6 c dt max|q|^2``.

The scheme is first order in time and of order ``degree + 1`` in space
(``L^2`` norm, smooth solutions).
"""

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse.linalg as spla
from skfem import (
    Basis,
    BilinearForm,
    ElementTriP1,
    ElementTriP2,
    Functional,
    LinearForm,
    MeshTri,
    asm,
)
from skfem.helpers import dot, grad

from ..problems.qtensor import initial_q
from ...core.checks import check_finite, check_int, check_positive

#: Cache format version: bump when the scheme changes.
_CACHE_VERSION = 2
#: Environment variable naming the on-disk cache folder.
CACHE_ENV = "PINA_NTK_CACHE"
_ELEMENTS = {1: ElementTriP1, 2: ElementTriP2}
_MEMORY_CACHE = {}


@BilinearForm
def _mass(u, v, w):
    return u * v


@BilinearForm
def _stiffness(u, v, w):
    return dot(grad(u), grad(v))


@LinearForm
def _cubic(v, w):
    # the two components of ∫ |q|^2 q v, stacked on a leading axis
    norm_sq = w["q1"] ** 2 + w["q2"] ** 2
    return norm_sq * w["qi"] * v


@Functional
def _energy(w):
    norm_sq = w["q1"] ** 2 + w["q2"] ** 2
    gradient_sq = dot(grad(w["q1"]), grad(w["q1"])) + dot(
        grad(w["q2"]), grad(w["q2"])
    )
    return (
        w["elasticity"] * gradient_sq + w["a"] * norm_sq + w["c"] * norm_sq**2
    )


@dataclass
class QTensorFEMSolution:
    """
    A finite-element solution stored at a sequence of times.

    :param basis: The scikit-fem basis (mesh and element).
    :param numpy.ndarray times: The stored times, increasing, ``(m,)``.
    :param numpy.ndarray values: Coefficients ``(m, 2, n_dofs)`` of ``q1``
        and ``q2`` at those times.
    :param numpy.ndarray step_times: The time of every step, ``(n_steps+1,)``.
    :param numpy.ndarray energies: The free energy ``E`` after every step.
    :param dict parameters: The physical and numerical parameters.
    :param float solve_time: Wall-clock seconds the solve took (kept when
        the solution is loaded from the cache).
    """

    basis: Basis
    times: np.ndarray
    values: np.ndarray
    step_times: np.ndarray
    energies: np.ndarray
    parameters: dict
    solve_time: float = float("nan")

    def coefficients(self, t):
        """
        The coefficients at time ``t``, linear in time between stored times
        (exact at a stored time).

        :param float t: A time in ``[0, T]``.
        :return: ``(2, n_dofs)``.
        :rtype: numpy.ndarray
        :raises ValueError: If ``t`` is outside the stored interval.
        """
        t = float(t)
        first, last = float(self.times[0]), float(self.times[-1])
        tolerance = 1e-9 * max(1.0, last)
        if not first - tolerance <= t <= last + tolerance:
            raise ValueError(f"t must lie in [{first}, {last}], got {t}.")
        k = int(np.searchsorted(self.times, t))
        if k < len(self.times) and abs(self.times[k] - t) <= tolerance:
            return self.values[k]
        if k > 0 and abs(self.times[k - 1] - t) <= tolerance:
            return self.values[k - 1]
        k = min(max(k, 1), len(self.times) - 1)
        t0, t1 = self.times[k - 1], self.times[k]
        theta = (t - t0) / (t1 - t0)
        return (1 - theta) * self.values[k - 1] + theta * self.values[k]

    def evaluate(self, x, y, t):
        """
        ``(q1, q2)`` at arbitrary points of the square and times.

        :param x: First coordinates, any shape.
        :param y: Second coordinates, same shape.
        :param t: One time for all points, or one per point (same shape).
        :return: ``(*x.shape, 2)``.
        :rtype: numpy.ndarray
        :raises ValueError: On mismatched shapes or times out of range.
        """
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        if x.shape != y.shape:
            raise ValueError(f"x and y shapes differ: {x.shape}, {y.shape}.")
        t = np.asarray(t, dtype=float)
        if t.ndim and t.shape != x.shape:
            raise ValueError(
                f"t must be a scalar or have the shape of x {x.shape}, got "
                f"{t.shape}."
            )
        points = np.stack([x.reshape(-1), y.reshape(-1)])
        out = np.empty((points.shape[1], 2))
        times = np.broadcast_to(t, x.shape).reshape(-1)
        for moment in np.unique(times):
            mask = times == moment
            probe = self.basis.probes(points[:, mask])
            out[mask] = probe @ self.coefficients(moment).T
        return out.reshape(*x.shape, 2)

    def tensor(self, x, y, t):
        """
        The full tensor ``Q = [[q1, q2], [q2, -q1]]``.

        :param x: First coordinates.
        :param y: Second coordinates.
        :param t: Time(s), as in :meth:`evaluate`.
        :return: ``(*x.shape, 2, 2)``, symmetric and trace-free.
        :rtype: numpy.ndarray
        """
        q = self.evaluate(x, y, t)
        q1, q2 = q[..., 0], q[..., 1]
        return np.stack([np.stack([q1, q2], -1), np.stack([q2, -q1], -1)], -2)

    def l2_error(self, exact, t):
        """
        ``(||q1 - q1*||^2 + ||q2 - q2*||^2)^(1/2)`` over the square, by
        quadrature.

        :param callable exact: ``(x, y, t) -> (q1*, q2*)`` on arrays.
        :param float t: A stored time.
        :return: The ``L^2`` error.
        :rtype: float
        """
        coefficients = self.coefficients(t)

        @Functional
        def error(w):
            e1, e2 = exact(w.x[0], w.x[1], t)
            return (w["q1"] - e1) ** 2 + (w["q2"] - e2) ** 2

        fields = {
            "q1": self.basis.interpolate(coefficients[0]),
            "q2": self.basis.interpolate(coefficients[1]),
        }
        return float(np.sqrt(asm(error, self.basis, **fields)))


def _mesh_basis(half_width, cells, degree):
    axis = np.linspace(-half_width, half_width, cells + 1)
    mesh = MeshTri.init_tensor(axis, axis)
    return Basis(mesh, _ELEMENTS[degree]())


def _cache_key(parameters):
    text = json.dumps({**parameters, "version": _CACHE_VERSION}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def default_cache_dir():
    """
    Where reference solutions are stored: ``$PINA_NTK_CACHE`` if set, else
    ``~/.cache/pina_ntk``.

    :rtype: pathlib.Path
    """
    folder = os.environ.get(CACHE_ENV)
    if folder:
        return Path(folder)
    return Path.home() / ".cache" / "pina_ntk"


def solve_qtensor_fem(
    elasticity=0.1,
    a=-0.2,
    c=1.0,
    final_time=2.0,
    half_width=2.0,
    cells=64,
    degree=2,
    time_step=5e-3,
    save_every=10,
    source=None,
    initial=None,
    cache=True,
    cache_dir=None,
    tolerance=1e-12,
    max_iterations=50,
):
    """
    Solve the Q-tensor flow on ``(-s, s)^2 × (0, T)`` with ``Q = 0`` on the
    boundary.

    Results for the paper's initial condition are cached in memory and on
    disk (keyed by every parameter), so a tutorial computes them once.

    :param float elasticity: ``L > 0``. Default ``0.1``.
    :param float a: Linear bulk coefficient. Default ``-0.2``.
    :param float c: Cubic bulk coefficient ``> 0``. Default ``1.0``.
    :param float final_time: ``T > 0``. Default ``2.0``.
    :param float half_width: ``s``. Default ``2.0``.
    :param int cells: Mesh cells per side (each split in two triangles).
        Default ``64``.
    :param int degree: Polynomial degree, ``1`` or ``2``. Default ``2``.
    :param float time_step: ``dt``; the last step is shortened to end at
        ``T``. Default ``5e-3``.
    :param int save_every: Steps between stored solutions (``t = 0`` and
        ``T`` are always stored). Default ``10``.
    :param callable source: Optional source ``(x, y, t) -> (f1, f2)`` added
        to the right-hand side (for manufactured-solution tests).
    :param callable initial: Optional ``(x, y) -> (q1, q2)`` replacing the
        paper's initial condition (interpolated at the nodes).
    :param bool cache: Use the memory and disk caches (ignored when
        ``source`` or ``initial`` is given). Default ``True``.
    :param cache_dir: Folder of the disk cache; default
        :func:`default_cache_dir`.
    :param float tolerance: Relative tolerance of the fixed-point iteration.
    :param int max_iterations: Iterations allowed per step.
    :return: The solution.
    :rtype: QTensorFEMSolution
    :raises ValueError: On a bad parameter.
    :raises RuntimeError: If the fixed-point iteration does not converge
        (take a smaller ``time_step``).

    :Example:
        >>> solution = solve_qtensor_fem(cells=32, degree=1)  # doctest: +SKIP
        >>> solution.evaluate([0.0, 1.0], [0.0, 0.5], 0.5).shape
        ... # doctest: +SKIP
        (2, 2)
    """
    parameters = {
        "elasticity": check_positive("elasticity", elasticity),
        "a": check_finite("a", a),
        "c": check_positive("c", c),
        "final_time": check_positive("final_time", final_time),
        "half_width": check_positive("half_width", half_width),
        "cells": cells,
        "degree": degree,
        "time_step": check_positive("time_step", time_step),
        "save_every": save_every,
    }
    check_int("cells", cells, 1)
    check_int("save_every", save_every, 1)
    if degree not in _ELEMENTS:
        raise ValueError(f"degree must be 1 or 2, got {degree!r}.")
    use_cache = cache and source is None and initial is None
    if use_cache:
        key = _cache_key(parameters)
        if key in _MEMORY_CACHE:
            return _MEMORY_CACHE[key]
        folder = Path(cache_dir) if cache_dir else default_cache_dir()
        path = folder / f"qtensor_fem_{key}.npz"
        if path.exists():
            solution = _load(path, parameters)
            _MEMORY_CACHE[key] = solution
            return solution
    solution = _solve(parameters, source, initial, tolerance, max_iterations)
    if use_cache:
        folder.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp.npz")
        np.savez_compressed(
            temporary,
            times=solution.times,
            values=solution.values,
            step_times=solution.step_times,
            energies=solution.energies,
            solve_time=solution.solve_time,
        )
        os.replace(temporary, path)  # atomic: no half-written cache files
        _MEMORY_CACHE[key] = solution
    return solution


def _load(path, parameters):
    data = np.load(path)
    basis = _mesh_basis(
        parameters["half_width"], parameters["cells"], parameters["degree"]
    )
    return QTensorFEMSolution(
        basis=basis,
        times=data["times"],
        values=data["values"],
        step_times=data["step_times"],
        energies=data["energies"],
        parameters=dict(parameters),
        solve_time=float(data["solve_time"]),
    )


def _solve(parameters, source, initial, tolerance, max_iterations):
    start = time.perf_counter()
    elasticity = parameters["elasticity"]
    a, c = parameters["a"], parameters["c"]
    final_time = parameters["final_time"]
    basis = _mesh_basis(
        parameters["half_width"], parameters["cells"], parameters["degree"]
    )
    interior = basis.complement_dofs(basis.get_dofs())
    mass = asm(_mass, basis)
    stiffness = asm(_stiffness, basis)
    implicit_a, explicit_a = max(a, 0.0), min(a, 0.0)

    x_dofs, y_dofs = basis.doflocs
    if initial is None:
        s = parameters["half_width"]
        q1, q2 = initial_q(x_dofs, y_dofs, s)
    else:
        q1, q2 = initial(x_dofs, y_dofs)
    q = np.zeros((2, basis.N))
    q[0], q[1] = q1, q2
    boundary = np.setdiff1d(np.arange(basis.N), interior)
    q[:, boundary] = 0.0

    n_steps = int(np.ceil(final_time / parameters["time_step"] - 1e-9))
    step_times = np.linspace(0.0, final_time, n_steps + 1)
    # one factorisation per distinct step length (only the last may differ)
    factors = {}

    def factor(dt):
        key = round(dt, 15)
        if key not in factors:
            operator = mass / dt + elasticity * stiffness + implicit_a * mass
            factors[key] = spla.splu(operator[interior][:, interior].tocsc())
        return factors[key]

    def energy(values):
        return asm(
            _energy,
            basis,
            q1=basis.interpolate(values[0]),
            q2=basis.interpolate(values[1]),
            elasticity=elasticity,
            a=a,
            c=c,
        )

    def cubic(values):
        q1_field = basis.interpolate(values[0])
        q2_field = basis.interpolate(values[1])
        return np.stack(
            [
                asm(_cubic, basis, q1=q1_field, q2=q2_field, qi=field)
                for field in (q1_field, q2_field)
            ]
        )

    def load(t):
        @LinearForm
        def first(v, w):
            return source(w.x[0], w.x[1], t)[0] * v

        @LinearForm
        def second(v, w):
            return source(w.x[0], w.x[1], t)[1] * v

        return np.stack([asm(first, basis), asm(second, basis)])

    times, values = [0.0], [q.copy()]
    energies = [energy(q)]
    for n in range(n_steps):
        dt = step_times[n + 1] - step_times[n]
        lu = factor(dt)
        # right-hand side without the cubic term: old value, explicit part
        rhs = (mass @ q.T).T * (1.0 / dt - explicit_a)
        if source is not None:
            rhs = rhs + load(step_times[n + 1])
        new = q.copy()
        for iteration in range(max_iterations):
            full = rhs - 2.0 * c * cubic(new)
            update = np.zeros_like(new)
            update[:, interior] = lu.solve(full[:, interior].T).T
            change = np.linalg.norm(update - new)
            new = update
            if change <= tolerance * max(np.linalg.norm(new), 1e-300):
                break
        else:
            raise RuntimeError(
                f"The fixed-point iteration did not converge at step {n + 1} "
                f"(t = {step_times[n + 1]:.4g}): take a smaller time_step."
            )
        q = new
        energies.append(energy(q))
        if (n + 1) % parameters["save_every"] == 0 or n + 1 == n_steps:
            times.append(step_times[n + 1])
            values.append(q.copy())
    return QTensorFEMSolution(
        basis=basis,
        times=np.asarray(times),
        values=np.stack(values),
        step_times=step_times,
        energies=np.asarray(energies),
        parameters=dict(parameters),
        solve_time=time.perf_counter() - start,
    )
