"""The liquid-crystal Q-tensor gradient flow of Section 5.2.3.

.. math::

    Q_t = L \\Delta Q - a Q - c \\operatorname{tr}(Q^2) Q
    \\quad \\text{in } \\Omega \\times (0, T), \\qquad Q = 0 \\text{ on }
    \\partial\\Omega,

for a symmetric trace-free ``2 × 2`` tensor ``Q = [[q1, q2], [q2, -q1]]``, so
``tr(Q^2) = 2 (q1^2 + q2^2)`` and each component obeys
``q_t = L Δq - a q - 2c (q1^2 + q2^2) q``. The initial tensor is
``Q0 = d d^T - |d|^2 I / 2`` with the paper's director field ``d``.
"""

import math

import numpy as np
import torch
from pina import Condition, LabelTensor
from pina.domain import CartesianDomain
from pina.equation import Equation, FixedValue
from pina.operator import grad, laplacian

from ...core.checks import check_finite, check_positive
from .base import PaperProblem


def _module(x):
    return torch if torch.is_tensor(x) else np


def initial_director(x, y, half_width=2.0):
    """
    The paper's initial director ``d = [f, g] / sqrt(1 + f^2 + g^2)`` with
    ``f = (s^2 - x^2)(s^2 - y^2)`` and ``g = sin(pi x) sin(pi y)``
    (``s = 2``: the paper's ``(2 - x)(2 + x)(2 - y)(2 + y)``).

    :param x: First coordinates (NumPy array or torch tensor).
    :param y: Second coordinates, same shape and type as ``x``.
    :param float half_width: ``s``, with ``Ω = (-s, s)^2``. Default ``2``.
    :return: ``(d1, d2)``, arrays of the type of ``x``.
    :rtype: tuple
    """
    xp = _module(x)
    f = (half_width**2 - x**2) * (half_width**2 - y**2)
    g = xp.sin(math.pi * x) * xp.sin(math.pi * y)
    norm = xp.sqrt(1.0 + f**2 + g**2)
    return f / norm, g / norm


def initial_q(x, y, half_width=2.0):
    """
    The independent entries of ``Q0 = d d^T - |d|^2 I / 2``.

    :param x: First coordinates (NumPy array or torch tensor).
    :param y: Second coordinates.
    :param float half_width: ``s``, with ``Ω = (-s, s)^2``. Default ``2``.
    :return: ``(q1, q2) = ((d1^2 - d2^2) / 2, d1 d2)``.
    :rtype: tuple
    """
    d1, d2 = initial_director(x, y, half_width)
    return 0.5 * (d1**2 - d2**2), d1 * d2


class _QTensorResidual:
    """``q_t - L Δq + a q + 2c (q1^2 + q2^2) q`` for both components."""

    def __init__(self, elasticity, a, c):
        self.elasticity = elasticity
        self.a = a
        self.c = c

    def __call__(self, input_, output_):
        q = output_.extract(["q1", "q2"])
        q_t = grad(output_, input_, components=["q1", "q2"], d=["t"])
        lap = laplacian(output_, input_, components=["q1", "q2"], d=["x", "y"])
        tr_q2 = 2.0 * (q**2).sum(dim=-1, keepdim=True)
        residual = q_t - self.elasticity * lap + (self.a + self.c * tr_q2) * q
        return torch.Tensor.as_subclass(residual, torch.Tensor)


class _InitialResidual:
    """``Q(x, y, 0) - Q0(x, y)`` for both components."""

    def __init__(self, half_width):
        self.half_width = half_width

    def __call__(self, input_, output_):
        x = torch.Tensor.as_subclass(input_.extract(["x"]), torch.Tensor)
        y = torch.Tensor.as_subclass(input_.extract(["y"]), torch.Tensor)
        q1, q2 = initial_q(x, y, self.half_width)
        q = torch.Tensor.as_subclass(
            output_.extract(["q1", "q2"]), torch.Tensor
        )
        return q - torch.cat([q1, q2], dim=-1)


