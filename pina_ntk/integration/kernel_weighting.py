"""The PINA weighting interface shared by the NTK weightings.

:class:`KernelWeighting` is what PINA sees: a
:class:`pina.weighting.BaseWeighting` whose ``update_weights`` hands the
step's losses to its driver. The weighting itself is configuration plus the
sampling rule (how one sample of the block traces is drawn): a
:class:`~pina_ntk.integration.contract.KernelRule`. The statistics of a run
(warm start, moving average, safeguard) live in its driver, the
:class:`~pina_ntk.integration.kernel_statistics.KernelStatistics` of the
:class:`~pina_ntk.NTKCallback` that PINA's trainer runs; the weighting
reads the driver through the
:class:`~pina_ntk.integration.contract.WeightDriver` protocol only.
"""

from abc import abstractmethod

import torch
from ..core.checks import check_choice, check_int
from ..core.estimators import balanced_probe_scales
from ..core.gradient_band import check_band
from ..core.safeguard import SpacedUpdateSafeguard
from .block_statistics import is_stationary, rayleigh_blocks
from .callback import NTKCallback
from .pina_adapter import SolverAttachedWeighting, offer_callback
from .recording import UNKNOWNS


def make_safeguard(safeguard):
    """
    The safeguard of a ``safeguard=...`` argument.

    :param safeguard: ``"default"``, ``None``, a callable budget ``h(t)``
        or a :class:`~pina_ntk.SpacedUpdateSafeguard`.
    :return: A safeguard, or ``None``.
    :raises ValueError: On anything else.
    """
    if safeguard is None or isinstance(safeguard, SpacedUpdateSafeguard):
        return safeguard
    if safeguard == "default":
        return SpacedUpdateSafeguard()
    if callable(safeguard):
        return SpacedUpdateSafeguard(budget=safeguard)
    raise ValueError(
        "safeguard must be 'default', None, a callable budget h(t) or a "
        f"SpacedUpdateSafeguard, got {safeguard!r}."
    )


def check_bounds(bounds):
    """
    Require a pair ``0 < lower < upper`` (the ``weight_bounds`` argument).

    :param bounds: The pair.
    :return: ``(lower, upper)`` as floats.
    :rtype: tuple
    :raises ValueError: If the check fails.
    """
    try:
        lower, upper = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ValueError(
            f"weight_bounds must be a pair (lower, upper), got {bounds!r}."
        ) from None
    if not 0.0 < lower < upper:
        raise ValueError(
            f"weight_bounds must satisfy 0 < lower < upper, got {bounds!r}."
        )
    return lower, upper


