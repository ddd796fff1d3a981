"""Exact and sketched statistics of the neural tangent kernel of a residual.

Everything here works on a *residual function*: a callable that maps a
dictionary of parameter tensors ``{name: tensor}`` to a list of residual
blocks, one tensor per loss term (a PINA condition, a data set, ...). Block
``c`` may have any shape; all of its entries belong to the block. With ``J``
the Jacobian of the flattened residual ``R`` with respect to the parameters,
the neural tangent kernel is ``K = J J^T`` and its diagonal block of condition
``c`` is ``K_cc``.

The functions are pure: they never modify the tensors in ``params`` (the
predictor step evaluates the residual at displaced copies), so they can be
called in the middle of a training step without disturbing its autograd graph
or the optimizer state.
"""

import math

import torch

from .weights import ntk_weights

#: Probe distributions accepted by :func:`sample_probe`.
PROBES = ("gaussian", "rademacher")
#: Finite-difference schemes accepted by the sketches.
DIFFERENCES = ("forward", "central")
#: Trace estimators: the predictor sketch and the parameter-space sketch.
ESTIMATORS = ("predictor", "parameter")


def sample_probe(like, kind="gaussian", generator=None, scales=None):
    """
    Draw one random probe vector, split into blocks shaped like ``like``.

    :param like: Tensors whose shapes, dtype and device the probe copies.
    :type like: list[torch.Tensor]
    :param str kind: ``"gaussian"`` (entries ``N(0, 1)``) or ``"rademacher"``
        (entries ``±1`` with probability 1/2). Default is ``"gaussian"``.
    :param torch.Generator generator: Source of randomness. Default is the
        global generator.
    :param torch.Tensor scales: One positive factor ``s_c`` per block
        (:func:`balanced_probe_scales`): block ``c`` of the probe is then
        ``s_c g_c``. Default ``None``, no scaling.
    :return: One tensor per block of ``like``.
    :rtype: list[torch.Tensor]
    :raises ValueError: If ``kind`` is not one of :data:`PROBES`.

    :Example:
        >>> blocks = [torch.zeros(3), torch.zeros(2, 2)]
        >>> [p.shape for p in sample_probe(blocks)]
        [torch.Size([3]), torch.Size([2, 2])]
    """
    if kind not in PROBES:
        raise ValueError(f"probe must be one of {PROBES}, got {kind!r}.")
    probe = []
    for block in like:
        opts = dict(device=block.device, dtype=block.dtype)
        if kind == "gaussian":
            probe.append(torch.randn(block.shape, generator=generator, **opts))
        else:
            bits = torch.randint(
                0, 2, block.shape, generator=generator, device=block.device
            )
            probe.append((2 * bits - 1).to(block.dtype))
    if scales is not None:
        probe = [s * g for s, g in zip(scales.to(like[0]).unbind(), probe)]
    return probe


def balanced_probe_scales(block_traces, block_sizes):
    """
    Probe scales that balance the blocks of the predictor sketch.

    The block sketch ``g_c · (K g)_c`` contains the cross terms ``g_c^T K_cd
    g_d``: zero in mean, but with a variance that grows with ``Tr(K_dd)``. A
    block whose trace is orders of magnitude below another's (a boundary
    condition next to a second-order PDE residual) is then drowned in the
    other block's sampling noise. Scaling block ``c`` of the probe by
    ``s_c = sqrt(w_c)``, the square root of the NTK weight
    (:func:`~pina_ntk.core.weights.ntk_weights`, ``mean`` reduction) that
    ``block_traces`` give, sketches the kernel ``S K S`` of the weighted
    residual, whose blocks have comparable mean diagonals;
    :func:`predictor_block_traces` divides by ``s_c^2`` again. Each sample
    stays unbiased for any scales fixed before the probe is drawn, so
    ``block_traces`` may be any earlier estimate.

    :param torch.Tensor block_traces: Estimates of ``Tr(K_cc)``, ``(C,)``.
    :param torch.Tensor block_sizes: Residual entries ``n_c`` per block.
    :return: ``s_c``, ``(C,)``; ``1`` for a block whose estimate is not
        finite and positive (and for all blocks if none is).
    :rtype: torch.Tensor

    :Example:
        >>> balanced_probe_scales(torch.tensor([400.0, 4.0]),
        ...                       torch.tensor([1.0, 1.0]))
        tensor([0.7106, 7.1063])
    """
    usable = torch.isfinite(block_traces) & (block_traces > 0)
    zero = torch.zeros_like(block_traces)
    # the weight formula over the usable blocks only; the others get NaN,
    # replaced below, so that one bad estimate cannot skew every scale
    weights = ntk_weights(
        torch.where(usable, block_traces, zero),
        torch.where(usable, block_sizes.to(block_traces), zero),
    )
    return torch.where(usable, weights.sqrt(), torch.ones_like(weights))


