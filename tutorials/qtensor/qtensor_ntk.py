# %% [markdown]
# # A liquid-crystal Q-tensor flow: PINN, NTK-PINN and finite elements
#
# This tutorial reproduces the Q-tensor experiment of Hirsch & Pichi
# (Section 5.2.3). The orientation of liquid-crystal molecules in a square
# $\Omega = (-2, 2)^2$ is described by a symmetric, trace-free $2\times 2$
# tensor $Q$ that follows the gradient flow
#
# $$Q_t = L\Delta Q - aQ - c\,\mathrm{tr}(Q^2)\,Q, \qquad Q = 0 \text{ on }
# \partial\Omega,$$
#
# with $L = 0.1$, $a = -0.2$, $c = 1$ up to $T = 2$, from
# $Q_0 = d d^\top - \tfrac12|d|^2 I$ where the director
# $d \propto [(2-x)(2+x)(2-y)(2+y),\ \sin\pi x\sin\pi y]$. Writing
# $Q = \begin{bmatrix} q_1 & q_2\\ q_2 & -q_1\end{bmatrix}$ leaves two
# unknowns, the network's two outputs.
#
# We train a PINN with plain loss weights and an **NTK-PINN** whose weights
# come from the sketched NTK traces (fresh points at every step, as in the
# paper) with [PINA](https://github.com/mathLab/PINA), and compare both
# with a finite-element solution computed with scikit-fem
# (`pina_ntk.paper.reference`, needs `pip install pina-ntk[fem]`).
#
# The same experiment runs from a shell with `pina-ntk qtensor`. Set
# `PINA_NTK_QUICK=1` to run this notebook in seconds with tiny settings.

# %%
import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from pina_ntk.paper.experiments.settings import quick_mode
from pina_ntk.paper.experiments.qtensor import (
    QTensorSettings,
    fem_reference,
    plot_directors,
    plot_losses,
    run_qtensor,
)
from pina_ntk.paper.problems import QTensorProblem

settings = QTensorSettings.quick() if quick_mode() else QTensorSettings()
settings

# %% [markdown]
# ## The problem
#
# `QTensorProblem` is a PINA problem with one condition per loss block:
# the interior residual (two columns, one per component), the initial
# condition, and each of the four sides. Its physical parameters are
# constructor arguments.

# %%
problem = QTensorProblem()
print("conditions:", list(problem.conditions))
print("points per step:", QTensorProblem.PAPER_POINTS)
print(
    "L, a, c, T:", problem.elasticity, problem.a, problem.c, problem.final_time
)

# %% [markdown]
# ## The finite-element reference
#
# Triangles (P1 or P2) in space; in time, Eyre's convex splitting (the
# convex part of the free energy implicit, the concave part $a|q|^2$ with
# $a<0$ explicit), which makes the free energy
#
# $$E(Q) = \int_\Omega \tfrac{L}{2}|\nabla Q|^2 + \tfrac{a}{2}\mathrm{tr}Q^2
# + \tfrac{c}{4}(\mathrm{tr}Q^2)^2$$
#
# decrease at every step. The solution is cached on disk, so re-running the
# notebook does not recompute it.

# %%
reference = fem_reference(settings, problem)
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.plot(reference.step_times, reference.energies)
ax.set_xlabel("t")
ax.set_ylabel("free energy E")
ax.set_title("FEM: the free energy decreases")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Train the PINN and the NTK-PINN
#
# Both use the same network (a 3×128 tanh MLP on 64 random Fourier features
# of the inputs scaled to $[-1, 1]$, as in the wave tutorial; the paper's
# network is a plain 3×500 MLP), the same optimiser, schedule, step count
# and seed. The boundary blocks have only
# 10 points per side and step, so the NTK-PINN uses the parameter-space
# trace estimator $\|R_c(\theta + \varepsilon z) - R_c(\theta)\|^2 /
# \varepsilon^2$, which is non-negative for every probe, rather than the
# predictor sketch, whose single-probe estimates of such small blocks are
# often negative.

# %%
results = run_qtensor(settings, progress=not quick_mode())

# %% [markdown]
# ## Relative L2 errors against the finite elements
#
# Errors of $(q_1, q_2)$ on a regular grid of the square at the reported
# times; wall times are those of training (and of solving the reference,
# or loading it from the cache).

# %%
display(Markdown(results.table()))

# %% [markdown]
# ## The paper's picture
#
# Contours of $|\lambda_1 (v_1\cdot e_x)|$, the light passing through the
# crossed polarisers, with $\lambda_1$ the positive eigenvalue of $Q$ and
# $v_1$ its eigenvector, drawn as the director field, at $t = 0$, $0.5$ and
# $2$. Near the boundary $Q \approx 0$, so the PINN's directors there are
# sensitive to small errors, while the FEM imposes $Q = 0$ exactly.

# %%
plot_directors(results)
plt.show()

# %%
plot_losses(results)
plt.show()

# %% [markdown]
# ## Going further
#
# The paper's network is a plain 3×500 tanh MLP. A full-size run (no
# Fourier features, 80,000 Adam steps, the paper's points resampled every
# step, a finer P2 reference) is
#
# ```
# pina-ntk qtensor --full-size --accelerator gpu --output-dir runs/qtensor-full
# ```
