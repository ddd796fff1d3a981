# %% [markdown]
# # Tutorial: NTK loss weights for the wave equation
#
# A physics-informed neural network (PINN) minimises a sum of loss terms,
# one per condition of the problem: the PDE residual in the interior, the
# initial and the boundary conditions. When these terms train at very
# different speeds the network can satisfy one and ignore the others; the
# wave equation below is the classic example, where a plain PINN fails.
# Wang, Yu & Perdikaris (2022) cure it with **neural tangent kernel (NTK)
# loss weights**: each condition's weight is set from the trace of its block
# of the kernel $K = J J^\top$ ($J$ the Jacobian of the residuals with
# respect to the network's parameters), so that every term converges at a
# comparable rate. Hirsch & Pichi replace the exact traces, which cost one
# backward pass per residual entry, by **randomised sketches** that cost one
# or two extra passes per step, averaged over the training steps.
#
# This tutorial reproduces the wave-equation experiment of Hirsch & Pichi
# (Section 5.2.2). You will train three PINNs that differ only in their
# loss weights:
#
# * a **vanilla PINN**: every loss term has weight 1;
# * an **exact-NTK PINN**: weights from the exact block traces of the NTK,
#   recomputed every few hundred steps;
# * a **sketch-NTK PINN**: weights from randomised trace sketches, one per
#   step, with the moving average of the paper's Algorithm 3.
#
# **Components used.** From [PINA](https://github.com/mathLab/PINA): a
# problem with one `Condition` per loss term, the
# `PhysicsInformedSingleModelSolver` and the `Trainer`. From `pina-ntk`:
# the loss weightings `NTKWeighting` (exact) and `SketchNTKWeighting`
# (sketched), passed to the solver as `weighting=...`, and the
# `ResampleCallback` that draws fresh collocation points at every step. The
# weighting is the whole set-up: attached to a solver, it brings along the
# Lightning callback that computes the weights inside each training step.
#
# **Run time.** The training wall time of each PINN of the stored run is in
# its results table below; it depends on the machine and on its load.
# Set the environment variable `PINA_NTK_QUICK=1` to run the notebook in
# seconds with tiny settings (the results are then not meaningful; the test
# suite runs it that way). The same experiment runs from a shell with
# `pina-ntk wave` (same code, with the weightings' defaults);
# `pina-ntk wave --paper-settings --sample-every 1` trains this notebook's
# settings (see *Which settings* below).

# %%
## Routine needed to run the notebook on Google Colab. pina-ntk is not on
## PyPI: install it from a clone of its repository, in the clone's root
## folder, with `pip install ".[tutorials]"` (on Colab, clone or upload the
## repository and `%cd` into its root before running this cell).
try:
    import google.colab

    IN_COLAB = True
except ImportError:
    IN_COLAB = False
if IN_COLAB:
    # !pip install ".[tutorials]"
    pass

import logging
import warnings

import matplotlib.pyplot as plt
import torch
from IPython.display import Markdown, display

# tqdm's notebook bars need ipywidgets; the plain text bar is used instead
warnings.filterwarnings("ignore", message="IProgress not found")

from pina import Trainer
from pina.solver import PhysicsInformedSingleModelSolver

from pina_ntk import SketchNTKWeighting
from pina_ntk.integration.resampling import (
    ResampleCallback,
    discretise_conditions,
)
from pina_ntk.paper.experiments.models import ScaledMLP
from pina_ntk.paper.experiments.settings import quick_mode
from pina_ntk.paper.experiments.wave import (
    WaveSettings,
    plot_solutions,
    plot_weights,
    run_wave,
)
from pina_ntk.paper.problems import WaveProblem

# Lightning's start-up banners, and two warnings that do not apply here (no
# validation set; a deprecation inside Lightning itself)
logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
warnings.filterwarnings("ignore", message=".*val_dataloader.*")
warnings.filterwarnings("ignore", message=".*LeafSpec.*")

# The settings of the stored run where they differ from the defaults of
# SketchNTKWeighting() and NTKWeighting() (see "Which settings" below); an
# empty RUN trains the defaults, as `pina-ntk wave` does.
RUN = dict(estimator="parameter", safeguard="none", sample_every=1)
settings = WaveSettings.quick(**RUN) if quick_mode() else WaveSettings(**RUN)
settings

