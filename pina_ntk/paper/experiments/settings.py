"""Settings of the paper's experiments and the weighting they build.

Options that the experiments share with the weightings take the weightings'
defaults (:data:`SKETCH_DEFAULTS`); the settings of the experiments' earlier
runs, which differ, are :meth:`ExperimentSettings.paper` (``pina-ntk
--paper-settings``).
"""

import inspect
import os
from dataclasses import asdict, dataclass, field
from typing import ClassVar

from ...core.checks import (
    check_bool,
    check_choice,
    check_int,
    check_positive,
    check_rate,
)
from ...core.estimators import ESTIMATORS
from ...integration.ntk_weighting import NTKWeighting
from ...integration.sketch_ntk_weighting import SketchNTKWeighting

#: Loss weightings of an experiment run.
WEIGHTINGS = ("none", "exact", "sketch")
#: Settings of the spaced-update safeguard.
SAFEGUARDS = ("default", "none")
#: Environment variable that switches tutorials to their quick settings.
QUICK_ENV = "PINA_NTK_QUICK"
#: The defaults of :class:`~pina_ntk.SketchNTKWeighting`'s options.
SKETCH_DEFAULTS = {
    name: parameter.default
    for name, parameter in inspect.signature(
        SketchNTKWeighting
    ).parameters.items()
}


def quick_mode():
    """
    Whether the quick (smoke-test) settings are asked for.

    :return: ``True`` when the environment variable ``PINA_NTK_QUICK`` is
        set to anything but ``""``, ``"0"``, ``"false"`` or ``"no"``.
    :rtype: bool
    """
    value = os.environ.get(QUICK_ENV, "").strip().lower()
    return value not in ("", "0", "false", "no")


