"""The mathematics of NTK loss weights, with torch alone.

Nothing here imports PINA or Lightning (a test checks it): every function
works on tensors and on *residual functions* ``params -> list of residual
blocks``, so the estimators can be used, tested and read without a solver.

* :mod:`~pina_ntk.core.estimators`: exact and sketched block traces
  (Algorithms 1 and 2, Theorem *alternative-ntk-approximation*), probes;
* :mod:`~pina_ntk.core.row_gradients`: exact block traces from a few
  reverse passes per residual column (per-row gradient norms);
* :mod:`~pina_ntk.core.weights`: the weight formula and its guards;
* :mod:`~pina_ntk.core.rayleigh`: the residual-aware statistic (Rayleigh
  quotients along the residual) that can replace the traces;
* :mod:`~pina_ntk.core.gradient_band`: a gradient-norm factor kept in a
  band around the NTK weights (``gradient_band``);
* :mod:`~pina_ntk.core.moving_average`: the kernel buffer of Algorithm 3;
* :mod:`~pina_ntk.core.safeguard`: the spaced-update rule (Corollary, eq.
  ``update-rule``);
* :mod:`~pina_ntk.core.residual_functions`: residual functions of plain
  parameter vectors and modules, the exact kernel;
* :mod:`~pina_ntk.core.checks`: argument checks with named errors.
"""

from .moving_average import MovingAverage, rate_per_sample
from .residual_functions import (
    exact_kernel,
    module_residual_fn,
    vector_residual_fn,
)
from .safeguard import SpacedUpdateSafeguard
from .weights import entry_weights, guarded_weights, ntk_weights

__all__ = [
    "MovingAverage",
    "SpacedUpdateSafeguard",
    "entry_weights",
    "exact_kernel",
    "guarded_weights",
    "module_residual_fn",
    "ntk_weights",
    "rate_per_sample",
    "vector_residual_fn",
]