# %% [markdown]
# ## The problem: one PINA condition per loss term
#
# The problem is
#
# $$u_{tt} - 4u_{xx} = 0 \text{ on } (0,1)^2,\quad u(x,0) = \sin(\pi x) +
# \tfrac12\sin(4\pi x),\quad u_t(x,0) = 0,\quad u(0,t) = u(1,t) = 0,$$
#
# with exact solution $u = \sin(\pi x)\cos(2\pi t) +
# \tfrac12\sin(4\pi x)\cos(8\pi t)$. The fast mode $\cos(8\pi t)$ is what a
# vanilla PINN misses.
#
# `WaveProblem` is an ordinary PINA `TimeDependentProblem` /
# `SpatialProblem`. Unlike PINA's zoo `AcousticWaveProblem`, which lumps the
# initial value and velocity into one condition and both sides into another,
# it has one condition per loss term of the paper, so the NTK weighting
# balances the five terms separately. `PAPER_POINTS` lists the number of
# fresh random collocation points per condition and step used by the paper
# and by Wang et al.

# %%
problem = WaveProblem()
print("conditions:", list(problem.conditions))
print("points per step:", WaveProblem.PAPER_POINTS)

# %% [markdown]
# ## An NTK-weighted PINN in plain PINA
#
# An NTK-weighted PINN is a PINA solver with a pina-ntk weighting. Here is
# the sketch-NTK PINN, trained for three steps on a small network: the
# weighting `SketchNTKWeighting(estimator="parameter")` (the cheaper of the
# two sketches, see below), and a `pina.Trainer` whose only callback is the
# `ResampleCallback` (fresh points at every step). No NTK callback is
# passed: the weighting adds its `NTKCallback`, which computes the weights
# inside each step, through Lightning's `configure_callbacks` (pass
# `callbacks=[NTKCallback(...)]` yourself only to set its options).

# %%
torch.manual_seed(0)
demo = WaveProblem()
discretise_conditions(demo, WaveProblem.PAPER_POINTS)
model = ScaledMLP([0, 0], [1, 1], 1, width=32, depth=3)
solver = PhysicsInformedSingleModelSolver(
    demo,
    model,
    weighting=SketchNTKWeighting(alpha=1e-3, estimator="parameter"),
)
trainer = Trainer(
    solver,
    max_epochs=3,  # one step per epoch: the whole batch
    accelerator="cpu",
    callbacks=[ResampleCallback(every_n_steps=1)],
    train_size=1.0,
    val_size=0.0,
    test_size=0.0,
    enable_progress_bar=False,
    enable_model_summary=False,
    logger=False,
    enable_checkpointing=False,
)
trainer.train()
# the condition weights of the last step
{
    name: round(float(weight), 3)
    for name, weight in solver.weighting.last_saved_weights().items()
}

# %% [markdown]
# The interior residual (second derivatives of the network) has by far the
# largest kernel trace, so its weight is the smallest: the weights lift the
# initial and boundary conditions, whose terms a vanilla PINN neglects.
#
# ## Training the three PINNs
#
# `run_wave` trains the three PINNs the same way, at full size. All
# three use the same network, the same optimiser and learning-rate
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
# The exact-NTK PINN recomputes its weights every `exact_every` steps
# (Wang et al. run one backward pass per residual entry, about a thousand
# per update here; pina-ntk takes the same traces from a few reverse passes
# per residual column through the step's own graph, about two training
# steps' work); the sketch-NTK PINN draws one sketch every `sample_every`
# steps into a moving average that spans about 1,000 steps.
#
# **Which settings.** The outputs stored in this notebook were computed
# with three settings that differ from the defaults of
# `SketchNTKWeighting()` and `NTKWeighting()`, so the code states them
# (`RUN` above); set `RUN = {}` and rerun the notebook to train the
# defaults, which `pina-ntk wave` trains.
# The stored run was computed by an earlier development version of
# pina-ntk; a rerun with these settings can differ from it slightly.
#
# * `sample_every=1`: a sketch at every step, Algorithm 3 of the paper as
#   published. The default draws one every 10 steps
#   (`SketchNTKWeighting(sample_every_n_steps=10)`); the
#   [spaced-samples study](../../docs/spaced-samples.md) compares the
#   spacings on this problem over three seeds.
# * `estimator="parameter"`: the parameter-space estimator
#   $\|R_c(\theta + \varepsilon z) - R_c(\theta)\|^2 / \varepsilon^2$,
#   $z \sim N(0, I)$ (Theorem 5 of the paper): one extra forward pass per
#   sample, no backward pass, and its noise on the block of condition $c$
#   involves only that block. The default is the predictor sketch of
#   Algorithm 2 (`estimator="predictor"`), which estimates
#   $g_c \cdot (Kg)_c$ for a random probe $g$ and costs one backward pass
#   more. Its noise also carries the coupling $g_c^\top K_{cd}\, g_d$ to
#   the other blocks, and here the interior block's trace is thousands of
#   times each boundary block's. With the default **balanced probe**
#   (`balanced_probe=True`) block $c$ of the probe is scaled by
#   $\sqrt{w_c}$ and its sketch divided by $w_c$ again, so each sample
#   stays unbiased and the small blocks are no longer drowned in the
#   interior's noise. *Balanced probes* in
#   [The estimators](../../docs/estimators.md) measures both sketches, and
#   the plain probe of Algorithm 2 as published (`balanced_probe=False`),
#   on this problem.
# * `safeguard="none"`: every weight update is applied, as in the paper's
#   Algorithm 3. The default is the spaced-update safeguard, the rule
#   behind the paper's convergence guarantee (Corollary 2), which keeps the
#   previous weights when an update would exceed its budget.
#
# Each sketch sample is completed after its step's backward pass (the
# default `sample_after_backward=True`), once the training graph is freed,
# and enters the next step's weights. The 32-sample warm start runs
# at step 0 before the backward pass; the networks are small, so the
# experiments evaluate it in one piece (`evaluation_chunk_size=None`) rather
# than in the default chunks of 128 points, which bound the memory of large
# networks.