def sketch_variances(kernel, block_sizes, scales=None):
    """
    Exact variances of single sketches of each block trace, for a known
    kernel and Gaussian probes: how noisy each estimator is on a problem.

    With ``F_cd = ||K_cd||_F^2``, one predictor sketch ``v_c · (K v)_c /
    s_c^2`` (``v = S g``, :func:`predictor_block_traces`) has variance
    ``F_cc + sum_d (s_d / s_c)^2 F_cd``; a plain probe (``s = 1``) gives
    ``F_cc + sum_d F_cd``, where a block ``d`` with a large trace swamps a
    small block ``c``. The parameter-space sketch ``||J_c z||^2`` has
    variance ``2 F_cc``, its own block only.

    :param torch.Tensor kernel: The exact ``n × n`` kernel, rows in block
        order (for example :func:`pina_ntk.core.residual_functions.exact_kernel`).
    :param block_sizes: Entries per block, summing to ``n``.
    :type block_sizes: list[int] | torch.Tensor
    :param torch.Tensor scales: The predictor probe's scales ``s_c``
        (:func:`balanced_probe_scales`); ``None`` (default) for a plain probe.
    :return: ``(predictor, parameter)`` variances, each ``(C,)``.
    :rtype: tuple[torch.Tensor, torch.Tensor]

    :Example:
        >>> kernel = torch.tensor([[4.0, 1.0], [1.0, 1.0]])
        >>> sketch_variances(kernel, [1, 1])
        (tensor([33.,  3.]), tensor([32.,  2.]))
    """
    sizes = [int(n) for n in block_sizes]
    rows = kernel.split(sizes, dim=0)
    frobenius = torch.stack(
        [
            torch.stack([b.pow(2).sum() for b in r.split(sizes, dim=1)])
            for r in rows
        ]
    )
    if scales is None:
        scales = torch.ones(len(sizes), dtype=kernel.dtype)
    scales = scales.to(kernel)
    ratio = (scales[None, :] / scales[:, None]) ** 2
    diagonal = frobenius.diagonal()
    return diagonal + (ratio * frobenius).sum(dim=1), 2.0 * diagonal


def exact_block_traces(residuals, params, chunk_size=1):
    """
    Exact block traces ``Tr(K_cc) = sum_{i in c} ||grad_theta R_i||^2``.

    One reverse-mode pass per residual entry. ``chunk_size > 1`` asks torch to
    vectorise the passes of a chunk (``is_grads_batched``); where the graph
    does not support that (or it fails) the loop over single entries is used.
    On PINA's derivative graphs the loop is usually the faster of the two.

    :param residuals: Residual blocks, computed from ``params`` with autograd
        enabled; their graph is retained.
    :type residuals: list[torch.Tensor]
    :param params: Parameters the kernel is taken with respect to. A
        parameter a block does not depend on contributes zero.
    :type params: list[torch.Tensor]
    :param int chunk_size: Entries differentiated per batched pass.
    :return: The trace of each diagonal block, shape ``(len(residuals),)``.
    :rtype: torch.Tensor

    :Example:
        >>> theta = torch.tensor([1.0, 2.0], requires_grad=True)
        >>> blocks = [theta * torch.tensor([3.0, 4.0]), theta.sum()[None]]
        >>> exact_block_traces(blocks, [theta])
        tensor([25.,  2.])
    """
    params = list(params)
    traces = []
    for block in residuals:
        flat = block.reshape(-1)
        total = flat.new_zeros(())
        if flat.grad_fn is None:  # a block independent of every parameter
            traces.append(total)
            continue
        start = 0
        while start < flat.numel():
            stop = min(start + chunk_size, flat.numel())
            total = total + _squared_gradient_norms(flat, params, start, stop)
            start = stop
        traces.append(total)
    return torch.stack(traces)


