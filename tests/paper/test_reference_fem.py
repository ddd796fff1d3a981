"""The scikit-fem reference solver of the Q-tensor flow."""

import math

import numpy as np
import pytest

pytest.importorskip("skfem")

from pina_ntk.paper.reference import (
    qtensor_fem,
    solve_qtensor_fem,
)  # noqa: E402

HALF_WIDTH = 1.0
K = math.pi / (2 * HALF_WIDTH)  # sin(K (x + s)) vanishes at x = ±s


def modes(x, y):
    """Two smooth spatial modes vanishing on the boundary, and Laplacians."""
    sx, sy = np.sin(K * (x + HALF_WIDTH)), np.sin(K * (y + HALF_WIDTH))
    s2x = np.sin(2 * K * (x + HALF_WIDTH))
    phi, psi = sx * sy, s2x * sy
    return phi, psi, -2 * K**2 * phi, -5 * K**2 * psi


def manufactured(amplitudes, rates, elasticity, a, c):
    """
    Exact solution ``q_i = A_i(t) mode_i`` and the matching source.

    ``amplitudes(t)`` and ``rates(t)`` give ``(A1, A2)`` and their time
    derivatives.
    """

    def exact(x, y, t):
        phi, psi, _, _ = modes(x, y)
        a1, a2 = amplitudes(t)
        return a1 * phi, a2 * psi

    def source(x, y, t):
        phi, psi, lap_phi, lap_psi = modes(x, y)
        a1, a2 = amplitudes(t)
        r1, r2 = rates(t)
        q1, q2 = a1 * phi, a2 * psi
        bulk = a + 2 * c * (q1**2 + q2**2)
        f1 = r1 * phi - elasticity * a1 * lap_phi + bulk * q1
        f2 = r2 * psi - elasticity * a2 * lap_psi + bulk * q2
        return f1, f2

    def initial(x, y):
        return exact(x, y, 0.0)

    return exact, source, initial


def observed_orders(errors):
    return [math.log2(e0 / e1) for e0, e1 in zip(errors[:-1], errors[1:])]


@pytest.mark.parametrize(
    "degree, cells, expected", [(1, (4, 8, 16), 2.0), (2, (2, 4, 8), 3.0)]
)
def test_spatial_convergence_order_on_a_manufactured_solution(
    degree, cells, expected
):
    # Linear in time and all terms implicit (a > 0): backward Euler is exact
    # in time, so the error is the spatial error alone.
    elasticity, a, c, final_time = 0.2, 0.5, 1.0, 0.2
    exact, source, initial = manufactured(
        lambda t: (0.2 + 0.3 * t, 0.1 - 0.2 * t),
        lambda t: (0.3, -0.2),
        elasticity,
        a,
        c,
    )
    errors = []
    for n in cells:
        solution = solve_qtensor_fem(
            elasticity=elasticity,
            a=a,
            c=c,
            final_time=final_time,
            half_width=HALF_WIDTH,
            cells=n,
            degree=degree,
            time_step=0.05,
            source=source,
            initial=initial,
        )
        errors.append(solution.l2_error(exact, final_time))
    orders = observed_orders(errors)
    assert all(abs(order - expected) < 0.35 for order in orders), orders


def test_time_convergence_order_on_a_manufactured_solution():
    # Exponential in time with a < 0 (explicit concave part): first order.
    elasticity, a, c, final_time = 0.1, -0.2, 1.0, 0.4
    exact, source, initial = manufactured(
        lambda t: (0.4 * np.exp(-2 * t), 0.3 * np.cos(3 * t)),
        lambda t: (-0.8 * np.exp(-2 * t), -0.9 * np.sin(3 * t)),
        elasticity,
        a,
        c,
    )
    errors = []
    for dt in (0.1, 0.05, 0.025):
        solution = solve_qtensor_fem(
            elasticity=elasticity,
            a=a,
            c=c,
            final_time=final_time,
            half_width=HALF_WIDTH,
            cells=12,
            degree=2,
            time_step=dt,
            source=source,
            initial=initial,
        )
        errors.append(solution.l2_error(exact, final_time))
    orders = observed_orders(errors)
    assert all(0.8 < order < 1.25 for order in orders), orders


@pytest.mark.parametrize(
    "a, time_step", [(-0.2, 0.05), (-0.2, 0.25), (0.3, 0.1)]
)
def test_free_energy_never_increases(a, time_step):
    solution = solve_qtensor_fem(
        a=a, cells=16, degree=1, time_step=time_step, cache=False
    )
    energies = solution.energies
    assert len(energies) == len(solution.step_times)
    increments = np.diff(energies)
    assert np.all(increments <= 1e-12 * abs(energies[0])), increments.max()
    assert energies[-1] < energies[0]


