"""PINA adapter: the residual blocks of a solver as a residual function.

A PINA solver evaluates each condition through ``condition.evaluate(batch,
solver)``, which returns the element-wise residual. :class:`ResidualRecorder`
records those calls during a training step, so the weighting can reuse the
residual the step has already computed (no extra forward pass), and
:func:`replay_residual_fn` turns the recorded calls into a pure function of
the parameters, evaluated with :func:`torch.func.functional_call` so the
model's own parameters are never modified.
"""

import torch
from torch.func import functional_call

from .pina_adapter import (
    as_plain_tensor,
    class_evaluate,
    ensemble_size,
    is_observation,
    member_evaluate,
    residual_loss_scales,
    residual_points_dim,
    UNKNOWN_PREFIX,
    trainable_parameters,
    unknown_parameters,
    unknowns_replaced,
    unwrap_evaluate,
    wrap_evaluate,
)

#: How the NTK weights treat an inverse problem's unknown parameters: the
#: kernel of the network's parameters alone, with the weights of the
#: conditions the unknowns enter capped at the observations' largest
#: (``"observations_first"``, :func:`~pina_ntk.core.weights.observations_first`)
#: or not (``"excluded"``); or the kernel of the network's parameters and
#: the unknowns (``"kernel"``).
UNKNOWNS = ("observations_first", "excluded", "kernel")


def kernel_parameters(solver, unknowns=UNKNOWNS[0]):
    """
    The parameters the kernel is taken with respect to.

    :param solver: A PINA solver.
    :param str unknowns: One of :data:`UNKNOWNS`. Default
        ``"observations_first"``.
    :return: ``{name: parameter}``: the solver's trainable parameters
        (:func:`~pina_ntk.integration.pina_adapter.trainable_parameters`),
        then an inverse problem's unknowns when ``unknowns`` is
        ``"kernel"``.
    :rtype: dict
    """
    params = trainable_parameters(solver)
    if unknowns == "kernel":
        params.update(unknown_parameters(solver))
    return params


def batch_calls(solver, batch):
    """
    Replayable ``(name, evaluate, data)`` calls for a batch of conditions.

    ``evaluate`` is the condition's own method (a recording wrapper on the
    instance is bypassed) and ``data`` a copy of the
    condition's data whose input is a fresh leaf requiring gradients, as in
    PINA's training step. An ensemble solver's condition gets one call per
    member, as in its training step
    (:func:`~pina_ntk.integration.pina_adapter.member_evaluate`).

    :param solver: The PINA solver.
    :param batch: ``(condition name, data dict)`` pairs, as in a training
        batch.
    :type batch: list[tuple[str, dict]]
    :return: The calls, in batch order.
    :rtype: list[tuple]
    """
    calls = []
    for name, data in batch:
        condition = solver.problem.conditions[name]
        evaluate = class_evaluate(condition)
        copied = dict(data)
        if torch.is_tensor(copied.get("input")):
            copied["input"] = copied["input"].detach().clone()
            copied["input"].requires_grad_(True)
        members = range(ensemble_size(solver))
        calls += [
            (name, member_evaluate(solver, evaluate, member), copied)
            for member in members
        ]
    return calls


class _Evaluate(torch.nn.Module):
    """Runs one ``condition.evaluate`` call; holds the solver as a submodule
    so that functional_call can swap its parameters for that call."""

    def __init__(self, solver):
        super().__init__()
        self.solver = solver

    def forward(self, evaluate, batch):
        return evaluate(batch, self.solver)


class _Replay(torch.nn.Module):
    """Evaluates recorded ``condition.evaluate`` calls, each times its
    scale; holds the solver as a submodule so that functional_call can swap
    its parameters."""

    def __init__(self, solver, calls, chunk_size=None, scales=None):
        super().__init__()
        self.solver = solver
        self._calls = calls
        self._chunk_size = chunk_size
        self._scales = scales or [(None, False)] * len(calls)
        self._points_dim = residual_points_dim(solver)

    def forward(self):
        dim = self._points_dim
        if self._chunk_size is None:
            return [
                loss_entries(evaluate(batch, self.solver), scale, dim)
                for (evaluate, batch), (scale, _) in zip(
                    self._calls, self._scales
                )
            ]
        return [
            torch.cat(
                [
                    loss_entries(evaluate(chunk, self.solver), scale, dim)
                    .detach()
                    .reshape(-1)
                    for chunk, scale in scaled_chunks(
                        batch, self._chunk_size, scales
                    )
                ]
            )
            for (evaluate, batch), scales in zip(self._calls, self._scales)
        ]


