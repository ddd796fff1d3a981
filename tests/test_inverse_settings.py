"""The inverse settings: the parameter error
(``benchmarks/suite/inverse_measures.py``) on hand-made values, its record
in a run and its cells on the pages, and the two settings of
``benchmarks/suite/suite_inverse_problems.py`` against solutions worked out
here."""

import math
import os
import random
import sys

import numpy as np
import pytest
import torch
from pina import LabelTensor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pina_ntk.integration.resampling import discretise_conditions  # noqa
from benchmarks.suite import inverse_measures as measures  # noqa: E402
from benchmarks.suite import suite_inverse_problems as inverse  # noqa: E402
from benchmarks.suite import suite_page  # noqa: E402
from benchmarks.suite import suite_problems  # noqa: E402
from benchmarks.suite import weightings  # noqa: E402
from benchmarks.suite import weightings_page  # noqa: E402

KEYS = {"parameters", "parameter_error"}


# ------------------------------------------------------ the parameter error
def test_parameter_error_is_the_largest_relative_error():
    # a: |1.1 - 1| / 1 = 0.1; b: |-0.1 + 0.2| / |-0.2| = 0.5. Dividing by
    # the value gives 1.0, the mean 0.3, the absolute error 0.1, a signed
    # true value (no abs) -0.5 and so 0.1
    found = measures.parameter_error(
        {"a": 1.1, "b": -0.1}, {"a": 1.0, "b": -0.2}
    )
    assert found == pytest.approx(0.5)
    assert measures.parameter_error({"kappa": 0.12}, {"kappa": 0.1}) == (
        pytest.approx(0.2)
    )
    assert measures.parameter_error({"c": 1.5}, {"c": 1.5}) == 0


def test_parameter_error_does_not_skip_a_nan():
    # max(nan, 0.5) is 0.5 but max(0.5, nan) is nan: both orders give nan
    true = {"a": 1.0, "b": 1.0}
    assert math.isnan(measures.parameter_error({"a": math.nan, "b": 1.5}, true))
    assert math.isnan(measures.parameter_error({"a": 1.5, "b": math.nan}, true))


@pytest.mark.parametrize(
    "values, true, match",
    [
        ({"a": 1.0}, {"a": 1.0, "b": 2.0}, "the same unknowns"),
        ({"a": 1.0, "b": 2.0}, {"a": 1.0}, "the same unknowns"),
        ({}, {}, "at least one"),
        ({"a": 0.1}, {"a": 0.0}, "zero"),
    ],
)
def test_parameter_error_refuses_mismatched_or_zero_truths(values, true, match):
    with pytest.raises(ValueError, match=match):
        measures.parameter_error(values, true)


def test_recording_appends_the_unknowns_beside_each_error():
    """Each call of the wrapped error function records the unknowns as they
    are then and their error (kappa 0.15: 0.5; 0.09: 0.1), after the
    error; a call that raises records nothing."""
    problem = suite_problems.HeatInverseProblem()
    record = {"history": {"steps": [], "errors": []}}
    calls = []

    def error_fn(solver):
        calls.append(solver)
        if solver == "raise":
            raise RuntimeError("evaluation failed")
        return 0.25

    error = measures.recording(error_fn, problem, record)
    drawn = float(problem.unknown_parameters["kappa"].detach())
    assert record["parameters"] == {"kappa": pytest.approx(drawn)}
    assert record["history"]["parameters"] == []
    for value in (0.15, 0.09):
        problem.unknown_parameters["kappa"].data.fill_(value)
        assert error("solver") == 0.25
    with pytest.raises(RuntimeError):
        error("raise")
    history = record["history"]
    assert [p["kappa"] for p in history["parameters"]] == [
        pytest.approx(0.15),
        pytest.approx(0.09),
    ]
    assert history["parameter_errors"] == [
        pytest.approx(0.5),
        pytest.approx(0.1),
    ]
    assert record["parameter_error"] == pytest.approx(0.1)
    assert calls == ["solver", "solver", "raise"]


def short_run(problem, steps=2):
    """A run of the runner's own, the quick network, ``steps`` steps."""
    settings = dict(weightings.QUICK, steps=steps, records=steps)
    (job,) = weightings.plan_jobs([problem], lambda p: ["none"], settings, 1)
    return weightings.run_job(job)


