"""The weighting configurations the wave-problem studies compare.

Shared by ``step_time.py``, ``peak_memory.py``, ``sketch_accuracy.py`` and
``overhead.py``: the table rows (:data:`CONFIGS`), the seeded PINA solver of
each row on ``AcousticWaveProblem`` (:func:`build_solver`), the callback
doing only a sketch's unavoidable work (:class:`UnavoidableWork`, the
reference rows), the training loop (:func:`train`) and the report tables
indexed by network and row (:func:`weighting_table`, :func:`target_table`).
``docs/benchmark-method.md`` describes what each row measures.
"""

import lightning
import torch
from lightning.pytorch.callbacks import Callback
from pina.model import FeedForward
from pina.problem.zoo import AcousticWaveProblem
from pina.solver import PhysicsInformedSingleModelSolver
from pina.weighting import NeuralTangentKernelWeighting

from harness import DOMAINS, fmt, markdown_table
from pina_ntk import NTKCallback, NTKWeighting, SketchNTKWeighting
from pina_ntk.core.estimators import predictor_direction, sample_probe
from pina_ntk.integration.pina_adapter import trainable_parameters
from pina_ntk.integration.recording import ResidualRecorder, batch_calls
from pina_ntk.paper.experiments.training import make_trainer

#: Configurations in table order: key, label.
CONFIGS = (
    ("unweighted", "unweighted (PINA default)"),
    ("exact_every_step", "exact `NTKWeighting`, every step"),
    ("exact_every_period", "exact `NTKWeighting`, every {period} steps"),
    ("predictor_forward", "predictor sketch, forward difference, k = 1"),
    ("predictor_central", "predictor sketch, central difference"),
    ("predictor_plain", "predictor sketch, `balanced_probe=False`"),
    ("parameter", "parameter-space sketch, k = 1"),
    ("predictor_every_10", "predictor sketch, k = 10 (amortised)"),
    ("predictor_every_100", "predictor sketch, k = 100 (amortised)"),
    ("parameter_every_10", "parameter-space sketch, k = 10 (amortised)"),
    ("parameter_every_100", "parameter-space sketch, k = 100 (amortised)"),
    (
        "predictor_same_step",
        "predictor sketch, forward, `sample_after_backward=False`",
    ),
    (
        "parameter_same_step",
        "parameter-space sketch, `sample_after_backward=False`",
    ),
    ("pina_ntk", "PINA `NeuralTangentKernelWeighting`"),
    (
        "reference_evaluation",
        "*reference: unweighted + one more residual evaluation*",
    ),
    (
        "reference_predictor",
        "*reference: unweighted + one more residual evaluation and one "
        "`Jᵀg` backward*",
    ),
)
CONFIG_KEYS = tuple(key for key, _ in CONFIGS)
#: The reference rows: unweighted training plus a sketch's unavoidable
#: work (see :class:`UnavoidableWork`).
REFERENCE_KEYS = ("reference_evaluation", "reference_predictor")
#: Rows with a sample every k > 1 steps (``sample_every_n_steps``): their
#: k. The other sketch rows sample at every step (k = 1).
SAMPLE_PERIODS = {
    "predictor_every_10": 10,
    "predictor_every_100": 100,
    "parameter_every_10": 10,
    "parameter_every_100": 100,
}
#: The four sketch estimators (memory targets, accuracy study).
SKETCH_KEYS = (
    "predictor_forward",
    "predictor_central",
    "predictor_plain",
    "parameter",
)


#: The per-step rows measure one sample per step whatever the default k.
EVERY_STEP = {"sample_every_n_steps": 1}