def test_energy_is_the_issue_formula():
    # ∫ L/2 |∇Q|^2 + a/2 tr Q^2 + c/4 (tr Q^2)^2 with Q = [[q1, q2],
    # [q2, -q1]], computed independently on a fine tensor grid for a smooth
    # initial tensor (so that the finite elements resolve it).
    elasticity, a, c = 0.1, -0.2, 1.0

    def initial(x, y):
        phi, psi, _, _ = modes(x, y)
        return 0.4 * phi, 0.3 * psi

    solution = solve_qtensor_fem(
        elasticity=elasticity,
        a=a,
        c=c,
        half_width=HALF_WIDTH,
        cells=16,
        degree=2,
        time_step=0.1,
        final_time=0.1,
        initial=initial,
    )
    n = 801
    axis = np.linspace(-HALF_WIDTH, HALF_WIDTH, n)
    h = axis[1] - axis[0]
    x, y = np.meshgrid(axis, axis, indexing="ij")
    q1, q2 = initial(x, y)
    density = 0.0
    for q in (q1, q2):
        gx, gy = np.gradient(q, h, h, edge_order=2)
        # |∇Q|^2 counts Q11, Q22 = -Q11 and Q12 = Q21: twice each component
        density = density + elasticity / 2 * 2 * (gx**2 + gy**2)
    tr_q2 = 2 * (q1**2 + q2**2)
    density = density + a / 2 * tr_q2 + c / 4 * tr_q2**2
    weights = np.ones(n) * h
    weights[[0, -1]] = h / 2
    reference = weights @ density @ weights
    assert solution.energies[0] == pytest.approx(reference, rel=1e-4)


def test_tensor_is_symmetric_and_trace_free_and_vanishes_on_the_boundary():
    solution = solve_qtensor_fem(cells=8, degree=2, time_step=0.5, cache=False)
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-2, 2, (2, 50))
    for t in (0.0, 0.75, 2.0):
        q = solution.tensor(x, y, t)
        assert np.array_equal(q, np.swapaxes(q, -1, -2))
        assert np.array_equal(np.trace(q, axis1=-2, axis2=-1), np.zeros(50))
        values = solution.evaluate(x, y, t)
        assert np.array_equal(q[:, 0, 0], values[:, 0])
        assert np.array_equal(q[:, 0, 1], values[:, 1])
    side = np.linspace(-2, 2, 9)
    edges = np.concatenate([side, side, np.full(9, -2.0), np.full(9, 2.0)])
    other = np.concatenate([np.full(9, -2.0), np.full(9, 2.0), side, side])
    assert np.abs(solution.evaluate(edges, other, 1.0)).max() < 1e-12


def test_evaluation_interpolates_nodes_and_times():
    solution = solve_qtensor_fem(
        cells=8, degree=1, time_step=0.25, save_every=2, cache=False
    )
    assert np.allclose(solution.times, [0.0, 0.5, 1.0, 1.5, 2.0])
    x, y = solution.basis.doflocs
    at_nodes = solution.evaluate(x, y, 0.5)
    assert np.allclose(at_nodes.T, solution.values[1], atol=1e-12)
    middle = solution.evaluate(x, y, 0.75)
    expected = 0.5 * (solution.values[1] + solution.values[2])
    assert np.allclose(middle.T, expected, atol=1e-12)
    per_point = solution.evaluate(x[:3], y[:3], np.array([0.0, 0.5, 2.0]))
    assert np.allclose(per_point[1], solution.values[1][:, 1], atol=1e-12)
    with pytest.raises(ValueError, match="t must lie"):
        solution.evaluate(x, y, 2.5)
    with pytest.raises(ValueError, match="shapes"):
        solution.evaluate(x, y[:-1], 0.5)


def test_results_are_cached_in_memory_and_on_disk(tmp_path):
    settings = dict(cells=4, degree=1, time_step=0.5, cache_dir=tmp_path)
    first = solve_qtensor_fem(**settings)
    assert solve_qtensor_fem(**settings) is first
    files = list(tmp_path.glob("qtensor_fem_*.npz"))
    assert len(files) == 1
    qtensor_fem._MEMORY_CACHE.clear()
    reloaded = solve_qtensor_fem(**settings)
    assert reloaded is not first
    assert np.array_equal(reloaded.values, first.values)
    assert np.array_equal(reloaded.energies, first.energies)
    # the cost of the solve is remembered, not the cost of loading it
    assert reloaded.solve_time == first.solve_time > 0
    other = solve_qtensor_fem(**{**settings, "a": -0.3})
    assert not np.array_equal(other.values, first.values)
    assert len(list(tmp_path.glob("qtensor_fem_*.npz"))) == 2


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"cells": 0}, "cells"),
        ({"degree": 3}, "degree"),
        ({"time_step": -0.1}, "time_step"),
        ({"elasticity": 0}, "elasticity"),
        ({"save_every": 1.5}, "save_every"),
        ({"a": float("inf")}, "a"),
    ],
)
def test_bad_parameters_are_rejected(kwargs, name):
    with pytest.raises(ValueError, match=name):
        solve_qtensor_fem(cache=False, **kwargs)


def test_non_convergence_is_reported():
    with pytest.raises(RuntimeError, match="time_step"):
        solve_qtensor_fem(
            cells=4, degree=1, time_step=1.0, max_iterations=2, cache=False
        )