@pytest.mark.parametrize(
    "name", ["heat_inverse", "wave_speed", "poisson_source"]
)
def test_an_inverse_run_records_its_parameter_error(name):
    """Two steps: the unknowns and their error at every record of the
    error history, the final ones in the record, each error that of its
    values; the unknowns move (the trained problem's are read)."""
    record = short_run(name)
    assert record["status"] == "ok", record["failure"]
    history = record["history"]
    assert history["steps"] == [0, 1, 2]
    values = history["parameters"]
    assert len(values) == len(history["parameter_errors"]) == 3
    true = weightings.problem_class(name).TRUE_PARAMETERS
    for found, error in zip(values, history["parameter_errors"]):
        assert set(found) == set(true)
        expected = max(abs(found[k] - t) / abs(t) for k, t in true.items())
        assert error == pytest.approx(expected)
    assert values[0] != values[-1]
    assert record["parameters"] == values[-1]
    assert record["parameter_error"] == history["parameter_errors"][-1]


def test_a_forward_run_records_no_parameter_error():
    record = short_run("heat_data")
    assert record["status"] == "ok", record["failure"]
    assert not KEYS & set(record)
    assert not {"parameters", "parameter_errors"} & set(record["history"])


# ------------------------------------------------------------ the registry
def test_the_inverse_settings_are_runnable_beside_the_split():
    from benchmarks.suite import weightings_setup as setup

    split = {e["setting"] for e in setup.SUITE}
    for name, cls in inverse.INVERSE_PROBLEMS.items():
        assert name not in split and name not in suite_problems.SUITE_PROBLEMS
        assert setup.PROBLEMS[name] == (
            f"suite_inverse_problems:{cls.__name__}",
            cls.POINTS,
        )
        assert name in setup.FIXED_POINTS and name not in setup.FEEDFORWARD
    assert set(setup.INVERSE) == {
        "heat_inverse",
        "poisson_source",
        "wave_speed",
    }


# ------------------------------------------------------------- wave_speed
def float64_points(problem, condition, n=64, seed=0):
    """Random points of a condition's domain (PINA's sampling), float64,
    differentiable."""
    torch.manual_seed(seed)
    random.seed(seed)
    problem.discretise_domain(n, "random", domains=[condition])
    pts = problem.discretised_domains[condition]
    pts = LabelTensor(pts.as_subclass(torch.Tensor).double(), pts.labels)
    return pts.requires_grad_(True)


def residual(problem, condition, pts, output=None, params=None):
    """A condition's residual on ``output`` (default: the solution), the
    unknowns at ``params`` (default: the true values)."""
    true = problem.TRUE_PARAMETERS.items()
    params = params or {k: torch.tensor([v]).double() for k, v in true}
    output = problem.solution(pts) if output is None else output
    equation = problem.conditions[condition].equation
    found = equation.residual(pts, output, params)
    return found.as_subclass(torch.Tensor).detach()


def test_wave_speed_solution_satisfies_the_wave_equation_by_autograd():
    """u_tt - 1.5^2 u_xx by torch's autograd alone (no PINA operator)."""
    problem = inverse.WaveSpeedProblem()
    xt = torch.rand(200, 2, dtype=torch.float64, requires_grad=True)
    u = problem.solution(LabelTensor(xt, ["x", "t"])).as_subclass(torch.Tensor)
    (du,) = torch.autograd.grad(u.sum(), xt, create_graph=True)
    u_xx = torch.autograd.grad(du[:, 0].sum(), xt, create_graph=True)[0][:, 0]
    u_tt = torch.autograd.grad(du[:, 1].sum(), xt)[0][:, 1]
    assert (u_tt - 1.5**2 * u_xx).abs().max() < 1e-9
    assert u_tt.abs().max() > 1.0  # not a trivial solution


@pytest.mark.parametrize("condition", ["D", "boundary", "t0"])
def test_wave_speed_conditions_vanish_on_the_solution(condition):
    problem = inverse.WaveSpeedProblem()
    found = residual(problem, condition, float64_points(problem, condition))
    assert found.abs().max() < 1e-9
    assert found.shape[1] == (2 if condition == "t0" else 1)


def test_wave_speed_equation_and_start_reject_wrong_answers():
    """Another speed leaves a residual; at t = 0 the second column is the
    initial velocity: sin(pi x)(1 + t) starts right but moving."""
    problem = inverse.WaveSpeedProblem()
    pts = float64_points(problem, "D")
    wrong = {"c": torch.tensor([1.0]).double()}
    assert residual(problem, "D", pts, params=wrong).abs().max() > 1e-2
    start = float64_points(problem, "t0")
    x, t = (start.extract([v]).as_subclass(torch.Tensor) for v in "xt")
    moving = LabelTensor(torch.sin(math.pi * x) * (1 + t), ["u"])
    found = residual(problem, "t0", start, output=moving)
    assert found[:, 0].abs().max() < 1e-12
    assert torch.allclose(found[:, 1:], torch.sin(math.pi * x).detach())


