# %% [markdown]
# # NTK loss weights for the wave equation
#
# This tutorial reproduces the wave-equation experiment of Hirsch & Pichi
# (Section 5.2.2), the benchmark on which Wang, Yu & Perdikaris (2022)
# introduced NTK loss weights. We train three physics-informed neural
# networks with [PINA](https://github.com/mathLab/PINA), identical except for
# the loss weights:
#
# * a **vanilla PINN** (every loss term has weight 1);
# * an **exact-NTK PINN**: weights from the exact traces of the neural
#   tangent kernel `K = J J^T`, recomputed every few steps;
# * a **sketch-NTK PINN**: weights from randomised trace sketches of the
#   paper (here the parameter-space estimator of its Theorem
#   *alternative-ntk-approximation*: one extra forward pass per step) with
#   the moving average of Algorithm 3.
#
# The problem is
#
# $$u_{tt} - 4u_{xx} = 0 \text{ on } (0,1)^2,\quad u(x,0) = \sin(\pi x) +
# \tfrac12\sin(4\pi x),\quad u_t(x,0) = 0,\quad u(0,t) = u(1,t) = 0,$$
#
# with exact solution $u = \sin(\pi x)\cos(2\pi t) +
# \tfrac12\sin(4\pi x)\cos(8\pi t)$. As in the paper, fresh random
# collocation points are drawn at every step.
#
# The same experiment runs from a shell with `pina-ntk wave` (same code,
# same defaults). Set the environment variable `PINA_NTK_QUICK=1` to run
# this notebook in seconds with tiny settings (used by the test suite).

# %%
import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from pina_ntk.paper.experiments.settings import quick_mode
from pina_ntk.paper.experiments.wave import (
    WaveSettings,
    plot_solutions,
    plot_weights,
    run_wave,
)
from pina_ntk.paper.problems import WaveProblem

settings = WaveSettings.quick() if quick_mode() else WaveSettings()
settings

# %% [markdown]
# ## The problem: one PINA condition per loss block
#
# `WaveProblem` is an ordinary PINA `TimeDependentProblem` /
# `SpatialProblem`. Unlike PINA's zoo `AcousticWaveProblem`, which lumps the
# initial value and velocity into one condition and both sides into another,
# it has one condition per loss term of the paper, so the NTK weighting
# balances the five blocks separately. `PAPER_POINTS` lists the number of
# fresh points per block and step used by the paper and by Wang et al.

# %%
problem = WaveProblem()
print("conditions:", list(problem.conditions))
print("points per step:", WaveProblem.PAPER_POINTS)

# %% [markdown]
# ## Under the hood
#
# `run_wave` below trains each PINN with the plain PINA API. For the
# sketch-NTK PINN that is: a `PhysicsInformedSingleModelSolver` with
# `weighting=SketchNTKWeighting(estimator="parameter")` (the cheaper of the
# two estimators; see below for the predictor sketch), and a
# `pina.Trainer` with two
# callbacks, `NTKCallback` (computes the weights inside each step) and
# `ResampleCallback` (fresh points every step). A few steps of it by hand:

# %%
import torch
from pina import Trainer
from pina.solver import PhysicsInformedSingleModelSolver

from pina_ntk import NTKCallback, SketchNTKWeighting
from pina_ntk.paper.experiments.models import ScaledMLP
from pina_ntk.integration.resampling import (
    ResampleCallback,
    discretise_conditions,
)

torch.manual_seed(0)
demo = WaveProblem()
discretise_conditions(demo, WaveProblem.PAPER_POINTS)
model = ScaledMLP([0, 0], [1, 1], 1, width=32, depth=3)
solver = PhysicsInformedSingleModelSolver(
    demo,
    model,
    weighting=SketchNTKWeighting(alpha=1e-3, estimator="parameter"),
)
ntk = NTKCallback()
trainer = Trainer(
    solver,
    max_epochs=3,  # one step per epoch: the whole batch
    accelerator="cpu",
    callbacks=[ntk, ResampleCallback(every_n_steps=1)],
    train_size=1.0,
    val_size=0.0,
    test_size=0.0,
    enable_progress_bar=False,
    enable_model_summary=False,
    logger=False,
    enable_checkpointing=False,
)
trainer.train()
{name: round(weight, 3) for name, weight in ntk.weights.items()}

