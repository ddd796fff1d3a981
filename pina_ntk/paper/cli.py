"""The ``pina-ntk`` command: run the paper's experiments from a shell.

``pina-ntk wave`` trains vanilla, exact-NTK and sketch-NTK PINNs on the wave
equation; ``pina-ntk qtensor`` trains a PINN and an NTK-PINN on the Q-tensor
flow and compares them with a finite-element reference. Both write PNG
figures and a ``metrics.json`` (errors, wall times, final weights) to the
output directory and print a table of the errors.

The NTK PINNs train with the defaults of :class:`~pina_ntk.NTKWeighting` and
:class:`~pina_ntk.SketchNTKWeighting` unless a flag says otherwise (exact
updates are spaced by ``--exact-every``); ``--paper-settings`` trains the
settings of the experiments' earlier runs instead
(:meth:`~pina_ntk.paper.experiments.settings.ExperimentSettings.paper`). The
command prints the settings it runs with before it starts.

Examples::

    pina-ntk wave --quick
    pina-ntk wave --paper-settings --weighting sketch --seed 0
    pina-ntk wave --steps 20000 --width 100 --weighting none sketch
    pina-ntk wave --full-size        # Wang et al.: 3x500, 80k Adam steps
    pina-ntk qtensor --estimator parameter --output-dir runs/qtensor
"""

import argparse
import inspect
import sys
from dataclasses import fields, replace

from ..core.checks import check_int, check_positive, check_rate
from ..core.estimators import ESTIMATORS
from .experiments.qtensor import QTensorSettings
from .experiments.settings import SAFEGUARDS, WEIGHTINGS
from .experiments.wave import WaveSettings

#: Default torch CPU threads of the command. The experiments' networks are
#: small, and torch's default of one thread per core slows down sharply
#: when other processes share the cores (docs/guide.md, "Threads").
DEFAULT_THREADS = 1


def _argument_type(convert, check, *args):
    """An argparse type: ``convert`` the text, then apply a check of
    :mod:`pina_ntk.core.checks`; failures become argparse errors."""

    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            kind = "an integer" if convert is int else "a number"
            raise argparse.ArgumentTypeError(
                f"expected {kind}, got {text!r}"
            ) from None
        try:
            check("the value", value, *args)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        return value

    return parse


_positive_int = _argument_type(int, check_int, 1)
_non_negative_int = _argument_type(int, check_int, 0)
_positive_float = _argument_type(float, check_positive)
_rate = _argument_type(float, check_rate)


def _points(text):
    name, sep, count = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(
            f"expected CONDITION=COUNT (e.g. pde=300), got {text!r}"
        )
    return name, _positive_int(count)


def _add_common(parser):
    preset = parser.add_mutually_exclusive_group()
    preset.add_argument(
        "--quick",
        action="store_true",
        help="tiny smoke-test settings (seconds; results not meaningful)",
    )
    preset.add_argument(
        "--full-size",
        action="store_true",
        help="the full-size setting: 3x500 tanh, 80,000 Adam steps",
    )
    parser.add_argument(
        "--paper-settings",
        action="store_true",
        help="the settings of the experiments' earlier runs instead of the "
        "weightings' defaults",
    )
    parser.add_argument("--steps", type=_positive_int, help="Adam steps")
    parser.add_argument("--width", type=_positive_int, help="hidden width")
    parser.add_argument("--depth", type=_positive_int, help="hidden layers")
    parser.add_argument(
        "--fourier-features",
        type=_non_negative_int,
        help="random Fourier features of the inputs (0: plain MLP)",
    )
    parser.add_argument(
        "--fourier-scale",
        type=_positive_float,
        help="standard deviation of the Fourier frequencies",
    )
    parser.add_argument("--lr", type=_positive_float, help="learning rate")
    parser.add_argument(
        "--lr-decay",
        type=_rate,
        help="learning-rate factor per --lr-decay-steps steps",
    )
    parser.add_argument(
        "--lr-decay-steps", type=_positive_int, help="see --lr-decay"
    )
    parser.add_argument(
        "--points",
        type=_points,
        action="append",
        metavar="CONDITION=COUNT",
        help="fresh points per step for one condition (repeatable)",
    )
    parser.add_argument(
        "--resample-every",
        type=_non_negative_int,
        help="steps between fresh draws of points (0: fixed points)",
    )
    parser.add_argument(
        "--weighting",
        nargs="+",
        choices=WEIGHTINGS,
        help="which PINNs to train",
    )
    parser.add_argument(
        "--estimator", choices=ESTIMATORS, help="the sketch's trace estimator"
    )
    parser.add_argument(
        "--balanced-probe",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="scale the predictor's probe by the square roots of the "
        "current weights",
    )
    parser.add_argument(
        "--alpha", type=_rate, help="the sketch's moving-average rate"
    )
    parser.add_argument(
        "--warmup-samples",
        type=_positive_int,
        help="sketches averaged for the warm start",
    )
    parser.add_argument(
        "--exact-every",
        type=_positive_int,
        help="steps between exact NTK updates",
    )
    parser.add_argument(
        "--sample-every",
        type=_positive_int,
        help="steps between sketch samples",
    )
    parser.add_argument(
        "--safeguard",
        choices=SAFEGUARDS,
        help="the spaced-update safeguard",
    )
    parser.add_argument("--seed", type=_non_negative_int, help="random seed")
    parser.add_argument(
        "--threads",
        type=_positive_int,
        default=DEFAULT_THREADS,
        help="torch CPU threads (default: %(default)s; these networks are "
        "small, and more threads slow down on a shared machine)",
    )
    parser.add_argument(
        "--accelerator",
        choices=("cpu", "gpu", "auto"),
        help="Lightning accelerator",
    )
    parser.add_argument(
        "--output-dir",
        default=None,
        help="where figures and metrics.json go "
        "(default: pina-ntk-runs/<experiment>)",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="hide the progress bars"
    )


