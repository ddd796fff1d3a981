"""The Lightning callback that drives the NTK weightings in PINA's loop."""

from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from typing_extensions import override

from ..core.checks import check_optional_interval
from .kernel_statistics import KernelStatistics, local_sum
from .lightning_logging import FALLBACK_LOG_EVERY, is_logging_step, log_values
from .pina_adapter import check_kernel_training, solver_reduction
from .recording import ResidualRecorder


class NTKCallback(Callback):
    """
    Computes NTK weights inside each PINA training step.

    A solver built with a pina-ntk weighting adds one to its trainer by
    itself (through Lightning's ``configure_callbacks``); pass one to
    ``pina.Trainer(callbacks=[...])`` only to set its options, and it is
    used instead.

    On every training batch it records the residual each condition's
    ``evaluate`` returns (the step's own forward pass) and hands it to its
    :attr:`statistics`
    (:class:`~pina_ntk.integration.kernel_statistics.KernelStatistics`,
    the weighting's driver: estimator, moving average, safeguard, weights);
    after the backward pass it completes a deferred sample. A later
    Trainer's callback takes the statistics over, and they continue.

    Every ``log_every_n_steps`` optimisation steps it writes
    :meth:`~pina_ntk.integration.kernel_statistics.KernelStatistics.log_values`
    to ``trainer.loggers``, at the step whose weights they are (see
    :func:`~pina_ntk.integration.lightning_logging.log_values`), and warns
    of what the run's reports hold. The whole state is saved in and
    restored from Lightning checkpoints.

    :param int log_every_n_steps: Optimisation steps between logged values;
        ``None`` (default) uses the trainer's ``log_every_n_steps``. PINA's
        full-batch ``Trainer`` (``batch_size=None``) sets that to 0 and
        drops the value it was given, so there the default is 50 and this
        argument is the way to choose.
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
        #: The weighting's driver: the run's kernel statistics (``setup``).
        self.statistics = None
        self._recorder = None
        self._pending_state = None  # a checkpoint's state, until the device

    @override
    def setup(self, trainer, pl_module, stage):
        """Check the set-up, take over the weighting's statistics (or create
        them), install the recorder."""
        weighting = check_kernel_training(trainer, pl_module)
        self.statistics = _taken_statistics(weighting, pl_module, self)
        if self._recorder is None or self._recorder.solver is not pl_module:
            self._recorder = ResidualRecorder(pl_module, weighting.unknowns)
        self._recorder.attach()
        if self.log_every_n_steps is None and not trainer.log_every_n_steps:
            rank_zero_info(
                f"NTKCallback logs every {FALLBACK_LOG_EVERY} steps: PINA's "
                "full-batch Trainer drops log_every_n_steps. Pass "
                "callbacks=[NTKCallback(log_every_n_steps=...)] to choose."
            )

    @override
    def teardown(self, trainer, pl_module, stage):
        """Remove the recorder; a later Trainer may take the statistics."""
        self._release()

    @override
    def on_exception(self, trainer, pl_module, exception):
        """As :meth:`teardown`: Lightning skips it when a run fails."""
        self._release()

    @override
    def on_train_start(self, trainer, pl_module):
        """Create the probe stream and apply a restored checkpoint state."""
        self.statistics.start(pl_module.device)
        if self._pending_state is not None:
            self.statistics.load_state_dict(
                self._pending_state, pl_module.device
            )
            self._pending_state = None

    @override
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        """Hand the step to the statistics; record it if they read it."""
        self._recorder.attach()
        if self.statistics.needs_residuals:
            self._recorder.start(batch_idx)
        self.statistics.begin_step(trainer.global_rank, self._recorder)

    @override
    def on_after_backward(self, trainer, pl_module):
        """Complete a deferred sample (the graph is freed, the optimiser has
        not stepped); stop recording: a closure optimiser's later loss
        evaluations reuse the step's weights, their graphs are not kept."""
        self.statistics.complete_deferred()
        self._recorder.stop()

    @override
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        """Stop recording, log the statistics and advance the step."""
        self._recorder.stop()
        statistics = self.statistics
        every = self.log_every_n_steps
        if is_logging_step(trainer, statistics.step, every):
            values = statistics.log_values()
            if values:
                log_values(trainer, values, statistics.step)
                self._warn()
        statistics.end_step()

    @override
    def on_train_end(self, trainer, pl_module):
        """Give the warnings not given at a logging step."""
        self._warn(final=True)

    @override
    def state_dict(self):
        """:return: Everything needed to resume identically. :rtype: dict"""
        return {} if self.statistics is None else self.statistics.state_dict()

    @override
    def load_state_dict(self, state_dict):
        """:param dict state_dict: A state from :meth:`state_dict`."""
        # applied in on_train_start, once the device is known
        self._pending_state = state_dict or None

    def _release(self):
        """Detach the recorder, close the step, release the statistics."""
        if self._recorder is not None:
            self._recorder.detach()
        if self.statistics is not None:
            self.statistics.close()
            self.statistics.release(self)

    def _warn(self, final=False):
        """Give the messages of the run's reports not given yet."""
        statistics = self.statistics
        for message, category in statistics.reports.take_messages(
            statistics.names, statistics.weighting.weight_bounds, final
        ):
            if category is None:
                rank_zero_info(message)
            else:
                rank_zero_warn(message, category=category)


def _taken_statistics(weighting, solver, holder):
    """
    The statistics of ``weighting``, created at its first fit, acquired by
    ``holder`` and connected: an earlier Trainer's continue, a running
    one's refuse (:meth:`KernelStatistics.acquire`).
    """
    statistics = weighting.driver
    if statistics is None:
        statistics = KernelStatistics(
            weighting, solver_reduction(solver), _global_sum(solver)
        )
    statistics.acquire(holder)
    weighting.connect(statistics)
    return statistics


def _global_sum(solver):
    """``tensor -> tensor`` summed over the processes training ``solver``."""

    def global_sum(tensor):
        trainer = solver.trainer
        if trainer.world_size == 1:
            return local_sum(tensor)
        # Lightning's all-reduce works in place: keep the caller's tensor
        return trainer.strategy.reduce(tensor.clone(), reduce_op="sum")

    return global_sum
