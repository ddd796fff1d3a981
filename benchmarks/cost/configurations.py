"""The wave-problem studies' rows (:data:`CONFIGS`), solvers, settings and
command line; their page: ``wave_study_page.py``. Method:
``docs/benchmark-method.md``."""

import argparse
import functools
import gc
import itertools
import os
import sys
import tempfile
import time
from importlib import import_module

import lightning
import torch
from lightning.pytorch.callbacks import Callback
from pina.model import FeedForward
from pina.problem.zoo import AcousticWaveProblem, Poisson2DSquareProblem
from pina.solver import PhysicsInformedSingleModelSolver as Solver
from pina_ntk import NTKCallback
from pina_ntk.core.estimators import predictor_direction, sample_probe
from pina_ntk.integration.pina_adapter import trainable_parameters
from pina_ntk.integration.recording import ResidualRecorder, batch_calls
from pina_ntk.paper.experiments.settings import make_weighting
from pina_ntk.paper.experiments.training import make_trainer

from benchmarks import harness
from benchmarks.cost.wave_study_page import render

#: Condition order of the ``--points`` flag.
DOMAINS = ("D", "t0", "boundary")
#: ``--problem``: Poisson (stationary) is where ``gradient_band`` acts.
PROBLEMS = dict(acoustic_wave=AcousticWaveProblem)
PROBLEMS["poisson"] = Poisson2DSquareProblem
#: Rows in table order: key, label (``{period}``: ``--period``), weighting
#: (``make_weighting``'s kind and options; ``None``: unweighted).
K, EVERY = "sample_every_n_steps", "update_every_n_steps"
K1 = {K: 1}
PARAMETER = dict(K1, estimator="parameter")
REFERENCE = "*reference: unweighted + one more residual evaluation"
#: Options timed at k = 10 besides the trace: key, label, options.
VARIANTS = (
    ("rayleigh", 'statistic="rayleigh"', {"statistic": "rayleigh"}),
    ("boundary", 'statistic="boundary"', {"statistic": "boundary"}),
    ("band", "gradient_band=4", {"gradient_band": 4.0}),
)
ESTIMATORS = (("predictor", "predictor"), ("parameter", "parameter-space"))
CONFIGS = (
    ("unweighted", "unweighted (PINA default)", None),
    ("exact_every_step", "exact `NTKWeighting`, every step", ("exact", {})),
    (
        "exact_every_period",
        "exact `NTKWeighting`, every {period} steps",
        ("exact", {EVERY: "{period}"}),
    ),
    (
        "exact_rayleigh_every_period",
        'exact `NTKWeighting(statistic="rayleigh")`, every {period} steps',
        ("exact", {EVERY: "{period}", "statistic": "rayleigh"}),
    ),
    (
        "predictor_forward",
        "predictor sketch, forward difference, k = 1",
        ("sketch", K1),
    ),
    (
        "predictor_central",
        "predictor sketch, central difference",
        ("sketch", dict(K1, difference="central")),
    ),
    (
        "predictor_plain",
        "predictor sketch, `balanced_probe=False`",
        ("sketch", dict(K1, balanced_probe=False)),
    ),
    ("parameter", "parameter-space sketch, k = 1", ("sketch", PARAMETER)),
    *(
        (
            f"{estimator}_every_{k}",
            f"{name} sketch, k = {k} (amortised)",
            ("sketch", {"estimator": estimator, K: k}),
        )
        for estimator, name in ESTIMATORS
        for k in (10, 100)
    ),
    *(
        (
            f"{estimator}_{variant}_every_10",
            f"{name} sketch, `{option}`, k = 10 (amortised)",
            ("sketch", {"estimator": estimator, K: 10, **options}),
        )
        for variant, option, options in VARIANTS
        for estimator, name in ESTIMATORS
    ),
    (
        "predictor_same_step",
        "predictor sketch, forward, `sample_after_backward=False`",
        ("sketch", dict(K1, sample_after_backward=False)),
    ),
    (
        "parameter_same_step",
        "parameter-space sketch, `sample_after_backward=False`",
        ("sketch", dict(PARAMETER, sample_after_backward=False)),
    ),
    ("pina_ntk", "PINA `NeuralTangentKernelWeighting`", ("pina_ntk", {})),
    ("reference_evaluation", REFERENCE + "*", None),
    ("reference_predictor", REFERENCE + " and one `Jᵀg` backward*", None),
)
CONFIG_KEYS = tuple(key for key, _, _ in CONFIGS)
LABELS = {key: label for key, label, _ in CONFIGS}
SPECS = {key: spec for key, _, spec in CONFIGS}
REFERENCE_KEYS = ("reference_evaluation", "reference_predictor")
#: Rows with a sample every k > 1 steps: their k.
SAMPLE_PERIODS = {key: spec[1].get(K, 1) for key, spec in SPECS.items() if spec}
SAMPLE_PERIODS = {key: k for key, k in SAMPLE_PERIODS.items() if k > 1}
#: The four sketch estimators (memory targets).
SKETCH_KEYS = ("predictor_forward", "predictor_central", "predictor_plain")
SKETCH_KEYS += ("parameter",)
#: Full and ``--quick`` settings.
FULL = dict(widths=[100, 300], depth=3, points=[300, 300, 200], steps=100)
FULL.update(warmup=5, rounds=6, period=100, exact_steps=2, memory_steps=2)
FULL.update(threads=1, seed=0, min_periods=3, rows=None)
FULL.update(problem="acoustic_wave")
QUICK = dict(FULL, widths=[20, 40], points=[40, 20, 20], steps=5, warmup=2)
QUICK.update(rounds=1, period=5, exact_steps=1, min_periods=1)
#: Flags of the settings: name, help text, extra argparse options.
SETTING_FLAGS = (
    ("steps", "measured steps per run", {}),
    (
        "warmup",
        "discarded steps at the start of each run (step 0 is the warm start)",
        {},
    ),
    ("rounds", "interleaved timing rounds", {}),
    ("threads", "torch intra-op threads in the workers", {}),
    ("widths", "hidden-layer widths", {"nargs": "+"}),
    ("depth", "hidden layers", {}),
    (
        "points",
        "points of the conditions D, t0 and boundary",
        {"nargs": 3, "metavar": ("D", "T0", "BOUNDARY")},
    ),
    ("period", "steps between exact updates of the periodic row", {}),
    ("min_periods", "least whole periods a periodic row is timed over", {}),
    ("exact_steps", "measured steps of the exact-every-step row", {}),
    ("memory_steps", "steps of the memory runs", {}),
    ("seed", "first seed: points, initial network and probes", {}),
    (
        "rows",
        "the rows measured, by key (unweighted always)",
        {"type": str, "nargs": "+", "choices": CONFIG_KEYS[1:]},
    ),
    ("problem", "the problem trained", {"type": str, "choices": [*PROBLEMS]}),
)
SETTING_NAMES = tuple(name for name, _, _ in SETTING_FLAGS)
#: The integer settings (checked against their least value).
COUNTS = [name for name, _, o in SETTING_FLAGS if o.get("type") is not str]
#: Page titles, by script.
TITLES = {
    "cost/overhead.py": "cost of NTK loss weights in PINA",
    "cost/step_time.py": "time per training step of NTK loss weights in PINA",
    "cost/peak_memory.py": "peak extra memory of NTK loss weights in PINA",
}
#: The studies' worker jobs (their modules: ``settings_line``, ``numbers``).
STUDIES = dict(
    time="benchmarks.cost.step_time:run_timing",
    memory="benchmarks.cost.peak_memory:run_memory",
)
#: Each study's raw results key.
STUDY_RAW = dict(time="timing", memory="memory")