def _show_defaults(parser, settings):
    # the defaults live in the settings classes; show them in --help
    names = {f.name for f in fields(settings)}
    for action in parser._actions:
        name = "weightings" if action.dest == "weighting" else action.dest
        if name in names and action.help:
            value = getattr(settings, name)
            if isinstance(value, tuple):
                value = " ".join(map(str, value))
            elif isinstance(value, dict):
                value = ", ".join(f"{k}={v}" for k, v in value.items())
            action.help += f" (default: {value})"


def _show_paper_settings(parser, settings_class):
    # what --paper-settings changes, per experiment
    changes = ", ".join(f"{k}={v}" for k, v in settings_class.PAPER.items())
    for action in parser._actions:
        if action.dest == "paper_settings":
            action.help += f" ({changes})"


def build_parser():
    """
    The argument parser of ``pina-ntk``.

    :rtype: argparse.ArgumentParser
    """
    parser = argparse.ArgumentParser(
        prog="pina-ntk",
        description="Run the NTK-weighted PINN experiments of Hirsch & Pichi "
        "(arXiv:2511.15530).",
    )
    sub = parser.add_subparsers(dest="experiment", required=True)
    wave = sub.add_parser(
        "wave",
        help="wave equation: vanilla vs exact-NTK vs sketch-NTK PINN",
    )
    _add_common(wave)
    _show_defaults(wave, WaveSettings())
    _show_paper_settings(wave, WaveSettings)
    qtensor = sub.add_parser(
        "qtensor", help="Q-tensor flow: PINN vs NTK-PINN vs FEM"
    )
    _add_common(qtensor)
    parser.experiment_parsers = {"wave": wave, "qtensor": qtensor}
    qtensor.add_argument(
        "--fem-cells", type=_positive_int, help="FEM cells per side"
    )
    qtensor.add_argument(
        "--fem-degree", type=int, choices=(1, 2), help="FEM degree"
    )
    qtensor.add_argument(
        "--fem-time-step", type=_positive_float, help="FEM time step"
    )
    _show_defaults(qtensor, QTensorSettings())
    _show_paper_settings(qtensor, QTensorSettings)
    return parser


def _settings(args, parser):
    Settings = WaveSettings if args.experiment == "wave" else QTensorSettings
    Problem = Settings.problem_class
    preset = "quick" if args.quick else "full_size" if args.full_size else None
    if args.paper_settings:
        settings = Settings.paper(preset)
    elif preset is not None:
        settings = getattr(Settings, preset)()
    else:
        settings = Settings()
    overrides = {}
    names = {f.name for f in fields(Settings)}
    for key, value in vars(args).items():
        if key in names and value is not None:
            overrides[key] = value
    if args.weighting is not None:
        overrides["weightings"] = tuple(dict.fromkeys(args.weighting))
    if args.points:
        points = dict(settings.points)
        for name, count in args.points:
            if name not in points:
                parser.experiment_parsers[args.experiment].error(
                    f"argument --points: unknown condition {name!r} for "
                    f"{args.experiment}; choose from {sorted(Problem.PAPER_POINTS)}"
                )
            points[name] = count
        overrides["points"] = points
    overrides.pop("weighting", None)
    try:
        return replace(settings, **overrides)
    except ValueError as error:  # a combination the flag types cannot see
        parser.experiment_parsers[args.experiment].error(str(error))


