"""Unit checks of :mod:`pina_ntk.integration.resampling` without training:
the checks of ``counts`` and ``every_n_steps`` (their messages are what a
user reads), the sampling mode and sizes of :func:`discretise_conditions`,
and the draws of :class:`ResampleCallback` driven hook by hook with tiny
fakes of the trainer and the solver."""

from types import SimpleNamespace

import pytest
import torch
from pina import Condition, LabelTensor
from pina.domain import CartesianDomain
from pina.equation import FixedValue
from pina.problem import SpatialProblem

from pina_ntk.integration import ResampleCallback
from pina_ntk.integration.resampling import discretise_conditions


def line_with_data():
    """A 1-D problem with two domain conditions (``D`` on [0, 1], ``ends``
    on [2, 3]) and one data condition without a domain."""

    class Line(SpatialProblem):
        output_variables = ["u"]
        spatial_domain = CartesianDomain({"x": [0, 1]})
        domains = {"D": spatial_domain, "ends": CartesianDomain({"x": [2, 3]})}
        conditions = {
            "D": Condition(domain="D", equation=FixedValue(0.0)),
            "ends": Condition(domain="ends", equation=FixedValue(0.0)),
            "data": Condition(
                input=LabelTensor(torch.zeros(3, 1), ["x"]),
                target=LabelTensor(torch.zeros(3, 1), ["u"]),
            ),
        }

    return Line()


def fake_solver(domain, n=5):
    """A stand-in of a PINA solver: condition ``D`` on ``domain`` holding
    ``n`` stored points (all that the callback reads of a solver)."""
    points = LabelTensor(torch.full((n, 1), -1.0), ["x"])
    condition = SimpleNamespace(
        domain="D", data=SimpleNamespace(input=points, data={"input": points})
    )
    problem = SimpleNamespace(
        conditions={"D": condition}, domains={"D": domain}
    )
    return SimpleNamespace(problem=problem)


def step(callback, solver, global_step, points):
    """One ``on_train_batch_start`` at ``global_step`` on a batch of
    condition ``D`` holding ``points``; returns the points it trains on."""
    batch = [("D", {"input": points})]
    callback.on_train_batch_start(
        SimpleNamespace(global_step=global_step), solver, batch, 0
    )
    return batch[0][1]["input"]


# ------------------------------------------------------- counts checks
COUNTS_MESSAGE = (
    r"counts must be a non-empty dict \{condition name: number of points\}, "
    r"got "
)


@pytest.mark.parametrize(
    "counts,shown", [({}, r"\{\}\."), ([("D", 3)], r"\[\('D', 3\)\]\.")]
)
def test_counts_must_be_a_non_empty_dict(counts, shown):
    # an empty dict and a non-dict (even a non-empty one) are both refused,
    # with the message naming the expected form and the value given
    with pytest.raises(ValueError, match=COUNTS_MESSAGE + shown):
        ResampleCallback(counts=counts)


def test_counts_keys_must_be_condition_names():
    # a key that is not a str is refused by name
    with pytest.raises(
        ValueError,
        match=r"counts keys must be condition names \(str\), got 1\.",
    ):
        ResampleCallback(counts={1: 3})


@pytest.mark.parametrize("n", [0, 2.5, True])
def test_counts_values_name_the_condition(n):
    # a point count below 1, or not an int, is reported as counts['D']
    with pytest.raises(
        ValueError,
        match=rf"counts\['D'\] must be an integer >= 1, got {n!r}\.",
    ):
        ResampleCallback(counts={"D": n})


def test_counts_is_copied():
    # the callback keeps its own dict: later edits of the caller's do not
    # change the draw sizes
    counts = {"D": 3}
    callback = ResampleCallback(counts=counts)
    counts["D"] = 7
    assert callback.counts == {"D": 3}


# -------------------------------------------------- every_n_steps check
@pytest.mark.parametrize("every", [0, -1, 1.0, True])
def test_every_n_steps_must_be_a_positive_int(every):
    # the message names the parameter as the user wrote it
    with pytest.raises(
        ValueError,
        match=rf"^every_n_steps must be an integer >= 1, got {every!r}\.$",
    ):
        ResampleCallback(every)


# -------------------------------------------------- discretise_conditions
def test_discretise_conditions_needs_counts():
    # None is refused by discretise_conditions itself (the callback takes it)
    with pytest.raises(
        ValueError, match=r"^counts must be a dict, got None\.$"
    ):
        discretise_conditions(line_with_data(), None)


@pytest.mark.parametrize("name", ["data", "nowhere"])
def test_discretise_conditions_refuses_conditions_without_domain(name):
    # a data condition (no domain) and an unknown name are both refused,
    # listing the problem's conditions
    message = (
        rf"^counts names '{name}', which is not a condition with a domain; "
        r"conditions: \['D', 'ends', 'data'\]\.$"
    )
    with pytest.raises(ValueError, match=message):
        discretise_conditions(line_with_data(), {name: 3})


