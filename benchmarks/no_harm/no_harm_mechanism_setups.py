"""The mechanism study of issue #76: its settings (the budgets, the rows of
the outcome study, the full and the quick study) and its set-ups (each
one's problem, points, network, optimiser and error), described in
``no_harm_mechanism.py``'s docstring; that script runs them,
``no_harm_mechanism_page.py`` renders their results."""

from benchmarks.suite.introductory_setups import SETUPS, assemble

#: The cases' set-ups of ``introductory_setups.SETUPS`` (PINA's tutorials).
TUTORIALS = {
    "ode": "tutorial_ode",
    "poisson": "tutorial_poisson",
    "poisson_feature": "tutorial_poisson_feature",
}
#: Each set-up's tutorial budget (epochs, one step each).
EPOCHS = {case: SETUPS[name][-2] for case, name in TUTORIALS.items()}
EPOCHS["lshape"] = 4000
#: The default's moving-average rate per step and sample spacing.
DEFAULT_ALPHA, DEFAULT_EVERY = 1e-3, 10
#: The rows of the outcome study: kind (``None``: no weighting), options.
ROWS = {
    "none": (None, {}),
    "default": ("sketch", {}),
    "sketch_a0.01_k10": ("sketch", dict(alpha=1e-2, sample_every_n_steps=10)),
    "sketch_a0.1_k10": ("sketch", dict(alpha=1e-1, sample_every_n_steps=10)),
    "sketch_a0.01_k1": ("sketch", dict(alpha=1e-2, sample_every_n_steps=1)),
    "sketch_a0.05_k1": ("sketch", dict(alpha=5e-2, sample_every_n_steps=1)),
    "exact_k1": ("exact", dict(update_every_n_steps=1)),
    "exact_k10": ("exact", dict(update_every_n_steps=10)),
    "exact_k100": ("exact", dict(update_every_n_steps=100)),
}
FULL = {
    "grid": 64,
    "trajectory": {
        "cases": ["poisson", "poisson_feature", "ode", "lshape"],
        "seeds": [0, 1],
        "last": 300,
        "every": 10,
        "windows": [[0, 50], [50, 150], [150, 300]],
        "lag_steps": [20, 50, 100, 300],
    },
    "outcome": {
        "cases": ["poisson", "poisson_feature"],
        "seeds": [0, 1, 2, 3],
        "rows": list(ROWS),
        "steps": None,  # each case's EPOCHS
        "error_every": 100,
    },
    "budget": {
        "case": "poisson",
        "seeds": [0, 1, 2],
        "rows": ["none", "default"],
        "budgets": [1000, 3000, 10000],
    },
}
QUICK = {
    "grid": 16,
    "trajectory": {
        "cases": ["poisson", "lshape"],
        "seeds": [0],
        "last": 30,
        "every": 10,
        "windows": [[0, 10], [10, 30]],
        "lag_steps": [10, 30],
    },
    "outcome": {
        "cases": ["poisson"],
        "seeds": [0],
        "rows": ["none", "default", "exact_k10"],
        "steps": 30,
        "error_every": 10,
    },
    "budget": {
        "case": "poisson",
        "seeds": [0],
        "rows": ["none", "default"],
        "budgets": [30, 60],
    },
}


# ---------------------------------------------------------------- set-ups
def evaluation_points(case, problem, grid):
    """The error's points: ``grid`` per axis (``lshape``: those in the L)."""
    if case == "lshape":
        return problem.evaluation_points(grid)
    return problem.spatial_domain.sample(grid, "grid")


def make_weighting(row):
    """A fresh weighting of a row of :data:`ROWS` (``None``: none)."""
    from pina_ntk import NTKWeighting, SketchNTKWeighting

    kind, options = ROWS[row]
    if kind is None:
        return None
    return (SketchNTKWeighting if kind == "sketch" else NTKWeighting)(**options)


def _lshape(problem):
    """The L-shaped set-up's network and solver options, its points drawn."""
    import torch
    from pina.optim import TorchOptimizer, TorchScheduler

    from pina_ntk.integration.resampling import discretise_conditions
    from pina_ntk.paper.experiments.models import ScaledMLP

    discretise_conditions(problem, problem.POINTS)
    box = problem.spatial_domain.range
    lower, upper = ([float(box[v][i]) for v in "xy"] for i in (0, 1))
    model = ScaledMLP(lower, upper, 1, width=64, depth=3)
    optimizer = TorchOptimizer(torch.optim.Adam, lr=1e-3)
    decay = torch.optim.lr_scheduler.ExponentialLR
    scheduler = TorchScheduler(decay, gamma=0.9 ** (1 / 1000))
    return model, dict(optimizer=optimizer, scheduler=scheduler)


def _error(case, problem, grid):
    """The relative L2 error on :func:`evaluation_points` (no draws)."""
    import torch

    points = evaluation_points(case, problem, grid)
    exact = problem.solution(points)
    exact = torch.Tensor.as_subclass(exact, torch.Tensor).flatten()

    def error(solver):
        with torch.no_grad():
            found = torch.Tensor.as_subclass(solver(points), torch.Tensor)
            gap = torch.linalg.norm(found.flatten() - exact)
            return float(gap / torch.linalg.norm(exact))

    return error


def build(case, row, seed, grid):
    """``(solver, trainer options, error function)`` of a set-up and row,
    seeded with ``seed`` before the points are drawn, then the network
    and the weighting built (a tutorial: ``introductory_setups.assemble``)."""
    import lightning
    from pina.solver import PhysicsInformedSingleModelSolver

    if case == "lshape":
        from benchmarks.suite.suite_plane_problems import LShapeProblem

        problem = LShapeProblem()
        error = _error(case, problem, grid)
        lightning.seed_everything(seed, verbose=False)
        model, options = _lshape(problem)
        sizes = dict(train_size=1.0, test_size=0.0, val_size=0.0)
    else:
        lightning.seed_everything(seed, verbose=False)
        problem, model, optimizer = assemble(TUTORIALS[case])
        error = _error(case, problem, grid)
        options = dict(optimizer=optimizer)
        sizes = dict(SETUPS[TUTORIALS[case]][-1])
    options["weighting"] = make_weighting(row)
    solver = PhysicsInformedSingleModelSolver(problem, model, **options)
    return solver, sizes, error
