"""Cost and accuracy of the NTK loss weightings inside PINA training.

On PINA's ``AcousticWaveProblem`` (the paper's wave equation) with tanh
networks of several widths, this script measures for each weighting

* the wall time of a training step relative to an unweighted step,
* the peak extra memory of training relative to unweighted training,
* the relative error of the sketched weights against the exact weights at
  the same parameters, along a short training run,

plus two reference rows: unweighted training with only the work a sketch
cannot avoid, done by PINA itself (one more residual evaluation; and one
backward pass for ``J^T g``), which shows how much of a sketch's ratio is
pina_ntk's own bookkeeping,

and writes the tables, the command, the machine and the targets (predictor
sketch at most 1.9x an unweighted step, parameter-space sketch at most
1.45x, peak memory at most 1.3x) to a markdown file.

Default set-up and why: point counts close to the paper's wave experiment
(300 interior points; 300 initial points carrying both initial value and
velocity, as PINA lumps them into one two-column condition; 200 boundary
points: 1100 residual entries), fixed rather than resampled so that exact
and sketched weights see the same points, a 3x100 tanh network (the issue's small net) and a 3x300 one (8.8 times the
parameters). Exact NTK traces cost one backward pass per residual entry;
on a shared two-core VM one exact step took about 5 s for 3x100, 12 s for
3x300 and 29 s for 3x500, and every round runs five of them per network
(exact every step: warm-up plus two measured steps; exact every 100 steps:
step 0 and step 100), and the last round adds a memory run of each; with
``--widths 100 500`` those rows take about 2.5 times as long as with 3x300.

Measurements run in worker processes (this script with ``--worker``), one
per round and network, so rounds do not share allocator or thread state.
Timing is interleaved: each round runs every configuration once per
network, cheap ones in a rotated order, bracketed by two unweighted runs;
the ratio of a round is taken against the unweighted runs of that round and
the reported ratio is the median over rounds. Memory (and the accuracy
study) run in the last round's workers, after their timing runs.

:Example:
    Smoke run (under a minute)::

        python benchmarks/overhead.py --quick --output /tmp/benchmarks.md

    Full run with the defaults (writes ``docs/benchmarks.md``)::

        python benchmarks/overhead.py
"""

import argparse
import datetime
import gc
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from importlib.metadata import PackageNotFoundError, version

import lightning
import torch
from lightning.pytorch.callbacks import Callback
from pina.model import FeedForward
from pina.problem.zoo import AcousticWaveProblem
from pina.solver import PhysicsInformedSingleModelSolver
from pina.weighting import NeuralTangentKernelWeighting

from pina_ntk import (
    NTKCallback,
    NTKWeighting,
    SketchNTKWeighting,
    solver_ntk_weights,
)
from pina_ntk.experiments.common import make_trainer
from pina_ntk.estimators import predictor_direction, sample_probe
from pina_ntk.residuals import (
    ResidualRecorder,
    batch_calls,
    trainable_parameters,
)