def test_discretise_conditions_uses_each_count_and_the_mode():
    # grid mode on [0, 1] with 5 points is 0, 1/4, ..., 1 (PINA's grid
    # includes the ends); "ends" ([2, 3]) gets its own count of 3
    problem = line_with_data()
    discretise_conditions(problem, {"D": 5, "ends": 3}, mode="grid")
    found = problem.discretised_domains
    d = sorted(found["D"].tensor.reshape(-1).tolist())
    assert d == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])
    ends = sorted(found["ends"].tensor.reshape(-1).tolist())
    assert ends == pytest.approx([2.0, 2.5, 3.0])


# ------------------------------------------------------- the callback
class RecordingDomain:
    """A domain written to PINA's ``DomainInterface.sample(n, mode,
    variables)`` signature (``mode`` has no default there): it records the
    mode and returns ``n`` points at 0.5."""

    def __init__(self):
        self.modes = []

    def sample(self, n, mode, variables="all"):
        self.modes.append(mode)
        return LabelTensor(torch.full((n, 1), 0.5), ["x"])


def test_sample_draws_uniformly_random_points():
    # "fresh uniformly random points": PINA's mode for that is "random",
    # passed explicitly, with counts[c] points
    domain = RecordingDomain()
    solver = fake_solver(domain)
    callback = ResampleCallback(counts={"D": 4})
    callback.on_train_start(None, solver)
    current = LabelTensor(torch.zeros(5, 1), ["x"])
    points = callback.sample(current, "D", solver)
    assert domain.modes == ["random"]
    assert points.shape == (4, 1)


def test_sample_puts_the_points_on_the_device_of_the_current_ones():
    # the new points follow current_points' device (meta here, so that the
    # move is seen on a CPU-only machine)
    solver = fake_solver(CartesianDomain({"x": [0, 1]}))
    callback = ResampleCallback(counts={"D": 4})
    callback.on_train_start(None, solver)
    current = torch.empty(5, 1, device="meta")
    points = callback.sample(current, "D", solver)
    assert points.device == torch.device("meta")
    assert points.shape == (4, 1)


def test_default_draws_at_every_step():
    # every_n_steps defaults to 1: new points at each of steps 0, 1, 2, put
    # into the batch and stored in the condition
    torch.manual_seed(0)
    solver = fake_solver(CartesianDomain({"x": [0, 1]}))
    callback = ResampleCallback(counts={"D": 4})
    assert callback.every_n_steps == 1
    callback.on_train_start(None, solver)
    old = solver.problem.conditions["D"].data.input
    seen = []
    for global_step in range(3):
        points = step(callback, solver, global_step, old)
        assert points.shape == (4, 1)
        assert solver.problem.conditions["D"].data.input is points
        assert all(points is not p for p in seen)
        seen.append(points)
    assert callback.draws == 3
    # three independent uniform draws on [0, 1]: no two are equal
    values = torch.cat([p.tensor for p in seen]).reshape(-1)
    assert len(set(values.tolist())) == 12
    assert bool(((values >= 0) & (values <= 1)).all())


def test_points_are_held_between_draws():
    # every_n_steps=3: steps 0..2 train on the draw of step 0, steps 3..4
    # on that of step 3
    solver = fake_solver(CartesianDomain({"x": [0, 1]}))
    callback = ResampleCallback(3, counts={"D": 2})
    callback.on_train_start(None, solver)
    old = solver.problem.conditions["D"].data.input
    points = [step(callback, solver, t, old) for t in range(5)]
    assert points[0] is points[1] is points[2]
    assert points[3] is points[4] and points[3] is not points[0]
    assert callback.draws == 2
    assert callback.state_dict() == {"draws": 2}


def test_counts_none_keeps_the_discretised_sizes():
    # counts=None resamples each domain condition with as many points as
    # it holds (5 here)
    solver = fake_solver(CartesianDomain({"x": [0, 1]}), n=5)
    callback = ResampleCallback()
    callback.on_train_start(None, solver)
    old = solver.problem.conditions["D"].data.input
    assert step(callback, solver, 0, old).shape == (5, 1)


def test_unknown_condition_is_refused_at_the_start_of_training():
    # counts naming a condition the problem lacks fails at on_train_start
    solver = fake_solver(CartesianDomain({"x": [0, 1]}))
    callback = ResampleCallback(counts={"pde": 3})
    with pytest.raises(
        ValueError,
        match=r"^counts names 'pde', which is not a condition with a "
        r"domain; conditions: \['D'\]\.$",
    ):
        callback.on_train_start(None, solver)
