"""Kernel statistics of a PINA solver outside training.

The samples are drawn by the weightings' own sampling rule
(:meth:`~pina_ntk.integration.kernel_weighting.KernelWeighting.warm_start`),
so the options and their defaults are those of
:class:`~pina_ntk.NTKWeighting` and :class:`~pina_ntk.SketchNTKWeighting`.
"""

import torch

from ..core.checks import check_choice, check_int
from ..core.weights import ntk_weights
from .kernel_statistics import to_device
from .ntk_weighting import NTKWeighting
from .pina_adapter import condition_data, solver_reduction
from .recording import batch_calls, kernel_parameters, replay_residual_fn
from .sketch_ntk_weighting import SketchNTKWeighting

#: Methods of :func:`ntk_traces`.
METHODS = ("exact", "sketch")


def condition_calls(solver):
    """
    One ``(name, evaluate, batch)`` triple per condition of the solver's
    problem (per condition and member for an ensemble solver), on the full
    discretisation stored in the conditions.

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
        data = condition_data(condition)
        if data is None:
            raise ValueError(
                f"Condition {name!r} holds no points yet: create "
                "pina.Trainer(solver, ...) first (it moves the problem's "
                "discretisation into the conditions)."
            )
        batch.append(
            (
                name,
                {key: to_device(value, device) for key, value in data.items()},
            )
        )
    return batch_calls(solver, batch)


def ntk_traces(solver, method="exact", **options):
    """
    Per-condition NTK traces ``Tr(K_cc)`` on the solver's discretisation.

    Residuals are the plain ``condition.evaluate`` residuals at the points
    stored in the conditions, every member's for an ensemble solver: a
    causal solver's time slicing and the factors the causal, RBA,
    autoregressive, self-adaptive and competitive solvers put on the
    squared residual inside their losses, which the weightings' kernel
    includes in training, are not applied here.

    :param solver: A PINA solver the weightings accept (single-model,
        ensemble, self-adaptive or competitive) after ``pina.Trainer``
        set-up.
    :param str method: ``"exact"`` (:class:`~pina_ntk.NTKWeighting`'s
        traces) or ``"sketch"`` (the mean of ``samples`` sketches, drawn as
        :class:`~pina_ntk.SketchNTKWeighting`'s warm start draws them,
        balanced probe included). Default ``"exact"``.
    :param int samples: Sketches averaged (``method="sketch"``). Default
        ``100``.
    :param int seed: Seed of the probes; ``None`` (default) draws one from
        torch's global generator.
    :param options: Keyword options of the weighting: ``chunk_size`` of
        :class:`~pina_ntk.NTKWeighting` (``"exact"``); ``estimator``,
        ``step_size``, ``difference``, ``probe``, ``balanced_probe`` of
        :class:`~pina_ntk.SketchNTKWeighting` (``"sketch"``); ``statistic``
        of both (then the effective traces ``n_c rho_c`` of the Rayleigh
        blocks); with their defaults there.
    :return: ``{condition: trace}`` as 0-d tensors.
    :rtype: dict
    :raises ValueError: On an unknown ``method``, ``samples < 1``, or an
        option the weighting refuses (named in the message).

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
    :func:`pina_ntk.core.weights.ntk_weights` for the convention.

    :param solver: A PINA solver the weightings accept, after
        ``pina.Trainer`` set-up.
    :param str method: ``"exact"`` or ``"sketch"``. Default ``"exact"``.
    :param options: The keyword options of :func:`ntk_traces`.
    :return: ``{condition: weight}`` as floats.
    :rtype: dict

    :Example:
        >>> solver_ntk_weights(solver)  # doctest: +SKIP
        {'D': 0.41, 'boundary': 1.87, 't0': 1.02}
    """
    names, traces, sizes = _block_statistics(solver, method, **options)
    weights = ntk_weights(traces, sizes, solver_reduction(solver))
    return dict(zip(names, weights.tolist()))


def diagnostic_weighting(method, samples=100, seed=None, **options):
    """
    The weighting whose sampling rule :func:`ntk_traces` uses.

    :param str method: ``"exact"`` or ``"sketch"``.
    :param int samples: Samples averaged (``"sketch"``).
    :param int seed: Seed of the probes (``"sketch"``).
    :param options: Options of the weighting.
    :return: An :class:`~pina_ntk.NTKWeighting` or a
        :class:`~pina_ntk.SketchNTKWeighting` with no safeguard.
    :raises ValueError: On an unknown method, ``samples < 1`` or a refused
        option.
    """
    check_choice("method", method, METHODS)
    if method == "exact":
        return NTKWeighting(safeguard=None, **options)
    check_int("samples", samples, 1)
    return SketchNTKWeighting(
        warmup_samples=samples, seed=seed, safeguard=None, **options
    )


def _block_statistics(solver, method, **options):
    """``(names, traces, sizes)`` of the solver's condition blocks."""
    weighting = diagnostic_weighting(method, **options)
    calls = condition_calls(solver)
    names = list(dict.fromkeys(name for name, _, _ in calls))
    residual_fn = replay_residual_fn(solver, calls, names)
    params = kernel_parameters(solver, weighting.unknowns)
    residuals = residual_fn(params)
    weighting.set_conditions(names, solver.problem)
    sizes = torch.tensor([r.numel() for r in residuals])
    generator = torch.Generator(device=residuals[0].device)
    if method == "sketch":
        seed = weighting.seed
        if seed is None:  # exact traces leave torch's generator alone
            seed = int(torch.randint(0, 2**62, (1,)).item())
        generator.manual_seed(seed)
    drawn = weighting.warm_start(residual_fn, params, residuals, generator)
    traces = torch.stack([t for t, _ in drawn]).mean(dim=0).detach()
    return names, traces, sizes.to(traces.device)
