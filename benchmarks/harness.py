"""Shared harness of the benchmark scripts in ``benchmarks/``.

* **Worker processes.** Every measurement runs in a fresh Python process
  (this file run with ``--worker``), with torch, OpenMP and MKL limited to
  ``--threads`` threads, so runs share no allocator or thread state. A
  worker task names its jobs as ``"module:function"`` (for example
  ``"step_time:run_timing"``); the worker imports each module from this
  directory, runs the jobs in order and returns their JSON results.
* **Probes.** :class:`StepTimer` (wall time of each training batch) and
  :class:`MemoryProbe` (peak extra tensor memory of a training run), both
  Lightning callbacks.
* **Markdown.** :func:`markdown_table`, :func:`fmt` and the report header
  (:func:`report_header`: command, date, machine, versions and a link to
  ``docs/benchmark-method.md``).
* **Settings.** The full and ``--quick`` settings of the wave-problem
  studies (:data:`FULL`, :data:`QUICK`), their flags, validation, and
  :func:`study_main`, the command line shared by ``step_time.py``,
  ``memory.py``, ``sketch_accuracy.py`` and ``overhead.py``.

The method itself (rounds, reference rows, ratios, threads) is described
once, in ``docs/benchmark-method.md``.
"""

import argparse
import datetime
import gc
import importlib
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import warnings
from importlib.metadata import PackageNotFoundError, version

import lightning
import torch
from lightning.pytorch.callbacks import Callback

#: The directory of the benchmark scripts, and the repository root.
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
#: The page describing how the benchmarks measure.
METHOD_DOC = os.path.join(ROOT, "docs", "benchmark-method.md")

#: Condition order of the ``--points`` flag.
DOMAINS = ("D", "t0", "boundary")

#: Settings of a full run and of ``--quick``; explicit flags override both.
FULL = dict(
    widths=[100, 300],
    depth=3,
    points=[300, 300, 200],
    steps=100,
    warmup=5,
    rounds=3,
    period=100,
    exact_steps=2,
    memory_steps=2,
    accuracy_width=None,  # the first width
    accuracy_checkpoints=[0, 50, 100, 200],
    accuracy_seeds=3,
    threads=1,
    seed=0,
)
QUICK = dict(
    FULL,
    widths=[20, 40],
    points=[40, 20, 20],
    steps=5,
    warmup=2,
    rounds=1,
    period=5,
    exact_steps=1,
    memory_steps=2,
    accuracy_checkpoints=[0, 5],
    accuracy_seeds=2,
)

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
#: Every setting name, in flag order.
SETTING_NAMES = tuple(name for name, _, _ in SETTING_FLAGS)


# ------------------------------------------------------------------ probes
class StepTimer(Callback):
    """
    Wall time of each training batch from ``on_train_batch_start`` to
    ``on_train_batch_end``: forward pass, NTK work, backward pass and
    optimiser step.

    :param bool synchronize: Wait for queued CUDA work at both ends.
    """

    def __init__(self, synchronize=False):
        super().__init__()
        self.synchronize = synchronize
        self.durations = []
        self._start = None

    def _now(self):
        if self.synchronize:
            torch.cuda.synchronize()
        return time.perf_counter()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        """Start the clock."""
        self._start = self._now()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        """Record the step's duration in seconds."""
        self.durations.append(self._now() - self._start)


class MemoryProbe(Callback):
    """
    Peak extra tensor memory of a training run, in bytes.

    CPU: torch's profiler records every allocation and release of the CPU
    allocator between ``on_train_start`` and ``on_train_end``; the peak of
    their running sum is the largest amount of tensor memory allocated
    during training on top of what was alive when it started (parameters and
    data). CUDA: ``max_memory_allocated`` minus ``memory_allocated`` at the
    start.

    :param bool cuda: Measure CUDA memory instead of CPU memory.
    """

    def __init__(self, cuda=False):
        super().__init__()
        self.cuda = cuda
        self.peak_bytes = None
        self._profiler = None
        self._base = 0

    def on_train_start(self, trainer, pl_module):
        """Reset the peak statistics or start the profiler."""
        gc.collect()
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self._base = torch.cuda.memory_allocated()
            return
        self._profiler = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            profile_memory=True,
        )
        self._profiler.start()

    def on_train_end(self, trainer, pl_module):
        """Read the peak."""
        if self.cuda:
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - self._base
            self.peak_bytes = max(int(peak), 0)
            return
        self._profiler.stop()
        self.peak_bytes = peak_allocated_bytes(self._profiler)


