"""The paper's experiments as PINA problems, one condition per loss block.

* :class:`WaveProblem`: the wave equation of Section 5.2.2;
* :class:`QTensorProblem`: the liquid-crystal Q-tensor flow of Section 5.2.3.

Both list the paper's per-step point counts in ``PAPER_POINTS``, for use with
:class:`pina_ntk.integration.resampling.ResampleCallback`.
"""

from .qtensor import QTensorProblem, initial_director, initial_q
from .wave import WaveProblem

__all__ = ["WaveProblem", "QTensorProblem", "initial_q", "initial_director"]