class PointCouplingError(ValueError):
    """A residual evaluated in chunks of points differs from the same
    points' residual evaluated with the whole batch: the model couples the
    points (batch normalisation, a layer over the batch), so per-chunk
    graphs do not give the kernel of the whole batch."""


def chunked_block_traces(chunks, num_blocks, params, reference=None):
    """
    Exact block traces from residual chunks that each carry their own graph.

    A residual entry that depends on its own point only has the same
    gradient whether it is computed with the whole batch or with a few
    points. Evaluated in chunks of points, each chunk with its own small
    graph, the reverse pass of an entry runs through its chunk's graph
    instead of the batch's: ``n`` entries cost ``O(n)`` instead of
    ``O(n^2)``. A chunk's entries are differentiated together in one
    batched reverse pass (``is_grads_batched``, one-hot seeds); where the
    graph does not support that, one pass per entry.

    :param chunks: ``(block index, residual chunk)`` pairs: the residual of
        a few points, computed from ``params`` with autograd enabled. An
        iterator that computes each chunk when asked keeps one chunk's graph
        alive at a time.
    :type chunks: Iterable[tuple[int, torch.Tensor]]
    :param int num_blocks: Number of blocks; a block with no chunk has trace
        zero.
    :param params: Parameters the kernel is taken with respect to.
    :type params: list[torch.Tensor]
    :param reference: The whole residual's values, one flat tensor per
        block, or ``None``. The first chunk of each block is compared with
        the block's leading entries; a chunk shorter than its block must
        agree with them to ``sqrt(eps)`` of the dtype, relative to their
        largest magnitude.
    :type reference: list[torch.Tensor]
    :return: The trace of each diagonal block, shape ``(num_blocks,)``.
    :rtype: torch.Tensor
    :raises PointCouplingError: If a chunk disagrees with ``reference``.

    :Example:
        >>> theta = torch.tensor([1.0, 2.0], requires_grad=True)
        >>> x = torch.tensor([3.0, 4.0])
        >>> # point i's residual theta_0 + theta_1 x_i: ||grad||^2 = 1 + x_i^2
        >>> chunks = ((0, theta[0] + theta[1] * x[i : i + 1]) for i in range(2))
        >>> chunked_block_traces(chunks, 2, [theta])
        tensor([27.,  0.])
    """
    params = list(params)
    totals = [None] * num_blocks
    checked = set()
    for block, chunk in chunks:
        flat = chunk.reshape(-1)
        if reference is not None and block not in checked:
            checked.add(block)
            check_point_independence([(block, flat)], reference)
        if flat.grad_fn is None:  # independent of every parameter
            found = flat.new_zeros(())
        else:
            found = flat.new_zeros(()) + _squared_gradient_norms(
                flat, params, 0, flat.numel()
            )
        totals[block] = (
            found if totals[block] is None else totals[block] + found
        )
    like = next((t for t in totals if t is not None), None)
    if like is None:
        like = params[0].new_zeros(())
    return torch.stack([like.new_zeros(()) if t is None else t for t in totals])


def check_point_independence(chunks, reference):
    """
    Check that each block's first chunk of points has the residual the
    same points have in the whole batch: the assumption under which the
    exact traces are taken point by point (:func:`chunked_block_traces`,
    :func:`~pina_ntk.core.row_gradients.row_gradient_traces`).

    :param chunks: ``(block index, residual chunk)`` pairs, each chunk the
        residual of its block's leading points evaluated on its own.
    :type chunks: Iterable[tuple[int, torch.Tensor]]
    :param reference: The whole residual's values, one flat tensor per
        block; a chunk shorter than its block must agree with the block's
        leading entries to ``sqrt(eps)`` of the dtype, relative to their
        largest magnitude.
    :type reference: list[torch.Tensor]
    :raises PointCouplingError: If a chunk disagrees with ``reference``.

    :Example:
        >>> x = torch.tensor([1.0, 2.0, 3.0])
        >>> whole = [x / x.sum()]
        >>> check_point_independence([(0, x[:1] / x.sum())], whole)
        >>> try:  # normalised over the chunk, not the batch
        ...     check_point_independence([(0, x[:1] / x[:1].sum())], whole)
        ... except PointCouplingError:
        ...     print("coupled")
        coupled
    """
    for block, chunk in chunks:
        _check_chunk(chunk.detach().reshape(-1), reference[block].reshape(-1))