def build_solver(task, key, safeguard="default", spec="row"):
    """``(solver, callbacks)`` of row ``key``, seeded: every row has the same
    problem, points and initial network.

    :param dict task: ``problem``, ``width``, ``depth``, ``points``,
        ``seed``, ``period``.
    :param spec: ``(kind, options)`` as in :data:`CONFIGS`, or ``"row"``:
        row ``key``'s."""
    lightning.seed_everything(task["seed"], verbose=False)
    problem = harness.own_problem(
        PROBLEMS[task.get("problem", "acoustic_wave")]
    )
    for domain, count in zip(DOMAINS, task["points"]):
        if domain in problem.conditions:
            problem.discretise_domain(count, "random", domains=[domain])
    model = FeedForward(2, 1, task["width"], task["depth"], torch.nn.Tanh)
    kind, options = (SPECS[key] if spec == "row" else spec) or (None, {})
    options = dict(options)
    if options.get(EVERY) == "{period}":
        options[EVERY] = task["period"]
    if kind == "sketch":
        options.update(seed=task["seed"], safeguard=safeguard)
    elif kind == "exact":
        options.update({EVERY: options.get(EVERY, 1), "safeguard": safeguard})
    weighting = kind and make_weighting(kind, **options)
    solver = Solver(problem, model, weighting=weighting)
    if key in REFERENCE_KEYS:
        return solver, [UnavoidableWork(key == "reference_predictor")]
    return solver, [NTKCallback()] if kind in ("exact", "sketch") else []