class QTensorProblem(PaperProblem):
    """
    The Q-tensor problem of the paper's Section 5.2.3 as a PINA problem.

    Outputs ``q1 = Q11`` and ``q2 = Q12`` (``Q`` is symmetric and
    trace-free); inputs ``x``, ``y``, ``t``. Conditions, one per loss block:
    ``"pde"``, ``"initial"``, and the four sides ``"left"`` (``x = -s``),
    ``"right"`` (``x = s``), ``"bottom"`` (``y = -s``), ``"top"``
    (``y = s``), each with ``Q = 0``. The initial condition vanishes on
    ``∂Ω`` when ``s`` is an integer (the default ``s = 2`` included).

    :param float elasticity: ``L > 0``. Default ``0.1``.
    :param float a: The linear bulk coefficient. Default ``-0.2``.
    :param float c: The cubic bulk coefficient, ``> 0``. Default ``1.0``.
    :param float final_time: ``T > 0``. Default ``2.0``.
    :param float half_width: ``s``, with ``Ω = (-s, s)^2``. Default ``2.0``.
    :raises ValueError: If ``elasticity``, ``c``, ``final_time`` or
        ``half_width`` is not positive, or ``a`` is not a finite number.

    :Example:
        >>> problem = QTensorProblem(a=-0.2, c=1.0, elasticity=0.1)
        >>> problem.output_variables
        ['q1', 'q2']
    """

    #: Fresh points per condition and step in the paper.
    PAPER_POINTS = {
        "pde": 300,
        "initial": 300,
        "left": 10,
        "right": 10,
        "bottom": 10,
        "top": 10,
    }

    output_variables = ["q1", "q2"]

    def __init__(
        self, elasticity=0.1, a=-0.2, c=1.0, final_time=2.0, half_width=2.0
    ):
        self.elasticity = check_positive("elasticity", elasticity)
        self.a = check_finite("a", a)
        self.c = check_positive("c", c)
        self.final_time = check_positive("final_time", final_time)
        self.half_width = s = check_positive("half_width", half_width)
        space = {"x": [-s, s], "y": [-s, s]}
        time = [0.0, self.final_time]
        self._spatial_domain = CartesianDomain(space)
        self._temporal_domain = CartesianDomain({"t": time})
        self.domains = {
            "pde": CartesianDomain({**space, "t": time}),
            "initial": CartesianDomain({**space, "t": 0.0}),
            "left": CartesianDomain({"x": -s, "y": [-s, s], "t": time}),
            "right": CartesianDomain({"x": s, "y": [-s, s], "t": time}),
            "bottom": CartesianDomain({"x": [-s, s], "y": -s, "t": time}),
            "top": CartesianDomain({"x": [-s, s], "y": s, "t": time}),
        }
        pde = _QTensorResidual(self.elasticity, self.a, self.c)
        self._conditions = {
            "pde": Condition(domain="pde", equation=Equation(pde)),
            "initial": Condition(
                domain="initial", equation=Equation(_InitialResidual(s))
            ),
        }
        for side in ("left", "right", "bottom", "top"):
            self._conditions[side] = Condition(
                domain=side, equation=FixedValue(0.0)
            )
        super().__init__()

    def initial_condition(self, pts):
        """
        ``Q0`` at the given points.

        :param LabelTensor pts: Points with labels ``x`` and ``y``.
        :return: ``(q1, q2)`` labelled ``["q1", "q2"]``.
        :rtype: LabelTensor
        """
        x = torch.Tensor.as_subclass(pts.extract(["x"]), torch.Tensor)
        y = torch.Tensor.as_subclass(pts.extract(["y"]), torch.Tensor)
        q1, q2 = initial_q(x, y, self.half_width)
        return LabelTensor(torch.cat([q1, q2], -1), self.output_variables)
