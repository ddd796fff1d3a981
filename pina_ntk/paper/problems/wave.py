"""The one-dimensional wave equation of Section 5.2.2 (Wang, Yu & Perdikaris).

.. math::

    u_{tt} - c^2 u_{xx} = 0 \\quad (x, t) \\in (0, 1) \\times (0, T),

with ``u(x, 0) = sin(pi x) + sin(4 pi x) / 2``, ``u_t(x, 0) = 0`` and
``u(0, t) = u(1, t) = 0``. Every term of the loss is its own PINA condition,
so the NTK weighting sees the five blocks of the paper.
"""

import torch
from pina import Condition, LabelTensor
from pina.domain import CartesianDomain
from pina.equation import Equation, FixedGradient, FixedValue
from pina.operator import laplacian

from ...core.checks import check_positive
from .base import PaperProblem


def wave_initial_displacement(x):
    """
    The initial displacement ``sin(pi x) + sin(4 pi x) / 2``.

    :param torch.Tensor x: Positions.
    :return: The displacement at ``x``.
    :rtype: torch.Tensor
    """
    return torch.sin(torch.pi * x) + 0.5 * torch.sin(4 * torch.pi * x)


class _WaveResidual:
    """``u_tt - c^2 u_xx``; a class (not a closure) so problems pickle."""

    def __init__(self, wave_speed):
        self.wave_speed = wave_speed

    def __call__(self, input_, output_):
        u_tt = laplacian(output_, input_, components=["u"], d=["t"])
        u_xx = laplacian(output_, input_, components=["u"], d=["x"])
        residual = u_tt - self.wave_speed**2 * u_xx
        return torch.Tensor.as_subclass(residual, torch.Tensor)


def _initial_value_residual(input_, output_):
    u = torch.Tensor.as_subclass(output_.extract(["u"]), torch.Tensor)
    x = torch.Tensor.as_subclass(input_.extract(["x"]), torch.Tensor)
    return u - wave_initial_displacement(x)


class WaveProblem(PaperProblem):
    """
    The wave equation of the paper's Section 5.2.2 as a PINA problem.

    Conditions, one per loss block (in this order): ``"pde"`` (interior
    residual), ``"initial_value"`` (``u(x, 0)``), ``"initial_velocity"``
    (``u_t(x, 0) = 0``), ``"left"`` (``u(0, t) = 0``) and ``"right"``
    (``u(1, t) = 0``). Inputs ``x`` and ``t``, output ``u``. The exact
    solution is :meth:`solution`.

    :param float wave_speed: ``c`` in ``u_tt = c^2 u_xx``. Default ``2.0``
        (the paper's ``u_tt - 4 u_xx = 0``).
    :param float final_time: ``T``, the end of the time interval.
        Default ``1.0``.
    :raises ValueError: If an argument is not a positive number.

    :Example:
        >>> problem = WaveProblem()
        >>> list(problem.conditions)
        ['pde', 'initial_value', 'initial_velocity', 'left', 'right']
        >>> problem.discretise_domain(100, "random")
    """

    #: Fresh points per condition and step in the paper (and Wang et al.).
    PAPER_POINTS = {
        "pde": 300,
        "initial_value": 100,
        "initial_velocity": 300,
        "left": 100,
        "right": 100,
    }

    output_variables = ["u"]

    def __init__(self, wave_speed=2.0, final_time=1.0):
        self.wave_speed = check_positive("wave_speed", wave_speed)
        self.final_time = check_positive("final_time", final_time)
        self._spatial_domain = CartesianDomain({"x": [0.0, 1.0]})
        self._temporal_domain = CartesianDomain({"t": [0.0, self.final_time]})
        time_range = [0.0, self.final_time]
        self.domains = {
            "pde": CartesianDomain({"x": [0.0, 1.0], "t": time_range}),
            "initial_value": CartesianDomain({"x": [0.0, 1.0], "t": 0.0}),
            "initial_velocity": CartesianDomain({"x": [0.0, 1.0], "t": 0.0}),
            "left": CartesianDomain({"x": 0.0, "t": time_range}),
            "right": CartesianDomain({"x": 1.0, "t": time_range}),
        }
        self._conditions = {
            "pde": Condition(
                domain="pde", equation=Equation(_WaveResidual(self.wave_speed))
            ),
            "initial_value": Condition(
                domain="initial_value",
                equation=Equation(_initial_value_residual),
            ),
            "initial_velocity": Condition(
                domain="initial_velocity", equation=FixedGradient(0.0, d="t")
            ),
            "left": Condition(domain="left", equation=FixedValue(0.0)),
            "right": Condition(domain="right", equation=FixedValue(0.0)),
        }
        super().__init__()

    def solution(self, pts):
        """
        The exact solution ``sin(pi x) cos(c pi t) + sin(4 pi x) cos(4 c pi t)
        / 2``.

        :param LabelTensor pts: Points with labels ``x`` and ``t``.
        :return: ``u`` at the points, labelled ``["u"]``.
        :rtype: LabelTensor
        """
        x = torch.Tensor.as_subclass(pts.extract(["x"]), torch.Tensor)
        t = torch.Tensor.as_subclass(pts.extract(["t"]), torch.Tensor)
        omega = self.wave_speed * torch.pi
        u = torch.sin(torch.pi * x) * torch.cos(omega * t) + 0.5 * torch.sin(
            4 * torch.pi * x
        ) * torch.cos(4 * omega * t)
        return LabelTensor(u, labels=self.output_variables)