def peak_allocated_bytes(profiler):
    """
    Peak running sum of the CPU allocator events of a finished profile.

    The raw kineto events carry every allocation (positive bytes) and
    release (negative bytes). Releases of blocks allocated before profiling
    started are not reported, so the sum starts at zero and measures the
    growth above the starting level.

    :param torch.profiler.profile profiler: A stopped profiler that ran with
        ``profile_memory=True``.
    :return: The peak in bytes.
    :rtype: int
    :raises RuntimeError: If torch does not expose the raw events.
    """
    try:
        events = profiler.profiler.kineto_results.events()
    except AttributeError as error:
        raise RuntimeError(
            "This torch version does not expose the profiler's raw events "
            "(profiler.profiler.kineto_results); the CPU memory measurement "
            "needs them."
        ) from error
    allocations = sorted(
        (event.start_ns(), event.nbytes())
        for event in events
        if event.name() == "[memory]"
    )
    current = peak = 0
    for _, nbytes in allocations:
        current += nbytes
        peak = max(peak, current)
    return peak


def memory_method(accelerator):
    """
    One line on how peak extra memory is measured on ``accelerator``.

    :param str accelerator: ``"cpu"`` or ``"cuda"``.
    :return: The description (markdown).
    :rtype: str
    """
    if accelerator == "cuda":
        return (
            "`torch.cuda.max_memory_allocated()` during training minus "
            "`torch.cuda.memory_allocated()` at its start"
        )
    return (
        "peak running sum of the CPU allocator's events in torch's profiler "
        "(`profile_memory=True`) above the level at the start of training"
    )


# ----------------------------------------------------------------- workers
def resolve_job(spec):
    """
    The function a job name refers to.

    :param str spec: ``"module:function"``, the module a script in this
        directory.
    :return: The function; it takes the worker task and returns a JSON-able
        result.
    :rtype: callable
    :raises ValueError: If ``spec`` is not of that form.
    """
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"Worker jobs are 'module:function', got {spec!r}.")
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    return getattr(importlib.import_module(module), name)


def worker_main(task, result_path):
    """
    Run the jobs of one worker task and write their JSON results.

    :param dict task: ``task["jobs"]`` lists ``"module:function"`` jobs, run
        in that order in this process; the other keys are the run's settings
        (``threads`` among them).
    :param str result_path: Where to write
        ``{"results": {job: result}, "threads": torch threads}``.
    """
    # Lightning's advice on data-loader workers is irrelevant for one
    # in-memory batch per step.
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    torch.set_num_threads(task["threads"])
    jobs = [(spec, resolve_job(spec)) for spec in task["jobs"]]
    results = {spec: job(task) for spec, job in jobs}
    envelope = {"results": results, "threads": torch.get_num_threads()}
    with open(result_path, "w", encoding="utf-8") as handle:
        json.dump(envelope, handle)


