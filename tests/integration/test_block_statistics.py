"""Which statistic each condition takes (``statistic="boundary"`` or a
mapping): the conditions' roles read from their domains, the option's
checks, and the exact weights of a mixed run against an independent
computation from the Jacobian rows."""

import numpy as np
import pytest
from pina import Condition
from pina.domain import CartesianDomain, EllipsoidDomain, Union
from pina.equation import FixedValue
from pina.problem import SpatialProblem
from pina.problem.zoo import (
    AdvectionProblem,
    DiffusionReactionProblem,
    HelmholtzProblem,
    Poisson2DSquareProblem,
)

from pina_ntk import NTKWeighting, SketchNTKWeighting, ntk_traces
from pina_ntk.integration.block_statistics import (
    check_statistic,
    condition_role,
    is_stationary,
    rayleigh_blocks,
)
from pina_ntk.integration.diagnostics import condition_calls
from pina_ntk.paper.problems import WaveProblem

from helpers import (
    make_problem,
    make_solver,
    make_trainer,
    ntk_callback,
    own_problem,
)
from reference import jacobian_blocks


@pytest.mark.parametrize(
    "problem,roles",
    [
        (Poisson2DSquareProblem, {"boundary": "boundary", "D": "interior"}),
        (HelmholtzProblem, {"boundary": "boundary", "D": "interior"}),
        (
            DiffusionReactionProblem,
            {"boundary": "boundary", "t0": "initial", "D": "interior"},
        ),
        (AdvectionProblem, {"t0": "initial", "D": "interior"}),
        (
            WaveProblem,
            {
                "pde": "interior",
                "initial_value": "initial",
                "initial_velocity": "initial",
                "left": "boundary",
                "right": "boundary",
            },
        ),
    ],
)
def test_condition_roles_come_from_the_domains(problem, roles):
    problem = own_problem(problem)
    assert {n: condition_role(problem, n) for n in roles} == roles
    assert set(roles) == set(problem.conditions)


class ShapesProblem(SpatialProblem):
    """A disc's surface and a union of the square with one of its edges:
    neither is a Cartesian boundary."""

    output_variables = ["u"]
    spatial_domain = CartesianDomain({"x": [0, 1], "y": [0, 1]})
    domains = {
        "disc": EllipsoidDomain(
            {"x": [0, 1], "y": [0, 1]}, sample_surface=True
        ),
        "mixed": Union(
            [
                CartesianDomain({"x": [0, 1], "y": [0, 1]}),
                CartesianDomain({"x": 0, "y": [0, 1]}),
            ]
        ),
        "edge": CartesianDomain({"x": 0, "y": [0, 1]}),
    }
    conditions = {
        name: Condition(domain=name, equation=FixedValue(0.0))
        for name in domains
    }


def test_data_and_other_domains_are_neither_boundary_nor_initial():
    problem = make_problem("supervised")
    (name,) = problem.conditions
    assert condition_role(problem, name) == "other"
    problem = ShapesProblem()
    assert condition_role(problem, "disc") == "other"
    assert condition_role(problem, "mixed") == "other"
    assert condition_role(problem, "edge") == "boundary"


def test_the_band_applies_to_stationary_problems_only():
    assert not is_stationary(WaveProblem())
    assert not is_stationary(own_problem(DiffusionReactionProblem))
    assert is_stationary(own_problem(HelmholtzProblem))
    assert is_stationary(ShapesProblem())
    assert is_stationary(None)
    # the weighting reads it at set_conditions
    weighting = SketchNTKWeighting(gradient_band=4)
    assert weighting.band_applies()
    weighting.set_conditions(["pde"], WaveProblem())
    assert not weighting.band_applies()
    weighting.set_conditions(["D", "boundary"], own_problem(HelmholtzProblem))
    assert weighting.band_applies()
    assert not SketchNTKWeighting().band_applies()  # off by default