def weighting_call(weighting):
    """
    A weighting as the constructor call that builds it, naming only the
    arguments that differ from the class's defaults.

    :param weighting: An :class:`~pina_ntk.NTKWeighting` or
        :class:`~pina_ntk.SketchNTKWeighting`.
    :return: E.g. ``"SketchNTKWeighting(seed=0)"``.
    :rtype: str
    """
    cls = type(weighting)
    changed = []
    for name, parameter in inspect.signature(cls).parameters.items():
        value = getattr(weighting, name, parameter.default)
        if name == "safeguard" and value is not None:
            value = "default"  # the experiments' only other setting
        if value != parameter.default:
            changed.append(f"{name}={value!r}")
    return f"{cls.__name__}({', '.join(changed)})"


def settings_summary(experiment, settings, threads, paper_settings=False):
    """
    The settings a run trains with, as the command prints them: one line
    per group; each NTK weighting as the call that builds it.

    :param str experiment: ``"wave"`` or ``"qtensor"``.
    :param ExperimentSettings settings: The settings.
    :param int threads: Torch CPU threads.
    :param bool paper_settings: Whether ``--paper-settings`` chose them.
    :rtype: str
    """
    from .experiments.settings import make_weighting

    s = settings
    preset = "--paper-settings; " if paper_settings else ""
    points = ", ".join(f"{k}={v}" for k, v in s.points.items())
    fresh = {0: "fixed", 1: "fresh every step"}.get(
        s.resample_every, f"fresh every {s.resample_every} steps"
    )
    features = (
        f"{s.fourier_features} Fourier features (scale {s.fourier_scale:g})"
        if s.fourier_features
        else "no Fourier features"
    )
    lines = [
        f"pina-ntk {experiment} settings ({preset}NTK weightings: the "
        "classes' defaults except as shown):",
        f"  PINNs     {' '.join(s.weightings)}",
        f"  network   {s.depth}x{s.width} tanh, {features}",
        f"  training  {s.steps} Adam steps, lr {s.lr:g} x{s.lr_decay:g} per "
        f"{s.lr_decay_steps} steps, seed {s.seed}, {s.accelerator}, "
        f"{threads} thread{'s' if threads != 1 else ''}",
        f"  points    {points} ({fresh})",
    ]
    for kind in ("exact", "sketch"):
        if kind in s.weightings:
            weighting = weighting_call(make_weighting(kind, s))
            lines.append(f"  {kind:<8}  {weighting}")
    return "\n".join(lines)


def main(argv=None):
    """
    Entry point of ``pina-ntk``.

    :param list argv: Arguments (default ``sys.argv[1:]``).
    :return: The exit status.
    :rtype: int
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    settings = _settings(args, parser)
    missing = _missing_extra(args.experiment)
    if missing is not None:
        print(f"pina-ntk {args.experiment}: {missing}", file=sys.stderr)
        return 1
    import torch

    torch.set_num_threads(args.threads)
    output_dir = args.output_dir or f"pina-ntk-runs/{args.experiment}"
    print(
        settings_summary(
            args.experiment, settings, args.threads, args.paper_settings
        ),
        flush=True,
    )
    if args.experiment == "wave":
        from .experiments.wave import run_wave as run
        from .experiments.wave import save_wave_outputs as save
    else:
        from .experiments.qtensor import run_qtensor as run
        from .experiments.qtensor import save_qtensor_outputs as save

    written = []

    def write(results):
        # after each PINN: what finished survives an interrupt
        written[:] = save(results, output_dir)

    try:
        results = run(settings, progress=not args.no_progress, on_result=write)
    except KeyboardInterrupt:
        kept = (
            ", ".join(str(p) for p in written) or "nothing (no PINN finished)"
        )
        print(f"\ninterrupted; kept {kept}", file=sys.stderr)
        return 130
    print(results.table())
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _missing_extra(experiment):
    """One line naming the extra an experiment needs, or ``None``."""
    if experiment != "qtensor":
        return None
    try:
        import scipy  # noqa: F401
        import skfem  # noqa: F401
    except ModuleNotFoundError as error:
        return (
            f"needs {error.name!r} for its finite-element reference; install "
            'the fem extra: pip install ".[fem]" (from a clone of '
            'pina-ntk) or pip install "pina-ntk[fem]"'
        )
    return None


if __name__ == "__main__":
    sys.exit(main())