def _check_chunk(chunk, whole):
    """Raise :class:`PointCouplingError` unless a chunk shorter than its
    block agrees with the block's leading entries."""
    if chunk.numel() >= whole.numel():
        return  # the chunk is the whole block: nothing was split
    leading = whole[: chunk.numel()].to(chunk.dtype)
    if not bool(torch.isfinite(leading).all() & torch.isfinite(chunk).all()):
        return  # non-finite traces follow, which the weights' guards reject
    scale = leading.abs().max()
    tolerance = math.sqrt(torch.finfo(chunk.dtype).eps) * scale
    if not bool((chunk - leading).abs().max() <= tolerance):
        raise PointCouplingError(
            "a residual evaluated on a chunk of points differs from the same "
            "points' residual in the whole batch"
        )


def _squared_gradient_norms(flat, params, start, stop):
    """Sum of ``||grad R_i||^2`` for ``start <= i < stop``."""
    if stop - start > 1:
        seeds = torch.zeros(stop - start, flat.numel(), **_like(flat))
        seeds[torch.arange(stop - start), torch.arange(start, stop)] = 1.0
        try:
            grads = torch.autograd.grad(
                flat,
                params,
                grad_outputs=seeds,
                retain_graph=True,
                allow_unused=True,
                is_grads_batched=True,
            )
            return sum(g.pow(2).sum() for g in grads if g is not None)
        except RuntimeError:
            pass  # graph not vmappable: fall back to the loop below
    total = flat.new_zeros(())
    for grads in entry_gradients(flat, params, range(start, stop)):
        total = total + sum(g.pow(2).sum() for g in grads)
    return total


def entry_gradients(flat, params, indices=None):
    """
    Yield ``grad_theta R_i`` for each entry ``i`` of a flat residual.

    One reverse-mode pass per entry (the graph is retained). Reverse passes,
    not :func:`torch.func.jacrev`, so residuals that differentiate their
    inputs with :func:`torch.autograd.grad` (PINA's operators) work too. A
    parameter the entry does not depend on gives zeros.

    :param torch.Tensor flat: A 1-d residual computed from ``params``.
    :param params: The parameters.
    :type params: list[torch.Tensor]
    :param indices: The entries to differentiate; all by default.
    :type indices: Iterable[int]
    :return: For each entry, one gradient tensor per parameter.
    :rtype: Iterator[tuple[torch.Tensor, ...]]
    """
    for i in range(flat.numel()) if indices is None else indices:
        yield torch.autograd.grad(
            flat[i],
            params,
            retain_graph=True,
            allow_unused=True,
            materialize_grads=True,
        )


def _like(tensor):
    return dict(device=tensor.device, dtype=tensor.dtype)


def predictor_direction(residuals, params, probe):
    """
    The predictor direction ``v = grad_theta R g = J^T g``.

    This is the paper's gradient step with ``Lambda_pred = diag(-g)
    diag(R)^+`` written without dividing by the residual, so exactly zero
    residual entries are harmless. One reverse-mode pass; the graph of
    ``residuals`` is retained for the training step's own backward pass.

    :param residuals: Residual blocks computed from ``params``.
    :type residuals: list[torch.Tensor]
    :param params: The parameters.
    :type params: list[torch.Tensor]
    :param probe: The probe, one block per residual block.
    :type probe: list[torch.Tensor]
    :return: One tensor per parameter (zeros for unused parameters).
    :rtype: list[torch.Tensor]
    """
    used = [(r, g) for r, g in zip(residuals, probe) if r.grad_fn is not None]
    if not used:
        return [torch.zeros_like(p) for p in params]
    grads = torch.autograd.grad(
        [r for r, _ in used],
        list(params),
        grad_outputs=[g for _, g in used],
        retain_graph=True,
        allow_unused=True,
        materialize_grads=True,
    )
    return [g.detach() for g in grads]