# %% [markdown]
# ## Train the three PINNs
#
# All three use the same network, the same optimiser and learning-rate
# schedule, the same number of steps and the same random seed. The network
# is a 3×128 tanh MLP on 64 random Fourier features
# $[\cos(zB), \sin(zB)]$ of the inputs $z$ scaled to $[-1, 1]$, with
# $B_{ij} \sim N(0, 1)$ fixed at initialisation. The features are not part
# of the paper's experiment (a plain 3×500 MLP trained for 80,000 steps);
# they let the NTK-weighted PINNs resolve the $\cos(8\pi t)$ mode within
# the 10,000 steps a CPU affords. They do not rescue the vanilla PINN, whose
# failure is the imbalance between the loss terms. `--fourier-features 0`
# (or `WaveSettings(fourier_features=0)`) trains the plain MLP.
#
# The exact-NTK PINN recomputes its weights every `exact_every` steps (one
# backward pass per residual entry: about a thousand per update), the
# sketch-NTK PINN estimates them at every step.
#
# The sketch uses the parameter-space estimator
# $\|R_c(\theta + \varepsilon z) - R_c(\theta)\|^2 / \varepsilon^2$,
# $z \sim N(0, I)$, whose noise on block $c$ involves only that block's own
# kernel. The predictor sketch of Algorithm 2 (`estimator="predictor"`,
# `pina-ntk wave --estimator predictor`) estimates $g_c \cdot (Kg)_c$, whose
# noise also carries the coupling $g_c^\top K_{cd}\, g_d$ to the other
# blocks. Here the interior block's trace is about 7,000 times each boundary
# block's, so with a plain probe (`balanced_probe=False`) the boundary
# estimates drown in the interior's noise: the warm start's average came out
# negative, the weights stayed at 1 for the first thousand steps, and the
# run ended at a relative error of 6.2e-1 (seed 0), like the vanilla PINN.
# The default balanced probe scales block $c$ of $g$ by $\sqrt{w_c}$ (and
# divides the sketch by $w_c$ again, so it stays unbiased), which evens the
# blocks out: 1.1e-2 (seed 0) and 1.4e-2 (seed 1), as accurate as the
# parameter-space sketch, at the cost of one more backward pass per step
# (README, *Balanced probes*).
#
# Each step's sketch sample is completed after that step's backward pass
# (the default `sample_after_backward=True`), once the training graph is
# freed, and enters the next step's weights. The 32-sample warm start runs
# at step 0 before the backward pass; the networks are small, so the
# experiments evaluate it in one piece (`evaluation_chunk_size=None`) rather
# than in the default chunks of 128 points, which bound the memory of large
# networks.
#
# Both NTK PINNs run with `safeguard="none"`, i.e. every weight update is
# applied, as in the paper's experiment. With the default spaced-update
# safeguard (the rule behind the paper's convergence theorem) and its
# default budget, most updates on this problem are rejected: the weights
# stay frozen for thousands of steps and then jump by a large factor once
# the residual has become small. Pass `safeguard="default"` (or
# `pina-ntk wave --safeguard default`) to see it.

# %%
results = run_wave(settings, progress=not quick_mode())

# %% [markdown]
# ## Relative L2 errors and wall times
#
# Errors are measured on a regular grid of $(x, t)$ against the exact
# solution; wall times are those of `Trainer.train` on this machine.

# %%
display(Markdown(results.table()))

# %% [markdown]
# ## Loss weights: exact (dashed) and sketched (solid)
#
# As in the paper's figure, the sketched weights follow the exact ones;
# the moving average (rate `alpha`) makes them smooth, and with resampled
# points they estimate the weights of the *expected* kernel.

# %%
plot_weights(results)
plt.show()

# %% [markdown]
# ## Solutions and errors

# %%
plot_solutions(results)
plt.show()

# %% [markdown]
# ## Going further
#
# The defaults are sized for a 2-core CPU (the wall times are in the table
# above). The full-size setting of Wang et al. (a plain 3×500 tanh MLP
# without Fourier features, 80,000 Adam steps with the learning rate
# decayed by 0.9 every 1,000 steps, the paper's point counts resampled at
# every step, exact weights every 1,000 steps) is
#
# ```
# pina-ntk wave --full-size --accelerator gpu --output-dir runs/wave-full
# ```
#
# which needs a GPU or many hours of CPU. Wang et al. report relative L2
# errors of about 4.5e-1 (vanilla) and 2e-3 to 4e-3 (NTK weights) in that
# setting.
