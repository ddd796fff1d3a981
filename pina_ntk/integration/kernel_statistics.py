"""The kernel statistics of one training run, as one state object.

:class:`KernelStatistics` is the weighting's driver
(:class:`~pina_ntk.integration.contract.WeightDriver`): it turns the
residual blocks of each optimisation step into condition weights. It knows
torch, :mod:`pina_ntk.core` and the contract only:
:class:`~pina_ntk.NTKCallback` hands it each step's
:class:`~pina_ntk.integration.contract.StepResiduals` and the distributed
sum, and checkpoints its :meth:`KernelStatistics.state_dict`. It holds the
run's state and hands the work to its parts:

- :class:`~pina_ntk.integration.step_schedule.StepSchedule`: what each step
  does and when (refreshes, the warm start, deferred samples, the one
  weighting per optimisation step of a closure optimiser);
- :class:`~pina_ntk.integration.trace_estimates.TraceEstimates`: the moving
  averages of the samples (Algorithm 3), the restarts of blocks whose
  average turned negative, the loss gradients' average;
- :class:`~pina_ntk.integration.weight_proposals.WeightProposals`: the
  weights formed from the traces and the safeguard's review of each
  proposal;
- :class:`~pina_ntk.integration.reports.RunReports`: the counts and the
  warnings.

One step, in order::

    begin_step(rank, residuals)        if due: seed the step's probes and,
                                       if the band applies, tap gradients
    weights_for_step(losses)           (from the weighting, in PINA's loss)
      check_names(names)               the same conditions at every step
      refresh(blocks, params, fn)      if due: sample -> buffer ->
                                       (band) -> safeguard -> weights
                                       (deferred: prepare the sample;
                                       weights only if stale)
      update_weights(blocks)           else, if the estimates are stale:
                                       buffer -> safeguard -> weights
    complete_deferred()                after the backward pass: the loss
                                       gradients (tapped), a sample (pending)
    end_step()                         drop what is left, step += 1
"""

import torch

from .reports import RunReports
from .step_schedule import StepSchedule, full_precision, probe_seed
from .trace_estimates import TraceEstimates, to_device
from .weight_proposals import WeightProposals

#: Imported from here by the diagnostics and the tests.
__all__ = [
    "KernelStatistics",
    "full_precision",
    "local_sum",
    "probe_seed",
    "to_device",
]


def local_sum(tensor):
    """The sum over the processes of a single-process run: ``tensor``."""
    return tensor