def test_rayleigh_blocks_of_each_option():
    problem = own_problem(DiffusionReactionProblem)
    names = ["D", "t0", "boundary"]
    assert rayleigh_blocks("trace", names, problem) == (False,) * 3
    assert rayleigh_blocks("rayleigh", names, problem) == (True,) * 3
    assert rayleigh_blocks("boundary", names, problem) == (False, False, True)
    mapping = {"t0": "rayleigh", "boundary": "trace"}
    assert rayleigh_blocks(mapping, names, problem) == (False, True, False)
    with pytest.raises(
        ValueError, match=r"statistic names conditions \['g1'\]"
    ):
        rayleigh_blocks({"g1": "rayleigh"}, names, problem)
    # a role reads the domains; the other options do not need the problem
    with pytest.raises(ValueError, match="statistic='boundary'.*solver"):
        rayleigh_blocks("boundary", names, None)
    assert rayleigh_blocks({"t0": "rayleigh"}, names, None) == (
        False,
        True,
        False,
    )


@pytest.mark.parametrize(
    "statistic",
    ["gradient", {"boundary": "gradient"}, {1: "trace"}, None, ["trace"]],
)
@pytest.mark.parametrize("cls", [NTKWeighting, SketchNTKWeighting])
def test_invalid_statistic_names_the_parameter(cls, statistic):
    with pytest.raises(ValueError, match="statistic"):
        cls(statistic=statistic)


def test_a_mapping_is_kept_as_a_plain_dict():
    from types import MappingProxyType

    option = check_statistic(MappingProxyType({"D": "rayleigh"}))
    assert option == {"D": "rayleigh"} and type(option) is dict


def test_a_mapping_naming_a_missing_condition_fails_at_the_first_step():
    weighting = NTKWeighting(statistic={"inlet": "rayleigh"})
    solver = make_solver("poisson", weighting=weighting)
    with pytest.raises(ValueError, match=r"\['inlet'\].*\['boundary', 'D'\]"):
        make_trainer(solver, steps=1).train()


def test_exact_boundary_statistic_matches_the_jacobian_rows():
    # the acoustic wave problem: boundary (Rayleigh), t0 and D (trace)
    weighting = NTKWeighting(statistic="boundary", safeguard=None)
    solver = make_solver("wave", weighting=weighting)
    make_trainer(solver, steps=1, ntk=False)
    rows = jacobian_blocks(solver)  # at theta_0
    values = {
        name: np.asarray(
            evaluate(batch, solver).detach().reshape(-1), dtype=np.float64
        )
        for name, evaluate, batch in condition_calls(solver)
    }
    expected = {}
    for name, jac in rows.items():
        if name == "boundary":
            r = values[name]
            projected = jac.T @ r
            expected[name] = len(r) * (projected @ projected) / (r @ r)
        else:
            expected[name] = float((jac * jac).sum())
    # outside training (diagnostics) and inside the first training step
    found = ntk_traces(solver, "exact", statistic="boundary")
    for name, value in expected.items():
        assert float(found[name]) == pytest.approx(value, rel=1e-5)
    trainer = make_trainer(solver, steps=1)
    trainer.train()
    traces = ntk_callback(trainer).statistics.traces
    for name, value in expected.items():
        assert traces[name] == pytest.approx(value, rel=1e-5)
    # the boundary's Rayleigh value differs from its trace: the test sees
    # which statistic each block took
    boundary_trace = float((rows["boundary"] ** 2).sum())
    assert abs(traces["boundary"] - boundary_trace) > 1e-3 * boundary_trace


def test_invalid_statistic_messages_spell_out_the_accepted_values():
    # the messages a user reads: the accepted options and the mapping's
    # form {condition: 'trace' | 'rayleigh'}, then the value given
    with pytest.raises(
        ValueError,
        match=r"^statistic must be one of \('trace', 'rayleigh', 'interior', "
        r"'boundary', 'initial'\) or a mapping "
        r"\{condition: 'trace' \| 'rayleigh'\}, got 'gradient'\.$",
    ):
        check_statistic("gradient")
    with pytest.raises(
        ValueError,
        match=r"^statistic as a mapping must map condition names to one of "
        r"\('trace', 'rayleigh'\), got 'D': 'exact'\.$",
    ):
        check_statistic({"D": "exact"})


def test_a_role_without_a_problem_says_to_attach_the_weighting():
    # the full message of a role given without a problem, as a user reads it
    with pytest.raises(
        ValueError,
        match=r"^statistic='initial' reads the conditions' domains: "
        r"attach the weighting to a PINA solver first\.$",
    ):
        rayleigh_blocks("initial", ["D"], None)
