"""Which kernel statistic each condition of a PINA problem takes, and
which conditions the ``gradient_band`` factor applies to.

The ``statistic`` option of :class:`~pina_ntk.NTKWeighting` and
:class:`~pina_ntk.SketchNTKWeighting` is one of :data:`STATISTIC_OPTIONS`
or a mapping ``{condition: "trace" | "rayleigh"}``; it is resolved here,
once the conditions of the training step are known, into one statistic per
residual block (:mod:`pina_ntk.core.rayleigh`).

A role (``"interior"``, ``"boundary"``, ``"initial"``) gives the Rayleigh
statistic to the conditions of that role and the trace to the others;
``docs/weights.md`` (*One statistic per condition*) says what that does to
the weights and what it measured.
"""

from collections.abc import Mapping

from pina.domain import CartesianDomain

from ..core.rayleigh import STATISTICS

#: Where a condition lives (:func:`condition_role`); a role as the
#: ``statistic`` option gives the Rayleigh statistic to its conditions.
ROLES = ("interior", "boundary", "initial", "other")
#: Values of the ``statistic`` option besides a mapping.
STATISTIC_OPTIONS = (*STATISTICS, *ROLES[:3])


def check_statistic(statistic):
    """
    Require a valid ``statistic`` option.

    :param statistic: One of :data:`STATISTIC_OPTIONS`, or a mapping from
        condition names to one of
        :data:`~pina_ntk.core.rayleigh.STATISTICS`.
    :return: The option (a mapping as a plain ``dict``).
    :raises ValueError: If it is neither.
    """
    if isinstance(statistic, Mapping):
        for name, value in statistic.items():
            if not isinstance(name, str) or value not in STATISTICS:
                raise ValueError(
                    "statistic as a mapping must map condition names to one "
                    f"of {STATISTICS}, got {name!r}: {value!r}."
                )
        return dict(statistic)
    if isinstance(statistic, str) and statistic in STATISTIC_OPTIONS:
        return statistic
    raise ValueError(
        f"statistic must be one of {STATISTIC_OPTIONS} or a mapping "
        f"{{condition: {' | '.join(map(repr, STATISTICS))}}}, got "
        f"{statistic!r}."
    )


def condition_role(problem, name):
    """
    Where condition ``name`` of ``problem`` lives, from its domain.

    A domain (or every piece of a union) is a Cartesian domain that fixes
    some variables: none fixed is the ``"interior"``; a temporal variable
    fixed is ``"initial"`` data; only spatial variables fixed is the
    ``"boundary"``. A data condition, another domain type or a mixture of
    these is ``"other"``.

    :param problem: The PINA problem.
    :param str name: A condition of ``problem``.
    :return: One of :data:`ROLES`.
    :rtype: str
    """
    domain = getattr(problem.conditions[name], "domain", None)
    if isinstance(domain, str):
        domain = problem.domains.get(domain)
    if domain is None:
        return "other"
    pieces = getattr(domain, "geometries", None) or [domain]
    temporal = set(getattr(problem, "temporal_variables", None) or ())
    roles = set()
    for piece in pieces:
        # an ellipsoid or a simplex fixes no variable on its surface either
        if not isinstance(piece, CartesianDomain):
            return "other"
        fixed = piece.fixed
        if not fixed:
            roles.add("interior")
        elif temporal & set(fixed):
            roles.add("initial")
        else:
            roles.add("boundary")
    return roles.pop() if len(roles) == 1 else "other"


def rayleigh_blocks(statistic, names, problem):
    """
    Which residual blocks take the Rayleigh statistic.

    :param statistic: A checked ``statistic`` option
        (:func:`check_statistic`).
    :param list names: The conditions, in block order.
    :param problem: The PINA problem (read for a role only; may be
        ``None`` otherwise).
    :return: One bool per block.
    :rtype: tuple[bool]
    :raises ValueError: If a mapping names a condition the problem lacks,
        or a role comes without a problem.
    """
    if isinstance(statistic, Mapping):
        unknown = sorted(set(statistic) - set(names))
        if unknown:
            raise ValueError(
                f"statistic names conditions {unknown} that the training "
                f"step does not have; its conditions are {list(names)}."
            )
        return tuple(statistic.get(n, "trace") == "rayleigh" for n in names)
    if statistic in ROLES:
        if problem is None:
            raise ValueError(
                f"statistic={statistic!r} reads the conditions' domains: "
                "attach the weighting to a PINA solver first."
            )
        return tuple(condition_role(problem, n) == statistic for n in names)
    return (statistic == "rayleigh",) * len(names)


def is_stationary(problem):
    """
    Whether ``problem`` has no temporal variable: the ``gradient_band``
    factor applies to stationary problems only (``docs/weights.md``, *A
    gradient-norm factor in a band*).

    :param problem: The PINA problem; ``None`` (a weighting not attached to
        a solver) counts as stationary.
    :rtype: bool
    """
    return problem is None or not getattr(problem, "temporal_variables", None)