def loss_entries(residual, scale, points_dim):
    """
    A call's residual as the entries of the solver's loss: times its scale
    (``None``: 1), its points' dimension first, so that the chunks of
    points of a call, flattened one after the other, give the whole call's
    entries in the same order.

    :param torch.Tensor residual: What ``condition.evaluate`` returned.
    :param torch.Tensor scale: See
        :func:`~pina_ntk.integration.pina_adapter.residual_loss_scales`.
    :param int points_dim: See
        :func:`~pina_ntk.integration.pina_adapter.residual_points_dim`.
    :rtype: torch.Tensor
    """
    residual = as_plain_tensor(residual)
    if scale is not None:
        residual = residual * scale
    return residual.movedim(points_dim, 0)


def scaled_chunks(batch, chunk_size, scales):
    """
    :func:`point_chunks` of ``batch``, each with its rows of the call's
    scale.

    :param dict batch: The call's data.
    :param int chunk_size: Points per chunk.
    :param tuple scales: ``(scale, per_point)`` of
        :func:`~pina_ntk.integration.pina_adapter.residual_loss_scales`.
    :return: ``(chunk, scale)`` pairs.
    :rtype: list[tuple]
    """
    scale, per_point = scales
    chunks = point_chunks(batch, chunk_size)
    if scale is None or not per_point or len(chunks) == 1:
        return [(chunk, scale) for chunk in chunks]
    starts = range(0, len(batch["input"]), chunk_size)
    return [
        (chunk, scale[start : start + chunk_size])
        for chunk, start in zip(chunks, starts)
    ]


def point_chunks(batch, chunk_size):
    """
    Split a condition's data into chunks of at most ``chunk_size`` points.

    Every tensor whose leading dimension is the number of points is sliced;
    inputs become fresh leaves requiring gradients, as PINA's operators need.
    Data whose input is not a tensor (graphs) is not split.

    :param dict batch: The condition's data (``"input"``, maybe ``"target"``).
    :param int chunk_size: Points per chunk.
    :return: The chunks.
    :rtype: list[dict]
    """
    points = batch.get("input")
    if not torch.is_tensor(points) or len(points) <= chunk_size:
        return [batch]
    count = len(points)
    chunks = []
    for start in range(0, count, chunk_size):
        chunk = {}
        for key, value in batch.items():
            if torch.is_tensor(value) and value.dim() and len(value) == count:
                value = value[start : start + chunk_size]
                if key == "input":
                    value = value.detach().requires_grad_(True)
            chunk[key] = value
        chunks.append(chunk)
    return chunks


def replay_residual_fn(
    solver, calls, names, chunk_size=None, scales=None, unknowns=None
):
    """
    A residual function that re-runs recorded condition evaluations.

    :param solver: The PINA solver the calls belong to.
    :param calls: ``(condition_name, evaluate, batch)`` triples, where
        ``evaluate`` is the condition's *original* bound method.
    :type calls: list[tuple]
    :param names: The condition names, in block order.
    :type names: list[str]
    :param int chunk_size: ``None`` (default): evaluate each call at once,
        keeping the autograd graph. An integer: evaluate at most that many
        points at a time and return *values only* (no graph), which bounds
        the memory of evaluations at displaced parameters that coexist with
        a training step's graph. Valid when the model treats points
        independently (as PINA's feed-forward models do; not batch
        normalisation in training mode).
    :param scales: Per call, ``(scale, per_point)`` of
        :func:`~pina_ntk.integration.pina_adapter.residual_loss_scales`:
        each call's residual is multiplied by its scale, the residual of
        the solver's loss; ``None`` (default): the residuals as evaluated.
    :type scales: list[tuple]
    :param dict unknowns: An inverse problem's unknowns as the calls were
        evaluated, ``{UNKNOWN_PREFIX + name: tensor}`` (PINA clamps them in
        place after a step's residuals, so the live values may differ);
        ``None`` (default): the live values. See :func:`unknown_values`.
    :return: ``params -> list of residual blocks`` (one per name, flattened
        and concatenated over that condition's calls), whose
        :meth:`~ReplayedResiduals.chunks` also gives the residual chunk by
        chunk, each chunk with its own graph.
    :rtype: ReplayedResiduals
    """
    return ReplayedResiduals(solver, calls, names, chunk_size, scales, unknowns)


