"""The wave-problem studies: what they compare, their settings, their page.

Shared by ``step_time.py``, ``peak_memory.py``, ``sketch_accuracy.py`` and
``overhead.py`` (all three): the table rows (:data:`CONFIGS`) and their
seeded solvers on PINA's ``AcousticWaveProblem`` (:func:`build_solver`),
the settings and flags and the command line (:func:`study_main`); the one
renderer of their results is ``wave_study_page.render``. What each row
measures: ``docs/benchmark-method.md``.
"""

import argparse
import importlib
import os
import sys
import tempfile
import time

import lightning
import torch
from lightning.pytorch.callbacks import Callback
from pina.model import FeedForward
from pina.problem.zoo import AcousticWaveProblem, Poisson2DSquareProblem
from pina.solver import PhysicsInformedSingleModelSolver

import harness
from wave_study_page import render
from pina_ntk import NTKCallback
from pina_ntk.core.estimators import predictor_direction, sample_probe
from pina_ntk.integration.pina_adapter import trainable_parameters
from pina_ntk.integration.recording import ResidualRecorder, batch_calls
from pina_ntk.paper.experiments.settings import make_weighting
from pina_ntk.paper.experiments.training import make_trainer

#: Condition order of the ``--points`` flag.
DOMAINS = ("D", "t0", "boundary")
#: Problems of the ``--problem`` flag: PINA's acoustic wave (time-dependent,
#: the default) and Poisson on the square (stationary: ``gradient_band``
#: acts on stationary problems only, so its cost is timed there; ``t0``'s
#: points are unused).
PROBLEMS = {
    "acoustic_wave": AcousticWaveProblem,
    "poisson": Poisson2DSquareProblem,
}
#: Configurations in table order: key, label, and the weighting (kind and
#: options for :func:`~pina_ntk.paper.experiments.settings.make_weighting`;
#: ``None``: unweighted, the reference rows' work is a callback's).
#: ``{period}`` is ``--period``; the per-step rows sample every step.
K1 = {"sample_every_n_steps": 1}
PARAMETER = dict(K1, estimator="parameter")
SAME_STEP = {"sample_after_backward": False}
REFERENCE = "*reference: unweighted + one more residual evaluation"
#: Options timed at the default spacing besides the trace: key, label,
#: options.
VARIANTS = (
    ("rayleigh", 'statistic="rayleigh"', {"statistic": "rayleigh"}),
    ("boundary", 'statistic="boundary"', {"statistic": "boundary"}),
    ("band", "gradient_band=4", {"gradient_band": 4.0}),
)
# fmt: off
CONFIGS = (
    ("unweighted", "unweighted (PINA default)", None),
    ("exact_every_step", "exact `NTKWeighting`, every step", ("exact", {})),
    ("exact_every_period", "exact `NTKWeighting`, every {period} steps",
     ("exact", {"update_every_n_steps": "{period}"})),
    ("exact_rayleigh_every_period",
     'exact `NTKWeighting(statistic="rayleigh")`, every {period} steps',
     ("exact", {"update_every_n_steps": "{period}", "statistic": "rayleigh"})),
    ("predictor_forward", "predictor sketch, forward difference, k = 1",
     ("sketch", K1)),
    ("predictor_central", "predictor sketch, central difference",
     ("sketch", dict(K1, difference="central"))),
    ("predictor_plain", "predictor sketch, `balanced_probe=False`",
     ("sketch", dict(K1, balanced_probe=False))),
    ("parameter", "parameter-space sketch, k = 1", ("sketch", PARAMETER)),
    *((f"{estimator}_every_{k}", f"{name} sketch, k = {k} (amortised)",
       ("sketch", {"estimator": estimator, "sample_every_n_steps": k}))
      for estimator, name in (("predictor", "predictor"),
                              ("parameter", "parameter-space"))
      for k in (10, 100)),
    *((f"{estimator}_{variant}_every_10",
       f"{name} sketch, `{option}`, k = 10 (amortised)",
       ("sketch", {"estimator": estimator, "sample_every_n_steps": 10,
                   **options}))
      for variant, option, options in VARIANTS
      for estimator, name in (("predictor", "predictor"),
                              ("parameter", "parameter-space"))),
    ("predictor_same_step",
     "predictor sketch, forward, `sample_after_backward=False`",
     ("sketch", dict(K1, **SAME_STEP))),
    ("parameter_same_step",
     "parameter-space sketch, `sample_after_backward=False`",
     ("sketch", dict(PARAMETER, **SAME_STEP))),
    ("pina_ntk", "PINA `NeuralTangentKernelWeighting`", ("pina_ntk", {})),
    ("reference_evaluation", REFERENCE + "*", None),
    ("reference_predictor", REFERENCE + " and one `Jᵀg` backward*", None),
)
# fmt: on
CONFIG_KEYS = tuple(key for key, _, _ in CONFIGS)
#: The reference rows (see :class:`UnavoidableWork`).
REFERENCE_KEYS = ("reference_evaluation", "reference_predictor")
#: Rows with a sample every k > 1 steps: their k.
SAMPLE_PERIODS = {
    key: spec[1]["sample_every_n_steps"]
    for key, _, spec in CONFIGS
    if spec and spec[1].get("sample_every_n_steps", 1) > 1
}
#: The four sketch estimators (memory targets, accuracy study).
SKETCH_KEYS = ("predictor_forward", "predictor_central", "predictor_plain")
SKETCH_KEYS += ("parameter",)

