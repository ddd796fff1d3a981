"""The Lightning callback that drives the NTK weightings in PINA's loop."""

import contextlib
import time

import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_warn
from typing_extensions import override

from ..core.checks import check_optional_interval
from .kernel_statistics import KernelStatistics, local_sum
from .kernel_weighting import KernelWeighting
from .lightning_logging import is_logging_step, log_values
from .pina_adapter import (
    check_kernel_solver,
    solver_reduction,
    trainable_parameters,
)
from .recording import ResidualRecorder


class NTKCallback(Callback):
    """
    Computes NTK weights inside each PINA training step.

    A solver built with a pina-ntk weighting adds one to its trainer by
    itself (through Lightning's ``configure_callbacks``); pass one to
    ``pina.Trainer(callbacks=[...])`` only to set its options, and it is
    used instead.

    On every training batch it records the residual each condition's
    ``evaluate`` returns (reusing the step's own forward pass) and hands it
    to its :class:`~pina_ntk.integration.kernel_statistics.KernelStatistics`,
    which runs the weighting's estimator when due (exact traces, or the
    predictor / parameter-space sketch at displaced copies of the
    parameters), folds the result into the moving-average kernel buffer,
    applies the spaced-update safeguard and returns the weights to the
    solver's loss aggregation.

    Exact weights, the sketch's warm start and, with
    ``SketchNTKWeighting(sample_after_backward=False)``, every sketch sample
    are computed before the step's backward pass, so the step uses the
    weights of its own parameters ``theta_t`` (Algorithms 1 and 3). By
    default a sketch sample is split: what needs the training graph (the
    predictor's ``J^T g``) runs before the backward pass, the evaluations at
    displaced parameters in ``on_after_backward``, still at ``theta_t`` but
    with the training graph freed; that sample enters the weights of step
    ``t + 1``.

    With ``NTKWeighting(update_every_n_steps=n)`` or
    ``SketchNTKWeighting(sample_every_n_steps=n)`` the statistics are
    refreshed every ``n`` steps; the weights in between are those of the
    last refresh (a deferred sample enters them at the next step).

    Logged through the solver (``pl_module.log``) every
    ``log_every_n_steps`` optimisation steps: ``ntk_weight/<condition>``,
    ``ntk_trace/<condition>`` (the trace estimate behind the weights),
    ``ntk_refreshes`` (exact updates or sketch samples so far),
    ``ntk_safeguard/accepted``, ``ntk_safeguard/rejected`` and
    ``ntk_safeguard/sum``. The whole state (buffers, safeguard, step counter,
    probe seed, weights) is saved in and restored from Lightning
    checkpoints.

    The step counter counts optimisation steps (training batches); with
    ``Trainer(batch_size=...)`` the statistics of a step use that step's
    batch.

    :param int log_every_n_steps: Steps between logged values; ``None``
        (default) uses the trainer's ``log_every_n_steps``, or Lightning's
        default of 50 when PINA has set it to 0 (full-batch training).
    :raises ValueError: If ``log_every_n_steps`` is not ``None`` or a
        positive integer.

    :Example:
        >>> from pina import Trainer
        >>> from pina_ntk import SketchNTKWeighting, NTKCallback
        >>> solver = PhysicsInformedSingleModelSolver(
        ...     problem, model, weighting=SketchNTKWeighting())  # doctest: +SKIP
        >>> trainer = Trainer(solver, max_epochs=500,
        ...     callbacks=[NTKCallback(log_every_n_steps=10)])  # doctest: +SKIP
        >>> trainer.train()  # doctest: +SKIP
    """

    def __init__(self, log_every_n_steps=None):
        super().__init__()
        check_optional_interval("log_every_n_steps", log_every_n_steps)
        self.log_every_n_steps = log_every_n_steps
        #: The kernel statistics of the run (created in ``setup``).
        self.statistics = None
        #: Whether a training step is running (read by the weighting).
        self.in_training_step = False
        self._solver = None
        self._recorder = None
        self._pending_state = None
        # start of the current step, and whether this fit's first refresh
        # has been timed (the cost check of an exact weighting)
        self._step_start = None
        self._refresh_timed = False

    # ------------------------------------------------------------ hooks
    @override
    def setup(self, trainer, pl_module, stage):
        """Check the solver and its weighting; install the recorder."""
        weighting = getattr(pl_module, "weighting", None)
        if not isinstance(weighting, KernelWeighting):
            raise ValueError(
                "NTKCallback drives pina_ntk weightings only: build the solver "
                "with weighting=pina_ntk.NTKWeighting(...) or "
                "weighting=pina_ntk.SketchNTKWeighting(...); got "
                f"{type(weighting).__name__}."
            )
        check_kernel_solver(pl_module, "NTKCallback")
        if weighting.solver is not pl_module:
            raise ValueError(
                "This weighting object is attached to another solver: create "
                "one weighting instance per solver."
            )
        if weighting.needs_full_precision and trainer.precision in (
            "bf16-true",
            "16-true",
        ):
            raise ValueError(
                f"{type(weighting).__name__} cannot run with Trainer("
                f"precision={trainer.precision!r}): its finite differences "
                "need full-precision parameters. Use precision='bf16-mixed' "
                "or '16-mixed' (the sketch then runs in full precision) or "
                "'32-true'."
            )
        if weighting.full_kernel and trainer.world_size > 1:
            raise ValueError(
                "full_kernel=True is not available in distributed training: "
                "each process only sees its share of the points. Use "
                "full_kernel=False (per-condition traces are all-reduced)."
            )
        if not isinstance(pl_module.loss, torch.nn.MSELoss):
            rank_zero_warn(
                "NTK weights assume a squared-residual loss (torch.nn.MSELoss);"
                f" the solver uses {type(pl_module.loss).__name__}."
            )
        weighting.connect(self)
        self._solver = pl_module
        if (
            self.statistics is None
            or self.statistics.weighting is not weighting
        ):
            self.statistics = KernelStatistics(
                weighting, solver_reduction(pl_module), self._global_sum
            )
        if self._recorder is None:
            self._recorder = ResidualRecorder(pl_module.problem)
        self._recorder.attach()

    @override
    def teardown(self, trainer, pl_module, stage):
        """Remove the recorder from the problem's conditions."""
        if self._recorder is not None:
            self._recorder.detach()
        if self.statistics is not None:
            self.statistics.drop_pending()
        self.in_training_step = False

    @override
    def on_train_start(self, trainer, pl_module):
        """Create the probe stream and apply a restored checkpoint state."""
        self._refresh_timed = False
        self.statistics.start(pl_module.device, self.statistics.weighting.seed)
        if self._pending_state is not None:
            self.statistics.load_state_dict(
                self._pending_state, pl_module.device
            )
            self._pending_state = None

    @override
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        """Start recording the residuals of this step; seed its probes."""
        self._step_start = None if self._refresh_timed else _now(pl_module)
        self._recorder.attach()
        self._recorder.start()
        self.in_training_step = True
        self.statistics.begin_step(trainer.global_rank)

    @override
    def on_after_backward(self, trainer, pl_module):
        """Complete a deferred sample: the backward pass has freed the
        training graph and the optimiser has not stepped yet."""
        if self.statistics.has_pending:
            # No training graph is alive now: evaluate every point at once.
            with full_precision(pl_module.device.type):
                self.statistics.complete_deferred(
                    self._recorder.residual_fn(pl_module, self.statistics.names)
                )

    @override
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        """Stop recording, log the statistics and advance the step."""
        self._recorder.stop()
        self.in_training_step = False
        if is_logging_step(
            trainer, self.statistics.step, self.log_every_n_steps
        ):
            values = self.statistics.log_values()
            if values:
                log_values(pl_module, values)
                self._report()
        self.statistics.end_step()

    @override
    def on_train_end(self, trainer, pl_module):
        """Report what was not yet reported at a logging step."""
        self._report()

    @override
    def state_dict(self):
        """:return: Everything needed to resume identically. :rtype: dict"""
        if self.statistics is None:
            return {}
        return self.statistics.state_dict()

    @override
    def load_state_dict(self, state_dict):
        """:param dict state_dict: A state from :meth:`state_dict`."""
        # applied in on_train_start, once the device is known
        self._pending_state = state_dict or None

    # ---------------------------------------------- called by the weighting
    def weights_for_step(self, losses):
        """
        The condition weights of the current training step.

        Called by the weighting from inside PINA's loss aggregation, after
        every condition's residual has been computed.

        :param dict losses: ``{condition: scalar loss}``.
        :return: ``{condition: weight}``.
        :rtype: dict
        :raises RuntimeError: If the conditions differ from earlier steps'.
        """
        names = list(losses)
        statistics = self.statistics
        statistics.check_names(names)
        if statistics.is_due():
            recorder, solver = self._recorder, self._solver
            params = trainable_parameters(solver)

            def residual_fn(chunk_size):
                return recorder.residual_fn(solver, names, chunk_size)

            timing = None
            if not self._refresh_timed:
                timing = (self._step_start, _now(solver))
            with full_precision(solver.device.type) as mixed:
                # Under mixed precision the step's residual was computed in
                # half precision, too coarse for finite differences and
                # exact traces: the kernel statistics take it again, in
                # full precision (one more residual evaluation).
                if mixed:
                    blocks = residual_fn(None)(params)
                else:
                    blocks = recorder.blocks(names)
                statistics.refresh(blocks, params, residual_fn)
            if timing is not None:
                self._check_refresh_cost(blocks, *timing, _now(solver))
            if statistics.weighting.full_kernel:
                statistics.check_fixed_points(recorder.inputs())
        elif statistics.weights_stale:
            # between refreshes, after a deferred sample: the weights take it
            # in now (the safeguard reads the step's residual values)
            with torch.no_grad():
                statistics.update_weights(self._recorder.blocks(names))
        return self.weight_tensors

    # ------------------------------------------------------------- reading
    @property
    def step(self):
        """:return: The optimisation steps taken so far. :rtype: int"""
        return 0 if self.statistics is None else self.statistics.step

    @property
    def weight_tensors(self):
        """
        The current weights as PINA uses them: ``{condition: 0-d tensor}``
        (empty before the first step, restored ones after a resume).

        :rtype: dict
        """
        statistics = self.statistics
        if statistics is None or statistics.weight_tensor is None:
            return {}
        return dict(zip(statistics.names, statistics.weight_tensor))

    @property
    def weights(self):
        """:return: The current weights ``{condition: float}``. :rtype: dict"""
        return {} if self.statistics is None else self.statistics.weights

    @property
    def traces(self):
        """:return: The trace estimates behind the weights. :rtype: dict"""
        return {} if self.statistics is None else self.statistics.traces

    @property
    def kernel(self):
        """
        The moving-average kernel sketch (``full_kernel=True`` only).

        :return: An ``n × n`` tensor, rows ordered by condition, or ``None``.
        :rtype: torch.Tensor
        """
        return None if self.statistics is None else self.statistics.kernel

    # ------------------------------------------------------------- helpers
    def _global_sum(self, tensor):
        """Sum over the processes of a distributed run (identity otherwise)."""
        trainer = self._solver.trainer
        if trainer.world_size == 1:
            return local_sum(tensor)
        # Lightning's all-reduce works in place: keep the caller's tensor
        return trainer.strategy.reduce(tensor.clone(), reduce_op="sum")

    def _check_refresh_cost(self, blocks, step_start, refresh_start, end):
        """Warn once, at the first refresh of a fit, if refreshes would take
        most of the training time (the weighting judges)."""
        self._refresh_timed = True
        # A training step (forward, backward, optimiser) costs about 2.5
        # times its forward pass: 2.1x on PINA's wave problem with a 3x100
        # tanh net, 3.3x with 3x500 (CPU). Step 0's forward pass also pays
        # one-off costs, so this rather underestimates the share.
        step_seconds = 2.5 * (refresh_start - step_start)
        message = self.statistics.weighting.refresh_cost_warning(
            sum(b.numel() for b in blocks), end - refresh_start, step_seconds
        )
        if message is not None:
            rank_zero_warn(message, category=UserWarning)

    def _report(self):
        """Warn once each about unusable estimates, conditions whose trace
        is exactly zero and weights clamped to the bounds."""
        statistics = self.statistics
        if statistics.take_invalid_report():
            rank_zero_warn(
                "An NTK trace estimate was non-finite or negative (or all "
                "were zero); the previous weights were kept. Warning once; "
                "check ntk_trace/* in the logs (a larger warmup_samples, a "
                "smaller alpha or, for blocks whose trace is far below the "
                "others', estimator='parameter' steadies the sketch).",
                category=RuntimeWarning,
            )
        constant = statistics.take_zero_trace_report()
        if constant:
            rank_zero_warn(
                f"The NTK trace of {constant} is exactly zero: no trainable "
                "parameter moves their residual, so training cannot reduce "
                "their loss. They get the weight of a uniform kernel (1 with "
                "the mean reduction) and the other weights are formed "
                "without them. Warning once.",
                category=RuntimeWarning,
            )
        clamped = statistics.take_bound_report()
        if clamped:
            rank_zero_warn(
                f"NTK weights were clamped to weight_bounds="
                f"{statistics.weighting.weight_bounds} (weight updates per "
                f"condition: {clamped}): the traces differ by more than the "
                "bounds allow, so those weights are not Tr(K)/Tr(K_cc). "
                "Widen weight_bounds if that is intended; the count is "
                "logged as ntk_bound_hits/<condition>. Warning once.",
                category=RuntimeWarning,
            )


@contextlib.contextmanager
def full_precision(device_type):
    """
    Run the enclosed code without autocast on ``device_type``.

    :param str device_type: ``"cpu"``, ``"cuda"``, ...
    :return: A context whose value says whether autocast was on.
    """
    mixed = torch.is_autocast_enabled(device_type)
    with torch.autocast(device_type, enabled=False):
        yield mixed


def _now(solver):
    """Seconds on a clock that waits for the solver's device."""
    if solver.device.type == "cuda":
        torch.cuda.synchronize(solver.device)
    return time.perf_counter()
