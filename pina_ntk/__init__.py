"""Neural-tangent-kernel loss weights for PINA, exact and sketched.

The package has three layers, one per subpackage; data flows upwards only
(see ``docs/architecture.md``):

* :mod:`pina_ntk.core`: the mathematics, on tensors and residual functions,
  with torch alone: trace estimators, the weight formula, the moving
  average, the spaced-update safeguard, argument checks;
* :mod:`pina_ntk.integration`: the adapters to PINA and Lightning: the two
  weightings, the callback and its kernel-statistics state, residual
  recording, diagnostics, resampling;
* :mod:`pina_ntk.paper`: the paper's application: problems, the
  finite-element reference, the experiments, the ``pina-ntk`` command and
  its figures.

Public API (importable from ``pina_ntk`` itself):

* :class:`NTKWeighting`, :class:`SketchNTKWeighting`: pass as
  ``weighting=...`` to a PINA solver (single-model, ensemble,
  self-adaptive or competitive);
* :class:`NTKCallback`: drives the weightings; the solver adds it to its
  trainer by itself (pass one to ``pina.Trainer(callbacks=[...])`` to set
  its options);
* :class:`SpacedUpdateSafeguard`: the spaced-update rule;
* :func:`ntk_traces`, :func:`solver_ntk_weights`: per-condition kernel
  traces and weights at the current parameters, for diagnostics;
* :class:`NTKDiagnosticsCallback`: exact eigenvalues and the time averages
  of the convergence theorems along training (small problems);
* :func:`vector_residual_fn`, :func:`module_residual_fn`,
  :func:`exact_kernel`: the estimators on plain residual functions.

The names are resolved on first use, so ``import pina_ntk.core`` imports
torch and nothing of PINA or Lightning.
"""

import importlib

#: Where each public name is defined: ``{name: module}``.
_EXPORTS = {
    "NTKWeighting": "pina_ntk.integration.ntk_weighting",
    "SketchNTKWeighting": "pina_ntk.integration.sketch_ntk_weighting",
    "NTKCallback": "pina_ntk.integration.callback",
    "SpacedUpdateSafeguard": "pina_ntk.core.safeguard",
    "ntk_traces": "pina_ntk.integration.diagnostics",
    "solver_ntk_weights": "pina_ntk.integration.diagnostics",
    "NTKDiagnosticsCallback": "pina_ntk.integration.diagnostics_callback",
    "exact_kernel": "pina_ntk.core.residual_functions",
    "vector_residual_fn": "pina_ntk.core.residual_functions",
    "module_residual_fn": "pina_ntk.core.residual_functions",
}

__all__ = list(_EXPORTS)
__version__ = "0.2.0"


def __getattr__(name):
    # PEP 562: the public names load their layer on first access only.
    if name not in _EXPORTS:
        raise AttributeError(f"module 'pina_ntk' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