def flatten_parameters(tensors):
    """
    Tensors (parameters, or one direction per parameter) as one detached
    1-d tensor, in order.

    One flat vector turns the displacement, its norm and the probe of the
    parameter-space sketch into single tensor operations instead of one per
    parameter, which matters for small networks whose steps are dominated
    by per-operation overhead.

    :param tensors: The tensors.
    :type tensors: Iterable[torch.Tensor]
    :return: Their concatenated entries (a new tensor).
    :rtype: torch.Tensor
    """
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def displace(params, direction, scale, theta=None):
    """
    Return ``{name: theta + scale * direction}`` as new, detached tensors.

    :param dict params: ``{name: tensor}``, left untouched.
    :param torch.Tensor direction: The flat direction
        (:func:`flatten_parameters` order).
    :param scale: The step length (a float or a 0-d tensor).
    :param torch.Tensor theta: ``flatten_parameters(params.values())`` if
        already computed.
    :return: The displaced parameters: views of one new flat tensor, shaped
        like ``params``.
    :rtype: dict
    """
    if theta is None:
        theta = flatten_parameters(params.values())
    moved = theta + scale * direction
    parts = moved.split([p.numel() for p in params.values()])
    # torch.cat promotes mixed parameter dtypes: give each its own back
    return {
        name: part.view(p.shape).to(p.dtype)
        for (name, p), part in zip(params.items(), parts)
    }


def _evaluate_detached(residual_fn, params):
    return [r.detach() for r in residual_fn(params)]


def auto_step_size(theta_norm, dir_norm, difference, dtype):
    """
    A step length whose displacement is ``tau * max(||theta||, 1)``.

    ``tau`` is ``eps^(1/2)`` for forward and ``eps^(1/3)`` for central
    differences (``eps`` the machine epsilon of ``dtype``), the classical
    balance between truncation and rounding error of a difference quotient.

    :param torch.Tensor theta_norm: ``||theta||``, the parameters' norm.
    :param torch.Tensor dir_norm: ``||direction||``, the displacement
        direction's norm (a zero direction gives a finite step).
    :param str difference: ``"forward"`` or ``"central"``.
    :param torch.dtype dtype: The floating-point type of the computation.
    :return: The step length ``h``, so that ``||h direction|| = tau
        max(||theta||, 1)`` (a 0-d tensor).
    :rtype: torch.Tensor
    """
    eps = torch.finfo(dtype).eps
    tau = eps ** (0.5 if difference == "forward" else 1.0 / 3.0)
    tiny = torch.finfo(dtype).tiny
    return tau * torch.clamp(theta_norm, min=1.0) / torch.clamp(dir_norm, tiny)


def kernel_probe_product(
    residual_fn,
    params,
    probe,
    step_size="auto",
    difference="forward",
    residuals=None,
    direction=None,
):
    """
    The predictor sketch ``K g ≈ (R(theta + dt v) - R(theta)) / dt``.

    With ``v = J^T g`` (:func:`predictor_direction`), the forward quotient has
    bias ``O(dt)``; ``difference="central"`` uses ``(R(theta + dt v) -
    R(theta - dt v)) / (2 dt)`` with bias ``O(dt^2)`` at one more forward pass.

    The two halves can run at different times: ``v`` needs the autograd
    graph of ``R(theta)``, the displaced evaluations only values. Passing a
    precomputed ``direction`` lets the evaluations run after that graph has
    been freed (for example after a training step's backward pass).

    :param callable residual_fn: ``params -> list of residual blocks``.
    :param dict params: ``{name: tensor}`` at ``theta``.
    :param probe: The probe ``g``, one block per residual block.
    :type probe: list[torch.Tensor]
    :param step_size: ``dt > 0``, or ``"auto"`` (:func:`auto_step_size`).
    :type step_size: float | str
    :param str difference: ``"forward"`` or ``"central"``.
    :param residuals: ``R(theta)`` already computed from ``params`` with
        autograd (for example by the training step); computed if ``None``.
        Values suffice when ``direction`` is given.
    :type residuals: list[torch.Tensor]
    :param direction: ``v = J^T g`` from :func:`predictor_direction`, one
        tensor per parameter; computed from ``residuals`` if ``None``.
    :type direction: list[torch.Tensor]
    :return: ``K g`` split into blocks like the residual.
    :rtype: list[torch.Tensor]
    """
    if residuals is None:
        residuals = residual_fn(params)
    if direction is None:
        direction = predictor_direction(residuals, list(params.values()), probe)
    theta = flatten_parameters(params.values())
    direction = flatten_parameters(direction)
    dt = step_size
    if dt == "auto":
        dt = auto_step_size(
            torch.linalg.vector_norm(theta),
            torch.linalg.vector_norm(direction),
            difference,
            probe[0].dtype,
        )
    plus = _evaluate_detached(
        residual_fn, displace(params, direction, dt, theta)
    )
    if difference == "forward":
        return [(p - r.detach()) / dt for p, r in zip(plus, residuals)]
    minus = _evaluate_detached(
        residual_fn, displace(params, direction, -dt, theta)
    )
    return [(p - m) / (2 * dt) for p, m in zip(plus, minus)]