class UnavoidableWork(Callback):
    """The reference rows: unweighted training plus the work a sketch cannot
    avoid: each condition evaluated once more after the backward pass and,
    with ``vjp`` (the predictor's), a backward pass for ``J^T g`` before."""

    def __init__(self, vjp):
        super().__init__()
        self.vjp, self._recorder, self._calls = vjp, None, None

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
        if self._recorder is not None:
            residuals = self._recorder.residuals
            params = trainable_parameters(pl_module).values()
            predictor_direction(residuals, params, sample_probe(residuals))
            self._recorder.stop()

    def on_after_backward(self, trainer, pl_module):
        with torch.enable_grad():  # PINA's operators differentiate inputs
            for _, evaluate, data in self._calls:
                evaluate(data, pl_module)
        self._calls = None


def train_row(task, key, steps, *probes, **options):
    """Train ``steps`` full-batch steps of a fresh :func:`build_solver` of
    row ``key`` with ``probes`` first; return its number of parameters."""
    solver, callbacks = build_solver(task, key, **options)
    count = sum(p.numel() for p in solver.parameters())
    callbacks = [*probes, *callbacks]
    make_trainer(solver, steps, callbacks, task["accelerator"]).train()
    del solver, callbacks
    gc.collect()
    return count


def measured_keys(settings):
    """The keys of the rows measured (all but those ``rows`` leaves out),
    in table order."""
    chosen = settings.get("rows") or CONFIG_KEYS
    return tuple(k for k in CONFIG_KEYS if k in chosen or k == "unweighted")


def config_label(key, settings):
    """:return: The table label of a row. :rtype: str"""
    return LABELS[key].format(period=settings["period"])


def measure(settings, workdir, started, studies):
    """The raw results of every worker: one per timing round and network,
    the last round's also measuring memory after its timing runs;
    ``timing`` and ``memory`` by width, ``threads``."""
    results = {"timing": {w: [] for w in settings["widths"]}, "memory": {}}
    rounds = settings["rounds"] if "time" in studies else 1
    for index, width in itertools.product(range(rounds), settings["widths"]):
        chosen = [s for s in studies if s == "time" or index == rounds - 1]
        task = dict(settings, jobs=[STUDIES[s] for s in chosen], width=width)
        envelope = harness.run_worker(dict(task, round=index), workdir)
        for study, job in zip(chosen, task["jobs"]):
            found = envelope["results"][job]
            if study == "time":
                results["timing"][width].append(found)
            else:
                results["memory"][width] = found
        results["threads"] = envelope["threads"]
        done = f"round {index + 1}, width {width}: {', '.join(task['jobs'])}"
        elapsed = time.perf_counter() - started
        print(f"[{elapsed:7.1f} s] {done} done", file=sys.stderr, flush=True)
    return results


def summarise(results, settings, studies):
    """The page's numbers: a row's time and memory side by side."""
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
    modules = {s: import_module(STUDIES[s].split(":")[0]) for s in studies}
    lines = [problem] + [m.settings_line(settings) for m in modules.values()]
    document = {"lines": lines, "parameters": {}}
    rows, targets = [], []
    for width in settings["widths"]:
        keys = measured_keys(settings)
        for key in keys:
            label = config_label(key, settings)
            rows.append(dict(width=width, key=key, label=label))
        for study in studies:
            found = modules[study].numbers(results, settings, width)
            document["parameters"][str(width)], values, checks = found
            for row in rows[-len(keys) :]:
                row[study] = values[row["key"]]
            targets += checks
    if rows:
        document["rows"] = rows
    if targets:
        document["targets"] = targets
    return document