#: Configurations in table order: key, label.
CONFIGS = (
    ("unweighted", "unweighted (PINA default)"),
    ("exact_every_step", "exact `NTKWeighting`, every step"),
    ("exact_every_period", "exact `NTKWeighting`, every {period} steps"),
    ("predictor_forward", "predictor sketch, forward difference"),
    ("predictor_central", "predictor sketch, central difference"),
    ("predictor_plain", "predictor sketch, `balanced_probe=False`"),
    ("parameter", "parameter-space sketch"),
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
#: Configurations that are timed step by step (median over steps).
PER_STEP_KEYS = (
    "predictor_forward",
    "predictor_central",
    "predictor_plain",
    "parameter",
    "predictor_same_step",
    "parameter_same_step",
    "pina_ntk",
    "reference_evaluation",
    "reference_predictor",
)
#: Sketch estimators compared with the exact weights.
ACCURACY_KEYS = (
    "predictor_forward",
    "predictor_central",
    "predictor_plain",
    "parameter",
)
#: Targets of the issue: the largest allowed ratio to an unweighted step.
#: (The library defaults are judged; the same-step rows show the cost of
#: following Algorithm 3 to the letter, see sample_after_backward.)
TIME_TARGETS = {"predictor_forward": 1.9, "parameter": 1.45}
#: The reference row of each time target: the extra work its estimator
#: cannot avoid (PINA's own residual evaluation, and for the predictor the
#: backward pass for J^T g) done without any NTK bookkeeping.
TIME_REFERENCES = {
    "predictor_forward": "reference_predictor",
    "parameter": "reference_evaluation",
}
MEMORY_TARGET = 1.3
MEMORY_TARGET_KEYS = (
    "predictor_forward",
    "predictor_central",
    "predictor_plain",
    "parameter",
)
#: Condition order of the points flag.
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


# ---------------------------------------------------------------- worker side
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
    if key == "unweighted" or key in TIME_REFERENCES.values():
        return None
    if key == "exact_every_step":
        return NTKWeighting(update_every_n_steps=1, safeguard=safeguard)
    if key == "exact_every_period":
        return NTKWeighting(update_every_n_steps=period, safeguard=safeguard)
    if key == "predictor_forward":
        return SketchNTKWeighting(seed=seed, safeguard=safeguard)
    if key == "predictor_central":
        return SketchNTKWeighting(
            difference="central", seed=seed, safeguard=safeguard
        )
    if key == "predictor_plain":
        return SketchNTKWeighting(
            balanced_probe=False, seed=seed, safeguard=safeguard
        )
    if key == "parameter":
        return SketchNTKWeighting(
            estimator="parameter", seed=seed, safeguard=safeguard
        )
    if key == "predictor_same_step":
        return SketchNTKWeighting(
            seed=seed, safeguard=safeguard, sample_after_backward=False
        )
    if key == "parameter_same_step":
        return SketchNTKWeighting(
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
    if key in TIME_REFERENCES.values():
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


def timing_order(round_index):
    """
    Configuration order of one timing round: the unweighted run, the cheap
    configurations rotated by the round index, the unweighted run again,
    then the exact ones (long, and far above the noise).

    :param int round_index: The round, from 0.
    :return: Configuration keys in run order.
    :rtype: list[str]
    """
    shift = round_index % len(PER_STEP_KEYS)
    rotated = list(PER_STEP_KEYS[shift:] + PER_STEP_KEYS[:shift])
    return (
        ["unweighted"]
        + rotated
        + ["unweighted", "exact_every_period", "exact_every_step"]
    )


def steps_of(task, key):
    """
    Optimisation steps a timing run of ``key`` trains.

    :param dict task: The worker task.
    :param str key: The configuration.
    :return: Warm-up plus measured steps.
    :rtype: int
    """
    if key == "exact_every_step":
        return 1 + task["exact_steps"]
    if key == "exact_every_period":
        return task["warmup"] + period_window(task)
    return task["warmup"] + task["steps"]


def period_window(settings):
    """
    Measured steps of the ``exact_every_period`` row: a whole number of
    update periods, so exactly that many exact updates fall in the window.

    :param dict settings: With ``steps`` and ``period``.
    :return: The window length.
    :rtype: int
    """
    periods = max(1, round(settings["steps"] / settings["period"]))
    return periods * settings["period"]


def run_timing(task):
    """
    One timing round for one network width.

    :param dict task: The worker task.
    :return: ``{"runs": [{"key", "durations"}], "parameters": int}``.
    :rtype: dict
    """
    runs = []
    parameters = None
    for key in timing_order(task["round"]):
        solver, callbacks = build_solver(task, key)
        parameters = sum(p.numel() for p in solver.parameters())
        timer = StepTimer(synchronize=task["accelerator"] == "cuda")
        train(task, solver, steps_of(task, key), [timer] + callbacks)
        runs.append({"key": key, "durations": timer.durations})
        del solver, callbacks, timer
        gc.collect()
    return {"runs": runs, "parameters": parameters}


def run_memory(task):
    """
    Peak extra memory of every configuration for one network width.

    ``exact_every_step`` trains one step (already an exact step); the others
    ``memory_steps`` steps, the first of which holds the exact update or the
    sketch's warm start.

    :param dict task: The worker task.
    :return: ``{key: peak bytes}``.
    :rtype: dict
    """
    peaks = {}
    for key in CONFIG_KEYS:
        solver, callbacks = build_solver(task, key)
        probe = MemoryProbe(cuda=task["accelerator"] == "cuda")
        steps = 1 if key == "exact_every_step" else task["memory_steps"]
        train(task, solver, steps, [probe] + callbacks)
        peaks[key] = probe.peak_bytes
        del solver, callbacks, probe
        gc.collect()
    return peaks


class ExactReference(Callback):
    """
    At chosen steps: the exact weights at the parameters of that step
    (before its update) and the weights the sketch used in that same step.

    :param checkpoints: Step indices, from 0.
    :type checkpoints: list[int]
    :param ntk_callback: The run's :class:`~pina_ntk.NTKCallback`.
    """

    def __init__(self, checkpoints, ntk_callback):
        super().__init__()
        self.checkpoints = set(checkpoints)
        self.ntk_callback = ntk_callback
        self.step = 0
        self.exact = {}
        self.sketch = {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        """Exact weights at ``theta_t`` on checkpoint steps."""
        if self.step in self.checkpoints:
            # With one full batch per step the solver's stored points are
            # the step's points, and the optimiser has not moved theta_t.
            self.exact[self.step] = solver_ntk_weights(pl_module, "exact")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        """The sketch's weights of the same step."""
        if self.step in self.checkpoints:
            self.sketch[self.step] = dict(self.ntk_callback.weights)
        self.step += 1


def run_accuracy(task):
    """
    Sketched against exact weights along training runs, one per estimator
    and seed (seeds ``seed, seed + 1, ...``: points, network and probes).

    The safeguard is off so that the weights are the estimator's own.

    :param dict task: The worker task (``width`` is the accuracy width).
    :return: ``{key: [{"exact": {step: weights}, "sketch": {...}}, ...]}``,
        one record per seed.
    :rtype: dict
    """
    checkpoints = task["accuracy_checkpoints"]
    result = {key: [] for key in ACCURACY_KEYS}
    for offset in range(task["accuracy_seeds"]):
        seeded = dict(task, seed=task["seed"] + offset)
        for key in ACCURACY_KEYS:
            solver, callbacks = build_solver(seeded, key, safeguard=None)
            reference = ExactReference(checkpoints, callbacks[0])
            steps = max(checkpoints) + 1
            train(seeded, solver, steps, [reference] + callbacks)
            result[key].append(
                {
                    "exact": {str(t): w for t, w in reference.exact.items()},
                    "sketch": {str(t): w for t, w in reference.sketch.items()},
                }
            )
            del solver, callbacks, reference
            gc.collect()
    return result


#: Jobs a worker process can run.
JOBS = {"timing": run_timing, "memory": run_memory, "accuracy": run_accuracy}


def worker_main(task, result_path):
    """
    Run the jobs of one worker task and write their JSON results.

    :param dict task: ``task["jobs"]`` lists ``"timing"``, ``"memory"``
        and/or ``"accuracy"``, run in that order in this process; the other
        keys are the run's settings.
    :param str result_path: Where to write the results.
    :raises ValueError: If a job is unknown.
    """
    # Lightning's advice on data-loader workers is irrelevant for one
    # in-memory batch per step.
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    torch.set_num_threads(task["threads"])
    unknown = [job for job in task["jobs"] if job not in JOBS]
    if unknown:
        raise ValueError(f"Unknown worker jobs {unknown}.")
    results = {job: JOBS[job](task) for job in task["jobs"]}
    envelope = {"results": results, "threads": torch.get_num_threads()}
    with open(result_path, "w", encoding="utf-8") as handle:
        json.dump(envelope, handle)


def _version(distribution):
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "unknown"


# ---------------------------------------------------------------- parent side
def run_worker(task, workdir):
    """
    Run this script as a worker process and return its result envelope.

    :param dict task: The worker task.
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


def round_ratios(runs, settings):
    """
    Per-step statistics of one round and their ratios to its unweighted runs.

    Per-step rows: median over the measured steps (warm-up discarded).
    ``exact_every_period``: mean over a window of whole update periods, so
    the exact updates are amortised; its ratio is taken against the mean of
    the unweighted steps. The unweighted reference pools the measured steps
    of both unweighted runs of the round.

    :param list runs: ``{"key", "durations"}`` dicts of one round.
    :param dict settings: The resolved settings.
    :return: ``{key: (seconds per step, ratio)}``.
    :rtype: dict
    """
    warmup = settings["warmup"]
    baseline = [
        d
        for run in runs
        if run["key"] == "unweighted"
        for d in run["durations"][warmup:]
    ]
    base_median = statistics.median(baseline)
    base_mean = statistics.fmean(baseline)
    result = {"unweighted": (base_median, 1.0)}
    for run in runs:
        key, durations = run["key"], run["durations"]
        if key == "unweighted":
            continue
        if key == "exact_every_period":
            window = durations[warmup : warmup + period_window(settings)]
            value = statistics.fmean(window)
            result[key] = (value, value / base_mean)
            continue
        skip = 1 if key == "exact_every_step" else warmup
        value = statistics.median(durations[skip:])
        result[key] = (value, value / base_median)
    return result


def summarise_timing(rounds, settings):
    """
    Median over rounds of each configuration's time and ratio.

    :param list rounds: The timing results of one width, one per round.
    :param dict settings: The resolved settings.
    :return: ``{key: {"seconds", "ratio", "low", "high"}}``.
    :rtype: dict
    """
    per_round = [round_ratios(r["runs"], settings) for r in rounds]
    summary = {}
    for key in CONFIG_KEYS:
        seconds = [r[key][0] for r in per_round]
        ratios = [r[key][1] for r in per_round]
        summary[key] = {
            "seconds": statistics.median(seconds),
            "ratio": statistics.median(ratios),
            "low": min(ratios),
            "high": max(ratios),
        }
    return summary


def weight_error(estimate, reference):
    """
    ``max_c |estimate_c - reference_c| / reference_c``.

    :param dict estimate: ``{condition: weight}``.
    :param dict reference: ``{condition: weight}``, same conditions.
    :rtype: float
    """
    return max(
        abs(estimate[c] - reference[c]) / reference[c] for c in reference
    )


def summarise_accuracy(accuracy):
    """
    Relative weight errors of each estimator, per checkpoint and seed.

    :param dict accuracy: The accuracy worker's result.
    :return: ``{key: {step: [error per seed]}}`` with ``step`` an int.
    :rtype: dict
    """
    errors = {}
    for key, records in accuracy.items():
        errors[key] = {}
        for record in records:
            for step, exact in record["exact"].items():
                error = weight_error(record["sketch"][step], exact)
                errors[key].setdefault(int(step), []).append(error)
    return errors


def exact_drift(accuracy, key=ACCURACY_KEYS[0]):
    """
    How far the exact weights move from step 0 along the runs of ``key``:
    ``max_c |w_exact(t) - w_exact(0)| / w_exact(0)``.

    :param dict accuracy: The accuracy worker's result.
    :param str key: The runs whose exact weights are used.
    :return: ``{step: [change per seed]}`` with ``step`` an int.
    :rtype: dict
    """
    drift = {}
    for record in accuracy[key]:
        exact = {int(t): w for t, w in record["exact"].items()}
        start = exact[min(exact)]
        for step, weights in exact.items():
            drift.setdefault(step, []).append(weight_error(weights, start))
    return drift


def config_label(key, settings):
    """:return: The table label of a configuration. :rtype: str"""
    label = dict(CONFIGS)[key]
    return label.format(period=settings["period"])


def _fmt(value, digits=2):
    return f"{value:.{digits}f}"


def target_checks(timing, memory, settings):
    """
    The targets of the issue, checked per network on the ratios rounded to
    the three decimals the report shows.

    :param dict timing: ``{width: summarise_timing(...)}``.
    :param dict memory: ``{width: {key: peak bytes}}``.
    :param dict settings: The resolved settings (for the labels).
    :return: ``[(width, description, measured, limit, passed,
        reference)]``, ``reference`` the ratio of the time target's
        reference row (``None`` for memory).
    :rtype: list[tuple]
    """
    wanted = [("time", key, limit) for key, limit in TIME_TARGETS.items()]
    wanted += [("memory", key, MEMORY_TARGET) for key in MEMORY_TARGET_KEYS]
    checks = []
    for width in timing:
        for quantity, key, limit in wanted:
            if quantity == "time":
                value = round(timing[width][key]["ratio"], 3)
            else:
                value = round(memory_ratio(memory[width], key), 3)
            reference = None
            if quantity == "time":
                reference_key = TIME_REFERENCES[key]
                reference = round(timing[width][reference_key]["ratio"], 3)
            label = f"{quantity}, {config_label(key, settings)}"
            checks.append(
                (width, label, value, limit, value <= limit, reference)
            )
    return checks


def memory_ratio(peaks, key):
    """:return: Peak extra memory of ``key`` over the unweighted one."""
    if peaks["unweighted"] <= 0:
        return math.inf
    return peaks[key] / peaks["unweighted"]


def render_markdown(report):
    """
    The benchmark report as markdown.

    :param dict report: Everything measured, see :func:`main`.
    :return: The document.
    :rtype: str
    """
    s = report["settings"]
    env = report["environment"]
    lines = [
        "# Benchmark: cost and accuracy of NTK loss weights in PINA",
        "",
        "Generated by `benchmarks/overhead.py`; do not edit by hand.",
        "",
        f"- Command: `{report['command']}`",
        f"- Date: {report['date']} (run took {report['runtime_min']:.1f} min)",
        f"- Machine: {env['machine']}, {env['nproc']} logical CPUs, "
        f"device `{s['accelerator']}`, torch threads {env['threads']}",
        f"- Versions: Python {env['python']}, torch {env['torch']}, "
        f"pina-mathlab {env['pina']}, lightning {env['lightning']}",
        "",
        "## Set-up",
        "",
        "PINA's `AcousticWaveProblem` (c = 2), fixed random points: "
        f"{s['points'][0]} in the interior (`D`), {s['points'][1]} at t = 0 "
        f"(`t0`, value and velocity: two residual columns), {s['points'][2]} "
        f"on the boundary; {report['entries']} residual entries. "
        f"Fully connected tanh networks with {s['depth']} hidden layers, "
        "`PhysicsInformedSingleModelSolver` with PINA's default optimiser "
        "(Adam, lr 1e-3) and mean-reduced MSE loss, one full batch per step, "
        f"seed {s['seed']}. The pina_ntk weightings use their defaults "
        "(sketches: alpha = 1e-3, 32 warm-start samples, automatic step "
        "size, default safeguard; a step's evaluations at displaced "
        "parameters run after its backward pass, when the training graph "
        "is freed, and its sample enters the next step's weights; the "
        "warm start runs before step 0's backward pass, in chunks of 128 "
        "points). The two `sample_after_backward=False` rows follow "
        "Algorithm 3 to the letter: every sample enters its own step's "
        "weights, so its evaluations run while the training graph is alive, "
        "in chunks of 128 points to bound their memory. PINA's "
        "`NeuralTangentKernelWeighting` "
        "uses its defaults (alpha = 0.5, updated every step). The larger "
        "network is kept moderate because an exact update costs one "
        "backward pass per residual entry (see the exact rows); "
        "`--widths` changes it.",
        "",
        "## Time and memory",
        "",
        "**Time per step** is measured inside PINA's training loop by a "
        "Lightning callback from `on_train_batch_start` to "
        "`on_train_batch_end`: forward pass, NTK work, backward pass and "
        "optimiser step. Each of "
        f"{s['rounds']} round(s) runs, in one fresh worker process per "
        "network, every configuration once (cheap configurations in an order "
        "rotated from round to round, bracketed by two unweighted runs). "
        "Per-step rows: median "
        f"over {s['steps']} steps after {s['warmup']} warm-up steps "
        "(discarded: they include the sketch's 32-sample warm start). "
        f"Exact every step: median over {s['exact_steps']} step(s) after "
        "one warm-up step. Exact every "
        f"{s['period']} steps: **mean** over {report['window']} steps, "
        "whole update periods so the exact updates are amortised, against "
        "the mean unweighted step. Each ratio is taken against the "
        "unweighted runs of the same round; the table gives the median over "
        "rounds and the range (min–max) of the per-round ratios.",
        "",
        f"**Peak extra memory**: {report['memory_method']}",
        "",
        "| network | weighting | ms / step | × unweighted | range over "
        "rounds | peak extra memory (MiB) | × unweighted |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for width, summary in report["timing"].items():
        peaks = report["memory"][width]
        net = (
            f"{s['depth']}×{width} ({report['parameters'][width]:,} "
            "parameters)"
        )
        for key in CONFIG_KEYS:
            row = summary[key]
            lines.append(
                f"| {net} | {config_label(key, s)} | "
                f"{_fmt(1e3 * row['seconds'], 1)} | "
                f"{_fmt(row['ratio'])} | "
                f"{_fmt(row['low'])}–{_fmt(row['high'])} | "
                f"{_fmt(peaks[key] / 2**20, 2)} | "
                f"{_fmt(memory_ratio(peaks, key))} |"
            )
    lines += [
        "",
        "## Targets",
        "",
        "Time targets: the predictor sketch with forward differences (the "
        "paper's Algorithm 2 with the default balanced probe) and the "
        "parameter-space sketch; memory target: all four sketches. Ratios "
        "as in the table above. "
        "The last column is the ratio of the matching reference row, the "
        "unavoidable part of the measured ratio: the parameter-space "
        "sketch's one extra residual evaluation, and the predictor's extra "
        "evaluation and backward pass, as PINA itself runs them, without "
        "pina_ntk's bookkeeping; the difference is that bookkeeping "
        "(probes, displacement through `torch.func.functional_call`, "
        "moving average, weight formula, safeguard).",
        "",
        "| network | quantity | measured | target | verdict | "
        "unavoidable work alone |",
        "|---|---|---:|---:|---|---:|",
    ]
    for width, what, value, limit, passed, reference in report["checks"]:
        verdict = "pass" if passed else "**fail**"
        floor = "—" if reference is None else f"{_fmt(reference, 3)}×"
        lines.append(
            f"| {s['depth']}×{width} | {what} | {_fmt(value, 3)}× | "
            f"≤ {limit}× | {verdict} | {floor} |"
        )
    lines += [
        "",
        "## Accuracy of the sketched weights",
        "",
        f"Training runs on the {s['depth']}×{report['accuracy_width']} "
        f"network, one per estimator and seed ({s['accuracy_seeds']} seeds "
        f"from {s['seed']}: points, initial network and probes), defaults as "
        "above but with the safeguard off, so the weights are the "
        "estimator's own. At each listed step the exact weights are computed "
        "at the parameters of that step of the *same* run "
        "(`pina_ntk.solver_ntk_weights(solver)`) "
        "and compared with the weights the sketch used in that step (its "
        "moving average). Entries: max over conditions of "
        "|w_sketch − w_exact| / w_exact in percent, median over seeds; the "
        "last column is the largest value over steps and seeds.",
        "",
    ]
    checkpoints = s["accuracy_checkpoints"]
    lines.append(
        "| estimator | "
        + " | ".join(f"step {c}" for c in checkpoints)
        + " | max |"
    )
    lines.append("|---|" + "---:|" * (len(checkpoints) + 1))
    rows = [
        (config_label(key, s), errors)
        for key, errors in report["accuracy_errors"].items()
    ]
    rows.append(
        (
            "*for scale: exact weights' own change since step 0*",
            report["exact_drift"],
        )
    )
    for label, values in rows:
        cells = [
            _fmt(100 * statistics.median(values[c]), 1) for c in checkpoints
        ]
        largest = max(max(per_seed) for per_seed in values.values())
        cells.append(_fmt(100 * largest, 1))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    first_seed = {key: runs[0] for key, runs in report["accuracy"].items()}
    last = str(checkpoints[-1])
    names = list(first_seed[ACCURACY_KEYS[0]]["exact"][last])
    lines += [
        "",
        "The last row is max over conditions of "
        "|w_exact(t) − w_exact(0)| / w_exact(0) in the forward-predictor "
        "runs. With alpha = 1e-3 the moving average still mostly holds the "
        "warm start after a few hundred steps, so on a short run the error "
        "at later steps is largely this lag; at step 0 it is the Monte "
        "Carlo error of the 32-sample warm start alone.",
        "",
        f"Weights at step {last}, seed {s['seed']} (each run has its own "
        "exact reference):",
        "",
        "| estimator | "
        + " | ".join(f"`{n}` exact" for n in names)
        + " | "
        + " | ".join(f"`{n}` sketch" for n in names)
        + " |",
        "|---|" + "---:|" * (2 * len(names)),
    ]
    for key in ACCURACY_KEYS:
        record = first_seed[key]
        exact = [_fmt(record["exact"][last][n], 3) for n in names]
        sketch = [_fmt(record["sketch"][last][n], 3) for n in names]
        lines.append(
            f"| {config_label(key, s)} | " + " | ".join(exact + sketch) + " |"
        )
    lines.append("")
    return "\n".join(lines)


def memory_method(accelerator):
    """:return: The description of the memory measurement. :rtype: str"""
    if accelerator == "cuda":
        return (
            "`torch.cuda.max_memory_allocated()` during training minus "
            "`torch.cuda.memory_allocated()` at its start (peak stats reset "
            "at the start): the extra GPU tensor memory of training."
        )
    return (
        "the peak, over the whole training run, of the tensor memory "
        "allocated through torch's CPU allocator on top of what was alive "
        "when training started (parameters, data), read from torch's "
        "profiler (`profile_memory=True`, running sum of its allocation "
        "and release events). It counts activations, autograd graphs, "
        "gradients, optimiser state and the NTK work; it does not count "
        "Python objects or the process's resident size (which is dominated "
        "by the imported libraries and would make every ratio close to 1). "
        "One run per configuration: the first step holds the exact update "
        "or the sketch's warm start; exact every step trains one step, the "
        "others {steps}. Tensor allocations are deterministic, so no rounds "
        "are needed."
    )


def resolve_settings(args):
    """
    The run's settings: ``--quick`` or full defaults, overridden by flags.

    :param argparse.Namespace args: The parsed flags.
    :return: The settings.
    :rtype: dict
    :raises ValueError: If a setting is out of range.
    """
    settings = dict(QUICK if args.quick else FULL)
    for name in FULL:
        value = getattr(args, name)
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


def _defaults(name):
    """The help suffix giving a setting's full and ``--quick`` defaults."""

    def show(value):
        if isinstance(value, list):
            return " ".join(map(str, value))
        return "first of --widths" if value is None else str(value)

    return f" (default {show(FULL[name])}; --quick {show(QUICK[name])})"


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


def parse_args(argv):
    """:return: The parsed command line. :rtype: argparse.Namespace"""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny networks and few steps: a smoke run of under a minute",
    )
    for name, text, options in SETTING_FLAGS:
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=int,
            help=text + _defaults(name),
            **options,
        )
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where to train; auto picks CUDA when available (default auto)",
    )
    parser.add_argument(
        "--output",
        default="docs/benchmarks.md",
        help="markdown file to write (default docs/benchmarks.md)",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


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


def main(argv=None):
    """
    Run the benchmark and write the markdown report.

    :param list argv: Command-line arguments (default ``sys.argv[1:]``).
    :return: The process exit code.
    :rtype: int
    """
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker is not None:
        worker_main(json.loads(args.worker), args.result)
        return 0
    try:
        settings = resolve_settings(args)
    except ValueError as error:
        print(f"overhead.py: error: {error}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    task_base = dict(settings)

    def log(message):
        elapsed = time.perf_counter() - started
        print(f"[{elapsed:7.1f} s] {message}", file=sys.stderr, flush=True)

    timing = {w: [] for w in settings["widths"]}
    memory, parameters, accuracy, envelope = {}, {}, None, None
    last_round = settings["rounds"] - 1
    with tempfile.TemporaryDirectory() as workdir:
        for round_index in range(settings["rounds"]):
            for width in settings["widths"]:
                # The last round's worker also measures memory (and
                # accuracy), after its timing runs: one process start less.
                jobs = ["timing"]
                if round_index == last_round:
                    jobs.append("memory")
                    if width == settings["accuracy_width"]:
                        jobs.append("accuracy")
                task = dict(
                    task_base, jobs=jobs, width=width, round=round_index
                )
                envelope = run_worker(task, workdir)
                results = envelope["results"]
                timing[width].append(results["timing"])
                parameters[width] = results["timing"]["parameters"]
                if "memory" in results:
                    memory[width] = results["memory"]
                accuracy = results.get("accuracy", accuracy)
                log(
                    f"round {round_index + 1}/{settings['rounds']}, width "
                    f"{width}: {', '.join(jobs)} done"
                )
        if accuracy is None:
            task = dict(
                task_base,
                jobs=["accuracy"],
                width=settings["accuracy_width"],
                round=0,
            )
            accuracy = run_worker(task, workdir)["results"]["accuracy"]
            log("accuracy done")

    summaries = {w: summarise_timing(timing[w], settings) for w in timing}
    report = {
        "settings": settings,
        "command": "python benchmarks/overhead.py " + shlex.join(argv),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC"
        ),
        "runtime_min": (time.perf_counter() - started) / 60.0,
        "environment": {
            "machine": machine_name(),
            "nproc": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "pina": _version("pina-mathlab"),
            "lightning": lightning.__version__,
            "threads": envelope["threads"],
        },
        "entries": settings["points"][0]
        + 2 * settings["points"][1]
        + settings["points"][2],
        "window": period_window(settings),
        "memory_method": memory_method(settings["accelerator"]).format(
            steps=settings["memory_steps"]
        ),
        "timing": summaries,
        "memory": memory,
        "parameters": parameters,
        "checks": target_checks(summaries, memory, settings),
        "accuracy_width": settings["accuracy_width"],
        "accuracy": accuracy,
        "accuracy_errors": summarise_accuracy(accuracy),
        "exact_drift": exact_drift(accuracy),
    }
    document = render_markdown(report)
    output_dir = os.path.dirname(os.path.abspath(args.output))
    os.makedirs(output_dir, exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as handle:
        handle.write(document)
    print(document)
    log(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