#: Settings of a full run and of ``--quick``; explicit flags override both
#: (``accuracy_width`` None: the first width).
FULL = dict(widths=[100, 300], depth=3, points=[300, 300, 200], steps=100)
FULL.update(warmup=5, rounds=3, period=100, exact_steps=2, memory_steps=2)
FULL.update(accuracy_width=None, accuracy_checkpoints=[0, 50, 100, 200])
FULL.update(accuracy_seeds=3, threads=1, seed=0, min_periods=3)
FULL.update(problem="acoustic_wave")
QUICK = dict(FULL, widths=[20, 40], points=[40, 20, 20], steps=5, warmup=2)
QUICK.update(rounds=1, period=5, exact_steps=1, accuracy_checkpoints=[0, 5])
QUICK.update(accuracy_seeds=2, min_periods=1)
#: Flags of the settings: name, help text, extra argparse options.
# fmt: off
SETTING_FLAGS = (
    ("steps", "measured steps per run", {}),
    ("warmup", "discarded steps at the start of each run (step 0 is the "
     "warm start)", {}),
    ("rounds", "interleaved timing rounds", {}),
    ("threads", "torch intra-op threads in the workers", {}),
    ("widths", "hidden-layer widths", {"nargs": "+"}),
    ("depth", "hidden layers", {}),
    ("points", "points of the conditions D, t0 and boundary",
     {"nargs": 3, "metavar": ("D", "T0", "BOUNDARY")}),
    ("period", "steps between exact updates of the periodic row", {}),
    ("min_periods", "whole periods a periodic row is timed over at the "
     "least", {}),
    ("exact_steps", "measured steps of the exact-every-step row", {}),
    ("memory_steps", "steps of the memory runs", {}),
    ("accuracy_width", "width of the accuracy runs", {}),
    ("accuracy_checkpoints",
     "steps where sketched and exact weights are compared", {"nargs": "+"}),
    ("accuracy_seeds", "seeds (runs per estimator) of the accuracy study", {}),
    ("seed", "first seed: points, initial network and probes", {}),
    ("problem", "the problem trained",
     {"type": str, "choices": tuple(PROBLEMS)}),
)
# fmt: on
SETTING_NAMES = tuple(name for name, _, _ in SETTING_FLAGS)
#: The smallest value of each setting (of each entry of a list).
MINIMA = dict(dict.fromkeys(SETTING_NAMES, 1), seed=0, accuracy_checkpoints=0)
del MINIMA["problem"]
#: Page titles, by script.
TITLES = {
    "overhead.py": "cost and accuracy of NTK loss weights in PINA",
    "step_time.py": "time per training step of NTK loss weights in PINA",
    "peak_memory.py": "peak extra memory of NTK loss weights in PINA",
    "sketch_accuracy.py": "accuracy of the sketched NTK loss weights in PINA",
}
#: The studies: the module whose ``JOB`` measures (in a worker) and whose
#: ``summarise`` gives the page's numbers.
STUDIES = {
    "time": "step_time",
    "memory": "peak_memory",
    "accuracy": "sketch_accuracy",
}


