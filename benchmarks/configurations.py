"""The wave-problem studies: what they compare, their settings, their page.

Shared by ``step_time.py``, ``peak_memory.py``, ``sketch_accuracy.py`` and
``overhead.py`` (all three together): the table rows (:data:`CONFIGS`), the
seeded PINA solver of each row on ``AcousticWaveProblem``
(:func:`build_solver`), the callback doing only a sketch's unavoidable work
(:class:`UnavoidableWork`, the reference rows), the full and ``--quick``
settings with their flags, the command line (:func:`study_main`) and the
one renderer of their results (:func:`render`). ``docs/benchmark-method.md``
describes what each row measures.
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
from pina.problem.zoo import AcousticWaveProblem
from pina.solver import PhysicsInformedSingleModelSolver

import harness
from harness import fmt, markdown_table
from pina_ntk import NTKCallback
from pina_ntk.core.estimators import predictor_direction, sample_probe
from pina_ntk.integration.pina_adapter import trainable_parameters
from pina_ntk.integration.recording import ResidualRecorder, batch_calls
from pina_ntk.paper.experiments.settings import make_weighting
from pina_ntk.paper.experiments.training import make_trainer

#: Condition order of the ``--points`` flag.
DOMAINS = ("D", "t0", "boundary")
#: Configurations in table order: key, label, and the weighting (kind and
#: options for :func:`~pina_ntk.paper.experiments.settings.make_weighting`;
#: ``None``: unweighted, the reference rows' work is a callback's).
#: ``{period}`` is ``--period``; the per-step rows sample every step.
K1 = {"sample_every_n_steps": 1}
PARAMETER = dict(K1, estimator="parameter")
SAME_STEP = {"sample_after_backward": False}
REFERENCE = "*reference: unweighted + one more residual evaluation"
# fmt: off
CONFIGS = (
    ("unweighted", "unweighted (PINA default)", None),
    ("exact_every_step", "exact `NTKWeighting`, every step", ("exact", {})),
    ("exact_every_period", "exact `NTKWeighting`, every {period} steps",
     ("exact", {"update_every_n_steps": "{period}"})),
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
FULL.update(accuracy_seeds=3, threads=1, seed=0)
QUICK = dict(FULL, widths=[20, 40], points=[40, 20, 20], steps=5, warmup=2)
QUICK.update(rounds=1, period=5, exact_steps=1, accuracy_checkpoints=[0, 5])
QUICK.update(accuracy_seeds=2)
#: Flags of the settings: name, help text, extra argparse options.
SETTING_FLAGS = (
    ("steps", "measured steps per run", {}),
    ("warmup", "discarded steps at the start of each run", {}),
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
    ("exact_steps", "measured steps of the exact-every-step row", {}),
    ("memory_steps", "steps of the memory runs", {}),
    ("accuracy_width", "width of the accuracy runs", {}),
    (
        "accuracy_checkpoints",
        "steps where sketched and exact weights are compared",
        {"nargs": "+"},
    ),
    ("accuracy_seeds", "seeds (runs per estimator) of the accuracy study", {}),
    ("seed", "first seed: points, initial network and probes", {}),
)
SETTING_NAMES = tuple(name for name, _, _ in SETTING_FLAGS)
#: Page titles, by script.
TITLES = {
    "overhead.py": "cost and accuracy of NTK loss weights in PINA",
    "step_time.py": "time per training step of NTK loss weights in PINA",
    "peak_memory.py": "peak extra memory of NTK loss weights in PINA",
    "sketch_accuracy.py": "accuracy of the sketched NTK loss weights in PINA",
}


# ------------------------------------------------------------ training
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
    elif key not in ("unweighted", "pina_ntk"):
        callbacks.append(NTKCallback())
    return solver, callbacks


class UnavoidableWork(Callback):
    """
    The extra work of a sketch without any of pina_ntk's bookkeeping, added
    to unweighted training: the reference rows.

    After the backward pass it evaluates every condition of the step once
    more with PINA's own ``condition.evaluate``, as both estimators must.
    With ``vjp`` it also runs, before the backward pass, one backward pass
    for ``J^T g`` through the step's retained graph, as the predictor must.

    :param bool vjp: Add the predictor's backward pass.
    """

    def __init__(self, vjp=False):
        super().__init__()
        self.vjp = vjp
        self._recorder = None
        self._calls = None

    def setup(self, trainer, pl_module, stage):
        """Watch the residuals when the backward pass needs them."""
        if self.vjp:
            self._recorder = ResidualRecorder(pl_module)
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
def _defaults(name, names):
    """The help suffix giving a setting's full and ``--quick`` defaults."""

    def show(settings):
        value = settings[name]
        if isinstance(value, list):
            return " ".join(map(str, value))
        if value is None:  # accuracy_width
            return "first of --widths" if "widths" in names else "20/100"
        return str(value)

    return f" (default {show(FULL)}; --quick {show(QUICK)})"


