"""The suite's problems (``benchmarks/suite/suite_problems.py``, the
``confirmation-2`` half's in ``suite_plane_problems.py``): every condition's
residual vanishes on the exact solution, data targets are the solution, and
checks that fail on plausible mistakes (signs, coefficients, domains)."""

import math
import os
import random
import sys

import pytest
import torch
from pina import LabelTensor
from pina.domain import Difference
from pina.problem import TimeDependentProblem

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pina_ntk.integration.resampling import discretise_conditions  # noqa
from benchmarks.suite import suite_plane_problems as plane  # noqa: E402
from benchmarks.suite import suite_problems as suite  # noqa: E402

#: Largest |residual| of a condition on the exact solution. In float64 the
#: terms are at most about 2.5e3 (multiscale_1d's 250 pi^2 sin 50 pi x), so
#: rounding leaves below 1e-12; a wrong formula, sign or coefficient leaves
#: 1e-2 or more (see the tests of such mistakes below).
TOL = 1e-9
#: Smallest max |residual| that counts as "not small" for a mistake.
WRONG = 1e-2

DOMAIN_CONDITIONS = [
    (name, condition)
    for name, cls in suite.SUITE_PROBLEMS.items()
    for condition in cls.conditions
]


def sample(problem, condition, n=None, seed=0):
    """Fresh random points of a domain condition (PINA's sampling, seeded),
    in float64, differentiable."""
    torch.manual_seed(seed)
    random.seed(seed)  # PINA's Union shuffles its parts with random
    domain = problem.conditions[condition].domain
    n = n or problem.POINTS[condition]
    problem.discretise_domain(n, "random", domains=[domain])
    pts = problem.discretised_domains[domain]
    pts = LabelTensor(pts.as_subclass(torch.Tensor).double(), pts.labels)
    return pts.requires_grad_(True)


def residual(problem, condition, pts, equation=None, params=None):
    """The residual of a condition with the exact solution as the network;
    an inverse problem's parameters at their true values by default."""
    if params is None and hasattr(problem, "TRUE_PARAMETERS"):
        true = problem.TRUE_PARAMETERS.items()
        params = {k: torch.tensor([v], dtype=torch.float64) for k, v in true}
    equation = equation or problem.conditions[condition].equation
    found = equation.residual(pts, problem.solution(pts), params)
    return found.as_subclass(torch.Tensor).detach()


def column(pts, name):
    return pts.extract([name]).as_subclass(torch.Tensor).detach().flatten()


@pytest.mark.parametrize("name", list(suite.SUITE_PROBLEMS))
def test_instances_own_their_conditions(name):
    cls = suite.SUITE_PROBLEMS[name]
    first, second = cls(), cls()
    assert first.conditions is not second.conditions
    for key, condition in first.conditions.items():
        assert condition is not second.conditions[key]
        assert condition is not cls.conditions.get(key)
        assert condition.problem is first and condition.name == key
    first.conditions.pop(next(iter(first.conditions)))
    assert len(second.conditions) == len(first.conditions) + 1


@pytest.mark.parametrize("name", list(suite.SUITE_PROBLEMS))
def test_points_flags_and_budget(name):
    """POINTS names the domain conditions, which discretise to those counts;
    about 1000 residual entries per step; STATIONARY as the problem's type."""
    cls = suite.SUITE_PROBLEMS[name]
    problem = cls()
    assert set(cls.POINTS) == set(cls.conditions)
    assert cls.STATIONARY is not isinstance(problem, TimeDependentProblem)
    discretise_conditions(problem, cls.POINTS)
    entries = 0
    for condition, n in cls.POINTS.items():
        assert len(problem.discretised_domains[condition]) == n
        width = residual(problem, condition, sample(problem, condition, 2))
        entries += n * width.shape[1]
    data = problem.conditions.get("data")
    entries += 0 if data is None else len(data.input)
    assert 950 <= entries <= 1050


@pytest.mark.parametrize("name, condition", DOMAIN_CONDITIONS)
def test_exact_solution_satisfies_condition(name, condition):
    problem = suite.SUITE_PROBLEMS[name]()
    pts = sample(problem, condition)
    found = residual(problem, condition, pts)
    assert found.shape[0] == len(pts)
    assert found.abs().max() <= TOL


