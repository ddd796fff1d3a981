"""The contract between a weighting, the statistics that drive it and the
training step that feeds them, as :class:`typing.Protocol` classes.

Three parts meet in every training step (``docs/architecture.md``):

* a weighting (:class:`~pina_ntk.NTKWeighting`,
  :class:`~pina_ntk.SketchNTKWeighting`) is a :class:`KernelRule`: its
  options, when it is due and how one sample of the block traces is drawn;
* its driver, :class:`~pina_ntk.integration.kernel_statistics.KernelStatistics`,
  is a :class:`WeightDriver`: what PINA's loss aggregation asks for through
  the weighting;
* the step's residuals reach the driver as :class:`StepResiduals`
  (:class:`~pina_ntk.integration.recording.ResidualRecorder` records them).

Both sides import this module and nothing of each other; each Protocol is
``runtime_checkable``, so ``isinstance`` checks that an object has every
member (not their signatures). ``tests/integration/test_contract.py``
checks the implementations and the table in ``docs/architecture.md``
against these classes.
"""

from typing import (
    Any,
    Callable,
    Iterator,
    Optional,
    Protocol,
    runtime_checkable,
)

import torch

#: ``params -> list of residual blocks``.
ResidualFn = Callable[[dict], list]


@runtime_checkable
class ChunkedResidualFn(Protocol):
    """A :data:`ResidualFn` that can also evaluate the residual in chunks of
    points, each with its own graph (the exact traces at linear cost)."""

    def __call__(self, params: dict) -> list:
        """The residual blocks at ``params``, with their graph."""

    def chunks(
        self, params: dict, points: int, blocks: Optional[tuple] = None
    ) -> Iterator[tuple]:
        """``(block index, flat residual chunk)`` pairs, each chunk of at
        most ``points`` points with its own graph, a block's chunks in
        order; only the blocks that ``blocks`` marks (``None``: all)."""


@runtime_checkable
class KernelRule(Protocol):
    """What the driver needs from a weighting."""

    #: Optimisation steps between refreshes (exact updates or samples).
    refresh_every_n_steps: int
    #: Moving-average rate of the traces per optimisation step.
    alpha: float
    #: Samples averaged by the warm start.
    warmup_samples: int
    #: Whether the full kernel sketch is averaged too.
    full_kernel: bool
    #: Whether samples take probe scales (a balanced predictor probe).
    uses_probe_scales: bool
    #: Whether a sample is completed after the step's backward pass.
    sample_after_backward: bool
    #: Points per evaluation at displaced parameters (``None``: all).
    evaluation_chunk_size: Optional[int]
    #: Whether samples take finite differences (full-precision parameters).
    needs_full_precision: bool
    #: Seed of the probe stream (``None``: drawn from torch's generator).
    seed: Optional[int]
    #: The spaced-update safeguard, or ``None``.
    safeguard: Any
    #: ``(lower, upper)`` clamp of the weights.
    weight_bounds: tuple
    #: Band ``b`` of the gradient-norm factor (``None``: NTK weights only).
    gradient_band: Optional[float]
    #: How an inverse problem's unknowns enter the kernel (``UNKNOWNS``).
    unknowns: str
    #: The PINA solver the weighting is attached to.
    solver: Any
    #: Whether a block whose averaged estimate turns negative is sketched on
    #: its own from then on (then the rule is a :class:`BlockIsolation`).
    isolates_blocks: bool

    def connect(self, driver: "WeightDriver") -> None:
        """Let ``driver`` compute the weights (once per fit)."""

    def set_conditions(self, names: list, problem: Any) -> None:
        """The conditions of the residual blocks, in block order."""

    def band_applies(self) -> bool:
        """Whether the ``gradient_band`` factor applies to this problem."""

    def is_due(self, step: int) -> bool:
        """Whether the statistics are refreshed at ``step``."""

    def warm_start(
        self,
        residual_fn: ResidualFn,
        params: dict,
        residuals: list,
        generator: torch.Generator,
    ) -> list:
        """The ``warmup_samples`` samples of the first refresh."""

    def sample(
        self,
        residual_fn: ResidualFn,
        params: dict,
        residuals: list,
        generator: torch.Generator,
        scales: Optional[torch.Tensor] = None,
        isolated: Optional[tuple] = None,
    ) -> tuple:
        """One sample ``(block_traces, kernel or None)``; the blocks that
        ``isolated`` marks sketched on their own."""

    def prepare_sample(
        self,
        params: dict,
        residuals: list,
        generator: torch.Generator,
        scales: Optional[torch.Tensor] = None,
        isolated: Optional[tuple] = None,
    ) -> dict:
        """The part of a sample that needs the graph of ``R(theta)``."""

    def complete_sample(
        self,
        residual_fn: ResidualFn,
        params: dict,
        prepared: dict,
        generator: torch.Generator,
    ) -> tuple:
        """The rest of a sample: values at displaced parameters."""

    def refresh_cost_warning(
        self, entries: int, refresh_seconds: float, step_seconds: float
    ) -> Optional[str]:
        """A warning when refreshes would take most of the training time."""


@runtime_checkable
class BlockIsolation(Protocol):
    """What the driver needs from a :class:`KernelRule` whose
    ``isolates_blocks`` is true: samples of single blocks without cross
    terms, to restart a block whose averaged estimate turned negative."""

    def isolated_sample(
        self,
        params: dict,
        residuals: list,
        generator: torch.Generator,
        blocks: tuple,
    ) -> torch.Tensor:
        """``(C,)`` statistics of the blocks ``blocks`` marks, each
        sketched on its own (zero elsewhere)."""


@runtime_checkable
class WeightDriver(Protocol):
    """What a weighting needs from its driver."""

    #: Whether a training step is running (else the last weights are used).
    in_training_step: bool
    #: The weights of the last training step, ``{condition: 0-d tensor}``.
    weight_tensors: dict

    def weights_for_step(self, losses: dict) -> dict:
        """The weights of the running training step, ``{condition: w}``."""


@runtime_checkable
class StepResiduals(Protocol):
    """What the driver needs from the running training step."""

    #: The solver's device.
    device: torch.device

    def parameters(self) -> dict:
        """``{name: parameter}`` the kernel is taken with respect to."""

    def blocks(self, names: list) -> list:
        """The step's residual blocks, with their graph, in ``names`` order."""

    def residual_fn(
        self, names: list, chunk_size: Optional[int] = None
    ) -> ChunkedResidualFn:
        """The step's residuals as a function of the parameters."""

    def inputs(self) -> torch.Tensor:
        """The step's input points, flattened (the full-kernel check)."""

    def tap_gradients(self, tap: Any) -> None:
        """Run the step's evaluations through ``tap``'s parameter views
        (``None``: the parameters themselves)."""

    def inverse_roles(self, names: list) -> tuple:
        """``(entered, observed)``: per block in ``names`` order, whether an
        inverse problem's unknowns enter its residual, and whether it holds
        observations; a tuple of bools each."""
