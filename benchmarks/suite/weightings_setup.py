"""The weightings benchmark's set-up: its problems, weightings and
settings, and the page's label of a weighting (``weightings.py`` runs them,
``weightings_page.py`` renders their results)."""

from benchmarks.suite import inverse_measures, suite_inverse_problems
from benchmarks.suite import suite_problems, suite_protocol

SCRIPT = "suite/weightings.py"
TITLE = "Loss weightings: error against training time"
#: Problems: the class and the fresh points per condition and step, about
#: 1000 residual entries as the wave problem's (``t0`` of acoustic_wave
#: holds two columns); ``None`` takes the class's ``PAPER_POINTS``.
ZOO, SQUARE = "pina.problem.zoo:", {"D": 800, "boundary": 200}
POISSON = (ZOO + "Poisson2DSquareProblem", SQUARE)
PROBLEMS = {
    "poisson": POISSON,
    "poisson_fixed": POISSON,
    "helmholtz": (ZOO + "HelmholtzProblem", SQUARE),
    "diffusion_reaction": (
        ZOO + "DiffusionReactionProblem",
        {"D": 600, "t0": 200, "boundary": 200},
    ),
    "acoustic_wave": (
        ZOO + "AcousticWaveProblem",
        {"D": 300, "t0": 200, "boundary": 200},
    ),
    "advection": (ZOO + "AdvectionProblem", {"D": 800, "t0": 200}),
    "wave": ("pina_ntk.paper.problems:WaveProblem", None),
    # the problem suite's: Poisson as a user builds it, the new problems
    "poisson_user": POISSON,
    **{
        name: ("suite_problems:" + cls.__name__, cls.POINTS)
        for name, cls in suite_problems.SUITE_PROBLEMS.items()
    },
    # inverse settings outside the split (their own registry)
    **{
        name: ("suite_inverse_problems:" + cls.__name__, cls.POINTS)
        for name, cls in suite_inverse_problems.INVERSE_PROBLEMS.items()
    },
}
#: The inverse settings: their runs record the parameter error too.
INVERSE = tuple(
    name
    for registry in (
        suite_problems.SUITE_PROBLEMS,
        suite_inverse_problems.INVERSE_PROBLEMS,
    )
    for name, cls in registry.items()
    if inverse_measures.is_inverse(cls)
)
#: The problem suite's settings (``suite-split.toml``), by half.
SPLIT = suite_protocol.read_split()
SUITE = [entry for half in SPLIT.values() for entry in half]
#: The settings the runner knows: the split's and the inverse settings
#: outside it, each with its network and points.
SETTINGS = SUITE + suite_inverse_problems.INVERSE_SETTINGS
#: Problems whose points are drawn once, before training, instead of afresh
#: at every step: how the points are drawn changes which weighting wins.
FIXED_POINTS = tuple(e["setting"] for e in SETTINGS if e["points"] == "fixed")
#: Problems trained with PINA's ``FeedForward`` as a user builds it (no
#: input scaling, no Fourier features) instead of the ``ScaledMLP``.
FEEDFORWARD = tuple(
    e["setting"] for e in SETTINGS if e["network"] == "feedforward"
)
#: The suite's seeds per weighting: the confirmation half's least.
HALF_SEEDS = {"tuning": 3, "confirmation": 5, "confirmation-2": 5}
#: The suite's weightings: the plain sum, PINA's rules, Wang et al.'s exact
#: weights every 100 steps, the published sketch (the bar of the decision)
#: and the candidate defaults.
SUITE_WEIGHTINGS = ("none", "pina_self_adaptive", "pina_ntk", "exact")
SUITE_WEIGHTINGS += ("sketch_predictor", "sketch_band_4")
#: The smoothing study's spacing in units of ``update_every`` (500 steps in
#: the full run) and its moving-average rate per step.
SPACED_FACTOR, SMOOTHING_ALPHA = 5, 1e-3
#: Weightings: label, and kind and options for the experiments' factory
#: :func:`~pina_ntk.paper.experiments.settings.make_weighting`
#: (``"every"``, ``"slow"``: ``update_every`` and 5 times it).
EXACT, SKETCH = "`NTKWeighting(update_every_n_steps=", "`SketchNTKWeighting("
WEIGHTINGS = {
    "none": ("none (plain sum)", "none", {}),
    "pina_ntk": ("PINA `NeuralTangentKernelWeighting()`", "pina_ntk", {}),
    "pina_self_adaptive": (
        "PINA `SelfAdaptiveWeighting(update_every_n_epochs={every})`",
        "pina_self_adaptive",
        {"update_every_n_epochs": "every"},
    ),
    "exact": (EXACT + "{every})`", "exact", {"update_every_n_steps": "every"}),
    "sketch_parameter": (
        SKETCH + 'estimator="parameter", gradient_band=None)`',
        "sketch",
        {"estimator": "parameter", "gradient_band": None},
    ),
    "sketch_predictor": (
        SKETCH + "gradient_band=None)`, the default",
        "sketch",
        {"gradient_band": None, "ramp_steps": 0},
    ),
    # the weights come in over the moving average's span, or over the
    # steps in which the kernel leaves its initial state (issue #76)
    **{
        f"sketch_ramp_{steps}": (
            SKETCH + f"ramp_steps={steps})`",
            "sketch",
            {"gradient_band": None, "ramp_steps": steps},
        )
        for steps in (1000, 300)
    },
    # exact weights that follow the kernel within ten steps (issue #76)
    "exact_10": (EXACT + "10)`", "exact", {"update_every_n_steps": 10}),
    # SketchNTKWeighting() as shipped when run
    "default": ("`SketchNTKWeighting()` as shipped when run", "sketch", {}),
    # how the weights treat an inverse problem's unknowns (issue #69)
    **{
        f"sketch_unknowns_{unknowns}": (
            SKETCH + f'unknowns="{unknowns}")`',
            "sketch",
            {"unknowns": unknowns},
        )
        for unknowns in ("excluded", "kernel")
    },
    # the sketch with a gradient-norm factor in a band around its weights
    **{
        f"sketch_band_{band}": (
            SKETCH + f"gradient_band={band})`",
            "sketch",
            {"gradient_band": float(band)},
        )
        for band in (2, 4)
    },
    "exact_rayleigh": (
        EXACT + '{every}, statistic="rayleigh")`',
        "exact",
        {"update_every_n_steps": "every", "statistic": "rayleigh"},
    ),
    "exact_rayleigh_smoothed": (
        EXACT + '{every}, statistic="rayleigh", alpha=0.001)`',
        "exact",
        {
            "update_every_n_steps": "every",
            "statistic": "rayleigh",
            "alpha": 1e-3,
        },
    ),
    # the sketch with each statistic other than the trace
    **{
        f"sketch_{statistic}": (
            SKETCH + f'statistic="{statistic}", gradient_band=None)`',
            "sketch",
            {"statistic": statistic, "gradient_band": None},
        )
        for statistic in ("rayleigh", "boundary", "interior")
    },
    "exact_500": (
        EXACT + "{slow})`",
        "exact",
        {"update_every_n_steps": "slow", "alpha": 1.0},
    ),
    "exact_500_smoothed": (
        EXACT + f"{{slow}}, alpha={SMOOTHING_ALPHA:g})`",
        "exact",
        {"update_every_n_steps": "slow", "alpha": SMOOTHING_ALPHA},
    ),
}
#: PINA's causal solver with a weighting of :data:`WEIGHTINGS` (its name's
#: rest): a weighting and a solver, compared with the plain solver's runs.
CAUSAL = {"causal_none": "none", "causal_sketch_predictor": "sketch_predictor"}
for _name, _base in CAUSAL.items():
    _text = WEIGHTINGS[_base][0].replace(", the default", "")
    WEIGHTINGS[_name] = ("causal solver, " + _text, *WEIGHTINGS[_base][1:])