@pytest.mark.parametrize("name", ["heat_data", "heat_inverse"])
def test_data_targets_are_the_exact_solution(name):
    cls = suite.SUITE_PROBLEMS[name]
    first, second = cls(), cls()
    data = first.conditions["data"]
    assert "t0" not in first.conditions or name == "heat_inverse"
    assert len(data.input) == cls.OBSERVED == 100
    assert data.target.labels == ["u"]
    exact = first.solution(data.input).as_subclass(torch.Tensor)
    assert torch.equal(data.target.as_subclass(torch.Tensor), exact)
    assert exact.abs().max() > 0.1
    x, t = column(data.input, "x"), column(data.input, "t")
    assert 0 <= x.min() and x.max() <= 1 and 0 <= t.min() and t.max() <= 1
    # drawn with a seeded generator: the same points for every instance
    assert torch.equal(data.input, second.conditions["data"].input)


def test_stokes_velocity_is_divergence_free():
    """By central differences, independently of PINA's operators."""
    problem, h = suite.StokesProblem(), 1e-4
    xy = torch.rand(200, 2, dtype=torch.float64)

    def velocity(shift):
        pts = LabelTensor(xy + torch.tensor(shift), ["x", "y"])
        return problem.solution(pts).extract(["u", "v"])

    dudx = (velocity([h, 0]) - velocity([-h, 0]))[:, 0] / (2 * h)
    dvdy = (velocity([0, h]) - velocity([0, -h]))[:, 1] / (2 * h)
    assert (dudx + dvdy).abs().max() < 1e-6  # O(h^2 pi^3)
    assert dudx.abs().max() > 1.0  # not divergence-free by being constant
    pressure = sample(problem, "pressure")
    assert len(pressure) == 1 and pressure.abs().max() == 0


@pytest.mark.parametrize("name", ["bvp_1d", "multiscale_1d"])
def test_1d_boundaries_are_single_points(name):
    cls = suite.SUITE_PROBLEMS[name]
    problem = cls()
    discretise_conditions(problem, cls.POINTS)
    for condition, x in (("left", 0.0), ("right", 1.0)):
        points = problem.discretised_domains[condition]
        assert cls.POINTS[condition] == 1 and points.shape == (1, 1)
        assert float(points) == x


def test_annulus_robin_needs_the_normal_to_the_origin():
    problem = suite.AnnulusRobinProblem()
    pts = sample(problem, "inner")
    right = residual(problem, "inner", pts, suite.robin(-1.0))
    wrong = residual(problem, "inner", pts, suite.robin(+1.0))
    assert right.abs().max() <= TOL < WRONG < wrong.abs().max()


def test_annulus_domains():
    """The circles are where they should be; the vectorised sampling keeps
    PINA's Difference's points, uniformly (E[r^2] = 0.625)."""
    problem = suite.AnnulusRobinProblem()
    for condition, low, high in (
        ("inner", 0.5, 0.5),
        ("outer", 1.0, 1.0),
        ("D", 0.5, 1.0),
    ):
        pts = sample(problem, condition, n=2000)
        r = torch.hypot(column(pts, "x"), column(pts, "y"))
        assert low - 1e-6 <= r.min() and r.max() <= high + 1e-6
    assert abs(float((r**2).mean()) - 0.625) < 0.03
    for point in pts[:20].detach():
        point = LabelTensor(point.reshape(1, 2).float(), ["x", "y"])
        assert Difference.is_inside(problem.spatial_domain, point)  # PINA's
    assert problem.spatial_domain.range == {"x": (-1, 1), "y": (-1, 1)}


def test_annulus_evaluation_points_lie_in_the_annulus():
    grid = suite.AnnulusRobinProblem().evaluation_points(101)
    assert grid.labels == ["x", "y"]
    r2 = column(grid, "x") ** 2 + column(grid, "y") ** 2
    assert 0.25 <= r2.min() and r2.max() <= 1.0
    share = len(grid) / 101**2  # of the box, the annulus's 3 pi / 16
    assert abs(share - 3 * math.pi / 16) < 0.02