# ------------------------------------------------------------ training
def build_solver(task, key, safeguard="default", spec="row"):
    """
    A seeded solver of a configuration and the callbacks it needs: the
    same problem, points and initial network for every configuration.

    :param dict task: The worker task (``problem``, ``width``, ``depth``,
        ``points``, ``seed``, ``period``).
    :param str key: The row; a key of :data:`REFERENCE_KEYS` adds the
        reference rows' callback.
    :param safeguard: The pina_ntk weightings' safeguard setting.
    :param spec: The weighting, ``(kind, options)`` as in :data:`CONFIGS`
        (``None``: unweighted), whose sketches keep their library default
        band; ``"row"``: the spec of row ``key`` (without the band).
    :return: ``(solver, callbacks)``.
    """
    lightning.seed_everything(task["seed"], verbose=False)
    problem = PROBLEMS[task.get("problem", "acoustic_wave")]()
    for domain, count in zip(DOMAINS, task["points"]):
        if domain in problem.conditions:
            problem.discretise_domain(count, "random", domains=[domain])
    network = dict(inner_size=task["width"], n_layers=task["depth"])
    model = FeedForward(2, 1, func=torch.nn.Tanh, **network)
    from_table = spec == "row"
    if from_table:
        spec = {k: s for k, _, s in CONFIGS}[key]
    weighting = None
    if spec is not None:
        kind, options = spec
        options = {
            name: task["period"] if value == "{period}" else value
            for name, value in options.items()
        }
        if kind == "sketch":
            options.update(seed=task["seed"], safeguard=safeguard)
            if from_table:  # the rows without a band: NTK weights alone
                options.setdefault("gradient_band", None)
        elif kind == "exact":
            options.setdefault("update_every_n_steps", 1)
            options["safeguard"] = safeguard
        weighting = make_weighting(kind, **options)
    solver = PhysicsInformedSingleModelSolver(
        problem, model, weighting=weighting
    )
    callbacks = []
    if key in REFERENCE_KEYS:
        callbacks.append(UnavoidableWork(vjp=key == "reference_predictor"))
    elif spec is not None and spec[0] in ("exact", "sketch"):
        callbacks.append(NTKCallback())
    return solver, callbacks


class UnavoidableWork(Callback):
    """
    The reference rows: unweighted training plus the extra work a sketch
    cannot avoid, without pina_ntk's bookkeeping. After the backward pass
    every condition of the step is evaluated once more (both estimators
    must); with ``vjp``, before it, one backward pass for ``J^T g`` through
    the step's graph (the predictor must).

    :param bool vjp: Add the predictor's backward pass.
    """

    def __init__(self, vjp=False):
        super().__init__()
        self.vjp = vjp
        self._recorder = None
        self._calls = None

    def setup(self, trainer, pl_module, stage):
        if self.vjp:  # watch the residuals for the backward pass
            self._recorder = ResidualRecorder(pl_module)
            self._recorder.attach()

    def teardown(self, trainer, pl_module, stage):
        if self._recorder is not None:
            self._recorder.detach()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._calls = batch_calls(pl_module, batch)
        if self._recorder is not None:
            self._recorder.start()

    def on_before_backward(self, trainer, pl_module, loss):
        if self._recorder is None:
            return
        residuals = self._recorder.residuals
        params = trainable_parameters(pl_module).values()
        predictor_direction(residuals, params, sample_probe(residuals))
        self._recorder.stop()

    def on_after_backward(self, trainer, pl_module):
        with torch.enable_grad():  # PINA's operators differentiate inputs
            for _, evaluate, data in self._calls:
                evaluate(data, pl_module)
        self._calls = None


def train(task, solver, steps, callbacks):
    """Train ``steps`` full-batch steps with PINA's trainer, quietly."""
    make_trainer(solver, steps, callbacks, task["accelerator"]).train()


def parameter_count(solver):
    """:return: The solver's number of parameters. :rtype: int"""
    return sum(p.numel() for p in solver.parameters())


def config_label(key, settings):
    """:return: The table label of a configuration. :rtype: str"""
    label = {k: text for k, text, _ in CONFIGS}[key]
    return label.format(period=settings["period"])


# -------------------------------------------------------- command line
def resolve_settings(args):
    """
    The run's settings: the ``--quick`` or full defaults overridden by the
    flags, ``accuracy_width`` resolved and ``accelerator`` added.

    :raises ValueError: If a setting is out of range.
    """
    settings = dict(QUICK if args.quick else FULL)
    for name in FULL:
        if getattr(args, name, None) is not None:
            settings[name] = getattr(args, name)
    if settings["accuracy_width"] is None:
        settings["accuracy_width"] = settings["widths"][0]
    for name, minimum in MINIMA.items():
        value = settings[name]
        if min(value if isinstance(value, list) else [value]) < minimum:
            flag = name.replace("_", "-")
            raise ValueError(f"--{flag} must be >= {minimum}.")
    checkpoints = sorted(set(settings["accuracy_checkpoints"]))
    settings["accuracy_checkpoints"] = checkpoints
    settings["accelerator"] = args.device
    if args.device == "auto":
        settings["accelerator"] = "cuda" if torch.cuda.is_available() else "cpu"
    return settings


