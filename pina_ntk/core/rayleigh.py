"""The residual-aware kernel statistic: Rayleigh quotients of the NTK blocks.

Under gradient flow on ``sum_c w_c L_c`` with ``L_c = ||R_c||^2 / n_c``, the
block-diagonal part of the kernel makes a condition's loss decay at the
relative rate ``-(d/dt) log L_c = 4 w_c rho_c / n_c`` with

    rho_c = R_c^T K_cc R_c / ||R_c||^2,

the Rayleigh quotient of ``K_cc`` along the residual that is actually
present. The trace rule (Wang, Yu & Perdikaris) equalises these rates for an
isotropic residual, whose Rayleigh quotient is the mean eigenvalue
``Tr(K_cc) / n_c``; replacing that mean by ``rho_c`` equalises them for the
current residual. ``rho_c`` lies between the extreme eigenvalues of
``K_cc`` and does not depend on the residual's scale, so a loss that
vanishes cannot make the weight run away the way a gradient-norm weight
does, yet a residual left in the kernel's slow directions (a boundary
condition after the easy part of it has been fitted) raises its condition's
weight.

Every function here returns *effective traces* ``n_c rho_c``: the number
that takes the place of ``Tr(K_cc)`` in
:func:`~pina_ntk.core.weights.ntk_weights`, so that the moving average,
safeguard and weight formula are shared with the trace rule. A block whose
residual is exactly zero has no direction; it falls back to its trace (the
Rayleigh quotient's mean over isotropic directions).
"""

import torch

from .estimators import exact_block_traces, sample_probe

#: What a kernel sample estimates per condition: ``Tr(K_cc)`` (the paper)
#: or ``n_c`` times the Rayleigh quotient along the residual. Functions
#: that take ``rayleigh`` (one bool per block, ``None``: every block) mix
#: the two, block by block.
STATISTICS = ("trace", "rayleigh")


def _random_unit(like, generator):
    direction = torch.randn(
        like.shape, generator=generator, dtype=like.dtype, device=like.device
    )
    return direction / torch.linalg.vector_norm(direction)


def residual_directions(residuals, generator=None, rayleigh=None):
    """
    The unit direction ``R_c / ||R_c||`` of each residual block.

    A zero block gets a uniformly random unit direction instead (from
    ``generator``), along which the Rayleigh quotient of ``K_cc`` has mean
    ``Tr(K_cc) / n_c``. The choice is made with :func:`torch.where`, without
    a device-to-host synchronisation.

    :param residuals: Residual blocks (values suffice).
    :type residuals: list[torch.Tensor]
    :param torch.Generator generator: Source of the random directions.
    :param rayleigh: Which blocks take the Rayleigh statistic (one bool per
        block); ``None`` (default): all.
    :type rayleigh: tuple[bool]
    :return: ``(directions, along)``: one unit tensor per block, and a
        ``(C,)`` boolean tensor, ``True`` where the statistic is taken along
        the direction: a nonzero residual of a Rayleigh block.
    :rtype: tuple[list[torch.Tensor], torch.Tensor]

    :Example:
        >>> directions, along = residual_directions(
        ...     [torch.tensor([3.0, 4.0]), torch.zeros(2)])
        >>> directions[0], along
        (tensor([0.6000, 0.8000]), tensor([ True, False]))
    """
    if rayleigh is None:
        rayleigh = (True,) * len(residuals)
    directions, along = [], []
    for block, is_rayleigh in zip(residuals, rayleigh):
        block = block.detach()
        norm = torch.linalg.vector_norm(block)
        fallback = _random_unit(block, generator)
        safe = torch.where(norm > 0, norm, torch.ones_like(norm))
        directions.append(torch.where(norm > 0, block / safe, fallback))
        # a trace block's flag is False without a host-to-device copy
        along.append(norm > 0 if is_rayleigh else norm < 0)
    return directions, torch.stack(along)


def residual_probe(residuals, generator=None, scales=None):
    """
    The predictor's probe along the residual: block ``c`` is ``s_c xi_c
    u_c`` with ``u_c`` from :func:`residual_directions` and ``xi_c = ±1``.

    With this probe the predictor's block sketch ``v_c · (K v)_c / s_c^2``
    (:func:`~pina_ntk.core.estimators.predictor_block_traces`) is
    ``rho_c`` plus the cross terms ``(s_d / s_c) xi_c xi_d u_c^T K_cd u_d``,
    which vanish in mean: an unbiased sample of the Rayleigh quotient at the
    cost of one trace sample; :func:`effective_traces` multiplies by
    ``n_c``. (Unit blocks keep a small block's cross terms as small as a
    large block's: a probe of norm ``sqrt(n_c)`` would not.)

    :param residuals: Residual blocks.
    :type residuals: list[torch.Tensor]
    :param torch.Generator generator: Source of the signs (and of the
        directions of zero blocks).
    :param torch.Tensor scales: ``s_c`` per block (balanced probe), or
        ``None``.
    :return: One tensor per block, shaped like ``residuals``.
    :rtype: list[torch.Tensor]
    """
    directions, _ = residual_directions(residuals, generator)
    like = directions[0]
    signs = torch.randint(
        0, 2, (len(directions),), generator=generator, device=like.device
    )
    signs = (2 * signs - 1).to(like.dtype)
    if scales is not None:
        signs = signs * scales.to(signs)
    return [s * u for s, u in zip(signs.unbind(), directions)]


