"""The scaling study's rows, plan and targets, fixed in code before the run
that judges them; the study: ``scaling.py``, its page: ``scaling_page.py``."""

from benchmarks.cost import configurations

#: Rows: key, label as a user writes it, weighting spec for
#: :func:`configurations.build_solver` (``None``: unweighted).
ROWS = (
    ("unweighted", "no weighting (PINA default)", None),
    ("default", "`SketchNTKWeighting()` (default)", ("sketch", {})),
    (
        "parameter",
        '`SketchNTKWeighting(estimator="parameter")`',
        ("sketch", {"estimator": "parameter"}),
    ),
    (
        "band",
        "`SketchNTKWeighting(gradient_band=4)`",
        ("sketch", {"gradient_band": 4.0}),
    ),
    (
        "exact_every_100",
        "`NTKWeighting(update_every_n_steps=100)`",
        ("exact", {"update_every_n_steps": 100}),
    ),
    ("exact_every_step", "`NTKWeighting()`", None),
    ("pina_ntk", "PINA `NeuralTangentKernelWeighting()`", ("pina_ntk", {})),
    (
        "pina_self_adaptive",
        "PINA `SelfAdaptiveWeighting()`",
        ("pina_self_adaptive", {}),
    ),
    ("reference_evaluation", configurations.REFERENCE + "*", None),
    (
        "reference_predictor",
        configurations.REFERENCE + " and one `Jᵀg` backward*",
        None,
    ),
)
#: The sketch rows (a sample every 10 steps) and the reference of each floor.
FLOOR_REFERENCE = {
    "default": "reference_predictor",
    "band": "reference_predictor",
    "parameter": "reference_evaluation",
}
#: Settings of a full run and of ``--quick``; no memory at ``no_memory``
#: (the CPU profiler outgrew 24 GiB there); more rounds where a step is
#: short and noisy (``rounds_at``); ``chunk_points`` timed at ``chunk_size``.
FULL = dict(
    points=[100, 1000, 10000, 100000],
    widths=[50, 100, 300, 1000],
    width=100,
    n=1000,
    depth=3,
    rounds=3,
    warmup=2,
    seed=0,
    threads=1,
    steps={"100": 200, "1000": 100, "10000": 40, "100000": 10},
    wide_steps={"300": 60, "1000": 20},
    exact_cap_s=120.0,
    exact_memory_cap_s=10.0,
    exact_rounds_s=60.0,
    memory_rounds=3,
    rounds_at={
        "100,100": 30,
        "1000,100": 18,
        "10000,100": 6,
        "1000,50": 18,
        "1000,300": 6,
        "1000,1000": 6,
    },
    default_steps=100,
    no_memory=["100000,100"],
    chunk_size="1000,100",
    chunk_points=[1, 2, 4, 8, 16, 32, 64, None],
)
QUICK = dict(
    FULL,
    points=[40],
    widths=[20],
    width=20,
    n=40,
    rounds=1,
    steps={},
    wide_steps={},
    default_steps=10,
    exact_cap_s=5.0,
    exact_memory_cap_s=5.0,
    rounds_at={},
    no_memory=[],
    chunk_size="40,20",
    chunk_points=[4, None],
)
#: The targets, fixed before the run that judges them, each at every n and
#: width measured: ``(row, most, less)``, the row's ratio to an unweighted
#: step less ``less`` at most ``most`` (one exact update alone: its step less
#: the step itself).
EXACT_TARGETS = (("exact_every_step", 4.0, 1.0), ("exact_every_100", 1.1, 0.0))
#: ``(a, b, factor)``: one exact update's seconds per entry at n = b within
#: the factor of those at n = a.
PER_ENTRY_FLAT = (1000, 10000, 1.5)
#: ``(n, factor)``: the exact run's peak extra memory at n at most the factor
#: times an unweighted step's.
MEMORY_TARGET = (10000, 1.5)
#: The default's allowance over its floor, in shares of a step, which do not
#: move with the host's speed: :data:`FLOOR_MARGIN_SMALL` up to
#: :data:`FLOOR_SMALL_N` residual entries (what 0.2 ms per step was of the
#: 4 ms step at n = 100 the allowance was set on), :data:`FLOOR_MARGIN` above.
FLOOR_SMALL_N = 1000
FLOOR_MARGIN_SMALL = 0.05
FLOOR_MARGIN = 0.02
LABELS = {key: label for key, label, _ in ROWS}
SPECS = {key: spec for key, _, spec in ROWS}
EXACT = ("exact_every_100", "exact_every_step")
#: Rows timed step by step (median over the measured steps).
PER_STEP = ("pina_ntk", "pina_self_adaptive", *configurations.REFERENCE_KEYS)
#: The sketch rows' sample period (``sample_every_n_steps``).
SAMPLE_PERIOD = 10


def floor_margin(n):
    """:return: The default's allowance over its floor at ``n`` residual
    entries, in shares of an unweighted step. :rtype: float"""
    return FLOOR_MARGIN_SMALL if n <= FLOOR_SMALL_N else FLOOR_MARGIN