class KernelStatistics:
    """
    The statistics of one weighting over one training run: the
    weighting's :class:`~pina_ntk.integration.contract.WeightDriver`.

    It holds the run (its step, conditions, probe stream, estimates,
    weights and counts), carries it across Trainers (:meth:`acquire`,
    :meth:`release`, :meth:`start`), lets its
    :class:`~pina_ntk.integration.step_schedule.StepSchedule` run each step,
    and reads, logs and checkpoints it.

    :param weighting: The
        :class:`~pina_ntk.integration.contract.KernelRule` whose options
        and sampling rule are used.
    :param str reduction: The solver's loss reduction, ``"mean"`` or
        ``"sum"``.
    :param callable global_sum: ``tensor -> tensor`` summed over the
        processes of a distributed run, without modifying its argument.
        Default: the identity (one process).
    """

    def __init__(self, weighting, reduction, global_sum=local_sum):
        self.weighting = weighting
        self.global_sum = global_sum
        #: The optimisation step, from 0.
        self.step = 0
        #: Condition names in block order (set at the first step).
        self.names = None
        self.seed = None
        self.generator = None
        #: Refreshes (exact updates or samples; the warm start counts once).
        self.refreshes = 0
        #: Whether a training step is running (read by the weighting).
        self.in_training_step = False
        #: The :class:`~pina_ntk.NTKCallback` driving these statistics now
        #: (:meth:`acquire`); ``None`` between fits.
        self.holder = None
        #: Counters and one-time warnings of the weight updates.
        self.reports = RunReports()
        #: The averaged estimates behind the weights.
        self.estimates = TraceEstimates(weighting, global_sum, self.reports)
        #: The weights and the review of each proposal.
        self.proposals = WeightProposals(
            weighting, reduction, global_sum, self.reports
        )
        #: What each step does (:class:`StepSchedule`).
        self.schedule = StepSchedule(self)

    # ------------------------------------------------------------ the run
    def acquire(self, holder):
        """
        Let ``holder`` (an :class:`~pina_ntk.NTKCallback`) drive these
        statistics until it calls :meth:`release`.

        A later Trainer's callback takes over the statistics of an earlier
        one whose fit has returned, and they continue as in one run: one
        solver trained by several Trainers in turn keeps its step counter,
        moving average, safeguard and counts.

        :param holder: The callback.
        :raises ValueError: If another callback drives them now (two
            ``NTKCallback`` in one Trainer, or a Trainer started while
            another one's fit, validation or test is running).
        """
        if self.holder is not None and self.holder is not holder:
            raise ValueError(
                "This weighting is driven by another NTKCallback whose "
                "Trainer is still running (two NTKCallbacks in one Trainer, "
                "or a second Trainer started inside the first one's fit). "
                "Pass at most one NTKCallback per Trainer and run one "
                "Trainer at a time: a later Trainer takes the weighting over "
                "once the earlier one's fit, validate or test has returned. "
                "To train two solvers side by side, give each its own "
                "weighting."
            )
        self.holder = holder

    def release(self, holder):
        """
        End ``holder``'s drive (its fit, validation or test returned or
        failed); a later callback may :meth:`acquire` the statistics.

        :param holder: The callback passed to :meth:`acquire`.
        """
        if self.holder is holder:
            self.holder = None

    def start(self, device):
        """
        Create the probe stream on ``device`` for a fit.

        Its base seed is the weighting's ``seed``; ``None`` draws one from
        torch's global generator (``lightning.seed_everything`` fixes it).
        A later fit of the same statistics (another Trainer) keeps the seed
        and moves the state to ``device``; a state restored afterwards
        brings its own.

        :param device: The solver's device.
        """
        if self.seed is None:
            seed = self.weighting.seed
            if seed is None:
                seed = int(torch.randint(0, 2**62, (1,)).item())
            self.seed = seed
        elif (
            self.proposals.weights is not None
            and self.proposals.weights.device != device
        ):
            self.load_state_dict(self.state_dict(), device)
        # reseeded at every due step: nothing of it is carried over
        self.generator = torch.Generator(device=device)
        self.reports.start_fit()

    # ---------------------------------------------------------- the steps
    def begin_step(self, rank, residuals):
        """Open a training step (:meth:`StepSchedule.begin_step`)."""
        self.schedule.begin_step(rank, residuals)

    def weights_for_step(self, losses):
        """The weights of the running training step
        (:meth:`StepSchedule.weights_for_step`)."""
        return self.schedule.weights_for_step(losses)

    def complete_deferred(self):
        """Complete what waits for the backward pass
        (:meth:`StepSchedule.complete_deferred`)."""
        self.schedule.complete_deferred()

    def end_step(self):
        """Close the step and count it (:meth:`StepSchedule.end_step`)."""
        self.schedule.end_step()

    def close(self):
        """Leave the step without counting it (:meth:`StepSchedule.close`)."""
        self.schedule.close()

    @property
    def needs_residuals(self):
        """Whether the next step reads its residuals
        (:attr:`StepSchedule.needs_residuals`). :rtype: bool"""
        return self.schedule.needs_residuals

    def check_fixed_points(self, points):
        """Require the same points as at the last step
        (:meth:`StepSchedule.check_fixed_points`)."""
        self.schedule.check_fixed_points(points)

    # ------------------------------------------------------- the statistics
    def check_names(self, names):
        """
        Require the conditions of the first step, in its order.

        :param list names: This step's condition names, in block order.
        :raises RuntimeError: If they differ from the first step's.
        """
        if self.names is None:
            self.names = list(names)
            self.weighting.set_conditions(self.names, self._problem())
        elif list(names) != self.names:
            raise RuntimeError(
                "NTK weights compare all conditions within one optimisation "
                f"step, but this batch holds {list(names)} and an earlier one "
                f"{self.names}. Use pina.Trainer(batching_mode="
                "'common_batch_size') (the default) so that every batch "
                "contains every condition."
            )

    def _problem(self):
        """The problem of the weighting's solver (``None`` before PINA has
        attached the weighting to one)."""
        solver = self.weighting.solver
        return None if solver is None else solver.problem

    def fold_gradients(self, local):
        """Fold this process's ``(C, P)`` gradients of the condition losses
        into their average (:meth:`TraceEstimates.fold_gradients`)."""
        self.estimates.fold_gradients(local)

    def local_sizes(self, residuals):
        """
        Entry counts of this process's blocks
        (:meth:`TraceEstimates.local_sizes
        <pina_ntk.integration.trace_estimates.TraceEstimates.local_sizes>`).

        :param residuals: The blocks.
        :type residuals: list[torch.Tensor]
        :rtype: torch.Tensor
        """
        return self.estimates.local_sizes(residuals)

    # ------------------------------------------------------------ reading
    @property
    def weight_tensors(self):
        """
        The current weights as PINA uses them: ``{condition: 0-d tensor}``
        (empty before the first step, restored ones after a resume).

        :rtype: dict
        """
        weights = self.proposals.weights
        return {} if weights is None else dict(zip(self.names, weights))

    @property
    def weights(self):
        """:return: The current weights ``{condition: float}``. :rtype: dict"""
        weights = self.proposals.weights
        if weights is None:
            return {}
        return dict(zip(self.names, weights.tolist()))

    @property
    def traces(self):
        """:return: The trace estimates behind the weights. :rtype: dict"""
        traces = self.proposals.traces
        if traces is None:
            return {}
        return dict(zip(self.names, traces.tolist()))

    @property
    def isolated_blocks(self):
        """
        The conditions sketched on their own since their averaged estimate
        turned negative (see :meth:`_isolated_statistics`).

        :return: Condition names, in block order; empty if none.
        :rtype: list
        """
        isolated = self.estimates.isolated
        if isolated is None:
            return []
        return [n for n, b in zip(self.names, isolated) if b]

    @property
    def rejections(self):
        """
        The proposals of weights so far and those not used, by reason
        (:data:`~pina_ntk.integration.reports.REJECTIONS`), as logged.

        :return: ``{"proposals": n, reason: count, ...}``; empty before the
            first proposal.
        :rtype: dict
        """
        counts = self.reports.rejection_counts()
        return {
            k.removeprefix("ntk_rejected/").removeprefix("ntk_"): int(v)
            for k, v in counts.items()
        }

    @property
    def bound_hits(self):
        """
        How many weight updates clamped each condition's weight to
        ``weight_bounds``.

        :return: ``{condition: count}``; empty before the first weights.
        :rtype: dict
        """
        return self.reports.bound_hit_counts(self.names)

    @property
    def trace_buffer(self):
        """
        The moving average of ``mean diag(K_cc)`` per condition.

        :return: A ``(C,)`` tensor, or ``None`` before the first sample.
        :rtype: torch.Tensor
        """
        return self.estimates.per_entry

    @property
    def kernel(self):
        """
        The moving-average kernel sketch (``full_kernel=True`` only).

        :return: An ``n × n`` tensor, rows ordered by condition, or ``None``.
        :rtype: torch.Tensor
        """
        return self.estimates.kernel

    def log_values(self):
        """
        The values to log: ``ntk_weight/<condition>``,
        ``ntk_trace/<condition>``, ``ntk_bound_hits/<condition>``,
        ``ntk_refreshes`` (exact updates or samples so far),
        ``ntk_proposals`` and ``ntk_rejected/<reason>`` (proposals of
        weights formed, and those not used, by reason:
        :data:`~pina_ntk.integration.reports.REJECTIONS`) and, with a
        started safeguard,
        ``ntk_safeguard/accepted``, ``ntk_safeguard/rejected``,
        ``ntk_safeguard/sum``.

        :return: ``{name: 0-d tensor}``; empty before the first weights.
        :rtype: dict
        """
        weights, traces = self.proposals.weights, self.proposals.traces
        if weights is None:
            return {}
        values = {}
        hits = self.reports.bound_hits
        for index, name in enumerate(self.names):
            values[f"ntk_weight/{name}"] = weights[index]
            values[f"ntk_trace/{name}"] = traces[index]
            if hits is not None:
                values[f"ntk_bound_hits/{name}"] = hits[index].to(torch.float32)
        values["ntk_refreshes"] = torch.tensor(float(self.refreshes))
        values.update(self.reports.rejection_counts())
        guard = self.weighting.safeguard
        if guard is not None and guard.total is not None:
            values["ntk_safeguard/accepted"] = guard.accepted.to(torch.float32)
            values["ntk_safeguard/rejected"] = guard.rejected.to(torch.float32)
            values["ntk_safeguard/sum"] = guard.total
        return values

    # ---------------------------------------------------------- checkpoint
    def state_dict(self):
        """:return: Everything needed to resume identically. :rtype: dict"""
        guard = self.weighting.safeguard
        reports = self.reports
        return {
            "step": self.step,
            "names": self.names,
            **self.proposals.state_dict(),
            **self.estimates.state_dict(),
            "points": self.schedule.points,
            "safeguard": None if guard is None else guard.state_dict(),
            "seed": self.seed,
            "proposals": reports.proposals,
            "rejected": reports.rejected,
            "rejected_blocks": reports.rejected_blocks,
            "formed": reports.formed,
            "dropped": reports.dropped,
            "warned_rejections": reports.warned_rejections,
            "bound_hits": reports.bound_hits,
            "zero_trace": reports.zero_trace,
            "refreshes": self.refreshes,
        }

    def load_state_dict(self, state, device):
        """
        Restore a state from :meth:`state_dict` onto ``device``.

        :param dict state: The state.
        :param device: The solver's device.
        """
        self.step = state["step"]
        self.names = state["names"]
        if self.names is not None:
            self.weighting.set_conditions(self.names, self._problem())
        self.proposals.load_state_dict(state, device)
        self.estimates.load_state_dict(state, device)
        self.schedule.points = to_device(state["points"], device)
        self.refreshes = state["refreshes"]
        reports = self.reports
        for key in ("proposals", "rejected", "rejected_blocks", "formed"):
            setattr(reports, key, to_device(state[key], device))
        reports.dropped = to_device(state["dropped"], device)
        reports.warned_rejections = state["warned_rejections"]
        reports.bound_hits = to_device(state["bound_hits"], device)
        reports.zero_trace = to_device(state["zero_trace"], device)
        guard = self.weighting.safeguard
        if guard is not None and state["safeguard"] is not None:
            guard.load_state_dict(
                {k: to_device(v, device) for k, v in state["safeguard"].items()}
            )
        self.seed = state["seed"]