def test_wave_speed_observations_are_the_solution_at_seeded_points():
    first, second = inverse.WaveSpeedProblem(), inverse.WaveSpeedProblem()
    data = first.conditions["data"]
    pts = data.input.as_subclass(torch.Tensor).double()
    x, t = pts[:, 0].numpy(), pts[:, 1].numpy()
    expected = np.sin(np.pi * x) * np.cos(1.5 * np.pi * t)
    target = data.target.as_subclass(torch.Tensor).flatten().double().numpy()
    assert len(pts) == 100 and data.target.labels == ["u"]
    assert np.allclose(target, expected, atol=1e-6)
    assert ((pts > 0) & (pts < 1)).all()
    assert torch.equal(data.input, second.conditions["data"].input)
    # about 1000 residual entries a step, t0 counting twice
    points = inverse.WaveSpeedProblem.POINTS
    assert sum(points.values()) + points["t0"] + len(pts) == 1000
    low, high = first.unknown_parameter_domain.range["c"]
    assert (low, high) == (0.5, 3) and set(first.unknown_parameters) == {"c"}


# ---------------------------------------------------------- poisson_source
def source(x, y, mu1=0.5, mu2=0.5):
    return np.exp(-2 * (x - mu1) ** 2 - 2 * (y - mu2) ** 2)


def test_the_reference_solves_the_five_point_equation():
    """Laplacian by differences of the grid's neighbours equals the source
    at every inner node; zero on the boundary; u < 0 inside (Laplace u > 0
    with u = 0 on the boundary: a sign error gives u > 0)."""
    axis, u = inverse.reference(201)
    assert axis[0] == -2 and axis[-1] == 2 and u.shape == (201, 201)
    h = 4 / 200
    inner = u[1:-1, 1:-1]
    laplacian = (
        u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * inner
    ) / h**2
    x, y = np.meshgrid(axis[1:-1], axis[1:-1], indexing="ij")
    assert np.abs(laplacian - source(x, y)).max() < 1e-8
    edges = [u[0], u[-1], u[:, 0], u[:, -1]]
    assert all(np.all(edge == 0) for edge in edges)
    assert inner.max() < 0
    # the deepest point lies towards the source's centre (0.5, 0.5)
    i, j = np.unravel_index(np.argmin(u), u.shape)
    assert axis[i] > 0 and axis[j] > 0


def test_the_reference_converges_at_second_order():
    """At (0, 0.4), a node of every grid: the change from 101 to 201 points
    is below 1e-4 and a quarter of that from 51 to 101 (a first-order
    mistake, as a spacing 4 / n, halves it instead)."""

    def at(n):
        axis, u = inverse.reference(n)
        h = axis[1] - axis[0]
        return u[round(2 / h), round(2.4 / h)]

    coarse, middle, fine = at(51), at(101), at(201)
    assert abs(middle - fine) < 1e-4
    assert 3.8 < abs(coarse - middle) / abs(middle - fine) < 4.2


def test_poisson_source_solution_interpolates_the_reference_bilinearly():
    problem = inverse.PoissonSourceProblem()
    axis, u = inverse.reference()
    nodes = torch.tensor([[axis[10], axis[150]], [axis[0], axis[77]]])
    found = problem.solution(LabelTensor(nodes, ["x", "y"]))
    assert found.labels == ["u"] and found.dtype == torch.float64
    assert torch.allclose(
        found.as_subclass(torch.Tensor).flatten(),
        torch.tensor([u[10, 150], u[0, 77]]),
    )
    # a cell's centre: the mean of its four corners (nearest-node would
    # give one of them)
    centre = (axis[60] + axis[61]) / 2, (axis[120] + axis[121]) / 2
    corners = u[60:62, 120:122].mean()
    found = problem.solution(LabelTensor(torch.tensor([centre]), ["x", "y"]))
    assert float(found) == pytest.approx(corners, abs=1e-12)
    assert corners != pytest.approx(u[60, 120], abs=1e-6)


