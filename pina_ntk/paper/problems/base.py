"""What the paper's problems share: instance-level domains and conditions."""

from pina.problem import SpatialProblem, TimeDependentProblem


class PaperProblem(TimeDependentProblem, SpatialProblem):
    """
    A space-time PINA problem whose domains and conditions are built per
    instance (from its physical parameters), with one condition per loss
    block of the paper.

    Subclasses set ``self._spatial_domain``, ``self._temporal_domain``,
    ``self.domains`` and ``self._conditions`` in ``__init__`` before calling
    ``super().__init__()``, and list the paper's per-step point counts in
    the class attribute ``PAPER_POINTS``.

    Instance-level conditions matter: PINA stores the points a ``Trainer``
    moves into a condition in the problem's ``conditions`` dict, so a
    class-level dict (as in PINA's zoo) would be shared by every instance.
    """

    #: Fresh points per condition and step in the paper.
    PAPER_POINTS = {}

    @property
    def spatial_domain(self):
        """:return: The spatial domain. :rtype: CartesianDomain"""
        return self._spatial_domain

    @property
    def temporal_domain(self):
        """:return: ``t`` in ``[0, T]``. :rtype: CartesianDomain"""
        return self._temporal_domain

    @property
    def conditions(self):
        """:return: The conditions, one per loss block. :rtype: dict"""
        return self._conditions
