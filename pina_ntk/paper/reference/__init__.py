"""Reference solutions for the tutorials (needs the ``fem`` extra:
``pip install pina-ntk[fem]``, i.e. scikit-fem).

* :func:`solve_qtensor_fem`: finite-element solution of the Q-tensor flow,
  cached on disk, evaluated anywhere by :class:`QTensorFEMSolution`.
"""

from .qtensor_fem import (
    QTensorFEMSolution,
    default_cache_dir,
    solve_qtensor_fem,
)

__all__ = ["solve_qtensor_fem", "QTensorFEMSolution", "default_cache_dir"]
