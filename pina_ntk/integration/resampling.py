"""Fresh random collocation points every few optimisation steps.

The paper (and Wang, Yu & Perdikaris) draw new points at every training step
instead of training on one fixed discretisation. :class:`ResampleCallback`
does what PINA's refinement callbacks (:class:`pina.callback.BaseRefinement`)
do, with two differences. *Where* the new points go: in PINA 0.3 the
refinement callbacks write them to the condition's data attribute at the end
of an epoch; with ``batch_size=None`` the training loader keeps serving the
batch it cached when it was built, so those points never reach a training
step. This callback therefore also puts the fresh points into the batch of
the step itself (in ``on_train_batch_start``), which is what the loss and
the NTK statistics of that step are computed on. *Which solvers*: PINA's
refinement base class refuses every solver but
:class:`~pina.solver.PhysicsInformedSingleModelSolver` (not even its causal
subclass); drawing uniform points needs nothing of the solver but its
problem's domains, so this callback takes any solver whose conditions have
domains, the causal one included.
"""

from lightning.pytorch.callbacks import Callback
from typing_extensions import override

from ..core.checks import check_int
from .pina_adapter import condition_points, store_condition_points


def _check_counts(counts):
    if counts is None:
        return None
    if not isinstance(counts, dict) or not counts:
        raise ValueError(
            "counts must be a non-empty dict {condition name: number of "
            f"points}}, got {counts!r}."
        )
    for name, n in counts.items():
        if not isinstance(name, str):
            raise ValueError(
                f"counts keys must be condition names (str), got {name!r}."
            )
        check_int(f"counts[{name!r}]", n, 1)
    return dict(counts)


def discretise_conditions(problem, counts, mode="random"):
    """
    Discretise the domain of each named condition with its own count.

    Every domain of the problem must be discretised before ``pina.Trainer``
    is created; this draws ``counts[c]`` points in the domain of condition
    ``c`` (a condition's ``domain`` attribute names its domain).

    :param problem: A PINA problem whose conditions have domains.
    :param dict counts: ``{condition name: number of points}``.
    :param str mode: PINA's sampling mode. Default ``"random"``.
    :raises ValueError: If ``counts`` is malformed or names a condition
        without a domain.

    :Example:
        >>> from pina_ntk.paper.problems import WaveProblem
        >>> problem = WaveProblem()
        >>> discretise_conditions(problem, WaveProblem.PAPER_POINTS)
    """
    counts = _check_counts(counts)
    if counts is None:
        raise ValueError("counts must be a dict, got None.")
    for name, n in counts.items():
        condition = problem.conditions.get(name)
        if condition is None or not hasattr(condition, "domain"):
            raise ValueError(
                f"counts names {name!r}, which is not a condition with a "
                f"domain; conditions: {list(problem.conditions)}."
            )
        problem.discretise_domain(n, mode, domains=[condition.domain])


class ResampleCallback(Callback):
    """
    Replace the collocation points of chosen conditions by fresh uniformly
    random points of their domains every ``every_n_steps`` optimisation steps.

    The points of step ``t`` are those drawn at the last multiple of
    ``every_n_steps`` not after ``t`` (step 0 included, so the initial
    discretisation only sizes PINA's data set). Condition ``c`` gets
    ``counts[c]`` points whatever the trainer's ``batch_size``; conditions
    not in ``counts`` keep their points (with ``counts=None`` every domain
    condition is resampled with as many points as it was discretised with).
    The current points are also stored in the conditions, so
    :func:`pina_ntk.ntk_traces` and later evaluations see them.

    Sampling uses torch's global generator (``lightning.seed_everything``
    makes runs repeatable). With :class:`pina_ntk.NTKCallback` the NTK
    buffer averages per-condition traces over the changing points (the
    paper's ``E[∇R_t^T ∇R_t]``); ``SketchNTKWeighting(full_kernel=True)``
    needs fixed points and refuses resampled ones.

    :param int every_n_steps: Steps between two draws; ``1`` draws at every
        step (the paper). Default ``1``.
    :param dict counts: ``{condition name: points per draw}``, or ``None``.
    :raises ValueError: If ``every_n_steps`` is not a positive integer or
        ``counts`` is malformed; at the start of training, if ``counts``
        names an unknown condition or one without a domain.

    :Example:
        >>> from pina import Trainer
        >>> from pina_ntk.paper.problems import WaveProblem
        >>> problem = WaveProblem()
        >>> discretise_conditions(problem, WaveProblem.PAPER_POINTS)
        >>> resample = ResampleCallback(1, counts=WaveProblem.PAPER_POINTS)
        >>> trainer = Trainer(solver, max_epochs=1000,
        ...                   callbacks=[resample])  # doctest: +SKIP
    """

    def __init__(self, every_n_steps=1, counts=None):
        super().__init__()
        check_int("every_n_steps", every_n_steps, 1)
        self.counts = _check_counts(counts)
        self.every_n_steps = every_n_steps
        self._points = {}
        self._sizes = {}
        self.draws = 0

    @override
    def on_train_start(self, trainer, solver):
        """
        Validate the conditions and fix the draw sizes.

        :param trainer: The ``pina.Trainer``.
        :param solver: A PINA solver (any whose problem's conditions have
            domains, the causal physics-informed one included).
        :raises ValueError: If ``counts`` names an unknown condition or one
            without a domain.
        """
        conditions = solver.problem.conditions
        if self.counts is None:
            self._sizes = {
                name: len(condition_points(solver, name))
                for name, condition in conditions.items()
                if hasattr(condition, "domain")
            }
            return
        for name in self.counts:
            if name not in conditions or not hasattr(
                conditions[name], "domain"
            ):
                raise ValueError(
                    f"counts names {name!r}, which is not a condition "
                    f"with a domain; conditions: {list(conditions)}."
                )
        self._sizes = dict(self.counts)

    def sample(self, current_points, condition_name, solver):
        """
        Fresh uniformly random points of the condition's domain.

        :param LabelTensor current_points: The points in use (for the
            device).
        :param str condition_name: The condition to resample.
        :param solver: The PINA solver.
        :return: ``counts[condition_name]`` new points.
        :rtype: LabelTensor
        """
        problem = solver.problem
        domain = problem.domains[problem.conditions[condition_name].domain]
        points = domain.sample(self._sizes[condition_name], "random")
        return points.to(current_points.device)

    @override
    def on_train_batch_start(self, trainer, solver, batch, batch_idx):
        """
        Draw new points when due and put the current ones into the batch.

        :param trainer: The ``pina.Trainer``.
        :param solver: The PINA solver.
        :param list batch: ``(condition name, data)`` pairs of this step.
        :param int batch_idx: The batch index within the epoch.
        """
        due = trainer.global_step % self.every_n_steps == 0
        data_by_name = dict(batch)
        for name in self._sizes:
            if due or name not in self._points:
                current = data_by_name.get(name, {}).get("input")
                if current is None:
                    current = condition_points(solver, name)
                self._points[name] = self.sample(current, name, solver)
                store_condition_points(solver, name, self._points[name])
        if due:
            self.draws += 1
        for name, data in batch:
            if name in self._points:
                data["input"] = self._points[name]

    @override
    def state_dict(self):
        """:return: The number of draws so far. :rtype: dict"""
        return {"draws": self.draws}

    @override
    def load_state_dict(self, state_dict):
        """:param dict state_dict: A state from :meth:`state_dict`."""
        self.draws = int(state_dict["draws"])