def resolve_settings(args):
    """
    The run's settings: ``--quick`` or full defaults, overridden by flags.

    :param argparse.Namespace args: The parsed flags.
    :return: Every setting of :data:`FULL`, with ``accuracy_width``
        resolved and ``accelerator`` added.
    :rtype: dict
    :raises ValueError: If a setting is out of range.
    """
    settings = dict(QUICK if args.quick else FULL)
    for name in FULL:
        if getattr(args, name, None) is not None:
            settings[name] = getattr(args, name)
    if settings["accuracy_width"] is None:
        settings["accuracy_width"] = settings["widths"][0]
    positive = ("steps", "rounds", "period", "exact_steps", "memory_steps")
    positive += ("accuracy_seeds", "threads", "depth", "accuracy_width")
    for name in positive:
        if settings[name] < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1.")
    if settings["warmup"] < 1:
        raise ValueError("--warmup must be >= 1 (step 0 is the warm start).")
    if len(settings["points"]) != len(DOMAINS) or min(settings["points"]) < 1:
        raise ValueError("--points needs three positive counts: D t0 boundary.")
    if min(settings["widths"]) < 1:
        raise ValueError("--widths must be positive.")
    if settings["seed"] < 0:
        raise ValueError("--seed must be >= 0.")
    if min(settings["accuracy_checkpoints"]) < 0:
        raise ValueError("--accuracy-checkpoints must be steps >= 0.")
    settings["accuracy_checkpoints"] = sorted(
        set(settings["accuracy_checkpoints"])
    )
    if args.device == "auto":
        settings["accelerator"] = "cuda" if torch.cuda.is_available() else "cpu"
    else:
        settings["accelerator"] = args.device
    return settings


def problem_line(settings):
    """The page's line on the problem and networks."""
    interior, initial, boundary = settings["points"]
    entries = interior + 2 * initial + boundary  # t0: value and velocity
    return (
        "Problem: PINA's `AcousticWaveProblem`, fixed random points "
        f"{interior} / {initial} / {boundary} (`D` / `t0` / `boundary`; "
        f"{entries} residual entries), tanh networks with "
        f"{settings['depth']} hidden layers, seed {settings['seed']}"
    )


#: The studies: the module whose ``JOB`` measures (in a worker) and whose
#: ``summarise`` gives the page's numbers.
STUDIES = {
    "time": "step_time",
    "memory": "peak_memory",
    "accuracy": "sketch_accuracy",
}


