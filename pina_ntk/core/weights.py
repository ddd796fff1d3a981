"""The NTK weight formula and its numerical guards, as tensor functions.

Convention. Wang, Yu & Perdikaris weight the *residual entries* of condition
``c`` by ``lambda_c = Tr(K) / Tr(K_cc)``. PINA multiplies a *reduced*
condition loss by one weight ``w_c``: with the ``mean`` reduction the loss of
``c`` is ``(1/n_c) sum_{i in c} R_i^2``, so the effective weight of one entry
is ``w_c / n_c``; with ``sum`` it is ``w_c``. We choose

* ``mean``: ``w_c = mean diag(K) / mean diag(K_cc) = lambda_c n_c / n``,
* ``sum``:  ``w_c = mean diag(K) / Tr(K_cc) = lambda_c / n``,

so that in both cases every residual entry of ``c`` carries the effective
weight ``lambda_c / n`` (``n`` the total number of entries): the paper's
``Lambda`` up to the single global constant ``1/n``, and the two reductions
give the same total loss. With the ``mean`` reduction a kernel with uniform
diagonal gives ``w_c = 1`` for every condition.
"""

import torch

#: Loss reductions understood by :func:`ntk_weights`.
REDUCTIONS = ("mean", "sum")


def ntk_weights(block_traces, block_sizes, reduction="mean"):
    """
    Condition weights from block traces of the NTK (see the module notes).

    :param torch.Tensor block_traces: ``Tr(K_cc)`` per condition, ``(C,)``.
    :param torch.Tensor block_sizes: Residual entries ``n_c`` per condition.
    :param str reduction: The loss reduction, ``"mean"`` or ``"sum"``.
    :return: The weight ``w_c`` of each condition's reduced loss, ``(C,)``.
    :rtype: torch.Tensor
    :raises ValueError: If ``reduction`` is not one of :data:`REDUCTIONS`.

    :Example:
        >>> ntk_weights(torch.tensor([4.0, 1.0]), torch.tensor([2.0, 1.0]))
        tensor([0.8333, 1.6667])
    """
    if reduction not in REDUCTIONS:
        raise ValueError(
            f"reduction must be one of {REDUCTIONS}, got {reduction!r}."
        )
    sizes = block_sizes.to(block_traces)
    mean_diag = block_traces.sum() / sizes.sum()
    weights = mean_diag / (block_traces / sizes)
    return weights / sizes if reduction == "sum" else weights


def entry_weights(weights, block_sizes, reduction="mean"):
    """
    The effective weight of one residual entry of each condition.

    :param torch.Tensor weights: Condition weights ``w_c``.
    :param torch.Tensor block_sizes: Residual entries ``n_c`` per condition.
    :param str reduction: The loss reduction, ``"mean"`` or ``"sum"``.
    :return: ``w_c / n_c`` for ``mean``, ``w_c`` for ``sum``.
    :rtype: torch.Tensor
    """
    if reduction not in REDUCTIONS:
        raise ValueError(
            f"reduction must be one of {REDUCTIONS}, got {reduction!r}."
        )
    sizes = block_sizes.to(weights)
    return weights / sizes if reduction == "mean" else weights


def usable_traces(block_traces):
    """
    Whether trace estimates can form weights: all finite and non-negative,
    and at least one positive.

    A trace of exactly zero belongs to a condition whose residual does not
    depend on the parameters (see :func:`guarded_weights`); a negative or
    non-finite estimate, or all zero, cannot form weights. Returned as a 0-d
    boolean tensor so callers can branch with :func:`torch.where` without a
    device-to-host synchronisation.

    :param torch.Tensor block_traces: Trace estimates, ``(C,)``.
    :return: ``True`` when the estimates can form weights.
    :rtype: torch.Tensor
    """
    return (
        torch.isfinite(block_traces).all()
        & (block_traces >= 0).all()
        & (block_traces > 0).any()
    )


