"""The adapters of the NTK weights to PINA and Lightning.

* :mod:`~pina_ntk.integration.contract`: what a weighting, its driver and
  the training step need from each other, as ``typing.Protocol`` classes;
* :mod:`~pina_ntk.integration.kernel_weighting`: the PINA weighting
  interface;
  :mod:`~pina_ntk.integration.ntk_weighting` and
  :mod:`~pina_ntk.integration.sketch_ntk_weighting`: the two weightings;
* :mod:`~pina_ntk.integration.block_statistics`: the kernel statistic of
  each condition (the ``statistic`` option);
* :mod:`~pina_ntk.integration.kernel_statistics`: the weighting's driver,
  the statistics of a run as one state object, with its parts:
  :mod:`~pina_ntk.integration.step_schedule` (what each step does and
  when), :mod:`~pina_ntk.integration.trace_estimates` (the moving
  averages, restarts and isolated blocks),
  :mod:`~pina_ntk.integration.weight_proposals` (the weights and the
  safeguard's review) and :mod:`~pina_ntk.integration.reports` (counters
  and one-time warnings);
* :mod:`~pina_ntk.integration.callback`: the Lightning hooks that feed and
  checkpoint it;
* :mod:`~pina_ntk.integration.recording`: a solver's residual blocks as a
  residual function;
* :mod:`~pina_ntk.integration.pina_adapter`: every touch of PINA's
  internals (private fields, patched methods, data containers);
* :mod:`~pina_ntk.integration.diagnostics`,
  :mod:`~pina_ntk.integration.diagnostics_callback`: kernel statistics
  outside training and exact diagnostics along it;
* :mod:`~pina_ntk.integration.resampling`: fresh collocation points every
  step;
* :mod:`~pina_ntk.integration.lightning_logging`: one logging rule.
"""

from .callback import NTKCallback
from .diagnostics import ntk_traces, solver_ntk_weights
from .diagnostics_callback import NTKDiagnosticsCallback
from .kernel_statistics import KernelStatistics
from .kernel_weighting import KernelWeighting
from .ntk_weighting import NTKWeighting
from .resampling import ResampleCallback, discretise_conditions
from .sketch_ntk_weighting import SketchNTKWeighting

__all__ = [
    "KernelStatistics",
    "KernelWeighting",
    "NTKCallback",
    "NTKDiagnosticsCallback",
    "NTKWeighting",
    "ResampleCallback",
    "SketchNTKWeighting",
    "discretise_conditions",
    "ntk_traces",
    "solver_ntk_weights",
]
