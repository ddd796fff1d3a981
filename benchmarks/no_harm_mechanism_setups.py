"""The mechanism study of issue #76: its settings (the budgets, the rows of
the outcome study, the full and the quick study) and its set-ups (each
one's problem, points, network, optimiser and error), described in
``no_harm_mechanism.py``'s docstring; that script runs them,
``no_harm_mechanism_page.py`` renders their results."""

import copy

#: Each set-up's tutorial budget (epochs, one step each).
EPOCHS = {"ode": 1500, "poisson": 1000, "poisson_feature": 1000}
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
def _fresh(cls):
    """A subclass of a problem class with its own conditions and domains
    (PINA's zoo problems keep them in class-level dicts the trainer fills)."""
    own = dict(conditions=copy.deepcopy(cls.conditions))
    return type(cls.__name__, (cls,), dict(own, domains=dict(cls.domains)))


def _ode_problem():
    import torch
    from pina import Condition
    from pina.domain import CartesianDomain
    from pina.equation import Equation
    from pina.equation.zoo import FixedValue
    from pina.operator import grad
    from pina.problem import SpatialProblem

    def ode(input_, output_):
        u_x = grad(output_, input_, components=["u"], d=["x"])
        return u_x - output_.extract(["u"])

    class SimpleODE(SpatialProblem):
        output_variables = ["u"]
        spatial_domain = CartesianDomain({"x": [0, 1]})
        domains = {"x0": CartesianDomain({"x": 0.0}), "D": spatial_domain}
        conditions = {
            "bound_cond": Condition(domain="x0", equation=FixedValue(1.0)),
            "phys_cond": Condition(domain="D", equation=Equation(ode)),
        }

        def solution(self, pts):
            return torch.exp(pts.extract(["x"]))

    return SimpleODE()


def _feature_model():
    """Tutorial 2's network with the fixed extra input feature."""
    import torch
    from pina import LabelTensor
    from pina.model import FeedForward

    class SinSin(torch.nn.Module):
        def forward(self, pts):
            x, y = pts.extract(["x"]), pts.extract(["y"])
            sx, sy = torch.sin(x * torch.pi), torch.sin(y * torch.pi)
            return LabelTensor(2 * torch.pi**2 * sx * sy, ["feat"])

    class WithFeature(FeedForward):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.extra = SinSin()

        def forward(self, x):
            return super().forward(x.append(self.extra(x)))

    return WithFeature(
        input_dimensions=3,
        output_dimensions=1,
        func=torch.nn.Softplus,
        layers=[10, 10],
    )


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


def build(case, row, seed, grid):
    """``(solver, trainer options, error function)`` of a set-up and row,
    seeded with ``seed`` (the evaluation points are drawn before)."""
    import lightning
    import torch
    from pina.model import FeedForward
    from pina.optim import TorchOptimizer, TorchScheduler
    from pina.solver import PhysicsInformedSingleModelSolver

    if case == "ode":
        problem = _ode_problem()
    elif case == "lshape":
        from suite_plane_problems import LShapeProblem

        problem = LShapeProblem()
    else:
        from pina.problem.zoo import Poisson2DSquareProblem

        problem = _fresh(Poisson2DSquareProblem)()
    points = evaluation_points(case, problem, grid)
    exact = problem.solution(points)
    exact = torch.Tensor.as_subclass(exact, torch.Tensor).flatten()

    def error(solver):
        with torch.no_grad():
            found = torch.Tensor.as_subclass(solver(points), torch.Tensor)
            gap = torch.linalg.norm(found.flatten() - exact)
            return float(gap / torch.linalg.norm(exact))

    lightning.seed_everything(seed, verbose=False)
    scheduler = None
    sizes = dict(train_size=1.0, test_size=0.0, val_size=0.0)
    if case == "ode":
        problem.discretise_domain(1, "random", domains=["x0"])
        problem.discretise_domain(20, "lh", domains=["D"])
        model = FeedForward(
            layers=[10, 10],
            func=torch.nn.Tanh,
            output_dimensions=1,
            input_dimensions=1,
        )
        optimizer = TorchOptimizer(torch.optim.RAdam, lr=0.005)
    elif case == "lshape":
        from pina_ntk.integration.resampling import discretise_conditions
        from pina_ntk.paper.experiments.models import ScaledMLP

        discretise_conditions(problem, problem.POINTS)
        box = problem.spatial_domain.range
        lower, upper = ([float(box[v][i]) for v in "xy"] for i in (0, 1))
        model = ScaledMLP(lower, upper, 1, width=64, depth=3)
        optimizer = TorchOptimizer(torch.optim.Adam, lr=1e-3)
        decay = torch.optim.lr_scheduler.ExponentialLR
        scheduler = TorchScheduler(decay, gamma=0.9 ** (1 / 1000))
    else:
        problem.discretise_domain(30, "grid", domains=["D"])
        problem.discretise_domain(100, "grid", domains=["boundary"])
        if case == "poisson_feature":
            model = _feature_model()
        else:
            model = FeedForward(
                layers=[10, 10],
                func=torch.nn.Softplus,
                output_dimensions=1,
                input_dimensions=2,
            )
        optimizer = TorchOptimizer(
            torch.optim.Adam, lr=0.006, weight_decay=1e-8
        )
        sizes = dict(train_size=0.8, test_size=0.2, val_size=0.0, shuffle=True)
    options = dict(optimizer=optimizer, weighting=make_weighting(row))
    if scheduler is not None:
        options["scheduler"] = scheduler
    solver = PhysicsInformedSingleModelSolver(problem, model, **options)
    return solver, sizes, error
