"""No test sees another test's PINA problem: a zoo problem trained in one
test leaves the next test's problem pristine, and a test that writes into a
problem class's conditions fails (``problem_isolation.py``)."""

from pathlib import Path

import pytest
from pina.condition import DomainEquationCondition
from pina.problem.zoo import Poisson2DSquareProblem

from helpers import make_problem, make_solver, make_trainer, own_problem

TESTS = Path(__file__).resolve().parent

pytest_plugins = ["pytester"]


def declared_points(problem_class):
    """The conditions of ``problem_class`` that hold points already."""
    return [
        name
        for name, condition in problem_class.conditions.items()
        if not isinstance(condition, DomainEquationCondition)
    ]


def test_training_an_own_problem_leaves_its_class_alone():
    declared = dict(Poisson2DSquareProblem.conditions)
    solver = make_solver("poisson", n=6)
    make_trainer(solver, steps=1, ntk=False).train()
    # the trained instance holds its points, its class does not
    assert declared_points(type(solver.problem)) == []
    assert Poisson2DSquareProblem.conditions == declared
    assert solver.problem.conditions["D"].input.shape[0] == 6
    fresh = own_problem(Poisson2DSquareProblem)
    assert all(
        isinstance(c, DomainEquationCondition)
        for c in fresh.conditions.values()
    )


def test_two_supervised_problems_keep_their_own_data():
    first = make_problem("supervised", n=5)
    second = make_problem("supervised", n=7)
    assert first.conditions["data"].input.shape[0] == 5
    assert second.conditions["data"].input.shape[0] == 7


ORDERED = """
from pina.condition import DomainEquationCondition
from pina.problem.zoo import Poisson2DSquareProblem
from helpers import make_problem, make_trainer, mlp
from pina.solver import PhysicsInformedSingleModelSolver


def train(problem):
    solver = PhysicsInformedSingleModelSolver(problem, mlp(2, 1, width=4))
    make_trainer(solver, steps=1, ntk=False).train()


def test_1_trains_a_zoo_problem():
    train({problem})


def test_2_sees_a_pristine_problem():
    conditions = Poisson2DSquareProblem().conditions
    assert all(
        isinstance(c, DomainEquationCondition) for c in conditions.values()
    )
"""


def run_in_order(pytester, problem, plugin="problem_isolation"):
    """Run :data:`ORDERED` (its two tests in order) in a fresh process with
    ``plugin``; ``problem`` builds the first test's problem."""
    pytester.makepyfile(test_ordered=ORDERED.format(problem=problem))
    return pytester.runpytest_subprocess(
        "-p",
        plugin,
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        f"--rootdir={pytester.path}",
        "-o",
        f"pythonpath={TESTS}",
    )


@pytest.mark.slow
def test_a_zoo_problem_trained_in_one_test_leaves_the_next_pristine(
    pytester,
):
    result = run_in_order(pytester, 'make_problem("poisson", n=6)')
    result.assert_outcomes(passed=2)


@pytest.mark.slow
def test_a_test_that_trains_a_shared_problem_fails_and_the_next_is_pristine(
    pytester,
):
    problem = (
        "(lambda p: (p.discretise_domain(6), p)[1])(Poisson2DSquareProblem())"
    )
    # without the plugin the second test fails: the Trainer moved the first
    # test's points into Poisson2DSquareProblem's own conditions
    result = run_in_order(pytester, problem, plugin="no:problem_isolation")
    result.assert_outcomes(passed=1, failed=1)
    result = run_in_order(pytester, problem)
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_1_trains_a_zoo_problem*",
            "*changed the conditions declared by Poisson2DSquareProblem*",
        ]
    )