def run_worker(task, workdir):
    """
    Run one worker task in a fresh process and return its result envelope.

    :param dict task: The worker task: ``jobs`` (see :func:`worker_main`),
        ``threads`` and whatever the jobs read.
    :param str workdir: A directory for the result file.
    :return: The JSON envelope written by :func:`worker_main`.
    :rtype: dict
    :raises RuntimeError: If the worker fails (its output is included).
    """
    result_path = os.path.join(workdir, f"result-{time.monotonic_ns()}.json")
    env = dict(os.environ)
    # Fix the OpenMP pool as well, so intra-op threads match --threads.
    env["OMP_NUM_THREADS"] = str(task["threads"])
    env["MKL_NUM_THREADS"] = str(task["threads"])
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        json.dumps(task),
        "--result",
        result_path,
    ]
    completed = subprocess.run(
        command, env=env, capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        tail = (completed.stdout + completed.stderr)[-4000:]
        raise RuntimeError(
            f"Worker {task['jobs']} failed (exit {completed.returncode}):\n"
            f"{tail}"
        )
    with open(result_path, encoding="utf-8") as handle:
        return json.load(handle)


# ---------------------------------------------------------------- markdown
def fmt(value, digits=2):
    """
    :param float value: A number.
    :param int digits: Decimals.
    :return: ``value`` with ``digits`` decimals.
    :rtype: str
    """
    return f"{value:.{digits}f}"


def markdown_table(header, align, rows):
    """
    A markdown table.

    :param list header: The column titles.
    :param str align: One letter per column, ``"l"`` (left) or ``"r"``
        (right, for numbers).
    :param list rows: The rows, lists of cells (converted with ``str``).
    :return: The table's lines.
    :rtype: list[str]
    :raises ValueError: If ``align`` or a row does not match the header.
    """
    if len(align) != len(header) or set(align) - {"l", "r"}:
        raise ValueError(f"align needs one l or r per column, got {align!r}.")
    rules = {"l": "---", "r": "---:"}
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(rules[a] for a in align) + "|",
    ]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"Row {row!r} does not match {header!r}.")
        lines.append("| " + " | ".join(str(cell) for cell in row) + " |")
    return lines


def machine_name():
    """:return: The CPU model (Linux) or the platform. :rtype: str"""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def package_version(distribution):
    """
    :param str distribution: An installed distribution's name.
    :return: Its version, or ``"unknown"``.
    :rtype: str
    """
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "unknown"


def method_link(output, anchor=""):
    """
    The link to ``docs/benchmark-method.md`` from a report written to
    ``output``: relative when the report lies in the repository, the
    repository path otherwise.

    :param output: The report's path, or ``None`` (printed only).
    :type output: str or None
    :param str anchor: A section anchor, without ``#``.
    :return: The link target.
    :rtype: str
    """
    target = "docs/benchmark-method.md"
    if output is not None:
        folder = os.path.dirname(os.path.abspath(output))
        if os.path.commonpath([folder, ROOT]) == ROOT:
            target = os.path.relpath(METHOD_DOC, folder).replace(os.sep, "/")
    return target + (f"#{anchor}" if anchor else "")


def report_header(title, run, settings, lines):
    """
    The top of a report: title, provenance, and the run's settings.

    :param str title: The title, without ``#``.
    :param dict run: From :func:`study_main`: ``script``, ``command``,
        ``date``, ``runtime_min``, ``threads`` and ``output``.
    :param dict settings: The resolved settings (``accelerator``).
    :param list lines: Further bullet lines (the settings of each study),
        without the leading ``- ``.
    :return: The header's lines.
    :rtype: list[str]
    """
    return [
        f"# {title}",
        "",
        f"Generated by `benchmarks/{run['script']}`; do not edit by hand. "
        "How it measures and what each row means: "
        f"[benchmark method]({method_link(run['output'])}).",
        "",
        f"- Command: `{run['command']}`",
        f"- Date: {run['date']} (run took {run['runtime_min']:.1f} min)",
        f"- Machine: {machine_name()}, {os.cpu_count()} logical CPUs, "
        f"device `{settings['accelerator']}`, torch threads {run['threads']}",
        f"- Versions: Python {platform.python_version()}, torch "
        f"{torch.__version__}, pina-mathlab "
        f"{package_version('pina-mathlab')}, lightning {lightning.__version__}",
        *(f"- {line}" for line in lines),
    ]


# ---------------------------------------------------------------- settings
def _defaults(name, names):
    """The help suffix giving a setting's full and ``--quick`` defaults."""

    def show(settings):
        value = settings[name]
        if isinstance(value, list):
            return " ".join(map(str, value))
        if value is None:  # accuracy_width
            if "widths" in names:
                return "first of --widths"
            return str(settings["widths"][0])
        return str(value)

    return f" (default {show(FULL)}; --quick {show(QUICK)})"