def test_poisson_3d_neumann_face_only_at_z_1():
    problem = suite.Poisson3DProblem()
    assert (column(sample(problem, "neumann"), "z") == 1).all()
    dirichlet = sample(problem, "dirichlet", n=600)
    x, y, z = (column(dirichlet, v) for v in "xyz")
    faces = [x == 0, x == 1, y == 0, y == 1, z == 0]  # not z = 1
    assert all(face.sum() > 50 for face in faces)
    assert torch.stack(faces).any(dim=0).all() and not (z == 1).any()


def test_burgers_wrong_viscosity_is_not_a_solution():
    problem = suite.BurgersProblem()
    pts = sample(problem, "D")
    wrong = residual(problem, "D", pts, suite.burgers(2 * suite.NU))
    assert wrong.abs().max() > WRONG
    at_start = sample(problem, "t0")  # a steep front at x = 1
    assert problem.solution(at_start).abs().max() > 0.8


def test_convection_exact_solution_is_periodic():
    """The Dirichlet ends (PINA's equations see one point at a time) impose
    the periodic solution; and the initial values are sin x."""
    problem = suite.ConvectionProblem()
    t = torch.rand(100, 1, dtype=torch.float64)
    ends = [torch.cat([torch.full_like(t, x), t], 1) for x in (0, 2 * math.pi)]
    left, right = (problem.solution(LabelTensor(p, ["x", "t"])) for p in ends)
    assert torch.allclose(left, right, atol=1e-12)
    start = sample(problem, "t0")
    exact = problem.solution(start).as_subclass(torch.Tensor).detach()
    assert torch.allclose(exact.flatten(), torch.sin(column(start, "x")))


def test_heat_inverse_parameter_enters_the_equation():
    problem = suite.HeatInverseProblem()
    (low, high), true = problem.unknown_parameter_domain.range["kappa"], 0.1
    assert problem.TRUE_PARAMETERS == {"kappa": true} and low < true < high
    assert set(problem.unknown_parameters) == {"kappa"}
    pts = sample(problem, "D")
    wrong = {"kappa": torch.tensor([2 * true], dtype=torch.float64)}
    assert residual(problem, "D", pts, params=wrong).abs().max() > WRONG


# ------------------------------------------- the confirmation-2 half (#42)
SECOND = ["elasticity", "nonlinear_disk", "lshape", "advection_diffusion"]
SECOND += ["neumann_cosine", "helmholtz_4d"]


def against(problem, condition, pts, *columns):
    """The residual of a condition with ``columns`` (functions of the
    points' tensor, one per output) as the network."""
    values = [f(pts).as_subclass(torch.Tensor) for f in columns]
    values = torch.cat(values, 1)
    output = LabelTensor(values, problem.output_variables)
    equation = problem.conditions[condition].equation
    return equation.residual(pts, output, None).as_subclass(torch.Tensor)


def test_the_second_confirmation_half_is_new_stationary_and_mixed():
    from benchmarks.suite import suite_protocol

    split = suite_protocol.read_split()
    second = split["confirmation-2"]
    names = [e["setting"] for e in second]
    assert len(second) >= 6 and names == SECOND
    assert all(e["stationary"] for e in second)
    assert 2 * sum(e["network"] == "feedforward" for e in second) >= len(names)
    assert {e["points"] for e in second} == {"fresh", "fixed"}
    others = {e["setting"] for h, es in split.items() if h != "confirmation-2"
              for e in es}  # fmt: skip
    assert others.isdisjoint(names) and set(names) <= set(suite.SUITE_PROBLEMS)
    assert all(suite.SUITE_PROBLEMS[n].STATIONARY for n in names)


def test_weightings_plans_five_seeds_per_confirmation_2_setting(
    monkeypatch, tmp_path
):
    """``weightings.py --half confirmation-2`` plans the suite's weightings,
    five seeds each, with each setting's network; stopped before any run."""
    from benchmarks.suite import weightings

    planned, plan = [], weightings.plan_jobs

    def stop(*arguments):
        planned.extend(plan(*arguments))
        raise KeyboardInterrupt  # not caught before the runs start

    monkeypatch.setattr(weightings, "plan_jobs", stop)
    with pytest.raises(KeyboardInterrupt):
        weightings.main(
            ["--half", "confirmation-2", "--output-dir", str(tmp_path)]
        )
    assert not os.listdir(tmp_path)
    split = {e["setting"]: e for e in weightings.SPLIT["confirmation-2"]}
    chosen = weightings.SUITE_WEIGHTINGS
    assert len(planned) == len(split) * len(chosen) * 5
    for name, entry in split.items():
        jobs = [j for j in planned if j["problem"] == name]
        assert {(j["weighting"], j["seed"]) for j in jobs} == {
            (w, s) for w in chosen for s in range(5)
        }
        assert {j["network"] for j in jobs} == {entry["network"]}
        assert jobs[0]["counts"] == suite.SUITE_PROBLEMS[name].POINTS
        fixed = name in weightings.FIXED_POINTS
        assert fixed == (entry["points"] == "fixed")