@dataclass
class ExperimentSettings:
    """
    Settings of one experiment (the PINNs it trains and how); subclasses
    set the problem and the defaults of the tutorial's CPU run.

    Every PINN of an experiment uses the same settings; only the loss
    weighting differs.

    :param int steps: Adam steps per PINN (one full batch per step).
    :param int width: Neurons per hidden layer (tanh).
    :param int depth: Hidden layers.
    :param int fourier_features: Random Fourier features of the scaled
        inputs (``0``: the plain MLP of the paper); see :class:`~pina_ntk.paper.experiments.models.ScaledMLP`.
        Default ``64``.
    :param float fourier_scale: Standard deviation of their frequencies.
    :param float lr: Adam's initial learning rate.
    :param float lr_decay: Factor applied to the learning rate every
        ``lr_decay_steps`` steps (applied smoothly, per step).
    :param int lr_decay_steps: See ``lr_decay``.
    :param dict points: Fresh points per condition and draw; conditions it
        does not name keep the paper's counts (``PAPER_POINTS``).
    :param int resample_every: Steps between draws of fresh points; ``0``
        keeps the initial points.
    :param tuple weightings: Which PINNs to train, from ``none``, ``exact``,
        ``sketch``.
    :param str estimator: The sketch's trace estimator, ``predictor`` or
        ``parameter``. Default: the weighting's (``predictor``).
    :param bool balanced_probe: Scale the predictor's probe by the square
        roots of the current weights (``SketchNTKWeighting(balanced_probe=
        ...)``); predictor only. Default: the weighting's.
    :param float alpha: The sketch's moving-average rate. Default: the
        weighting's.
    :param int warmup_samples: Sketches averaged for the warm start.
        Default: the weighting's.
    :param int exact_every: Steps between exact NTK updates
        (``NTKWeighting(update_every_n_steps=...)``). Default ``250``.
    :param int sample_every: Steps between sketch samples
        (``SketchNTKWeighting(sample_every_n_steps=...)``). Default: the
        weighting's.
    :param str safeguard: ``default`` (the spaced-update rule) or ``none``
        (every weight update applied). Default: the weightings'
        (``default``).
    :param int seed: Seed of initialisation, sampling and probes.
    :param str accelerator: Lightning's accelerator (``cpu``, ``gpu``,
        ``auto``).
    :param int grid: Evaluation grid points per axis.
    :raises ValueError: On a setting out of range, naming it.
    """

    #: The PINA problem class of the experiment.
    problem_class: ClassVar[type] = None
    #: Overrides of :meth:`ExperimentSettings.quick` beyond the shared tiny
    #: network.
    QUICK: ClassVar[dict] = {}
    #: The settings of the experiments' earlier runs where they differ from
    #: the weightings' defaults (:meth:`ExperimentSettings.paper`).
    PAPER: ClassVar[dict] = {"estimator": "parameter"}

    steps: int = 10000
    width: int = 128
    depth: int = 3
    fourier_features: int = 64
    fourier_scale: float = 1.0
    lr: float = 2e-3
    lr_decay: float = 0.75
    lr_decay_steps: int = 1000
    points: dict = field(default_factory=dict)
    resample_every: int = 1
    weightings: tuple = WEIGHTINGS
    # the weightings' defaults; PAPER holds the earlier runs' settings
    estimator: str = SKETCH_DEFAULTS["estimator"]
    balanced_probe: bool = SKETCH_DEFAULTS["balanced_probe"]
    alpha: float = SKETCH_DEFAULTS["alpha"]
    warmup_samples: int = SKETCH_DEFAULTS["warmup_samples"]
    exact_every: int = 250
    sample_every: int = SKETCH_DEFAULTS["sample_every_n_steps"]
    safeguard: str = "default"
    seed: int = 0
    accelerator: str = "cpu"
    grid: int = 101

    def __post_init__(self):
        # a partial dict overrides the paper's counts it names
        self.points = {**self.problem_class.PAPER_POINTS, **self.points}
        for name in ("steps", "width", "depth", "lr_decay_steps"):
            check_int(name, getattr(self, name), 1)
        check_int("exact_every", self.exact_every, 1)
        check_int("sample_every", self.sample_every, 1)
        check_int("warmup_samples", self.warmup_samples, 1)
        check_int("resample_every", self.resample_every, 0)
        check_int("seed", self.seed, 0)
        check_int("grid", self.grid, 2)
        check_int("fourier_features", self.fourier_features, 0)
        check_positive("fourier_scale", self.fourier_scale)
        check_positive("lr", self.lr)
        check_rate("lr_decay", self.lr_decay)
        check_rate("alpha", self.alpha)
        unknown = set(self.points) - set(self.problem_class.PAPER_POINTS)
        if unknown:
            raise ValueError(
                f"points names unknown conditions {sorted(unknown)}; the "
                f"conditions are {list(self.problem_class.PAPER_POINTS)}."
            )
        for name, count in self.points.items():
            check_int(f"points[{name!r}]", count, 1)
        self.weightings = tuple(self.weightings)
        if not self.weightings:
            raise ValueError("weightings must name at least one PINN.")
        for name in self.weightings:
            check_choice("weightings", name, WEIGHTINGS)
        check_choice("estimator", self.estimator, ESTIMATORS)
        check_bool("balanced_probe", self.balanced_probe)
        check_choice("safeguard", self.safeguard, SAFEGUARDS)

    @classmethod
    def quick(cls, **overrides):
        """
        Seconds-long settings for smoke tests (not meaningful results).

        :return: The settings.
        """
        base = dict(steps=20, width=16, depth=2, exact_every=10, grid=21)
        return cls(**{**base, **cls.QUICK, **overrides})

    @classmethod
    def paper(cls, preset=None, **overrides):
        """
        The settings of the experiments' earlier runs (the tutorials'
        committed outputs, the ``pina-ntk`` defaults before the command
        took the weightings' defaults): the preset's, with the options in
        :attr:`PAPER` instead of the weightings' defaults. These are the
        parameter-space sketch (Hirsch & Pichi, arXiv:2511.15530, Theorem 5,
        eq. (14)) and, for the wave problem, every weight update applied
        (no safeguard), as in Algorithm 3 of the paper.

        :param str preset: ``None`` (the tutorial's CPU run), ``"quick"`` or
            ``"full_size"``.
        :return: The settings; ``overrides`` win over both.
        :raises ValueError: On an unknown ``preset``.
        """
        check_choice("preset", preset, (None, "quick", "full_size"))
        paper = {**cls.PAPER, **overrides}
        if preset is None:
            return cls(**paper)
        return getattr(cls, preset)(**paper)

    @property
    def history_every(self):
        """:return: Steps between recorded losses and weights. :rtype: int"""
        return max(1, self.steps // 200)

    def as_dict(self):
        """:return: The settings, JSON-serialisable. :rtype: dict"""
        values = asdict(self)
        values["weightings"] = list(self.weightings)
        return values


def pina_weighting(kind, **options):
    """
    One of PINA's own loss weightings, which the benchmarks compare with
    pina-ntk's.

    :param str kind: ``"pina_ntk"`` (``NeuralTangentKernelWeighting``) or
        ``"pina_self_adaptive"`` (``SelfAdaptiveWeighting``).
    :param options: The class's constructor arguments.
    :return: The weighting.
    :raises ValueError: On an unknown ``kind``.
    """
    # Imported here: only the benchmarks build PINA's weightings.
    from pina.weighting import (
        NeuralTangentKernelWeighting,
        SelfAdaptiveWeighting,
    )

    classes = {
        "pina_ntk": NeuralTangentKernelWeighting,
        "pina_self_adaptive": SelfAdaptiveWeighting,
    }
    check_choice("weighting", kind, tuple(classes))
    return classes[kind](**options)


def make_weighting(kind, settings=None, **options):
    """
    The loss weighting of one PINN of an experiment or a benchmark.

    :param str kind: ``"none"`` (plain sum of losses), ``"exact"``
        (:class:`~pina_ntk.NTKWeighting`), ``"sketch"``
        (:class:`~pina_ntk.SketchNTKWeighting`), or one of PINA's
        weightings (``"pina_ntk"``, ``"pina_self_adaptive"``, see
        :func:`pina_weighting`).
    :param settings: The experiment's estimator, ``alpha``, warm start,
        update interval, safeguard and seed; ``None``: the class defaults.
    :type settings: ExperimentSettings or None
    :param options: Constructor arguments that override those of
        ``settings`` (the benchmarks' configurations).
    :return: The weighting, or ``None`` for ``"none"``.
    :raises ValueError: On an unknown ``kind``.
    """
    if kind in ("pina_ntk", "pina_self_adaptive"):
        return pina_weighting(kind, **options)
    check_choice("weighting", kind, WEIGHTINGS)
    if kind == "none":
        return None
    found = {}
    if settings is not None:
        found["safeguard"] = None if settings.safeguard == "none" else "default"
    if kind == "exact":
        if settings is not None:
            found["update_every_n_steps"] = settings.exact_every
        return NTKWeighting(**{**found, **options})
    if settings is not None:
        # The experiments' networks are small: the warm start (the only
        # sampling that runs while a training graph is alive, see
        # sample_after_backward) evaluates the displaced residuals in one
        # piece, saving PINA's per-call overhead at little memory cost.
        found.update(
            alpha=settings.alpha,
            sample_every_n_steps=settings.sample_every,
            warmup_samples=settings.warmup_samples,
            estimator=settings.estimator,
            balanced_probe=settings.balanced_probe,
            seed=settings.seed,
            evaluation_chunk_size=None,
        )
    return SketchNTKWeighting(**{**found, **options})