def predictor_block_traces(probe, kernel_product, scales=None):
    """
    Block trace sketches ``g_c · (K g)_c``, unbiased for ``Tr(K_cc)``.

    With a balanced probe ``v_c = s_c g_c`` (:func:`sample_probe` with
    ``scales``) and ``K v``: ``v_c · (K v)_c / s_c^2``, unbiased as well.

    :param probe: The probe ``g`` (or ``v``) in blocks.
    :type probe: list[torch.Tensor]
    :param kernel_product: ``K g`` (or ``K v``) in the same blocks.
    :type kernel_product: list[torch.Tensor]
    :param torch.Tensor scales: The probe's scales ``s_c``; ``None`` (default)
        for an unscaled probe.
    :return: Shape ``(n_blocks,)``.
    :rtype: torch.Tensor
    """
    traces = torch.stack(
        [(g * kg).sum() for g, kg in zip(probe, kernel_product)]
    )
    return traces if scales is None else traces / scales.to(traces) ** 2


def isolated_block_traces(residuals, params, probe, blocks, scales=None):
    """
    Block sketches without cross terms, ``g_c^T K_cc g_c = ||J_c^T g_c||^2``,
    for the blocks marked in ``blocks``; zero for the others.

    The predictor's block sketch ``g_c · (K g)_c`` (:func:`predictor_block_traces`)
    is ``g_c^T K_cc g_c`` plus the cross terms ``g_c^T K_cd g_d``: zero in
    mean, but able to drown a block whose trace is far below another's, so
    that the sketch, and even a long average of sketches, comes out negative.
    The block's own term alone is unbiased for ``Tr(K_cc)`` as well, never
    negative (``K_cc`` is positive semi-definite), and its variance involves
    the block itself only (``2 ||K_cc||_F^2`` for a Gaussian probe, the
    parameter-space sketch's). It takes one reverse pass through the block's
    own graph, which for a small boundary block is a fraction of a step.

    :param residuals: Residual blocks computed from ``params``; their graph
        is retained.
    :type residuals: list[torch.Tensor]
    :param params: The parameters.
    :type params: list[torch.Tensor]
    :param probe: The probe in blocks (``v_c = s_c g_c`` for a scaled probe).
    :type probe: list[torch.Tensor]
    :param blocks: One bool per block: whether to sketch it.
    :type blocks: tuple[bool]
    :param torch.Tensor scales: The probe's scales ``s_c`` (each sketch is
        divided by ``s_c^2``, as in :func:`predictor_block_traces`);
        ``None`` (default) for an unscaled probe.
    :return: Shape ``(n_blocks,)``.
    :rtype: torch.Tensor

    :Example:
        >>> theta = torch.tensor([1.0, 2.0], requires_grad=True)
        >>> blocks = [theta * torch.tensor([3.0, 4.0]), theta.sum()[None]]
        >>> probe = [torch.tensor([1.0, 1.0]), torch.tensor([1.0])]
        >>> isolated_block_traces(blocks, [theta], probe, (True, True))
        tensor([25.,  2.])
    """
    params = list(params)
    traces = []
    for block, g, marked in zip(residuals, probe, blocks):
        total = g.new_zeros(())
        if marked and block.grad_fn is not None:
            grads = torch.autograd.grad(
                block,
                params,
                grad_outputs=g.reshape(block.shape),
                retain_graph=True,
                allow_unused=True,
            )
            total = sum((d.pow(2).sum() for d in grads if d is not None), total)
        traces.append(total)
    traces = torch.stack(traces)
    return traces if scales is None else traces / scales.to(traces) ** 2


def symmetrised_kernel_sketch(probe, kernel_product, scales=None):
    """
    The single-sample kernel estimate ``(Kg g^T + g (Kg)^T) / 2``.

    With a balanced probe ``v = S g`` (``S = diag(s_c)`` repeated over each
    block's entries) it is ``(Kv u^T + u (Kv)^T) / 2`` with ``u = S^-2 v``,
    unbiased since ``E[v v^T] = S^2``.

    :param probe: The probe ``g`` (or ``v``) in blocks.
    :type probe: list[torch.Tensor]
    :param kernel_product: ``K g`` (or ``K v``) in the same blocks.
    :type kernel_product: list[torch.Tensor]
    :param torch.Tensor scales: The probe's scales ``s_c``; ``None`` (default)
        for an unscaled probe.
    :return: An ``n × n`` symmetric matrix, ``n`` the total number of entries.
    :rtype: torch.Tensor
    """
    if scales is not None:
        probe = [g / s**2 for g, s in zip(probe, scales.to(probe[0]).unbind())]
    g = torch.cat([b.reshape(-1) for b in probe])
    kg = torch.cat([b.reshape(-1) for b in kernel_product])
    outer = torch.outer(kg, g)
    return 0.5 * (outer + outer.T)