def test_elasticity_rejects_a_flipped_displacement():
    problem = suite.ElasticityProblem()
    u = lambda p: plane._navier(p)[0][:, :1]  # noqa: E731
    minus_v = lambda p: -plane._navier(p)[0][:, 1:]  # noqa: E731
    for condition in ("D", "traction"):
        pts = sample(problem, condition)
        found = against(problem, condition, pts, u, minus_v)
        assert found.shape[1] == 2 and found.abs().max() > WRONG
    # the clamped sides are x = 0, x = 1, y = 0; the traction at y = 1
    x, y = (column(sample(problem, "clamped", 300), v) for v in "xy")
    assert ((x == 0) | (x == 1) | (y == 0)).all() and not (y == 1).any()
    assert (column(sample(problem, "traction"), "y") == 1).all()


def test_nonlinear_disk_needs_its_nonlinearity():
    """The exact solution does not solve the linear -Laplace u = f, and a
    multiple of it (a linear problem's scaling) is rejected; the domains are
    the disc and its circle, the evaluation grid the disc's pi / 4 of the
    box."""
    problem = suite.NonlinearDiskProblem()
    pts = sample(problem, "D")
    linear = suite.Equation(
        lambda i, o: -suite._d(o, i, "xy", 2) - plane._nonlinear_terms(i)[1]
    )
    wrong = linear.residual(pts, problem.solution(pts), None)
    assert wrong.abs().max() > WRONG
    double = against(
        problem, "D", pts, lambda p: 2 * plane._nonlinear_terms(p)[0]
    )
    assert double.abs().max() > WRONG
    for condition, low in (("D", 0.0), ("boundary", 1.0)):
        pts = sample(problem, condition)
        r = torch.hypot(column(pts, "x"), column(pts, "y"))
        assert low - 1e-6 <= r.min() and r.max() <= 1 + 1e-6
    grid = problem.evaluation_points(101)
    assert abs(len(grid) / 101**2 - math.pi / 4) < 0.02


def test_lshape_solution_is_the_corner_singularity():
    """Zero on both edges at the re-entrant corner, continuous across the
    negative x-axis (the angle runs over [0, 3 pi / 2]: without it, on
    (-pi, pi], the x = 0, y < 0 edge would get sin(-pi / 3)), the gradient
    unbounded at the corner."""
    problem = suite.LShapeProblem()
    s = torch.rand(100, 1, dtype=torch.float64)
    zero = torch.zeros_like(s)

    def at(x, y):
        pts = LabelTensor(torch.cat([x, y], 1), ["x", "y"])
        return problem.solution(pts).as_subclass(torch.Tensor).flatten()

    assert at(s, zero).abs().max() < 1e-12  # y = 0, x > 0
    assert at(zero, -s).abs().max() < 1e-12  # x = 0, y < 0
    assert (at(zero, s) > 0).all()  # x = 0, y > 0: inside the L
    above, below = at(-s, zero + 1e-12), at(-s, zero - 1e-12)
    assert torch.allclose(above, below, atol=1e-9) and above.min() > 0
    origin, small = zero[:1], torch.full((1, 1), 1e-6, dtype=torch.float64)
    slope = (at(-small, origin) - at(origin, origin)) / 1e-6
    assert slope.abs().max() > 50  # r^(2/3) / r = 100 at r = 1e-6


