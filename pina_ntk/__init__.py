"""Neural-tangent-kernel loss weights for PINA, exact and sketched.

Public API:

* :class:`NTKWeighting`, :class:`SketchNTKWeighting`: pass as
  ``weighting=...`` to a PINA single-model solver;
* :class:`NTKCallback`: add to ``pina.Trainer(callbacks=[...])``;
* :class:`SpacedUpdateSafeguard`: the spaced-update rule;
* :func:`ntk_traces`, :func:`solver_ntk_weights`: per-condition kernel
  traces and weights at the current parameters, for diagnostics;
* :class:`NTKDiagnosticsCallback`: exact eigenvalues and the time averages
  of the convergence theorems along training (small problems);
* :func:`vector_residual_fn`, :func:`module_residual_fn`,
  :func:`exact_kernel`: the estimators on plain residual functions.

The mathematics lives in :mod:`pina_ntk.estimators`, :mod:`pina_ntk.weights`,
:mod:`pina_ntk.moving_average` and :mod:`pina_ntk.safeguard`, as functions
of residual functions and tensors usable without PINA.
"""

from .callback import NTKCallback
from .diagnostics import ntk_traces, solver_ntk_weights
from .diagnostics_callback import NTKDiagnosticsCallback
from .generic import exact_kernel, module_residual_fn, vector_residual_fn
from .safeguard import SpacedUpdateSafeguard
from .weighting import NTKWeighting, SketchNTKWeighting

__all__ = [
    "NTKWeighting",
    "SketchNTKWeighting",
    "NTKCallback",
    "SpacedUpdateSafeguard",
    "ntk_traces",
    "solver_ntk_weights",
    "NTKDiagnosticsCallback",
    "exact_kernel",
    "vector_residual_fn",
    "module_residual_fn",
]
__version__ = "0.1.0"