def unknown_values(solver, params, recorded):
    """
    The unknown parameters of a replayed evaluation at ``params``: those
    the recorded step used, displaced as ``params`` displaces them from
    their live values when the kernel includes them (so that the replay at
    the live parameters gives the recorded residual, and derivatives with
    respect to the unknowns are those at the step).

    :param solver: The PINA solver.
    :param dict params: The kernel's parameters, ``{name: tensor}``.
    :param recorded: ``{UNKNOWN_PREFIX + name: tensor}`` at the step, or
        ``None``.
    :type recorded: dict | None
    :return: ``{UNKNOWN_PREFIX + name: tensor}`` to evaluate with.
    :rtype: dict
    """
    recorded = recorded or {}
    values = {}
    for key, live in unknown_parameters(solver).items():
        if key in params:
            shift = recorded[key] - live.detach() if key in recorded else 0
            values[key] = params[key] + shift
        elif key in recorded:
            values[key] = recorded[key]
    return values


def call_at(module, solver, params, args, recorded=None):
    """
    ``module(*args)`` at the kernel's parameters ``params``: the solver's
    through :func:`torch.func.functional_call` (``module`` holds the
    solver as its submodule ``solver``), an inverse problem's unknowns
    through :func:`~pina_ntk.integration.pina_adapter.unknowns_replaced`
    (see :func:`unknown_values`).

    :param torch.nn.Module module: Holds the solver as ``module.solver``.
    :param solver: The PINA solver.
    :param dict params: ``{name: tensor}`` of the kernel.
    :param tuple args: The positional arguments of ``module``.
    :param recorded: See :func:`unknown_values`.
    :return: What ``module`` returns.
    """
    module_params = {
        f"solver.{k}": v
        for k, v in params.items()
        if not k.startswith(UNKNOWN_PREFIX)
    }
    values = unknown_values(solver, params, recorded)
    with torch.enable_grad(), unknowns_replaced(solver, values):
        # PINA's operators differentiate the inputs, even under no_grad
        return functional_call(module, module_params, args, strict=False)


class ReplayedResiduals:
    """
    Recorded condition evaluations as a function of the parameters: a
    :class:`~pina_ntk.integration.contract.ChunkedResidualFn`, evaluated
    with :func:`torch.func.functional_call` (the model's own parameters are
    never modified). See :func:`replay_residual_fn` for the arguments.
    """

    def __init__(
        self, solver, calls, names, chunk_size=None, scales=None, unknowns=None
    ):
        self.solver = solver
        self._unknowns = unknowns
        self._calls = list(calls)
        self._names = list(names)
        self._scales = scales or [(None, False)] * len(self._calls)
        self._points_dim = residual_points_dim(solver)
        self._replay = _Replay(
            solver,
            [(ev, batch) for _, ev, batch in self._calls],
            chunk_size,
            self._scales,
        )
        self._evaluate = _Evaluate(solver)

    def __call__(self, params):
        """
        :param dict params: ``{name: tensor}`` of the solver's parameters.
        :return: One flat residual block per condition, in block order.
        :rtype: list[torch.Tensor]
        """
        outputs = call_at(self._replay, self.solver, params, (), self._unknowns)
        owners = [name for name, _, _ in self._calls]
        return group_blocks(owners, outputs, self._names)

    def chunks(self, params, points, blocks=None):
        """
        The residual in chunks of at most ``points`` points, each evaluated
        on its own (its own autograd graph), lazily: one chunk's graph is
        alive at a time. Block by block, in block order; within a block,
        the chunks of its calls in their order, so that a block's chunks
        concatenate to the block of :meth:`__call__`.

        :param dict params: ``{name: tensor}`` of the solver's parameters.
        :param int points: Points per chunk.
        :param blocks: One bool per block: whether to evaluate it; ``None``
            (default): all.
        :type blocks: tuple[bool]
        :return: ``(block index, flat residual chunk)`` pairs.
        :rtype: Iterator[tuple[int, torch.Tensor]]
        """
        for index, name in enumerate(self._names):
            if blocks is not None and not blocks[index]:
                continue
            for (owner, evaluate, batch), scales in zip(
                self._calls, self._scales
            ):
                if owner != name:
                    continue
                for chunk, scale in scaled_chunks(batch, points, scales):
                    residual = call_at(
                        self._evaluate,
                        self.solver,
                        params,
                        (evaluate, chunk),
                        self._unknowns,
                    )
                    entries = loss_entries(residual, scale, self._points_dim)
                    yield index, entries.reshape(-1)