def make_weighting(key, period, seed, safeguard="default"):
    """
    The weighting object of a configuration.

    :param str key: One of :data:`CONFIG_KEYS`.
    :param int period: Steps between exact updates (``exact_every_period``).
    :param int seed: Probe seed of the sketches.
    :param safeguard: The pina_ntk safeguard setting.
    :return: The weighting, or ``None`` for PINA's unweighted default
        (also for the reference rows, whose work a callback adds).
    :raises ValueError: If ``key`` is unknown.
    """
    if key == "unweighted" or key in REFERENCE_KEYS:
        return None
    if key in SAMPLE_PERIODS:
        return SketchNTKWeighting(
            estimator=key.split("_")[0],
            sample_every_n_steps=SAMPLE_PERIODS[key],
            seed=seed,
            safeguard=safeguard,
        )
    if key == "exact_every_step":
        return NTKWeighting(update_every_n_steps=1, safeguard=safeguard)
    if key == "exact_every_period":
        return NTKWeighting(update_every_n_steps=period, safeguard=safeguard)
    if key == "predictor_forward":
        return SketchNTKWeighting(**EVERY_STEP, seed=seed, safeguard=safeguard)
    if key == "predictor_central":
        return SketchNTKWeighting(
            **EVERY_STEP, difference="central", seed=seed, safeguard=safeguard
        )
    if key == "predictor_plain":
        return SketchNTKWeighting(
            **EVERY_STEP, balanced_probe=False, seed=seed, safeguard=safeguard
        )
    if key == "parameter":
        return SketchNTKWeighting(
            **EVERY_STEP, estimator="parameter", seed=seed, safeguard=safeguard
        )
    if key == "predictor_same_step":
        return SketchNTKWeighting(
            **EVERY_STEP,
            seed=seed,
            safeguard=safeguard,
            sample_after_backward=False,
        )
    if key == "parameter_same_step":
        return SketchNTKWeighting(
            **EVERY_STEP,
            estimator="parameter",
            seed=seed,
            safeguard=safeguard,
            sample_after_backward=False,
        )
    if key == "pina_ntk":
        return NeuralTangentKernelWeighting()
    raise ValueError(f"key must be one of {CONFIG_KEYS}, got {key!r}.")


def build_solver(task, key, safeguard="default"):
    """
    A seeded wave-problem solver: the same points and initial network for
    every configuration and round.

    :param dict task: The worker task (``width``, ``depth``, ``points``,
        ``seed``, ``period``).
    :param str key: The configuration.
    :param safeguard: The pina_ntk safeguard setting.
    :return: ``(solver, callbacks)``; ``callbacks`` holds the
        :class:`~pina_ntk.NTKCallback` when the weighting needs it.
    :rtype: tuple
    """
    lightning.seed_everything(task["seed"], verbose=False)
    problem = AcousticWaveProblem()
    for domain, count in zip(DOMAINS, task["points"]):
        problem.discretise_domain(count, "random", domains=[domain])
    model = FeedForward(
        2,
        1,
        inner_size=task["width"],
        n_layers=task["depth"],
        func=torch.nn.Tanh,
    )
    weighting = make_weighting(key, task["period"], task["seed"], safeguard)
    solver = PhysicsInformedSingleModelSolver(
        problem, model, weighting=weighting
    )
    callbacks = []
    if key in REFERENCE_KEYS:
        callbacks.append(UnavoidableWork(vjp=key == "reference_predictor"))
    elif key not in ("unweighted", "pina_ntk"):
        callbacks.append(NTKCallback())
    return solver, callbacks


class UnavoidableWork(Callback):
    """
    The extra work of a sketch without any of pina_ntk's bookkeeping, added
    to unweighted training: the reference rows that show how close the
    sketches' time ratios can get to 1.

    After the backward pass it evaluates every condition of the step once
    more with PINA's own ``condition.evaluate`` (at ``theta``, whereas a
    sketch evaluates at displaced parameters through
    ``torch.func.functional_call``), as both estimators must. With ``vjp``
    it also runs, before the backward pass, one backward pass for
    ``J^T g`` through the step's retained graph, as the predictor must. No
    probe bookkeeping, displacement, moving average, weights or safeguard.

    :param bool vjp: Add the predictor's backward pass.
    """

    def __init__(self, vjp=False):
        super().__init__()
        self.vjp = vjp
        self._recorder = None
        self._calls = None

    def setup(self, trainer, pl_module, stage):
        """Watch the conditions' residuals when the backward pass needs
        them."""
        if self.vjp:
            self._recorder = ResidualRecorder(pl_module.problem)
            self._recorder.attach()

    def teardown(self, trainer, pl_module, stage):
        """Restore the conditions' own ``evaluate``."""
        if self._recorder is not None:
            self._recorder.detach()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        """Keep the step's condition data for the extra evaluation."""
        self._calls = batch_calls(pl_module, batch)
        if self._recorder is not None:
            self._recorder.start()

    def on_before_backward(self, trainer, pl_module, loss):
        """The predictor's backward pass for ``J^T g``."""
        if self._recorder is None:
            return
        residuals = self._recorder.residuals
        params = trainable_parameters(pl_module).values()
        predictor_direction(residuals, params, sample_probe(residuals))
        self._recorder.stop()

    def on_after_backward(self, trainer, pl_module):
        """One more evaluation of every condition of the step."""
        with torch.enable_grad():  # PINA's operators differentiate inputs
            for _, evaluate, data in self._calls:
                evaluate(data, pl_module)
        self._calls = None


