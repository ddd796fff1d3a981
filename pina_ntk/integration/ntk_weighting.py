"""Exact NTK weights: :class:`NTKWeighting` (Algorithm 1)."""

import itertools
import math
import warnings

from ..core.checks import check_int, check_rate
from ..core.estimators import (
    PointCouplingError,
    check_point_independence,
    chunked_block_traces,
    exact_block_traces,
)
from ..core.rayleigh import exact_rayleigh_traces
from ..core.row_gradients import row_gradient_traces
from .block_statistics import check_statistic
from .contract import ChunkedResidualFn
from .kernel_weighting import KernelWeighting

#: Share of the training time in exact updates above which they warn.
EXACT_SHARE_WARNING = 0.8
#: Points per chunk of the exact traces (``chunk_size``) where they are
#: taken chunk by chunk, chosen by measurement (``docs/scaling.md``,
#: *Points per chunk*).
EXACT_CHUNK_POINTS = 8


class NTKWeighting(KernelWeighting):
    """
    Exact NTK weights (Algorithm 1 of Hirsch & Pichi; Wang, Yu & Perdikaris).

    Every ``update_every_n_steps`` optimisation steps the block traces
    ``Tr(K_cc) = sum_{i in c} ||grad R_i||^2`` are computed exactly and
    each condition gets the weight
    ``w_c = mean diag(K) / mean diag(K_cc)``: the per-entry weight
    ``Tr(K)/Tr(K_cc)`` of the paper up to one global constant (see
    :mod:`pina_ntk.core.weights`). The weights stay fixed between updates.

    With ``alpha < 1`` the weights come from a moving average of the exact
    traces over updates instead of the latest ones, so that they change
    smoothly rather than jump at each update.

    :param int update_every_n_steps: Optimisation steps between exact
        updates (the same spacing as
        ``SketchNTKWeighting(sample_every_n_steps=...)``); ``1`` updates at
        every step. Default is ``1``.
    :param safeguard: The spaced-update rule: ``"default"``
        (:class:`~pina_ntk.SpacedUpdateSafeguard` with its scale-aware
        budget), a callable budget ``h(t)``, a safeguard instance, or
        ``None`` to apply every update. Default is ``"default"``.
    :param tuple weight_bounds: ``(lower, upper)`` clamp of the weights.
        Default is ``(1e-6, 1e6)``.
    :param chunk_size: Points per chunk of the exact traces. An update
        costs time linear in the number of residual entries, since each
        point's residual depends on that point alone (PINA's feed-forward
        models). Where every parameter enters the residual through linear
        layers, the traces come from a few reverse passes per residual
        column through the step's own graph; a step with an update costs
        three to four unweighted steps (:mod:`pina_ntk.core.row_gradients`;
        the *Time per step* table of ``docs/scaling.md``). Otherwise each
        condition's residual is evaluated again in chunks of this many
        points, each chunk with its own small graph, and a chunk's entries
        are differentiated together in one batched backward pass. Either
        way, the first chunk of each condition is evaluated on its own and
        checked against the step's residual at every update, and a model
        that couples the points (a layer normalising over the batch) falls
        back, with one warning, to ``None``. ``None``: one backward pass per
        residual entry through the whole step's graph, a cost quadratic in
        the number of entries. Default is :data:`EXACT_CHUNK_POINTS`.
    :type chunk_size: int | None
    :param float alpha: Moving-average rate of the traces per optimisation
        step, in ``(0, 1]``, as in :class:`SketchNTKWeighting`: an update
        folds its traces in with rate ``1 - (1 - alpha)^n``,
        ``n = update_every_n_steps``. ``1`` (default) uses the latest exact
        traces alone (Algorithm 1).
    :param statistic: ``"trace"`` (default): the weights balance the
        mean eigenvalues ``Tr(K_cc)/n_c``. ``"rayleigh"``: they balance the
        Rayleigh quotients ``R_c^T K_cc R_c / ||R_c||^2`` of the current
        residuals instead, the decay rates of the residual actually present
        (:mod:`pina_ntk.core.rayleigh`); an update then costs one backward
        pass per condition instead of one per residual entry.
        ``"interior"``, ``"boundary"``, ``"initial"`` or a mapping
        ``{condition: "trace" | "rayleigh"}``: one statistic per condition,
        as in :class:`SketchNTKWeighting`.
    :type statistic: str | dict
    :param gradient_band: ``None`` (default): the NTK weights. A number
        ``b >= 1``: on a stationary problem (no temporal variable), at each
        update every weight is multiplied by the factor in ``[1/b, b]``
        that comes nearest to equalising the norms of the conditions'
        weighted loss gradients, as PINA's ``SelfAdaptiveWeighting`` does
        without a band (:mod:`pina_ntk.core.gradient_band`). The factor
        follows the losses' progress (the squared gradient norms are
        averaged over about 100 steps) and cannot run away when a loss
        vanishes. Its gradients are read off the training step's own
        backward pass (no backward pass of its own) and enter the weights
        from the next step on. A
        time-dependent problem keeps the NTK weights: balancing gradients
        lifts the PDE's weight above the initial data's, which lost the
        wave problem (``docs/weights.md``).
    :type gradient_band: float | None
    :param str unknowns: How the weights treat the unknown parameters of
        a PINA ``InverseProblem``, which the same optimiser trains.
        ``"observations_first"`` (default): the kernel of the network's
        parameters, and the weight of every condition the unknowns enter
        capped at the largest weight of the observations (input-target
        conditions), so that the network fits the data before the
        equations at the present unknowns
        (:func:`~pina_ntk.core.weights.observations_first`).
        ``"excluded"``: the same kernel, no cap. ``"kernel"``: the kernel of
        the network's parameters and the unknowns, no cap; exact updates
        then take the batched path. Forward problems: all three are the
        same. Chosen on three inverse problems
        (``docs/inverse-problems.md``). Either way the residuals are
        evaluated again at the unknowns the step's loss used (PINA clamps
        them in place after it).
    :param int ramp_steps: Steps over which the weights come in: at step
        ``t < ramp_steps`` each weight ``w_c`` is applied as ``u_c (w_c /
        u_c)^(t / ramp_steps)``, ``u_c`` the weight of a uniform kernel
        diagonal (``1`` with PINA's ``mean`` reduction: no weighting), so
        that training starts from no weighting and takes in the NTK's
        balance as the kernel leaves its state at initialisation, whose
        weights can do harm (:func:`~pina_ntk.core.weights.ramped_weights`;
        ``docs/weights.md``). ``0``: the NTK weights from the first step.
        Default ``0`` (Wang et al.'s weights as published).
    :raises ValueError: If an argument is out of range.

    :Example:
        >>> from pina import Trainer
        >>> from pina.solver import PhysicsInformedSingleModelSolver
        >>> from pina_ntk import NTKWeighting
        >>> solver = PhysicsInformedSingleModelSolver(
        ...     problem, model, weighting=NTKWeighting(update_every_n_steps=100)
        ... )  # doctest: +SKIP
        >>> Trainer(solver, max_epochs=1000).train()  # brings its NTKCallback
        ... # doctest: +SKIP
    """

    def __init__(
        self,
        update_every_n_steps=1,
        safeguard="default",
        weight_bounds=(1e-6, 1e6),
        chunk_size=EXACT_CHUNK_POINTS,
        alpha=1.0,
        statistic="trace",
        gradient_band=None,
        unknowns="observations_first",
        ramp_steps=0,
    ):
        check_int("update_every_n_steps", update_every_n_steps, 1)
        if chunk_size is not None:
            check_int("chunk_size", chunk_size, 1)
        check_rate("alpha", alpha)
        statistic = check_statistic(statistic)
        super().__init__(
            safeguard, weight_bounds, gradient_band, unknowns, ramp_steps
        )
        self.refresh_every_n_steps = update_every_n_steps
        self.chunk_size = chunk_size
        self.alpha = float(alpha)
        self.statistic = statistic
        # the points were found coupled in this fit: whole-batch passes
        self._points_coupled = False

    @property
    def update_every_n_steps(self):
        """
        The argument of that name (``refresh_every_n_steps`` inside the
        library).

        :rtype: int
        """
        return self.refresh_every_n_steps

    def refresh_cost_warning(self, entries, refresh_seconds, step_seconds):
        """
        A warning when exact updates would take most (over
        :data:`EXACT_SHARE_WARNING`) of the training time: an update
        differentiates each of the ``entries``
        residual entries on its own, so its cost grows with the number of
        points while a training step's barely does.

        :param int entries: Residual entries of a step.
        :param float refresh_seconds: Time of the first update.
        :param float step_seconds: Estimated time of a training step
            without update.
        :return: The message, or ``None``.
        :rtype: str
        """
        steps_per_update = refresh_seconds / step_seconds
        period = self.refresh_every_n_steps
        share = steps_per_update / (steps_per_update + period)
        if share <= EXACT_SHARE_WARNING:
            return None
        work = f"differentiates each of the {entries} residual entries"
        if self.statistic == "rayleigh":
            work = "takes one backward pass per condition"
        return (
            f"Exact NTK updates would take about {share:.0%} of the training "
            f"time: one update {work} ({refresh_seconds:.3g} s, about "
            f"{steps_per_update:.0f} training steps) and runs every "
            f"{period} step(s). Use NTKWeighting(update_every_n_steps="
            f"{math.ceil(steps_per_update)}) or more (half the time), or "
            "SketchNTKWeighting "
            "(a sample costs about one more residual evaluation)."
        )

    def set_conditions(self, names, problem):
        """See :meth:`KernelWeighting.set_conditions`; a new fit checks
        again whether the model treats the points independently."""
        super().set_conditions(names, problem)
        self._points_coupled = False

    def prepare_sample(
        self, params, residuals, generator, scales=None, isolated=None
    ):
        """
        What the exact traces need of the step's graph: the Rayleigh
        quotients (one backward pass per condition), the residual's values
        (the check of the points' independence) and the traces themselves
        where one reverse pass per residual column gives them
        (:func:`~pina_ntk.core.row_gradients.row_gradient_traces`), or,
        without chunks, one pass per entry; see
        :meth:`KernelWeighting.prepare_sample` (exact traces have no cross
        terms: ``isolated`` is never given).
        """
        rayleigh = self.rayleigh_blocks(residuals)
        chunks = self.chunk_size is not None and not self._points_coupled
        pointwise = [chunks and not r for r in rayleigh]
        weights = list(params.values())
        by_rows = [
            row_gradient_traces(r, weights) if p else None
            for r, p in zip(residuals, pointwise)
        ]
        chunked = tuple(p and t is None for p, t in zip(pointwise, by_rows))
        # a detached block contributes zero here: its trace comes later
        traces = exact_rayleigh_traces(
            [r.detach() if p else r for r, p in zip(residuals, pointwise)],
            weights,
            rayleigh=rayleigh,
        ).detach()
        for index, found in enumerate(by_rows):
            if found is not None:
                traces[index] = found.detach()
        return {
            "traces": traces,
            "chunked": chunked,
            "by_rows": tuple(t is not None for t in by_rows),
            "values": [r.detach().reshape(-1) for r in residuals],
        }

    def complete_sample(self, residual_fn, params, prepared, generator):
        """
        The traces of the blocks left to chunks, one small graph per chunk
        of points, after the check that each point's residual depends on
        that point alone; see :meth:`KernelWeighting.complete_sample`.
        """
        traces, chunked = prepared["traces"], prepared["chunked"]
        pointwise = tuple(map(any, zip(chunked, prepared["by_rows"])))
        if not any(pointwise):
            return traces, None
        if isinstance(residual_fn, ChunkedResidualFn):
            try:
                # the chunked blocks' first chunks are checked as they come
                check_point_independence(
                    self._first_chunks(
                        residual_fn, params, prepared["by_rows"]
                    ),
                    prepared["values"],
                )
                found = chunked_block_traces(
                    residual_fn.chunks(params, self.chunk_size, chunked),
                    len(chunked),
                    list(params.values()),
                    reference=prepared["values"],
                )
            except PointCouplingError as error:
                self._points_coupled = True
                warnings.warn(
                    f"NTKWeighting(chunk_size={self.chunk_size}): {error}, "
                    "so the model couples the points (a layer over the "
                    "batch, such as batch normalisation). Exact traces are "
                    "taken through the whole batch instead, at a cost "
                    "quadratic in the residual entries; pass chunk_size="
                    "None to choose that and silence this warning."
                )
                found = None
        else:  # a plain residual function: no chunks
            found = None
        if found is None:
            chunked = pointwise
            whole = residual_fn(params)
            found = exact_block_traces(
                [b if c else b.detach() for b, c in zip(whole, chunked)],
                list(params.values()),
            )
        # an index assignment copies across dtypes and devices
        for index in itertools.compress(range(len(chunked)), chunked):
            traces[index] = found[index].detach()
        return traces, None

    def _first_chunks(self, residual_fn, params, blocks):
        """Each of ``blocks``' first chunk of points (one small evaluation
        per block: the chunks are computed when asked)."""
        for index, wanted in enumerate(blocks):
            if wanted:
                only = tuple(i == index for i in range(len(blocks)))
                yield next(
                    iter(residual_fn.chunks(params, self.chunk_size, only))
                )