def measure(settings, workdir, log, studies):
    """
    Every worker of the studies: one per timing round and network; the last
    round's also measures memory (and at the accuracy width, accuracy)
    after its timing runs, which saves process starts and changes no number
    (``docs/benchmark-method.md``).

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
    """
    The page's numbers (see :func:`render`): each study's, the time and
    memory of a row side by side, each network's targets together.
    """
    document = {"lines": [problem_line(settings)], "parameters": {}}
    targets = []
    for study in studies:
        found = importlib.import_module(STUDIES[study]).summarise(
            results, settings
        )
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
        widths = settings["widths"]
        document["targets"] = sorted(
            targets, key=lambda c: widths.index(c["width"])
        )
    return document


def study_main(argv, script, names, studies, default_output=None):
    """
    The command line of a study: measure in worker processes, write the
    results (``--output`` with the suffix ``.json``) and render the page
    from them; ``--from-json`` renders an earlier run's results.

    :param argv: Command-line arguments (``sys.argv[1:]`` if ``None``).
    :type argv: list[str] or None
    :param str script: The script's file name.
    :param names: The settings the study takes as flags.
    :type names: tuple[str]
    :param tuple studies: Keys of :data:`STUDIES`, in page order.
    :param default_output: The default page; ``None``: print only.
    :type default_output: str or None
    :return: The process exit code.
    :rtype: int
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=f"The {TITLES[script]}.")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    for name, text, options in SETTING_FLAGS:
        if name in names:
            flag = "--" + name.replace("_", "-")
            help_text = text + _defaults(name, names)
            parser.add_argument(flag, type=int, help=help_text, **options)
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
    harness.add_run_flags(parser, workers=False, combine=False)
    args = parser.parse_args(argv)
    if args.from_json:
        document = harness.read_json(args.from_json)
    else:
        try:
            settings = resolve_settings(args)
        except ValueError as error:
            print(f"{script}: error: {error}", file=sys.stderr)
            return 2
        part = harness.provenance(
            script,
            argv,
            args.machine_label,
            device=settings["accelerator"],
            workers=1,
        )
        started = time.perf_counter()

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
            harness.write_json(
                os.path.splitext(args.output)[0] + ".json", document
            )
    block = render(document, args.output)
    if args.output is not None:
        title = f"Benchmark: {TITLES[document['script']]}"
        harness.write_page(args.output, document["script"], block, title)
    print(block)
    return 0


# --------------------------------------------------------------- page
def method_link(output, anchor=""):
    """
    The link to ``docs/benchmark-method.md`` from a page at ``output``:
    relative in the repository, the repository path otherwise.
    """
    target = "docs/benchmark-method.md"
    if output is not None:
        folder = os.path.dirname(os.path.abspath(output))
        if os.path.commonpath([folder, harness.ROOT]) == harness.ROOT:
            method = os.path.join(harness.ROOT, target)
            target = os.path.relpath(method, folder).replace(os.sep, "/")
    return target + (f"#{anchor}" if anchor else "")


def weighting_table(document):
    """The table with one row per network and configuration."""
    rows = document["rows"]
    time = any("time" in row for row in rows)
    memory = any("memory" in row for row in rows)
    header = ["network", "weighting"]
    header += ["ms / step", "× unweighted", "range over rounds"] * time
    header += ["peak extra memory (MiB)", "× unweighted"] * memory
    depth = document["settings"]["depth"]
    cells = []
    for row in rows:
        count = document["parameters"][str(row["width"])]
        line = [f"{depth}×{row['width']} ({count:,} parameters)", row["label"]]
        if time:
            ms, ratio, low, high = row["time"]
            line += [fmt(ms, 1), fmt(ratio), f"{fmt(low)}–{fmt(high)}"]
        if memory:
            line += [fmt(row["memory"][0]), fmt(row["memory"][1])]
        cells.append(line)
    return (
        markdown_table(header, "ll" + "r" * (len(header) - 2), cells),
        time,
        memory,
    )


def target_table(document):
    """The targets table; the reference column only where one is known."""
    checks = document["targets"]
    with_reference = any(c.get("reference") is not None for c in checks)
    header = ["network", "quantity", "measured", "target", "verdict"]
    header += ["unavoidable work alone"] * with_reference
    rows = []
    for check in checks:
        row = [
            f"{document['settings']['depth']}×{check['width']}",
            check["label"],
            f"{fmt(check['measured'], 3)}×",
            f"≤ {check['limit']:g}×",
            "pass" if check["measured"] <= check["limit"] else "**fail**",
        ]
        if with_reference:
            reference = check.get("reference")
            row.append("—" if reference is None else f"{fmt(reference, 3)}×")
        rows.append(row)
    align = "llrrl" + "r" * with_reference
    return markdown_table(header, align, rows), with_reference