def measure(settings, workdir, log, studies):
    """
    Every worker of the studies: one per timing round and network; the last
    round's also measures memory (and at the accuracy width, accuracy)
    after its timing runs, which saves process starts and changes no number.

    :return: ``timing`` (``{width: [round results]}``), ``memory``
        (``{width: result}``), ``accuracy`` and the workers' ``threads``.
    :rtype: dict
    """
    job = {s: importlib.import_module(STUDIES[s]).JOB for s in studies}
    results = {"timing": {w: [] for w in settings["widths"]}, "memory": {}}

    def run(jobs, width, index):
        task = dict(settings, jobs=jobs, width=width, round=index)
        envelope = harness.run_worker(task, workdir)
        found = envelope["results"]
        if job.get("time") in found:
            results["timing"][width].append(found[job["time"]])
        if job.get("memory") in found:
            results["memory"][width] = found[job["memory"]]
        if job.get("accuracy") in found:
            results["accuracy"] = found[job["accuracy"]]
        results["threads"] = envelope["threads"]
        log(f"round {index + 1}, width {width}: {', '.join(jobs)} done")

    rounds = settings["rounds"] if "time" in studies else 1
    for index in range(rounds):
        for width in settings["widths"]:
            jobs = [job["time"]] if "time" in studies else []
            if index == rounds - 1:
                jobs += [job["memory"]] if "memory" in studies else []
                if width == settings["accuracy_width"] and "accuracy" in job:
                    jobs.append(job["accuracy"])
            if jobs:
                run(jobs, width, index)
    if "accuracy" in job and results.get("accuracy") is None:
        run([job["accuracy"]], settings["accuracy_width"], 0)
    return results


def summarise(results, settings, studies):
    """The page's numbers (see :func:`render`): each study's, the time and
    memory of a row side by side, each network's targets together."""
    interior, initial, boundary = settings["points"]
    points = f"{interior} / {initial} / {boundary} (`D` / `t0` / `boundary`"
    entries = interior + 2 * initial + boundary  # t0: value and velocity
    name = settings.get("problem", "acoustic_wave")
    if name != "acoustic_wave":  # stationary: no t0
        points = f"{interior} / {boundary} (`D` / `boundary`"
        entries = interior + boundary
    problem = (
        f"Problem: PINA's `{PROBLEMS[name].__name__}`, fixed random points "
        f"{points}; {entries} residual entries), tanh networks with "
        f"{settings['depth']} hidden layers, seed {settings['seed']}"
    )
    document = {"lines": [problem], "parameters": {}}
    targets = []
    for study in studies:
        module = importlib.import_module(STUDIES[study])
        found = module.summarise(results, settings)
        document["lines"].append(found.pop("line"))
        document["parameters"].update(found.pop("parameters", {}))
        targets += found.pop("targets", [])
        rows = found.pop("rows", None)
        if rows and "rows" in document:
            for row, memory in zip(document["rows"], rows):
                row["memory"] = memory["memory"]
        elif rows:
            document["rows"] = rows
        document.update(found)
    if targets:
        order = settings["widths"].index
        document["targets"] = sorted(targets, key=lambda c: order(c["width"]))
    return document


def study_main(argv, script, names, studies, default_output=None):
    """
    The command line of a study: measure in worker processes, write the
    results (``--output`` with the suffix ``.json``) and the page rendered
    from them (or from ``--from-json``).

    :param names: The settings the study takes as flags.
    :param tuple studies: Keys of :data:`STUDIES`, in page order.
    :param default_output: The default page; ``None``: print only.
    :return: The process exit code.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=f"The {TITLES[script]}.")

    def default(settings, name):
        value = settings[name]
        if value is None:  # accuracy_width
            return "first of --widths" if "widths" in names else "20/100"
        return " ".join(map(str, value)) if isinstance(value, list) else value

    for name, text, options in SETTING_FLAGS:
        if name in names:
            text += f" (default {default(FULL, name)}; "
            text += f"--quick {default(QUICK, name)})"
            flag = "--" + name.replace("_", "-")
            parser.add_argument(flag, help=text, **{"type": int, **options})
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where to train; auto picks CUDA when available (default auto)",
    )
    parser.add_argument(
        "--output",
        default=default_output,
        help="page to write; its results go to the same name with .json "
        f"(default {default_output or 'none: print only'})",
    )
    harness.add_run_flags(parser)
    args = parser.parse_args(argv)
    if args.from_json:
        document = harness.read_json(args.from_json)
    else:
        try:
            settings = resolve_settings(args)
        except ValueError as error:
            parser.error(str(error))
        started = time.perf_counter()
        device = settings["accelerator"]
        part = harness.provenance(
            script, argv, args.machine_label, device=device, workers=1
        )

        def log(message):
            elapsed = time.perf_counter() - started
            print(f"[{elapsed:7.1f} s] {message}", file=sys.stderr, flush=True)

        with tempfile.TemporaryDirectory() as workdir:
            results = measure(settings, workdir, log, studies)
        part["threads"] = results.pop("threads")
        document = {
            "script": script,
            "parts": [harness.finish(part, started)],
            "settings": settings,
            **summarise(results, settings, studies),
            "raw": results,
        }
        if args.output is not None:
            path = os.path.splitext(args.output)[0] + ".json"
            harness.write_json(path, document)
    block = render(document, args.output)
    if args.output is not None:
        title = f"Benchmark: {TITLES[document['script']]}"
        harness.write_page(args.output, document["script"], block, title)
    print(block)
    return 0
