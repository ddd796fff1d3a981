import lightning
import torch
from pina import Trainer
from pina.model import FeedForward
from pina.problem.zoo import AcousticWaveProblem
from pina.solver import PhysicsInformedSingleModelSolver

from pina_ntk import NTKCallback, SketchNTKWeighting

lightning.seed_everything(0)  # before the points are drawn: repeatable runs
problem = AcousticWaveProblem()
problem.discretise_domain(200, "random")
model = FeedForward(2, 1, inner_size=64, n_layers=3, func=torch.nn.Tanh)
solver = PhysicsInformedSingleModelSolver(
    problem, model, weighting=SketchNTKWeighting()
)
trainer = Trainer(
    solver,
    max_epochs=1000,  # full batch: one step per epoch
    callbacks=[NTKCallback(log_every_n_steps=10)],  # optional: its options
)
trainer.train()
weights = solver.weighting.last_saved_weights()  # one per condition
print({name: round(float(weight), 4) for name, weight in weights.items()})