def train(task, solver, steps, callbacks):
    """
    Train ``steps`` optimisation steps with PINA's trainer (one full batch
    per epoch), without logger, progress bar or checkpoints.

    :param dict task: The worker task (``accelerator``).
    :param solver: The PINA solver.
    :param int steps: Optimisation steps.
    :param list callbacks: Lightning callbacks.
    """
    trainer = make_trainer(solver, steps, callbacks, task["accelerator"])
    trainer.train()


def parameter_count(solver):
    """:return: The solver's number of parameters. :rtype: int"""
    return sum(p.numel() for p in solver.parameters())


def config_label(key, settings):
    """:return: The table label of a configuration. :rtype: str"""
    label = dict(CONFIGS)[key]
    return label.format(period=settings["period"])


def residual_entries(settings):
    """
    :param dict settings: With ``points``.
    :return: Residual entries of one step (the ``t0`` condition has two
        columns: value and velocity).
    :rtype: int
    """
    interior, initial, boundary = settings["points"]
    return interior + 2 * initial + boundary


def problem_line(settings):
    """
    The report's line on the problem and networks.

    :param dict settings: The resolved settings.
    :return: The line (markdown, no bullet).
    :rtype: str
    """
    interior, initial, boundary = settings["points"]
    return (
        "Problem: PINA's `AcousticWaveProblem`, fixed random points "
        f"{interior} / {initial} / {boundary} (`D` / `t0` / `boundary`; "
        f"{residual_entries(settings)} residual entries), tanh networks "
        f"with {settings['depth']} hidden layers, seed {settings['seed']}"
    )


def weighting_table(settings, parameters, columns):
    """
    The table with one row per network and configuration.

    :param dict settings: The resolved settings (``widths``, ``depth``).
    :param dict parameters: ``{width: parameter count}``.
    :param list columns: ``(header, cells)`` pairs: ``header`` a list of
        column titles (numbers, right-aligned), ``cells(width, key)`` the
        row's cells under them.
    :return: The table's lines.
    :rtype: list[str]
    """
    header = ["network", "weighting"]
    for titles, _ in columns:
        header += titles
    rows = []
    for width in settings["widths"]:
        net = (
            f"{settings['depth']}×{width} ({parameters[width]:,} " "parameters)"
        )
        for key in CONFIG_KEYS:
            row = [net, config_label(key, settings)]
            for _, cells in columns:
                row += cells(width, key)
            rows.append(row)
    return markdown_table(header, "l" * 2 + "r" * (len(header) - 2), rows)


def target_table(settings, checks):
    """
    The targets table.

    :param dict settings: The resolved settings (``depth``).
    :param list checks: ``(width, description, measured, limit, passed,
        reference)`` tuples; ``reference`` is the ratio of the matching
        reference row, or ``None``. The last column is left out when no
        check has one.
    :return: The table's lines.
    :rtype: list[str]
    """
    with_reference = any(check[5] is not None for check in checks)
    header = ["network", "quantity", "measured", "target", "verdict"]
    align = "llrrl"
    if with_reference:
        header.append("unavoidable work alone")
        align += "r"
    rows = []
    for width, what, value, limit, passed, reference in checks:
        row = [
            f"{settings['depth']}×{width}",
            what,
            f"{fmt(value, 3)}×",
            f"≤ {limit}×",
            "pass" if passed else "**fail**",
        ]
        if with_reference:
            row.append("—" if reference is None else f"{fmt(reference, 3)}×")
        rows.append(row)
    return markdown_table(header, align, rows)