def mixed_probe(
    residuals, rayleigh, kind="gaussian", generator=None, scales=None
):
    """
    The predictor's probe when some blocks take the Rayleigh statistic and
    others the trace: ``s_c sqrt(n_c) xi_c u_c`` (:func:`residual_probe`
    times ``sqrt(n_c)``) where ``rayleigh[c]``, else block ``c`` of
    :func:`~pina_ntk.core.estimators.sample_probe`.

    The factor ``sqrt(n_c)`` gives a Rayleigh block the norm that a trace
    block's probe has in mean: its sketch is then ``n_c rho_c``, the
    effective trace itself, and its cross terms are balanced by the probe
    scales as a trace block's are (a unit direction next to Gaussian blocks
    of norm ``sqrt(n_d)`` would be drowned in their cross terms). The two
    probes are independent with mean-zero blocks, so every cross term still
    vanishes in mean and each block's sketch stays unbiased for its own
    statistic. With every block of one kind use that kind's probe instead.

    :param residuals: Residual blocks.
    :type residuals: list[torch.Tensor]
    :param rayleigh: One bool per block, with both values present.
    :type rayleigh: tuple[bool]
    :param str kind: The trace blocks' probe, ``"gaussian"`` or
        ``"rademacher"``.
    :param torch.Generator generator: Source of randomness.
    :param torch.Tensor scales: ``s_c`` per block, or ``None``.
    :rtype: list[torch.Tensor]
    """
    along = residual_probe(residuals, generator, scales)
    isotropic = sample_probe(residuals, kind, generator, scales)
    return [
        a * r.numel() ** 0.5 if is_rayleigh else g
        for a, g, r, is_rayleigh in zip(along, isotropic, residuals, rayleigh)
    ]


def effective_traces(quotients, residuals):
    """
    ``n_c rho_c`` from Rayleigh quotients ``rho_c``, ``n_c`` the entries of
    block ``c`` (Python numbers: no host-to-device copy).

    :param torch.Tensor quotients: ``rho_c``, ``(C,)``.
    :param residuals: The residual blocks.
    :type residuals: list[torch.Tensor]
    :rtype: torch.Tensor
    """
    return torch.stack(
        [q * r.numel() for q, r in zip(quotients.unbind(), residuals)]
    )


def exact_rayleigh_traces(residuals, params, chunk_size=1, rayleigh=None):
    """
    Exact effective traces ``n_c R_c^T K_cc R_c / ||R_c||^2``.

    ``R_c^T K_cc R_c = ||J_c^T R_c||^2``: one reverse-mode pass per block
    (not per entry, as exact traces need). A block with a zero residual,
    and a block that ``rayleigh`` leaves to the trace, takes its exact
    trace instead (:func:`~pina_ntk.core.estimators.exact_block_traces`).

    :param residuals: Residual blocks, computed from ``params`` with autograd
        enabled; their graph is retained.
    :type residuals: list[torch.Tensor]
    :param params: Parameters the kernel is taken with respect to.
    :type params: list[torch.Tensor]
    :param int chunk_size: Entries per batched pass of exact traces.
    :param rayleigh: Which blocks take the Rayleigh statistic (one bool per
        block); ``None`` (default): all.
    :type rayleigh: tuple[bool]
    :return: Shape ``(len(residuals),)``.
    :rtype: torch.Tensor

    :Example:
        >>> theta = torch.tensor([1.0, 2.0], requires_grad=True)
        >>> block = theta * torch.tensor([3.0, 4.0])  # K = diag(9, 16)
        >>> exact_rayleigh_traces([block], [theta])  # 2 * 1105 / 73
        tensor([30.2740])
    """
    params = list(params)
    if rayleigh is None:
        rayleigh = (True,) * len(residuals)
    found = []
    for block, is_rayleigh in zip(residuals, rayleigh):
        flat = block.reshape(-1)
        squared = torch.dot(flat.detach(), flat.detach())
        if flat.grad_fn is None:  # independent of every parameter
            found.append(flat.new_zeros(()))
        elif not is_rayleigh or squared == 0:
            found.append(exact_block_traces([block], params, chunk_size)[0])
        else:
            grads = torch.autograd.grad(
                flat,
                params,
                grad_outputs=flat.detach(),
                retain_graph=True,
                allow_unused=True,
            )
            numerator = sum(g.pow(2).sum() for g in grads if g is not None)
            found.append(flat.numel() * numerator / squared)
    return torch.stack(found)