def test_lshape_domains():
    """No point in the missing quadrant; the boundary on the L's eight unit
    sides, uniformly; the evaluation grid is the L's 3/4 of the box."""
    problem = suite.LShapeProblem()
    inside = sample(problem, "D", n=3000)
    x, y = column(inside, "x"), column(inside, "y")
    assert not ((x > 0) & (y < 0)).any()
    assert abs(float((x < 0).double().mean()) - 2 / 3) < 0.03
    edge = sample(problem, "boundary", n=800)
    x, y = column(edge, "x"), column(edge, "y")
    sides = [x == -1, y == 1, y == -1, x == 1, (x == 0) & (y <= 0)]
    sides += [(y == 0) & (x >= 0)]
    assert torch.stack(sides).any(dim=0).all()
    assert [int(s.sum()) for s in sides] == [200, 200, 100, 100, 100, 100]
    assert problem.spatial_domain.range == {"x": (-1, 1), "y": (-1, 1)}
    grid = problem.evaluation_points(101)
    gx, gy = column(grid, "x"), column(grid, "y")
    assert not ((gx > 0) & (gy < 0)).any()
    assert abs(len(grid) / 101**2 - 3 / 4) < 0.02


def test_advection_diffusion_layers_are_downstream():
    """The layers sit at x = 1 and y = 1, downstream of b = (1, 1): the
    mirrored solution (layers upstream, at 0) is rejected."""
    problem = suite.AdvectionDiffusionProblem()
    pts = sample(problem, "D")

    def mirrored(p):
        flipped = LabelTensor(1 - p.as_subclass(torch.Tensor), ["x", "y"])
        return plane._layer_terms(flipped)[0]

    assert against(problem, "D", pts, mirrored).abs().max() > WRONG
    # steep: at y = 0.5, u falls from over 0.25 to 0 within epsilon of x = 1
    near = LabelTensor(
        torch.tensor([[0.9, 0.5], [1.0, 0.5]]).double(), ["x", "y"]
    )
    u = problem.solution(near).as_subclass(torch.Tensor).flatten()
    assert u[0] > 0.25 and u[1].abs() < 1e-12


def test_neumann_cosine_flux_and_pin():
    """sin for cos breaks the zero flux; the solution plus a constant keeps
    the equation and the flux and only the pinned point rejects it."""
    problem = suite.NeumannCosineProblem()

    def sin(p):
        x, y = suite._cols(p, "xy")
        return torch.sin(6 * math.pi * x) * torch.cos(4 * math.pi * y)

    edge = sample(problem, "boundary")
    assert against(problem, "boundary", edge, sin).abs().max() > WRONG
    shifted = lambda p: plane._cosine_terms(p)[0] + 1.0  # noqa: E731
    for condition in ("D", "boundary"):
        found = against(problem, condition, sample(problem, condition), shifted)
        assert found.abs().max() <= TOL
    pin = sample(problem, "pin")
    assert len(pin) == 1 and float(pin.detach().abs().max()) == 0
    assert against(problem, "pin", pin, shifted).abs().max() > WRONG
    # a face each of x = 0, 1 and y = 0, 1 gets points
    x, y = column(edge, "x"), column(edge, "y")
    assert all(int(f.sum()) > 20 for f in (x == 0, x == 1, y == 0, y == 1))


def test_helmholtz_4d_wave_number_and_faces():
    """k^2 = 6 pi^2 is no Dirichlet eigenvalue pi^2 (n1^2 + ... + n4^2) of
    -Laplace (so the problem is well posed); a doubled frequency in x is
    rejected; the boundary draws 50 points on each of the eight faces."""
    import itertools

    sums = {
        sum(n * n for n in ns)
        for ns in itertools.product(range(1, 4), repeat=4)
    }
    assert 6 not in sums and min(sums) < 6  # indefinite: 4 pi^2 < k^2
    assert plane.K2 == pytest.approx(6 * math.pi**2)
    problem = suite.Helmholtz4DProblem()
    pts = sample(problem, "D")

    def doubled(p):
        x, *rest = suite._cols(p, "xyzw")
        x = LabelTensor(torch.cat([2 * x, *rest], 1), list("xyzw"))
        return plane._helmholtz_terms(x)[0]

    assert against(problem, "D", pts, doubled).abs().max() > WRONG
    faces = sample(problem, "boundary")
    cols = faces.as_subclass(torch.Tensor).detach()
    counts = [int((cols[:, k] == s).sum()) for k in range(4) for s in (0, 1)]
    assert counts == [50] * 8
