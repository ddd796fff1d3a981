"""Neural-tangent-kernel loss weights for PINA, exact and sketched.

Public API:

* :class:`NTKWeighting`, :class:`SketchNTKWeighting`: pass as
  ``weighting=...`` to a PINA single-model solver;
* :class:`NTKCallback`: add to ``pina.Trainer(callbacks=[...])``;
* :class:`SpacedUpdateSafeguard`: the spaced-update rule;
* :func:`ntk_traces`, :func:`solver_ntk_weights`: per-condition kernel
  traces and weights at the current parameters, for diagnostics.

The mathematics lives in :mod:`pina_ntk.estimators`, :mod:`pina_ntk.weights`,
:mod:`pina_ntk.moving_average` and :mod:`pina_ntk.safeguard`, as functions
of residual functions and tensors usable without PINA.
"""

from .callback import NTKCallback
from .diagnostics import ntk_traces, solver_ntk_weights
from .safeguard import SpacedUpdateSafeguard
from .weighting import NTKWeighting, SketchNTKWeighting

__all__ = [
    "NTKWeighting",
    "SketchNTKWeighting",
    "NTKCallback",
    "SpacedUpdateSafeguard",
    "ntk_traces",
    "solver_ntk_weights",
]
__version__ = "0.1.0"
