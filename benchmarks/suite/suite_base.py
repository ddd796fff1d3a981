r"""What the problems of the suite (``suite_problems.py``) share: their base
class (own copies of the class's conditions, observations, the solution),
columns and derivatives of PINA's labelled tensors, equations and
conditions from terms, and the evaluation grid and discs of the round
domains."""

import copy

import torch
from pina import Condition, LabelTensor
from pina.domain import EllipsoidDomain
from pina.equation import Equation
from pina.operator import grad, laplacian
from pina.problem import TimeDependentProblem

PI = torch.pi


def _plain(tensor):
    return torch.Tensor.as_subclass(tensor, torch.Tensor)


def _cols(pts, names):
    """The columns ``names`` (one letter each) of ``pts``, ``(n, 1)``."""
    return [_plain(pts.extract([v])) for v in names]


def _d(out, pts, d, order=1, comp="u"):
    """:math:`\\partial_d` (``order=1``) or the Laplacian over ``d``."""
    op = grad if order == 1 else laplacian
    return _plain(op(out, pts, components=[comp], d=list(d)))


def _equals(terms, components=None, index=0):
    """Equation ``output - terms(input)[index]`` of ``components``."""

    def residual(input_, output_):
        out = output_ if components is None else output_.extract(components)
        return _plain(out) - terms(input_)[index]

    return Equation(residual)


def _conditions(**equations):
    """A condition per equation, each on the domain of its own name (so each
    gets its own number of points)."""
    return {k: Condition(domain=k, equation=e) for k, e in equations.items()}


class _Benchmark:
    """Own copies of the class's conditions (and ``OBSERVED`` observations,
    a ``data`` condition); the solution is the first of ``terms(pts)``; the
    output ``u`` unless set; ``STATIONARY`` unless time-dependent."""

    OBSERVED = 0
    output_variables = ["u"]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.STATIONARY = not issubclass(cls, TimeDependentProblem)

    def __init__(self):
        self.conditions = copy.deepcopy(type(self).conditions)
        self.domains = dict(type(self).domains)
        if self.OBSERVED:  # PINA's InputTargetCondition cannot be deep-copied
            self.conditions["data"] = self.observations(self.OBSERVED)
        super().__init__()

    def solution(self, pts):
        """The exact solution at ``pts`` (a :class:`LabelTensor` of the input
        variables), labelled with the output variables."""
        return LabelTensor(type(self).terms(pts)[0], self.output_variables)

    def observations(self, n, seed=0):
        """``Condition(input=..., target=...)``: the solution at ``n`` uniform
        random points of ``D``'s box, seeded by ``seed``: the same each call."""
        box = self.domains["D"].range
        low, high = torch.tensor(list(box.values())).T
        generator = torch.Generator().manual_seed(seed)
        pts = torch.rand(n, len(box), generator=generator)
        pts = LabelTensor(low + (high - low) * pts, list(box))
        return Condition(input=pts, target=self.solution(pts))


def _grid_in(keep):
    """``evaluation_points(n)``: the points of an ``n`` x ``n`` grid of
    :math:`[-1, 1]^2` where ``keep(x, y)``, labelled ``x``, ``y``."""

    def evaluation_points(self, n):
        pts = torch.cartesian_prod(*[torch.linspace(-1.0, 1.0, n)] * 2)
        return LabelTensor(pts[keep(pts[:, 0], pts[:, 1])], ["x", "y"])

    return evaluation_points


def _disc(radius, surface=False):
    box = {"x": [-radius, radius], "y": [-radius, radius]}
    return EllipsoidDomain(box, sample_surface=surface)