def parameter_space_block_traces(
    residual_fn,
    params,
    step_size="auto",
    difference="forward",
    generator=None,
    residuals=None,
    along=None,
):
    """
    Trace sketches from a random parameter displacement (no backward pass).

    ``||R_c(theta + eps z) - R_c(theta)||^2 / eps^2`` with ``z ~ N(0, I_p)``
    is an estimate of ``Tr(K_cc)`` with bias ``O(eps)`` (Theorem
    *alternative-ntk-approximation* of the paper); the central variant
    ``||R_c(theta + eps z) - R_c(theta - eps z)||^2 / (4 eps^2)`` has bias
    ``O(eps^2)``. It gives block traces only, not kernel-vector products.

    :param callable residual_fn: ``params -> list of residual blocks``.
    :param dict params: ``{name: tensor}`` at ``theta``.
    :param step_size: ``eps > 0``, or ``"auto"``: ``eps`` such that
        ``||eps z||`` is about ``tau * max(||theta||, 1)`` as in
        :func:`auto_step_size`.
    :type step_size: float | str
    :param str difference: ``"forward"`` or ``"central"``.
    :param torch.Generator generator: Source of ``z``.
    :param residuals: ``R(theta)`` if already available (detached is fine).
    :type residuals: list[torch.Tensor]
    :param along: ``(directions, along)`` from
        :func:`~pina_ntk.core.rayleigh.residual_directions`: then block ``c``
        gives ``n_c (u_c · J_c z)^2``, unbiased for ``n_c u_c^T K_cc u_c``
        (the Rayleigh statistic's effective trace; the plain trace sketch
        where ``along`` is ``False``). ``None`` (default): traces.
    :type along: tuple
    :return: Shape ``(n_blocks,)``.
    :rtype: torch.Tensor
    """
    theta = flatten_parameters(params.values())
    z = parameter_probe(theta, generator)
    eps = step_size
    if eps == "auto":
        # a direction of norm sqrt(p) gives eps = tau max(||theta||, 1) / sqrt(p),
        # so that ||eps z|| ≈ tau max(||theta||, 1) since E||z||^2 = p; eps is
        # then independent of z, which keeps the estimator's expansion simple
        eps = auto_step_size(
            torch.linalg.vector_norm(theta),
            # a CPU scalar: no host-to-device copy (a GPU synchronisation)
            torch.tensor(math.sqrt(theta.numel()), dtype=theta.dtype),
            difference,
            theta.dtype,
        )
    plus = _evaluate_detached(residual_fn, displace(params, z, eps, theta))
    if difference == "forward":
        if residuals is None:
            residuals = residual_fn(params)
        base = [r.detach() for r in residuals]
        scale = eps**2
    else:
        base = _evaluate_detached(residual_fn, displace(params, z, -eps, theta))
        scale = 4 * eps**2
    moved = [p - b for p, b in zip(plus, base)]
    squared = torch.stack([_squared_norm(m) for m in moved])
    if along is not None:
        directions, projected_blocks = along
        projected = torch.stack(
            [
                m.numel() * (u * m).sum().square()
                for u, m in zip(directions, moved)
            ]
        )
        squared = torch.where(projected_blocks, projected, squared)
    return squared / scale


def parameter_probe(theta, generator=None):
    """
    The random direction ``z ~ N(0, I_p)`` of the parameter-space sketch.

    :param torch.Tensor theta: The flat parameters
        (:func:`flatten_parameters`); ``z`` has their shape, dtype and device.
    :param torch.Generator generator: Source of randomness.
    :return: ``z``, flat.
    :rtype: torch.Tensor
    """
    return torch.randn(
        theta.shape, generator=generator, dtype=theta.dtype, device=theta.device
    )


def _squared_norm(tensor):
    flat = tensor.reshape(-1)
    return torch.dot(flat, flat)