def group_blocks(owners, residuals, names):
    """
    Flatten and concatenate residuals by owning condition, in ``names`` order.

    :param owners: The condition name of each residual.
    :type owners: list[str]
    :param residuals: The residual tensors.
    :type residuals: list[torch.Tensor]
    :param names: The block order.
    :type names: list[str]
    :return: One flat tensor per name.
    :rtype: list[torch.Tensor]
    :raises RuntimeError: If a condition has no residual.
    """
    blocks = []
    for name in names:
        parts = [r.reshape(-1) for o, r in zip(owners, residuals) if o == name]
        if not parts:
            raise RuntimeError(
                f"No residual was recorded for condition {name!r}: the solver "
                "did not evaluate it through condition.evaluate(...)."
            )
        blocks.append(parts[0] if len(parts) == 1 else torch.cat(parts))
    return blocks


class ResidualRecorder:
    """
    Records the ``condition.evaluate`` calls of a solver's training steps:
    the :class:`~pina_ntk.integration.contract.StepResiduals` of a step.

    :param solver: The PINA solver whose problem's conditions are watched.
    :param str unknowns: How an inverse problem's unknown parameters enter
        the kernel, one of :data:`UNKNOWNS`. Default
        ``"observations_first"``.

    :Example:
        >>> recorder = ResidualRecorder(solver)   # doctest: +SKIP
        >>> recorder.attach(); recorder.start()   # doctest: +SKIP
        >>> loss = solver.training_step(batch, 0) # doctest: +SKIP
        >>> blocks = recorder.blocks(["D", "boundary"])  # doctest: +SKIP
    """

    def __init__(self, solver, unknowns=UNKNOWNS[0]):
        self.solver = solver
        self.unknowns = unknowns
        self.calls = []  # (name, original evaluate, batch)
        self.residuals = []
        self.recording = False
        self.tap = None  # a ConditionGradientTap for this step, or None
        self.batch_index = 0  # of the recorded step, in its epoch
        self._scales = None  # the step's residual_loss_scales, when read
        self._unknowns_at_step = {}  # before PINA clamps them in place
        self._evaluate = _Evaluate(solver)

    @property
    def device(self):
        """:return: The solver's device."""
        return self.solver.device

    def attach(self):
        """
        Make every condition's ``evaluate`` record into this recorder
        (idempotent and cheap, so it is re-run at every training batch; see
        :func:`~pina_ntk.integration.pina_adapter.wrap_evaluate`).
        """
        wrap_evaluate(self.solver.problem, self)

    def detach(self):
        """Remove the wrappers, restoring the conditions' own methods."""
        unwrap_evaluate(self.solver.problem, _RecordingEvaluate)
        self.stop()

    def __call__(self, name, evaluate):
        """:return: A wrapper of ``evaluate`` recording into this recorder."""
        return _RecordingEvaluate(self, name, evaluate)

    def owns(self, wrapper, name):
        """:return: Whether ``wrapper`` records ``name`` into this recorder."""
        return (
            isinstance(wrapper, _RecordingEvaluate)
            and wrapper.recorder is self
            and wrapper.name == name
        )

    def start(self, batch_index=0):
        """
        Forget earlier calls and begin recording.

        :param int batch_index: The training batch's index in its epoch
            (the RBA solver's attention rows depend on it).
        """
        self.calls, self.residuals = [], []
        self.recording = True
        self.tap = None
        self.batch_index = batch_index
        self._scales = None
        self._unknowns_at_step = {
            key: value.detach().clone()
            for key, value in unknown_parameters(self.solver).items()
        }

    def stop(self):
        """Stop recording and drop references to tensors."""
        self.recording = False
        self.calls, self.residuals = [], []
        self.tap = None
        self._scales = None

    def tap_gradients(self, tap):
        """
        Run this step's condition evaluations through the views of ``tap``
        (a :class:`~pina_ntk.core.gradient_band.ConditionGradientTap`), so
        that the step's backward pass also yields each condition's
        gradient; ``None`` evaluates with the parameters themselves.

        :param tap: The tap, or ``None``.
        """
        self.tap = tap

    def evaluate(self, name, evaluate, batch, solver):
        """
        One recorded ``condition.evaluate(batch, solver)`` call, through the
        tap's views of the parameters when a tap is set (and ``solver`` is
        this recorder's).

        :param str name: The condition.
        :param callable evaluate: Its original ``evaluate``.
        :param dict batch: Its data.
        :param solver: The solver PINA passes.
        :return: What ``evaluate`` returns.
        """
        if self.tap is None or solver is not self.solver:
            return evaluate(batch, solver)
        # the live unknowns (the step's own, which the loss differentiates),
        # through the tap's views when the kernel includes them
        views = self.tap.aliases(name)
        return call_at(self._evaluate, solver, views, (evaluate, batch))

    def parameters(self):
        """
        :return: The kernel's parameters, ``{name: parameter}``
            (:func:`kernel_parameters` with :attr:`unknowns`).
        :rtype: dict
        """
        return kernel_parameters(self.solver, self.unknowns)

    def loss_scales(self):
        """
        The factors the solver's loss puts on the recorded residuals, as
        square roots, read once per step after its loss has been formed
        (:func:`~pina_ntk.integration.pina_adapter.residual_loss_scales`).

        :return: Per recorded call, ``(scale, per_point)``.
        :rtype: list[tuple]
        """
        if self._scales is None:
            self._scales = residual_loss_scales(
                self.solver, self.calls, self.residuals, self.batch_index
            )
        return self._scales

    def blocks(self, names):
        """
        The residuals of the solver's loss, the recorded residuals times
        their :meth:`loss_scales`, as blocks (with their autograd graph).

        :param names: The block order.
        :type names: list[str]
        :return: One flat tensor per condition.
        :rtype: list[torch.Tensor]
        """
        owners = [name for name, _, _ in self.calls]
        dim = residual_points_dim(self.solver)
        residuals = [
            loss_entries(r, scale, dim)
            for r, (scale, _) in zip(self.residuals, self.loss_scales())
        ]
        return group_blocks(owners, residuals, names)

    def inverse_roles(self, names):
        """
        The roles of the conditions in an inverse problem, read off the
        recorded residuals: whether the unknowns enter a condition's
        residual (one backward pass from its residuals to the unknowns,
        through the few nodes between them), and whether the condition
        holds observations
        (:func:`~pina_ntk.integration.pina_adapter.is_observation`).

        :param names: The block order.
        :type names: list[str]
        :return: ``(entered, observed)``, a tuple of bools each.
        :rtype: tuple[tuple, tuple]
        """
        unknowns = list(unknown_parameters(self.solver).values())
        entered = dict.fromkeys(names, False)
        for (name, _, _), residual in zip(self.calls, self.residuals):
            if unknowns and residual.requires_grad and not entered[name]:
                gradients = torch.autograd.grad(
                    residual.sum(),
                    unknowns,
                    retain_graph=True,
                    allow_unused=True,
                )
                entered[name] = any(g is not None for g in gradients)
        observed = tuple(is_observation(self.solver, name) for name in names)
        return tuple(entered[name] for name in names), observed

    def inputs(self):
        """
        The input points of the recorded calls, flattened and concatenated.

        :return: A detached 1-D tensor.
        :rtype: torch.Tensor
        """
        return torch.cat(
            [
                as_plain_tensor(data["input"]).detach().reshape(-1)
                for _, _, data in self.calls
            ]
        )

    def residual_fn(self, names, chunk_size=None):
        """
        The recorded calls as a function of the parameters, each times its
        :meth:`loss_scales` (fixed at the step's values).

        :param names: The block order.
        :type names: list[str]
        :param int chunk_size: See :func:`replay_residual_fn`.
        :return: See :func:`replay_residual_fn`.
        :rtype: callable
        """
        return replay_residual_fn(
            self.solver,
            list(self.calls),
            names,
            chunk_size,
            self.loss_scales(),
            self._unknowns_at_step,
        )


class _RecordingEvaluate:
    """Callable stored on a condition: evaluates and, when on, records."""

    def __init__(self, recorder, name, original):
        self.recorder = recorder
        self.name = name
        self.original = original

    def __call__(self, batch, solver):
        recorder = self.recorder
        if not recorder.recording:
            return self.original(batch, solver)
        residual = recorder.evaluate(self.name, self.original, batch, solver)
        # an ensemble's member is the one PINA set for this call
        evaluate = member_evaluate(solver, self.original)
        recorder.calls.append((self.name, evaluate, dict(batch)))
        recorder.residuals.append(as_plain_tensor(residual))
        return residual

    def __reduce__(self):
        # Pickling a problem mid-training (checkpoints, deepcopy) stores the
        # condition without the wrapper.
        return (getattr, (self.original.__self__, "evaluate"))
