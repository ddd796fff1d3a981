"""Kernel statistics of a PINA solver outside training."""

import torch

from .estimators import (
    DIFFERENCES,
    ESTIMATORS,
    PROBES,
    balanced_probe_scales,
    exact_block_traces,
    kernel_probe_product,
    parameter_space_block_traces,
    predictor_block_traces,
    sample_probe,
)
from .residuals import (
    batch_calls,
    replay_residual_fn,
    to_device,
    trainable_parameters,
)
from .validation import check_bool, check_choice, check_int
from .weights import ntk_weights

#: Methods of :func:`ntk_traces`.
METHODS = ("exact", "sketch")


def condition_calls(solver):
    """
    One ``(name, evaluate, batch)`` triple per condition of the solver's
    problem, on the full discretisation stored in the conditions.

    :param solver: A PINA solver whose problem holds its points (after
        ``pina.Trainer(solver, ...)`` has been created).
    :return: The calls, in the problem's condition order, with the points
        on the solver's device (the conditions keep theirs on the CPU while
        Lightning trains the model on an accelerator).
    :rtype: list[tuple]
    :raises ValueError: If a condition holds no points yet.
    """
    batch = []
    device = solver.device
    for name, condition in solver.problem.conditions.items():
        data = getattr(condition, "data", None)
        if data is None or not hasattr(data, "keys"):
            raise ValueError(
                f"Condition {name!r} holds no points yet: create "
                "pina.Trainer(solver, ...) first (it moves the problem's "
                "discretisation into the conditions)."
            )
        batch.append(
            (
                name,
                {key: to_device(data.data[key], device) for key in data.keys},
            )
        )
    return batch_calls(solver, batch)


def ntk_traces(solver, method="exact", **options):
    """
    Per-condition NTK traces ``Tr(K_cc)`` on the solver's discretisation.

    Residuals are the plain ``condition.evaluate`` residuals at the points
    stored in the conditions (a causal solver's time slicing is not applied).

    :param solver: A PINA single-model solver after ``pina.Trainer`` set-up.
    :param str method: ``"exact"`` or ``"sketch"`` (mean of ``samples``
        sketches). Default ``"exact"``.
    :param options: Keyword options, all optional:
    :param int samples: Sketches averaged (``method="sketch"``); 100.
    :param str estimator: ``"predictor"`` (default) or ``"parameter"``.
    :param step_size: ``dt``/``eps`` or ``"auto"`` (default).
    :param str difference: ``"forward"`` (default) or ``"central"``.
    :param str probe: ``"gaussian"`` (default) or ``"rademacher"``.
    :param bool balanced_probe: Scale the predictor's probe by the square
        roots of the weights of the samples' running mean (none for the
        first), as :class:`~pina_ntk.SketchNTKWeighting` does during its
        warm start; ignored by the parameter-space estimator. Default
        ``True``.
    :param int seed: Seed of the probes; ``None`` (default) uses the global
        generator.
    :param int chunk_size: See
        :func:`~pina_ntk.estimators.exact_block_traces`; 1.
    :return: ``{condition: trace}`` as 0-d tensors.
    :rtype: dict
    :raises ValueError: On an unknown ``method``/``estimator``/``probe``/
        ``difference``, ``samples < 1`` or a non-boolean ``balanced_probe``.

    :Example:
        >>> trainer = Trainer(solver, max_epochs=1)  # doctest: +SKIP
        >>> ntk_traces(solver)  # doctest: +SKIP
        {'D': tensor(1520.3), 'boundary': tensor(21.9), ...}
    """
    names, traces, _ = _block_statistics(solver, method, **options)
    return dict(zip(names, traces))


def solver_ntk_weights(solver, method="exact", **options):
    """
    The NTK weights of the solver's conditions at its current parameters.

    The weights :class:`~pina_ntk.NTKWeighting` would use (without safeguard
    or clamping) for the solver's loss reduction; see
    :func:`pina_ntk.weights.ntk_weights` for the convention.

    :param solver: A PINA single-model solver after ``pina.Trainer`` set-up.
    :param str method: ``"exact"`` or ``"sketch"``.
    :param options: The keyword options of :func:`ntk_traces`.
    :return: ``{condition: weight}`` as floats.
    :rtype: dict

    :Example:
        >>> solver_ntk_weights(solver)  # doctest: +SKIP
        {'D': 0.41, 'boundary': 1.87, 't0': 1.02}
    """
    names, traces, sizes = _block_statistics(solver, method, **options)
    weights = ntk_weights(traces, sizes, solver._reduction)
    return dict(zip(names, weights.tolist()))


def _check_options(
    method, samples, estimator, probe, difference, balanced_probe
):
    check_choice("method", method, METHODS)
    check_choice("estimator", estimator, ESTIMATORS)
    check_choice("probe", probe, PROBES)
    check_choice("difference", difference, DIFFERENCES)
    check_int("samples", samples, 1)
    check_bool("balanced_probe", balanced_probe)


def _block_statistics(
    solver,
    method="exact",
    samples=100,
    estimator="predictor",
    step_size="auto",
    difference="forward",
    probe="gaussian",
    balanced_probe=True,
    seed=None,
    chunk_size=1,
):
    """``(names, traces, sizes)`` of the solver's condition blocks."""
    _check_options(
        method, samples, estimator, probe, difference, balanced_probe
    )
    calls = condition_calls(solver)
    names = [name for name, _, _ in calls]
    residual_fn = replay_residual_fn(solver, calls, names)
    params = trainable_parameters(solver)
    residuals = residual_fn(params)
    sizes = torch.tensor([r.numel() for r in residuals])
    if method == "exact":
        traces = exact_block_traces(
            residuals, list(params.values()), chunk_size
        )
        return names, traces.detach(), sizes.to(traces.device)
    generator = torch.Generator(device=residuals[0].device)
    if seed is None:
        seed = int(torch.randint(0, 2**62, (1,)).item())
    generator.manual_seed(seed)
    total = torch.zeros(len(names), dtype=residuals[0].dtype)
    for drawn in range(samples):
        if estimator == "parameter":
            total = (
                total
                + parameter_space_block_traces(
                    residual_fn,
                    params,
                    step_size,
                    difference,
                    generator,
                    residuals,
                ).cpu()
            )
            continue
        scales = None
        if balanced_probe and drawn > 0:
            # fixed before the probe is drawn: the sample stays unbiased
            scales = balanced_probe_scales(total / drawn, sizes)
        g = sample_probe(residuals, probe, generator, scales)
        kg = kernel_probe_product(
            residual_fn, params, g, step_size, difference, residuals
        )
        total = total + predictor_block_traces(g, kg, scales).cpu()
    return names, total / samples, sizes