def parse_args(argv, description, names, default_output=None):
    """
    The command line of a wave-problem study.

    :param list argv: The arguments.
    :param str description: The ``--help`` description.
    :param names: The settings the study takes as flags (of
        :data:`SETTING_NAMES`).
    :type names: tuple[str]
    :param default_output: The default of ``--output``; ``None``: print the
        report only.
    :type default_output: str or None
    :return: The parsed command line.
    :rtype: argparse.Namespace
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny networks and few steps: a smoke run",
    )
    for name, text, options in SETTING_FLAGS:
        if name in names:
            parser.add_argument(
                "--" + name.replace("_", "-"),
                type=int,
                help=text + _defaults(name, names),
                **options,
            )
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where to train; auto picks CUDA when available (default auto)",
    )
    shown = default_output or "none: print only"
    parser.add_argument(
        "--output",
        default=default_output,
        help=f"markdown file to write (default {shown})",
    )
    return parser.parse_args(argv)


def resolve_settings(args):
    """
    The run's settings: ``--quick`` or full defaults, overridden by the
    flags the study has.

    :param argparse.Namespace args: The parsed flags.
    :return: Every setting of :data:`FULL`, with ``accuracy_width``
        resolved and ``accelerator`` added.
    :rtype: dict
    :raises ValueError: If a setting is out of range.
    """
    settings = dict(QUICK if args.quick else FULL)
    for name in FULL:
        value = getattr(args, name, None)
        if value is not None:
            settings[name] = value
    if settings["accuracy_width"] is None:
        settings["accuracy_width"] = settings["widths"][0]
    for name in (
        "steps",
        "rounds",
        "period",
        "exact_steps",
        "memory_steps",
        "accuracy_seeds",
        "threads",
        "depth",
    ):
        if settings[name] < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1.")
    if settings["warmup"] < 1:
        raise ValueError("--warmup must be >= 1 (step 0 is the warm start).")
    if len(settings["points"]) != len(DOMAINS) or min(settings["points"]) < 1:
        raise ValueError("--points needs three positive counts: D t0 boundary.")
    if min(settings["widths"]) < 1:
        raise ValueError("--widths must be positive.")
    if settings["accuracy_width"] < 1:
        raise ValueError("--accuracy-width must be >= 1.")
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


def study_main(argv, script, description, names, measure, render, **options):
    """
    The command line of a study: parse and check the settings, measure in
    worker processes, then print the markdown report and write it to
    ``--output``.

    :param argv: Command-line arguments (``sys.argv[1:]`` if ``None``).
    :type argv: list[str] or None
    :param str script: The script's file name, for the report and errors.
    :param str description: The ``--help`` description.
    :param names: The settings the study takes as flags.
    :type names: tuple[str]
    :param measure: ``measure(settings, workdir, log)`` runs the workers
        and returns the results, with the ``threads`` of the last worker.
    :param render: ``render(results, settings, run)`` returns the report;
        ``run`` as in :func:`report_header`.
    :param options: ``default_output`` for :func:`parse_args`.
    :return: The process exit code.
    :rtype: int
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv, description, names, **options)
    try:
        settings = resolve_settings(args)
    except ValueError as error:
        print(f"{script}: error: {error}", file=sys.stderr)
        return 2
    started = time.perf_counter()

    def log(message):
        elapsed = time.perf_counter() - started
        print(f"[{elapsed:7.1f} s] {message}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory() as workdir:
        results = measure(settings, workdir, log)
    run = {
        "script": script,
        "command": shlex.join(["python", f"benchmarks/{script}", *argv]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC"
        ),
        "runtime_min": (time.perf_counter() - started) / 60.0,
        "threads": results["threads"],
        "output": args.output,
    }
    document = render(results, settings, run)
    if args.output is not None:
        output_dir = os.path.dirname(os.path.abspath(args.output))
        os.makedirs(output_dir, exist_ok=True)
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(document)
    print(document)
    if args.output is not None:
        log(f"wrote {args.output}")
    return 0


def main(argv=None):
    """
    The worker entry point: ``harness.py --worker TASK --result PATH``.

    :param list argv: Command-line arguments (default ``sys.argv[1:]``).
    :return: The process exit code.
    :rtype: int
    """
    parser = argparse.ArgumentParser(
        description="Run benchmark jobs in this process (used by the "
        "benchmark scripts, not by hand)."
    )
    parser.add_argument("--worker", required=True, help="the task, JSON")
    parser.add_argument("--result", required=True, help="result JSON file")
    args = parser.parse_args(argv)
    worker_main(json.loads(args.worker), args.result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