# %%
results = run_wave(settings, progress=not quick_mode())

# %% [markdown]
# ## Results
#
# ### Relative L2 errors and wall times
#
# Errors are measured on a regular grid of $(x, t)$ against the exact
# solution; wall times are those of `Trainer.train` on the machine that ran
# this notebook.

# %%
display(Markdown(results.table()))

# %% [markdown]
# ### Loss weights: exact (dashed) and sketched (solid)
#
# As in the paper's figure, the sketched weights follow the exact ones;
# the moving average (rate `alpha`) makes them smooth, and with resampled
# points they estimate the weights of the *expected* kernel. Early in
# training, when the exact weights move by several times within a few
# hundred steps, the average (which spans about $1/\alpha = 1000$ steps)
# trails them.

# %%
plot_weights(results)
plt.show()

# %% [markdown]
# ### Solutions and errors
#
# One row per PINN: its prediction, the exact solution and the pointwise
# error (each row's error has its own colour scale; the relative error is in
# the panel's title and in the table above).

# %%
plot_solutions(results)
plt.show()

# %% [markdown]
# Read together, the table and the figures show the experiment's point.
# The vanilla PINN settles on a function that satisfies the PDE and the
# boundary conditions but not the initial condition: it keeps the slow mode
# $\sin(\pi x)\cos(2\pi t)$ and loses the fast one, the initial and
# boundary terms being too weak against the interior residual. Both NTK
# PINNs resolve the fast mode, and the sketched weights give errors of the
# same size as the exact ones. Their costs differ in kind: the sketch adds
# one forward pass per step, an exact update a few reverse passes per
# residual column (Wang et al.'s method: one backward pass per residual
# entry, whose cost grows as the square of the number of points). With
# exact updates every 500 steps on 900 entries both are affordable. The
# wall times in the table come from the earlier version that made the
# stored run, when an exact update still took one pass per entry;
# [the scaling page](../../docs/scaling.md) has the current costs.
#
# ## What's next?
#
# Congratulations on completing the wave-equation tutorial of `pina-ntk`!
# Here are a few directions you can explore:
#
# 1. **A nonlinear system with a finite-element reference** — the
#    [Q-tensor tutorial](../qtensor/qtensor_ntk.ipynb) trains a PINN and an
#    NTK-PINN on a liquid-crystal gradient flow and compares both with a
#    scikit-fem solution.
#
# 2. **The weightings' defaults** — `pina-ntk wave --weighting sketch`
#    trains the predictor sketch with its balanced probe and the safeguard
#    (the defaults of `SketchNTKWeighting`); add `--no-balanced-probe` to
#    see the plain probe of Algorithm 2.
#
# 3. **Cost and accuracy** — the benchmarks
#    ([docs/benchmarks.md](../../docs/benchmarks.md), method in
#    [docs/benchmark-method.md](../../docs/benchmark-method.md)) measure the
#    time per step, the extra memory and the error of sketched against
#    exact weights for every weighting.
#
# 4. **The full-size setting** — Wang et al.'s plain 3×500 tanh MLP, 80,000
#    Adam steps with the learning rate decayed by 0.9 every 1,000 steps,
#    exact weights every 1,000 steps:
#    `pina-ntk wave --full-size --accelerator gpu --output-dir runs/wave-full`
#    (a GPU, or many hours of CPU). Wang et al. report relative L2 errors of
#    about 4.5e-1 (vanilla) and 2e-3 to 4e-3 (NTK weights) in that setting.
#
# 5. **...and more** — every option of the weightings and the callback
#    (estimators, safeguard, weight bounds, logging, diagnostics) is
#    described in the API documentation (`docs/`, build instructions in the
#    README).
#
# For more on PINA itself, see the
# [PINA documentation](https://mathlab.github.io/PINA/).