def test_poisson_source_observations_are_the_tutorial_grid():
    problem = inverse.PoissonSourceProblem()
    data = problem.conditions["data"]
    pts = data.input.as_subclass(torch.Tensor)
    assert data.input.labels == ["x", "y"] and pts.shape == (2500, 2)
    side = torch.linspace(-2, 2, 50)
    for column in range(2):
        assert torch.equal(torch.unique(pts[:, column]), side)
    target = data.target.as_subclass(torch.Tensor).flatten()
    exact = problem.solution(data.input).as_subclass(torch.Tensor).flatten()
    assert torch.equal(target, exact)
    edge = (pts.abs() == 2).any(dim=1)
    assert int(edge.sum()) == 4 * 49 and target[edge].abs().max() == 0
    assert target.min() < -0.3


def test_poisson_source_equation_uses_the_unknown_centre():
    """The interior residual on u = x^2 y (Laplacian 2 y) is 2 y minus the
    source centred at the given unknowns (the true ones without)."""
    problem = inverse.PoissonSourceProblem()
    pts = float64_points(problem, "D")
    xy = pts.as_subclass(torch.Tensor)
    output = LabelTensor(xy[:, :1] ** 2 * xy[:, 1:], ["u"])
    x, y = (xy[:, k].detach().numpy() for k in range(2))
    mu = {"mu1": torch.tensor([-0.3]).double()}
    mu["mu2"] = torch.tensor([0.7]).double()
    found = residual(problem, "D", pts, output, mu).flatten().numpy()
    assert np.allclose(found, 2 * y - source(x, y, -0.3, 0.7), atol=1e-12)
    equation = problem.conditions["D"].equation
    true = equation.residual(pts, output, None).as_subclass(torch.Tensor)
    expected = 2 * y - source(x, y)
    assert np.allclose(true.detach().flatten().numpy(), expected, atol=1e-12)


def test_poisson_source_unknowns_points_and_boundary():
    problem = inverse.PoissonSourceProblem()
    assert problem.TRUE_PARAMETERS == {"mu1": 0.5, "mu2": 0.5}
    assert set(problem.unknown_parameters) == {"mu1", "mu2"}
    ranges = problem.unknown_parameter_domain.range
    assert ranges == {"mu1": (-1, 1), "mu2": (-1, 1)}
    discretise_conditions(problem, inverse.PoissonSourceProblem.POINTS)
    edge = problem.discretised_domains["boundary"].as_subclass(torch.Tensor)
    assert edge.shape == (1000, 2) and (edge.abs() == 2).any(dim=1).all()
    assert len(problem.discretised_domains["D"]) == 400
    found = residual(problem, "boundary", float64_points(problem, "boundary"))
    assert found.abs().max() < 1e-12


# -------------------------------------------------------------- the pages
def page_run(problem, weighting, seed, error, parameter=None, status="ok"):
    """A run of 8 steps recorded at steps 0-8: the solution's error and,
    given ``parameter``, its parameter error twice as large until step 4
    (a run cut at step 4, equal time at cost 2, has 2 ``parameter``)."""
    history = {"steps": list(range(9)), "seconds": [1.0 + i for i in range(9)]}
    history["errors"] = [error] * 9
    found = dict(weightings.FULL, problem=problem, weighting=weighting)
    found.update(seed=seed, steps=8, status=status, history=history, part=0)
    found.update(counts={"D": 10}, failure=None, final_error=error)
    found.update(ms_per_step=1.0, final_weights={}, rejections=None)
    if parameter is not None:
        history["parameter_errors"] = [2 * parameter] * 5 + [parameter] * 4
        history["parameters"] = [{"kappa": 0.1}] * 9
        found.update(parameter_error=parameter, parameters={"kappa": 0.1})
    return found


def page_document(runs, problems, costs=None):
    weightings_run = list(dict.fromkeys(r["weighting"] for r in runs))
    ratios = {p: {w: [1.0] for w in weightings_run[1:]} for p in problems}
    ratios.update(costs or {})
    return dict(
        settings=dict(weightings.FULL, steps=8),
        parts=[{"machine_label": "a machine"}],
        runs=runs,
        problems=problems,
        weightings=weightings_run,
        step_costs=dict(rounds=1, steps=8, ratios=ratios, part={}),
    )


def recorded_document():
    """heat_inverse with parameter errors (none 0.2 and 0.4; the sketch
    0.1 and 0.4), stokes without any."""
    runs = [
        page_run("heat_inverse", "none", 0, 1e-2, 0.2),
        page_run("heat_inverse", "none", 1, 1e-2, 0.4),
        page_run("heat_inverse", "sketch_predictor", 0, 5e-3, 0.1),
        page_run("heat_inverse", "sketch_predictor", 1, 5e-3, 0.4),
        page_run("stokes", "none", 0, 0.5),
        page_run("stokes", "sketch_predictor", 0, 0.4),
    ]
    return page_document(runs, ["stokes", "heat_inverse"])