def render_results(document, output=None):
    """The page block of a results file, its raw measurements (where it
    kept them) summarised anew by this code."""
    if "raw" in document:
        document = dict(document, **resummarise(document))
    return render(document, output)


def resummarise(document):
    """The summary of a results file's raw measurements (JSON's string keys
    back to widths)."""
    raw, settings = dict(document["raw"]), document["settings"]
    for study in ("timing", "memory"):
        raw[study] = {int(w): v for w, v in raw.get(study, {}).items()}
    studies = [s for s, k in STUDY_RAW.items() if any(raw[k].values())]
    timing = [t for rounds in raw["timing"].values() for t in rounds]
    present = {run["key"] for t in timing for run in t["runs"]}
    present.update(*(m["peaks"] for m in raw["memory"].values()))
    settings = dict(settings, rows=[k for k in CONFIG_KEYS if k in present])
    return summarise(raw, settings, studies)


def study_main(script, names, studies, default_output=None):
    """A script's ``main(argv=None)``: flags ``names``, :data:`STUDIES`
    ``studies``."""
    return functools.partial(run_script, script, names, studies, default_output)


def run_script(script, names, studies, default_output, argv=None):
    """Measure (or read ``--from-json``), write the results (``--output``'s
    name, ``.json``) and the page; return 0."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=f"The {TITLES[script]}.")

    def default(value, name):
        if name == "rows":
            return "all"
        return " ".join(map(str, value)) if isinstance(value, list) else value

    for name, text, options in SETTING_FLAGS:
        if name in names:
            text += f" (default {default(FULL[name], name)}; "
            text += f"--quick {default(QUICK[name], name)})"
            flag = "--" + name.replace("_", "-")
            parser.add_argument(flag, help=text, **{"type": int, **options})
    text = "where to train; auto picks CUDA when available (default auto)"
    devices = ("auto", "cpu", "cuda")
    parser.add_argument("--device", choices=devices, default="auto", help=text)
    text = "page to write; its results go to the same name with .json "
    text += f"(default {default_output or 'none: print only'})"
    parser.add_argument("--output", help=text + "; --quick: a temporary one")
    harness.add_run_flags(parser)
    args = parser.parse_args(argv)
    args.output = harness.output_location(args, "output", default_output)
    if args.from_json:
        document = harness.read_json(args.from_json)
    else:
        settings = dict(QUICK if args.quick else FULL)
        flags = {name: getattr(args, name, None) for name in FULL}
        settings.update({k: v for k, v in flags.items() if v is not None})
        for name in COUNTS:
            least = int(name != "seed")
            value = settings[name]
            if min(value if isinstance(value, list) else [value]) < least:
                parser.error(f"--{name.replace('_', '-')} must be >= {least}.")
        device = {"auto": "cuda" if torch.cuda.is_available() else "cpu"}
        settings["accelerator"] = device.get(args.device, args.device)
        started = time.perf_counter()
        extra = dict(device=settings["accelerator"], workers=1)
        part = harness.provenance(script, argv, args.machine_label, **extra)
        with tempfile.TemporaryDirectory() as workdir:
            results = measure(settings, workdir, started, studies)
        part["threads"] = results.pop("threads")
        document = dict(script=script, parts=[harness.finish(part, started)])
        summary = summarise(results, settings, studies)
        document.update(settings=settings, **summary, raw=results)
        if args.output is not None:
            path = os.path.splitext(args.output)[0] + ".json"
            harness.write_json(path, document)
    # a new run's summary is already this code's
    renderer = render_results if args.from_json else render
    block = renderer(document, args.output)
    if args.output is not None:
        title = f"Benchmark: {TITLES[document['script']]}"
        harness.write_page(args.output, document["script"], block, title)
    print(block)
    return 0