def accuracy_section(accuracy, output):
    """The accuracy section, from the page's numbers."""
    checkpoints = accuracy["checkpoints"]
    errors = [
        [label, *(fmt(v, 1) for v in values), fmt(largest, 1)]
        for label, values, largest in accuracy["errors"]
    ]
    names = accuracy["names"]
    weights = [
        [label, *(fmt(v, 3) for v in exact + sketch)]
        for label, exact, sketch in accuracy["weights"]
    ]
    link = method_link(output, "accuracy-of-the-sketched-weights")
    return [
        "## Accuracy of the sketched weights",
        "",
        "Max over conditions of |w_sketch − w_exact| / w_exact in percent, "
        "median over seeds; last column: largest value over steps and "
        f"seeds; [method]({link}).",
        "",
        *markdown_table(
            ["estimator", *(f"step {c}" for c in checkpoints), "max"],
            "l" + "r" * (len(checkpoints) + 1),
            errors,
        ),
        "",
        f"Weights at step {accuracy['step']}, seed {accuracy['seed']} (each "
        "run has its own exact reference):",
        "",
        *markdown_table(
            [
                "estimator",
                *(f"`{n}` exact" for n in names),
                *(f"`{n}` sketch" for n in names),
            ],
            "l" + "r" * (2 * len(names)),
            weights,
        ),
    ]


def render(document, output=None):
    """
    The page of a wave-problem study, from its results document alone.

    :param dict document: ``script``, ``parts``, ``settings``, ``lines``
        (the settings in words), ``parameters`` and, as measured, ``rows``
        (per network and configuration: ``time`` = [ms, ratio, low, high],
        ``memory`` = [MiB, ratio]), ``targets`` and ``accuracy``.
    :param output: The page's path (for the method links), or ``None``.
    :type output: str or None
    :return: The markdown block.
    :rtype: str
    """
    lines = [
        "How it measures and what each row means: "
        f"[benchmark method]({method_link(output)}).",
        "",
        *harness.header_lines(document["parts"][0]),
        *(f"- {line}" for line in document["lines"]),
    ]
    if "rows" in document:
        table, time_rows, memory_rows = weighting_table(document)
        links = {
            a: method_link(output, a)
            for a in ("time-per-step", "peak-extra-memory", "reference-rows")
        }
        text = []
        if time_rows:
            text.append(
                "Time: median over rounds of the per-round ratio to the same "
                "round's unweighted runs, and its range ([method]"
                f"({links['time-per-step']}))"
            )
        if memory_rows:
            text.append(
                "memory: ratio to the unweighted run of the same network "
                f"([method]({links['peak-extra-memory']}))"
            )
        if any(r["label"].startswith("*reference") for r in document["rows"]):
            text.append(
                f"rows in italics are the [reference rows]"
                f"({links['reference-rows']})"
            )
        title = {(1, 1): "Time and memory", (1, 0): "Time per step"}
        title = title.get((time_rows, memory_rows), "Peak extra memory")
        intro = "; ".join(text)
        lines += ["", f"## {title}", "", intro[0].upper() + intro[1:] + ".", ""]
        lines += table
    if document.get("targets"):
        table, with_reference = target_table(document)
        link = method_link(output, "targets")
        intro = f"[Targets]({link})"
        if with_reference:
            intro += (
                "; the last column is the ratio of the matching reference "
                "row: the unavoidable part of the measured ratio"
            )
        lines += ["", "## Targets", "", intro + ".", "", *table]
    if "accuracy" in document:
        lines += ["", *accuracy_section(document["accuracy"], output)]
    return "\n".join(lines) + "\n"