class KernelWeighting(SolverAttachedWeighting):
    """
    Base class of the NTK weightings (not for direct use).

    :param safeguard: See :class:`~pina_ntk.NTKWeighting`.
    :param tuple weight_bounds: See :class:`~pina_ntk.NTKWeighting`.
    :param gradient_band: See :class:`~pina_ntk.NTKWeighting`.
    :type gradient_band: float | None
    :param str unknowns: See :class:`~pina_ntk.NTKWeighting`.
    :raises ValueError: If an argument is out of range.
    """

    #: Moving-average rate per optimisation step and warm-start size of the
    #: kernel buffer.
    alpha = 1.0
    warmup_samples = 1
    #: Optimisation steps between refreshes (exact updates or samples).
    refresh_every_n_steps = 1
    full_kernel = False
    #: Whether samples take probe scales (a balanced predictor probe).
    uses_probe_scales = False
    #: Points per evaluation at displaced parameters (None: all at once).
    evaluation_chunk_size = None
    #: Whether a step's sample is completed after its backward pass.
    sample_after_backward = False
    #: Seed of the probe stream (None: drawn from torch's generator).
    seed = None
    #: Whether samples take finite differences (half-precision parameters
    #: are refused).
    needs_full_precision = False
    #: The ``statistic`` option (checked by the subclasses).
    statistic = "trace"
    #: Whether a block whose averaged estimate turns negative is sketched on
    #: its own from then on (a
    #: :class:`~pina_ntk.integration.contract.BlockIsolation`).
    isolates_blocks = False

    def __init__(
        self, safeguard, weight_bounds, gradient_band, unknowns, ramp_steps
    ):
        # PINA calls update_weights every step with update_every_n_epochs=1;
        # when statistics are refreshed is decided per optimisation step here.
        super().__init__(update_every_n_epochs=1, aggregator="sum")
        check_int("ramp_steps", ramp_steps, 0)
        self.ramp_steps = ramp_steps
        self.safeguard = make_safeguard(safeguard)
        self.weight_bounds = check_bounds(weight_bounds)
        self.gradient_band = check_band(gradient_band)
        check_choice("unknowns", unknowns, UNKNOWNS)
        self.unknowns = unknowns
        self._driver = None
        self._rayleigh = None
        self._stationary = True  # until attached or set_conditions reads it

    def attached(self, solver):
        """
        From now on ``solver`` brings an :class:`~pina_ntk.NTKCallback` to
        any ``Trainer`` that has none (zero set-up).

        :param solver: The PINA solver this weighting was attached to.
        """
        offer_callback(solver, NTKCallback)
        # known before the first step, whose forward pass the band taps
        self._stationary = is_stationary(solver.problem)

    @property
    def driver(self):
        """
        The :class:`~pina_ntk.integration.contract.WeightDriver` computing
        this weighting's weights (the
        :class:`~pina_ntk.integration.kernel_statistics.KernelStatistics` of
        its :class:`~pina_ntk.NTKCallback`), or ``None`` before a trainer
        has set it up.
        """
        return self._driver

    def connect(self, driver):
        """
        Let ``driver`` compute this weighting's weights.

        :param driver: A :class:`~pina_ntk.integration.contract.WeightDriver`.
        :raises ValueError: If another callback drives this weighting
            already.
        """
        if self._driver not in (None, driver):
            raise ValueError(
                "This weighting is already driven by another NTKCallback: "
                "pass a single NTKCallback to the Trainer."
            )
        self._driver = driver

    def update_weights(self, losses):
        """
        Weights for the current losses, from the driving callback.

        Outside a training step (validation, testing) the last training
        weights are reused (ones before the first step).

        :param dict losses: The mapping from condition names to scalar losses.
        :return: The mapping from condition names to weights.
        :rtype: dict
        :raises RuntimeError: If no :class:`~pina_ntk.NTKCallback` drives
            this weighting.
        """
        if self._driver is None:
            raise RuntimeError(
                f"{type(self).__name__} needs its Lightning callback, which "
                "the solver adds through configure_callbacks; it was not "
                "set up (a solver whose configure_callbacks was replaced?). "
                "Pass callbacks=[pina_ntk.NTKCallback()] to pina.Trainer(...)."
            )
        if (
            not self.solver.trainer.training
            or not self._driver.in_training_step
        ):
            saved = self.last_saved_weights()
            return {c: saved.get(c, 1.0) for c in losses}
        return self._driver.weights_for_step(losses)

    def last_saved_weights(self):
        """
        The weights of the last training step (restored ones after a
        resume, before the first step), else PINA's saved weights.

        :return: ``{condition: weight}``.
        :rtype: dict
        """
        if self._driver is not None and self._driver.weight_tensors:
            return self._driver.weight_tensors
        return super().last_saved_weights()

    def set_conditions(self, names, problem):
        """
        Resolve the ``statistic`` option for the conditions of the residual
        blocks (the driver calls it before the first sample of a fit).

        :param list names: The conditions, in block order.
        :param problem: The PINA problem they belong to.
        :raises ValueError: If ``statistic`` names a condition not in
            ``names``.
        """
        self._rayleigh = rayleigh_blocks(self.statistic, names, problem)
        self._stationary = is_stationary(problem)

    def band_applies(self):
        """
        Whether the ``gradient_band`` factor applies: a band is set and the
        problem is stationary (as read by :meth:`attached` and
        :meth:`set_conditions`).

        :rtype: bool
        """
        return self.gradient_band is not None and self._stationary

    def rayleigh_blocks(self, residuals):
        """
        Which blocks take the Rayleigh statistic, in block order.

        :param residuals: The step's residual blocks.
        :type residuals: list[torch.Tensor]
        :rtype: tuple[bool]
        :raises RuntimeError: If the option depends on the conditions and
            :meth:`set_conditions` has not been called.
        """
        if self._rayleigh is not None:
            return self._rayleigh
        if self.statistic in ("trace", "rayleigh"):
            return (self.statistic == "rayleigh",) * len(residuals)
        raise RuntimeError(
            f"statistic={self.statistic!r} depends on the conditions: "
            "set_conditions(names, problem) must come first (the NTKCallback "
            "calls it)."
        )

    def is_due(self, step):
        """
        Whether the kernel statistics are refreshed at ``step``: steps
        ``0, n, 2n, ...`` for ``n = refresh_every_n_steps``.

        :param int step: The optimisation step, from 0.
        :rtype: bool
        """
        return step % self.refresh_every_n_steps == 0

    def refresh_cost_warning(self, entries, refresh_seconds, step_seconds):
        """
        A warning when refreshing the statistics would take most of the
        training time, else ``None``.

        :param int entries: Residual entries of a step.
        :param float refresh_seconds: Time of the first refresh.
        :param float step_seconds: Estimated time of a training step
            without refresh.
        :rtype: str
        """
        return None

    def warm_start(self, residual_fn, params, residuals, generator):
        """
        The ``warmup_samples`` samples of the first refresh.

        With a balanced probe (:attr:`uses_probe_scales`) the first probe is
        unscaled and each later one takes the scales of the mean of the
        samples drawn so far: fixed before the probe is drawn, so every
        sample stays unbiased.

        :param callable residual_fn: ``params -> list of residual blocks``.
        :param dict params: ``{name: parameter}``.
        :param residuals: ``R(theta)`` blocks with their graph.
        :type residuals: list[torch.Tensor]
        :param torch.Generator generator: The probe stream.
        :return: ``[(block_traces, kernel), ...]``, see :meth:`sample`.
        :rtype: list
        """
        samples = []
        sizes = None
        for _ in range(self.warmup_samples):
            scales = None
            if self.uses_probe_scales and samples:
                if sizes is None:
                    sizes = block_sizes(residuals)
                mean = torch.stack([t for t, _ in samples]).mean(dim=0)
                scales = balanced_probe_scales(mean, sizes)
            samples.append(
                self.sample(residual_fn, params, residuals, generator, scales)
            )
        return samples

    def sample(
        self,
        residual_fn,
        params,
        residuals,
        generator,
        scales=None,
        isolated=None,
    ):
        """
        One sample of the block traces (and, if asked, of the kernel).

        :meth:`prepare_sample` followed by :meth:`complete_sample`.

        :param callable residual_fn: ``params -> list of residual blocks``.
        :param dict params: ``{name: parameter}``.
        :param residuals: ``R(theta)`` blocks from the training step.
        :type residuals: list[torch.Tensor]
        :param torch.Generator generator: The probe stream.
        :param torch.Tensor scales: Probe scales per block, see
            :meth:`prepare_sample`.
        :param isolated: Blocks sketched on their own, see
            :meth:`prepare_sample`.
        :type isolated: tuple[bool]
        :return: ``(block_traces, kernel)``, ``kernel`` ``None`` unless
            ``full_kernel``.
        :rtype: tuple
        """
        prepared = self.prepare_sample(
            params, residuals, generator, scales, isolated
        )
        return self.complete_sample(residual_fn, params, prepared, generator)

    @abstractmethod
    def prepare_sample(
        self, params, residuals, generator, scales=None, isolated=None
    ):
        """
        The part of a sample that needs the autograd graph of ``R(theta)``.

        :param dict params: ``{name: parameter}``.
        :param residuals: ``R(theta)`` blocks with their graph.
        :type residuals: list[torch.Tensor]
        :param torch.Generator generator: The probe stream.
        :param torch.Tensor scales: The predictor probe's scales per block
            (:func:`~pina_ntk.core.estimators.balanced_probe_scales`);
            ``None`` for an unscaled probe. Given only when
            :attr:`uses_probe_scales`.
        :param isolated: One bool per block: the blocks to sketch on their
            own, without cross terms (``None``: none). Given only when
            :attr:`isolates_blocks`.
        :type isolated: tuple[bool]
        :return: Detached tensors for :meth:`complete_sample`.
        :rtype: dict
        """

    @abstractmethod
    def complete_sample(self, residual_fn, params, prepared, generator):
        """
        The rest of a sample: values only, no graph of ``R(theta)`` needed.

        :param callable residual_fn: ``params -> list of residual blocks``.
        :param dict params: ``{name: parameter}`` (still at ``theta``).
        :param dict prepared: From :meth:`prepare_sample`.
        :param torch.Generator generator: The probe stream.
        :return: ``(block_traces, kernel)`` as in :meth:`sample`.
        :rtype: tuple
        """


def block_sizes(residuals):
    """
    The entry counts of residual blocks, as a tensor like the blocks.

    :param residuals: The blocks.
    :type residuals: list[torch.Tensor]
    :rtype: torch.Tensor
    """
    # the first block's dtype and device; float64 counts are exact up to
    # 2^53 entries, float32 ones up to 2^24
    return residuals[0].new_tensor([r.numel() for r in residuals])