def guarded_weights(
    block_traces, block_sizes, previous, reduction="mean", bounds=(1e-6, 1e6)
):
    """
    Weights from trace estimates that can never be non-finite or out of range.

    If the estimates are unusable (:func:`usable_traces`) the ``previous``
    weights are returned unchanged; otherwise :func:`ntk_weights` clamped to
    ``bounds`` (the paper's assumption *lambda-bounds*, bounded
    ``Lambda``). A condition whose trace is exactly zero has a residual
    that no parameter moves: its gradient is zero whatever its weight, and
    ``Tr(K)/Tr(K_cc)`` is infinite. It gets the weight of a uniform kernel diagonal instead
    (``1`` with the ``mean`` reduction, ``1/n_c`` with ``sum``), and the
    other conditions' weights are formed as usual.

    :param torch.Tensor block_traces: Trace estimates, ``(C,)``.
    :param torch.Tensor block_sizes: Residual entries per condition.
    :param torch.Tensor previous: The weights to keep on failure, ``(C,)``.
    :param str reduction: The loss reduction.
    :param tuple bounds: ``(lower, upper)`` for the weights.
    :return: ``(weights, ok)`` with ``ok`` a 0-d boolean tensor.
    :rtype: tuple[torch.Tensor, torch.Tensor]
    """
    ok = usable_traces(block_traces)
    constant = block_traces == 0
    # Replace bad and zero traces by ones before dividing so no NaN or
    # infinity can leak through torch.where's unselected branch into
    # gradients or logs.
    safe = torch.where(
        ok & ~constant, block_traces, torch.ones_like(block_traces)
    )
    proposed = ntk_weights(safe, block_sizes, reduction)
    sizes = block_sizes.to(proposed)
    # with the true Tr(K): a zero block adds nothing to it
    proposed = proposed * (block_traces.sum() / safe.sum()).where(ok, 1.0)
    uniform = ntk_weights(sizes, sizes, reduction)
    proposed = torch.where(constant, uniform, proposed).clamp(*bounds)
    return torch.where(ok, proposed, previous.to(proposed)), ok


def ramp_fraction(step, ramp_steps):
    """
    How far the weights have come in at optimisation ``step``: ``step /
    ramp_steps`` up to 1, and 1 from the start without a ramp.

    :param int step: The optimisation step, from 0.
    :param int ramp_steps: The steps over which the weights come in; ``0``
        for none.
    :return: The fraction ``s`` in ``[0, 1]`` of :func:`ramped_weights`.
    :rtype: float

    :Example:
        >>> ramp_fraction(75, 300), ramp_fraction(600, 300), ramp_fraction(0, 0)
        (0.25, 1.0, 1.0)
    """
    if ramp_steps == 0:
        return 1.0
    return min(step / ramp_steps, 1.0)


def ramped_weights(weights, block_sizes, reduction, fraction):
    """
    Weights a ``fraction`` of the way from those of a uniform kernel diagonal
    to ``weights``, geometrically: ``u_c (w_c / u_c)^s``.

    ``u_c`` is what :func:`ntk_weights` gives for equal per-entry traces:
    ``1`` with the ``mean`` reduction (no weighting), ``1/n_c`` with
    ``sum`` (every entry weighted alike). At ``s = 0`` no condition is
    favoured, at ``s = 1`` the weights are unchanged, and in between each
    condition's weight over a uniform diagonal's, ``w_c / u_c``, is taken
    to the power ``s`` (and so is the ratio of two conditions'). A ramp:
    training starts without the NTK's balance and takes it in as the
    kernel leaves its initial state, whose weights can do harm
    (``docs/weights.md``, *Weights that come in as the kernel leaves its
    initial state*).

    :param torch.Tensor weights: Condition weights ``w_c``, positive, ``(C,)``.
    :param torch.Tensor block_sizes: Residual entries ``n_c`` per condition.
    :param str reduction: The loss reduction, ``"mean"`` or ``"sum"``.
    :param float fraction: ``s`` in ``[0, 1]`` (:func:`ramp_fraction`).
    :return: The ramped weights, ``(C,)``.
    :rtype: torch.Tensor

    :Example:
        >>> ramped_weights(torch.tensor([4.0, 0.25]), torch.tensor([3, 1]),
        ...                "mean", 0.5)
        tensor([2.0000, 0.5000])
    """
    if fraction >= 1.0:
        return weights
    sizes = block_sizes.to(weights)
    uniform = ntk_weights(sizes, sizes, reduction)
    return uniform * (weights / uniform).pow(fraction)


def observations_first(weights, entered, observed):
    """
    Cap the weight of every condition an inverse problem's unknowns enter
    at the largest weight of its observations.

    The unknowns are identified through the residuals they enter, evaluated
    on a solution that the observations fix. A network weighted towards
    those residuals more than towards the observations satisfies them
    first, at the present unknowns, which then follow the network instead
    of the data (``docs/inverse-problems.md``). The cap keeps the
    observations ahead; the other conditions keep their weights, and
    without unknowns or observations nothing changes.

    :param torch.Tensor weights: Condition weights ``w_c``, ``(C,)``.
    :param entered: Whether the unknowns enter each condition's residual.
    :type entered: Sequence[bool]
    :param observed: Whether each condition holds observations
        (input-target data).
    :type observed: Sequence[bool]
    :return: The capped weights, ``(C,)``.
    :rtype: torch.Tensor

    :Example:
        >>> observations_first(
        ...     torch.tensor([1500.0, 0.9, 0.8]),
        ...     (True, False, False),
        ...     (False, True, False),
        ... )
        tensor([0.9000, 0.9000, 0.8000])
    """
    if not any(entered) or not any(observed):
        return weights
    entered = torch.tensor(entered, device=weights.device)
    observed = torch.tensor(observed, device=weights.device)
    cap = weights[observed].max()
    return torch.where(entered, torch.minimum(weights, cap), weights)