SMOOTHING_WEIGHTINGS = ("exact_500", "exact_500_smoothed")
SMOOTHING_PROBLEMS = ("wave", "helmholtz", "poisson")
#: Settings of every run: a tanh ``ScaledMLP``, Adam with a learning rate
#: decaying smoothly per step (a run cut at a time budget is the start of a
#: longer one), the error on a ``grid`` x ``grid`` grid ``records`` times.
FULL = dict(width=64, depth=3, fourier_features=0, fourier_scale=1.0)
FULL.update(lr=1e-3, lr_decay=0.9, lr_decay_steps=1000, grid=101, records=50)
FULL.update(update_every=100, point_scale=1.0, steps=4000, seeds=3)
FULL.update(calibrate=30, quick=False)
QUICK = dict(FULL, width=8, depth=2, grid=11, records=2, update_every=5)
QUICK.update(point_scale=0.03, steps=10, seeds=1, calibrate=0, quick=True)
QUICK_PROBLEMS = ("poisson", "wave")
#: Seeds where a problem departs from ``seeds``: ``wave`` trains the
#: tutorial's wider network, about twice the cost per step.
SEEDS = {"wave": 2}
#: ``wave`` trains the wave tutorial's network (without it no weighting
#: learnt it in a first, reduced run); in ``--quick`` only its embedding.
TUTORIAL_NETWORK = ("width", "depth", "fourier_features", "fourier_scale")
TUTORIAL_NETWORK += ("lr", "lr_decay", "lr_decay_steps")
TUTORIAL_NETWORK_PROBLEMS = ("wave",)


def label(weighting, every):
    """The page's label of a weighting, with its actual spacing."""
    text = WEIGHTINGS[weighting][0]
    return text.format(every=every, slow=SPACED_FACTOR * every)


def key(job):
    """:return: ``(problem, weighting, seed)`` of a job or run."""
    return job["problem"], job["weighting"], job["seed"]
