"""The PINA solver a run of the weightings benchmark trains
(``weightings.run_job``): the physics-informed solver of one network (the
causal one for the rows of ``weightings_setup.CAUSAL``), or, where a job
names its ``solver``, a physics-informed ensemble or the self-adaptive
solver; and an ensemble's score, its members' mean."""

import torch
from pina.optim import TorchOptimizer, TorchScheduler
from pina.solver import (
    CausalPhysicsInformedSingleModelSolver,
    PhysicsInformedEnsembleSolver,
    PhysicsInformedSingleModelSolver,
    SelfAdaptivePhysicsInformedSolver,
)
from pina_ntk.integration.block_statistics import condition_role

from benchmarks.suite.weightings_setup import CAUSAL


def build_solver(job, problem, models, weighting):
    """The solver of a job: Adam at ``job["lr"]`` with its smooth decay for
    every network (``models``: the first network and a function that
    builds another, drawn after it); ``job["solver"]``:
    ``"ensemble"`` (``job["members"]`` networks, each with its own
    optimiser and decay) or ``"self_adaptive"`` (PINA's sigmoid pointwise
    weights, maximised by their own Adam at the same rate, without decay:
    PINA's default scheduler)."""
    gamma = job["lr_decay"] ** (1.0 / job["lr_decay_steps"])
    decay = torch.optim.lr_scheduler.ExponentialLR

    def adam():
        return TorchOptimizer(torch.optim.Adam, lr=job["lr"])

    def decaying():
        return TorchScheduler(decay, gamma=gamma)

    # members drawn one after the other from the seeded generator
    model, make_model = models
    if job.get("solver") == "ensemble":
        models = [model] + [make_model() for _ in range(job["members"] - 1)]
        return PhysicsInformedEnsembleSolver(
            problem,
            models,
            optimizers=[adam() for _ in models],
            schedulers=[decaying() for _ in models],
            weighting=weighting,
        )
    if job.get("solver") == "self_adaptive":
        constant = torch.optim.lr_scheduler.ConstantLR
        return SelfAdaptivePhysicsInformedSolver(
            problem,
            model,
            optimizer_model=adam(),
            optimizer_weights=adam(),
            scheduler_model=decaying(),
            scheduler_weights=TorchScheduler(constant, factor=1.0),
            weighting=weighting,
        )
    options = dict(optimizer=adam(), scheduler=decaying(), weighting=weighting)
    if job["weighting"] not in CAUSAL:
        return PhysicsInformedSingleModelSolver(problem, model, **options)
    # PINA's defaults: eps 100, 10 slices
    interior = [
        c
        for c in problem.conditions
        if condition_role(problem, c) == "interior"
    ]
    return CausalPhysicsInformedSingleModelSolver(
        problem, model, regularized_conditions=interior, **options
    )


class MembersMean:
    """An ensemble solver seen as the mean of its members' outputs, the
    ensemble's prediction, for ``relative_error_fn``."""

    def __init__(self, solver):
        self.solver = solver
        self.device = solver.device

    def eval(self):
        self.solver.eval()

    def __call__(self, points):
        outputs = torch.Tensor.as_subclass(self.solver(points), torch.Tensor)
        return outputs.mean(dim=0)  # PINA stacks the members first


def members_mean_error(error_fn, solver):
    """``error_fn`` of an ensemble solver's mean prediction."""
    return error_fn(MembersMean(solver))