def cells(lines, start):
    line = next(line for line in lines if line.startswith(start))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_runs_summary_sets_the_parameter_error_beside_the_error():
    lines = weightings_page.summary_table(recorded_document())
    header = ["weighting", "stokes", "heat_inverse", "heat_inverse: parameter"]
    assert cells(lines, "| weighting") == header
    # medians: none (0.2 + 0.4) / 2, the sketch (0.1 + 0.4) / 2, in bold
    # as the lowest; the solution errors beside them
    assert cells(lines, "| none")[2:] == ["1.0e-2", "0.30"]
    sketch = cells(lines, "| `SketchNTKWeighting(gradient_band=None)`")
    assert sketch[2:] == ["**5.0e-3**", "**0.25**"]


def test_the_runs_problem_table_sets_the_final_parameter_errors():
    document = recorded_document()
    lines = weightings_page.problem_section(document, "heat_inverse")
    assert cells(lines, "| weighting")[2] == "parameter error at step 8"
    assert cells(lines, "| none")[2] == "3.00e-01 (2.00e-01–4.00e-01)"
    assert any(
        line.startswith("*parameter error at step 8*:") for line in lines
    )
    assert any("parameter.png" in line for line in lines)
    forward = weightings_page.problem_section(document, "stokes")
    assert "parameter" not in "\n".join(forward)


def test_runs_made_before_the_record_show_not_recorded():
    """The committed runs lack the keys: not recorded, never a number, and
    the page says from when it is recorded; a forward-only page has no
    parameter column and no sentence."""
    document = recorded_document()
    for run in document["runs"]:
        for name in KEYS:
            run.pop(name, None)
        for name in ("parameters", "parameter_errors"):
            run["history"].pop(name, None)
    summary = weightings_page.summary_table(document)
    assert cells(summary, "| none")[3] == "not recorded"
    note = weightings_page.summary_note(document)[0]
    assert measures.SINCE in note and "“not recorded”" in note
    section = weightings_page.problem_section(document, "heat_inverse")
    assert cells(section, "| none")[2] == "not recorded"
    assert not any("parameter.png" in line for line in section)
    ratios = suite_page.per_problem_table(document, "steps", "none")
    assert cells(ratios, "| `SketchNTKWeighting")[3] == "not recorded"
    forward = dict(document, problems=["stokes"])
    forward["runs"] = [r for r in document["runs"] if r["problem"] == "stokes"]
    assert weightings_page.summary_note(forward) == []
    assert "parameter" not in "\n".join(
        weightings_page.summary_table(forward)
        + suite_page.per_problem_lines(forward, ["none"])
    )


def test_the_suite_ratios_pair_the_final_parameter_errors_by_seed():
    """÷ none at equal steps: seeds 0.1 / 0.2 and 0.4 / 0.4, geometric
    mean sqrt(0.5); at equal time at cost 2 the sketch's runs are cut at
    step 4, where its parameter errors are twice as large: sqrt(2)."""
    costs = {"heat_inverse": {"sketch_predictor": [2.0]}}
    document = recorded_document()
    document["step_costs"]["ratios"].update(costs)
    steps = suite_page.per_problem_table(document, "steps", "none")
    header = cells(steps, "| weighting")
    assert header[2:] == ["heat_inverse", "heat_inverse: parameter"]
    row = cells(steps, "| `SketchNTKWeighting")
    assert row[2] == "0.5 (0.5–0.5)" and row[3] == "0.71 (0.5–1)"
    time = suite_page.per_problem_table(document, "time", "none")
    assert cells(time, "| `SketchNTKWeighting")[3] == "1.4 (1–2)"
    note = suite_page.per_problem_lines(document, ["none"])[0]
    assert note.startswith("*heat_inverse: parameter*: the geometric mean")


def test_the_census_sets_the_parameter_error_after_an_inverse_error():
    recorded = page_run("heat_inverse", "default", 0, 0.005, 0.25)
    before = page_run("heat_inverse", "default", 0, 0.005)
    forward = page_run("stokes", "default", 0, 0.5)
    inverse_names = ("heat_inverse",)
    assert measures.census_error(recorded, inverse_names) == (
        "0.005 (parameter: 0.25)"
    )
    assert measures.census_error(before, inverse_names) == (
        "0.005 (parameter: not recorded)"
    )
    assert measures.census_error(forward, inverse_names) == "0.5"
