r"""Which loss weighting reaches the lowest error for a time budget?

Trains the same network, points and optimiser on each problem with each loss
weighting and records the relative L2 error on a fixed evaluation grid every
few steps, together with the training time spent so far (the evaluations'
own time excluded). Writes a report (``weightings.md``: per problem, the
error at equal steps and at equal wall time, the cost per step against
unweighted training, failures as measured) with one error-against-time
figure per problem (``figures/weightings/<problem>.png``) and every number
(``weightings.json``, rewritten after each finished run so that an
interrupted run keeps what it measured).

Problems: every problem of ``pina.problem.zoo`` with an analytical solution
(Poisson, Helmholtz, diffusion-reaction, acoustic wave, advection) and
pina-ntk's wave problem (the paper's and the tutorial's, one condition per
loss term). Weightings: none (plain sum), PINA's
``NeuralTangentKernelWeighting`` and ``SelfAdaptiveWeighting``, pina-ntk's
``NTKWeighting`` and ``SketchNTKWeighting`` with both estimators; on the
problems of :data:`SMOOTHING_PROBLEMS` also exact weights updated every 500
steps with and without a moving average of the traces (the report's
section *Smoothing exact weights*).

Each job, one (problem, weighting, seed) run, trains in a worker process
with one torch thread; ``--workers`` of them run at once, longest first.
Every run records ``--machine-label``; ``--combine`` merges runs made on
several machines (each problem on one machine: its equal-time comparison
is within the problem) into one report that says which ran where.

    # the full run, docs/weightings.md (about 92 min on 2 cores)
    python benchmarks/weightings.py
    # a smoke run (about 20 s, mostly imports)
    python benchmarks/weightings.py --quick --output-dir /tmp/weightings
    # the per-step costs behind FULL_RUNS
    python benchmarks/weightings.py --calibrate 300 --workers 1
    # split over two machines, then combined into docs/
    python benchmarks/weightings.py --problems poisson helmholtz \
        --workers 16 --machine-label "A" --output-dir /tmp/part-a
    python benchmarks/weightings.py --problems diffusion_reaction \
        acoustic_wave advection wave --machine-label "B" \
        --output-dir /tmp/part-b
    python benchmarks/weightings.py --combine /tmp/part-a /tmp/part-b
"""

import argparse
import concurrent.futures
import copy
import datetime
import importlib
import inspect
import json
import math
import multiprocessing
import os
import platform
import shlex
import signal
import statistics
import sys
import time
import traceback

import harness

#: The repository root and the default output folder.
ROOT = harness.ROOT
DEFAULT_OUTPUT_DIR = os.path.join(ROOT, "docs")

#: Problems: the class (``"module:name"``) and the fresh points per
#: condition and step. Zoo counts are about 1000 residual entries a step,
#: as the wave problem's (the paper's); ``None`` takes the class's
#: ``PAPER_POINTS``.
PROBLEMS = {
    "poisson": (
        "pina.problem.zoo:Poisson2DSquareProblem",
        {"D": 800, "boundary": 200},
    ),
    "helmholtz": (
        "pina.problem.zoo:HelmholtzProblem",
        {"D": 800, "boundary": 200},
    ),
    "diffusion_reaction": (
        "pina.problem.zoo:DiffusionReactionProblem",
        {"D": 600, "t0": 200, "boundary": 200},
    ),
    # t0 holds two residual columns (value and velocity): 400 entries, as
    # the wave problem's initial_value and initial_velocity together
    "acoustic_wave": (
        "pina.problem.zoo:AcousticWaveProblem",
        {"D": 300, "t0": 200, "boundary": 200},
    ),
    "advection": (
        "pina.problem.zoo:AdvectionProblem",
        {"D": 800, "t0": 200},
    ),
    "wave": ("pina_ntk.paper.problems:WaveProblem", None),
}

#: Steps between updates of the two spaced weightings,
#: ``NTKWeighting(update_every_n_steps=...)`` and
#: ``SelfAdaptiveWeighting(update_every_n_epochs=...)`` (see the report's
#: set-up section for why).
UPDATE_EVERY = 100

#: ``exact_500``'s spacing in units of the settings' ``update_every``:
#: 500 steps in the full run, 25 in ``--quick``.
SPACED_FACTOR = 5
#: ``exact_500_smoothed``'s moving-average rate of the exact traces per
#: step: an update every 500 steps folds its traces in with rate
#: ``1 - (1 - 1e-3)^500 = 0.39``.
SMOOTHING_ALPHA = 1e-3

#: Weightings: key, label in the report (``{every}``: the settings'
#: ``update_every``; ``{slow}``: ``SPACED_FACTOR`` times it).
WEIGHTINGS = {
    "none": "none (plain sum)",
    "pina_ntk": "PINA `NeuralTangentKernelWeighting()`",
    "pina_self_adaptive": "PINA `SelfAdaptiveWeighting"
    "(update_every_n_epochs={every})`",
    "exact": "`NTKWeighting(update_every_n_steps={every})`",
    "sketch_parameter": '`SketchNTKWeighting(estimator="parameter")`',
    "sketch_predictor": '`SketchNTKWeighting(estimator="predictor")`',
    "exact_500": "`NTKWeighting(update_every_n_steps={slow})`",
    "exact_500_smoothed": "`NTKWeighting(update_every_n_steps={slow}, "
    "alpha={alpha:g})`",
}
#: The smoothing study's two weightings, and the problems they run on by
#: default (an explicit ``--weightings`` runs them on every problem).
SMOOTHING_WEIGHTINGS = ("exact_500", "exact_500_smoothed")
SMOOTHING_PROBLEMS = ("wave", "helmholtz", "poisson")
#: The columns of the report's smoothing table.
SMOOTHING_COMPARED = (
    "exact_500",
    "exact_500_smoothed",
    "exact",
    "sketch_parameter",
    "sketch_predictor",
)

#: Settings of every problem and weighting: a tanh MLP on inputs scaled to
#: [-1, 1] (``ScaledMLP``, no Fourier features), Adam with a learning rate
#: decaying by ``lr_decay`` every ``lr_decay_steps`` steps (smoothly, per
#: step: the schedule depends on the step only, so a run cut at a time
#: budget is the start of a longer run), the error on a ``grid`` x ``grid``
#: grid of the input box ``records`` times per run.
FULL = dict(
    width=64,
    depth=3,
    fourier_features=0,
    fourier_scale=1.0,
    lr=1e-3,
    lr_decay=0.9,
    lr_decay_steps=1000,
    grid=101,
    records=50,
    update_every=UPDATE_EVERY,
    point_scale=1.0,
)
#: ``--quick``: a tiny network, few points and steps (a smoke test).
QUICK = dict(
    FULL,
    width=8,
    depth=2,
    grid=11,
    records=2,
    update_every=5,
    point_scale=0.03,
)
#: The network and optimiser settings of the wave tutorial (random Fourier
#: features into a wider MLP, its learning-rate schedule), read from
#: :class:`~pina_ntk.paper.experiments.wave.WaveSettings`.
TUTORIAL_NETWORK = (
    "width",
    "depth",
    "fourier_features",
    "fourier_scale",
    "lr",
    "lr_decay",
    "lr_decay_steps",
)
#: Problems whose runs depart from :data:`FULL`: ``wave`` trains the wave
#: tutorial's network, without which no weighting learnt it in 2000 steps
#: of the first, reduced run (relative L2 0.57-1.0 for all weightings),
#: so its column compared nothing. ``acoustic_wave``, the same equation in
#: PINA's zoo, keeps the plain MLP as a PINA user would start.
TUTORIAL_NETWORK_PROBLEMS = ("wave",)


def problem_settings(problem, settings):
    """
    The settings of a problem's runs: ``settings`` (:data:`FULL` or
    :data:`QUICK`) with the wave tutorial's network on
    :data:`TUTORIAL_NETWORK_PROBLEMS` (in ``--quick`` only its Fourier
    embedding, on the tiny network).

    :param str problem: A key of :data:`PROBLEMS`.
    :param dict settings: :data:`FULL` or :data:`QUICK`.
    :rtype: dict
    """
    if problem not in TUTORIAL_NETWORK_PROBLEMS:
        return dict(settings)
    from pina_ntk.paper.experiments.wave import WaveSettings

    tutorial = WaveSettings()
    names = TUTORIAL_NETWORK
    if settings == QUICK:
        names = ("fourier_features", "fourier_scale")
    return dict(settings, **{name: getattr(tutorial, name) for name in names})


QUICK_STEPS = 10
QUICK_SEEDS = 1
QUICK_PROBLEMS = ("poisson", "wave")

#: Per problem, the steps of every run and the seeds per weighting of the
#: full run. Sized with ``--calibrate 300 --workers 1`` (one run of 300
#: steps per problem and weighting, 1 torch thread, the machine's other
#: core busy with another training process as the second worker's would
#: be): the milliseconds per step in :data:`MS_PER_STEP`, which include the
#: step-0 work (warm start, first update) spread over the 300 steps. On the
#: five zoo problems the first six weightings together cost 85-165 ms a
#: step per problem, and the smoothing study's two add about 43 ms on each
#: of Poisson and Helmholtz, 716 ms in all: 4000 steps x 3 seeds. ``wave``
#: trains the tutorial's wider network with Fourier features
#: (``--calibrate 200 --workers 2``: 263 ms a step for its eight
#: weightings), so 2 seeds. In all 4000 x (3 x 0.716 + 2 x 0.263) s / 2
#: workers = 89 min of training, about 92 min with each run's set-up and
#: evaluations (a few seconds a run).
FULL_RUNS = {problem: (4000, 3) for problem in PROBLEMS}
FULL_RUNS["wave"] = (4000, 2)


def _with_spaced_exact(costs):
    """
    A problem's :data:`MS_PER_STEP` with the smoothing study's weightings:
    unweighted training plus one exact update every ``SPACED_FACTOR``
    times ``exact``'s spacing, so ``exact``'s update cost over
    ``SPACED_FACTOR`` (the moving average costs nothing measurable).

    :param dict costs: ``{weighting: ms}`` of the first six weightings.
    :rtype: dict
    """
    spaced = costs["none"] + (costs["exact"] - costs["none"]) / SPACED_FACTOR
    return dict(
        costs, **{name: round(spaced, 1) for name in SMOOTHING_WEIGHTINGS}
    )


#: Measured milliseconds per step (``--calibrate 300``, see
#: :data:`FULL_RUNS`; the smoothing study's from ``exact``'s, see
#: :func:`_with_spaced_exact`): they order the jobs longest first and
#: estimate the run's duration.
MS_PER_STEP = {
    problem: _with_spaced_exact(dict(zip(WEIGHTINGS, costs)))
    for problem, costs in {
        # none, PINA NTK, PINA self-adaptive, exact, sketch parameter,
        # sketch predictor
        "poisson": (14.6, 23.5, 13.3, 51.6, 21.1, 29.2),
        "helmholtz": (13.0, 19.3, 20.0, 58.1, 25.1, 29.0),
        "diffusion_reaction": (12.3, 20.1, 14.6, 30.8, 18.5, 22.7),
        "acoustic_wave": (13.0, 15.9, 13.2, 24.2, 17.6, 22.0),
        "advection": (8.0, 11.8, 9.5, 25.2, 12.8, 17.7),
        # the tutorial's network, --calibrate 200 --workers 2
        "wave": (26.3, 36.4, 25.7, 50.6, 31.0, 30.7),
    }.items()
}
#: Seconds per run beyond its training steps (Lightning's set-up, the
#: evaluations), for the duration estimate.
RUN_OVERHEAD_S = 3.0


# ----------------------------------------------------------------- workers
def problem_class(name):
    """
    The class of a problem of :data:`PROBLEMS`.

    :param str name: The problem's key.
    :rtype: type
    """
    module, _, attribute = PROBLEMS[name][0].partition(":")
    return getattr(importlib.import_module(module), attribute)


def point_counts(name, scale=1.0):
    """
    Fresh points per condition and step.

    :param str name: The problem's key.
    :param float scale: Factor on every count (``--quick``), at least 4.
    :return: ``{condition: points}``.
    :rtype: dict
    """
    counts = PROBLEMS[name][1] or problem_class(name).PAPER_POINTS
    return {c: max(4, round(n * scale)) for c, n in counts.items()}


def fresh_problem(cls):
    """
    A new instance of a problem class, with conditions of its own.

    PINA's zoo problems keep their conditions in a class-level dict, which
    their ``__init__`` extends and into which the trainer writes its points;
    two runs in one worker process would share it. A subclass with a deep
    copy of the (never instantiated, so pristine) class dict keeps them
    apart. Problems with per-instance conditions are built as they are.

    :param type cls: The problem class.
    :return: The problem.
    """
    if isinstance(cls.__dict__.get("conditions"), dict):
        cls = type(
            cls.__name__,
            (cls,),
            {
                "conditions": copy.deepcopy(cls.conditions),
                "domains": dict(cls.domains),
            },
        )
    return cls()


def problem_box(problem):
    """
    The input box of a problem, in ``input_variables`` order.

    :param problem: A PINA problem.
    :return: ``(lower, upper)`` lists.
    :rtype: tuple[list, list]
    """
    from pina_ntk.paper.experiments.models import input_box

    if hasattr(problem, "temporal_domain"):
        return input_box(problem)
    # input_box reads a temporal domain, which stationary problems lack
    ranges = problem.spatial_domain.range
    lower = [float(ranges[v][0]) for v in problem.input_variables]
    upper = [float(ranges[v][1]) for v in problem.input_variables]
    return lower, upper


def make_weighting(name, update_every, seed):
    """
    A fresh weighting object.

    :param str name: A key of :data:`WEIGHTINGS`.
    :param int update_every: Steps between updates of the spaced ones
        (``SPACED_FACTOR`` times it for the smoothing study's).
    :param int seed: The sketches' probe seed.
    :return: The weighting, ``None`` for ``"none"``.
    """
    from pina.weighting import (
        NeuralTangentKernelWeighting,
        SelfAdaptiveWeighting,
    )

    from pina_ntk import NTKWeighting, SketchNTKWeighting

    if name == "none":
        return None
    if name == "pina_ntk":
        return NeuralTangentKernelWeighting()
    if name == "pina_self_adaptive":
        return SelfAdaptiveWeighting(update_every_n_epochs=update_every)
    if name == "exact":
        return NTKWeighting(update_every_n_steps=update_every)
    if name in SMOOTHING_WEIGHTINGS:
        return NTKWeighting(
            update_every_n_steps=SPACED_FACTOR * update_every,
            alpha=SMOOTHING_ALPHA if name == "exact_500_smoothed" else 1.0,
        )
    estimator = name.split("_", 1)[1]
    return SketchNTKWeighting(estimator=estimator, seed=seed)


def describe_weighting(weighting):
    """
    The class of a weighting object and the values of its constructor's
    options, JSON-serialisable (objects as ``"<class name>"``).

    :param weighting: The weighting or ``None``.
    :rtype: dict
    """
    if weighting is None:
        return {"class": None}
    cls = type(weighting)
    found = {"class": f"{cls.__module__}.{cls.__qualname__}"}
    for name in inspect.signature(cls).parameters:
        value = getattr(weighting, name, None)
        if isinstance(value, tuple):
            value = list(value)
        elif not isinstance(value, (int, float, str, bool, type(None))):
            value = f"<{type(value).__name__}>"
        found[name] = value
    if "SketchNTK" in cls.__name__:
        # weightings from before the option sampled every step
        found["sample_every_n_steps"] = getattr(
            weighting, "sample_every_n_steps", 1
        )
    return found


def current_weights(solver):
    """
    The condition weights a solver's weighting applies now.

    Every weighting's ``last_saved_weights()`` (PINA's method, which
    pina-ntk's weightings override with their current weights): PINA's
    ``NeuralTangentKernelWeighting`` also has a ``weights`` attribute, but
    it stays ``{}``.

    :param solver: A PINA solver.
    :return: ``{condition: float}``.
    :rtype: dict
    """
    saved = getattr(solver.weighting, "last_saved_weights", None)
    if saved is None:
        return {}
    return {str(c): float(w) for c, w in saved().items()}


def _failure_watch():
    """The Lightning callback that stops a run at its first failure."""
    from lightning.pytorch.callbacks import Callback

    class FailureWatch(Callback):
        """
        Stops training at the first non-finite loss or weight, recording it
        (Lightning would otherwise train on with NaN to the last step).
        """

        def __init__(self):
            self.failure = None
            self.failed_at = None

        def on_train_batch_end(
            self, trainer, pl_module, outputs, batch, batch_idx
        ):
            step = trainer.global_step
            loss = outputs["loss"] if isinstance(outputs, dict) else outputs
            loss = math.nan if loss is None else float(loss)
            weights = current_weights(pl_module)
            bad = {c: w for c, w in weights.items() if not math.isfinite(w)}
            if not math.isfinite(loss):
                self.failure = f"non-finite loss ({loss}) at step {step}"
            elif bad:
                self.failure = f"non-finite weights {bad} at step {step}"
            else:
                return
            self.failed_at = step
            trainer.should_stop = True

    return FailureWatch()


def run_job(job):
    """
    Train one PINN and return its record (a worker's job).

    A run that raises is recorded with the exception and what it measured
    before; one whose loss or weights turn non-finite stops there and is
    recorded as failed.

    :param dict job: ``problem``, ``weighting``, ``seed``, ``steps``,
        ``counts`` and the settings of :data:`FULL`.
    :return: The record: the job, ``status`` (``"ok"`` or ``"failed"``),
        ``failure``, ``history`` (``steps``, ``seconds``, ``errors``, from
        step 0), ``train_seconds``, ``ms_per_step``, ``final_error``,
        ``final_weights``, ``weighting_options``, ``torch_threads``.
    :rtype: dict
    """
    import torch

    # one intra-op thread per worker: the jobs share the machine's cores
    torch.set_num_threads(1)
    record = dict(job, status="ok", failure=None)
    record["history"] = {"steps": [], "seconds": [], "errors": []}
    record["final_weights"] = {}
    try:
        _train(job, record)
    except Exception as error:  # recorded, not hidden: see the report
        record["failure"] = f"raised {type(error).__name__}: {error}"
        record["traceback"] = traceback.format_exc()[-3000:]
    history = record["history"]
    if record["failure"] is None and not all(
        math.isfinite(e) for e in history["errors"]
    ):
        record["failure"] = "non-finite error on the evaluation grid"
    done = history["steps"][-1] if history["steps"] else 0
    if record["failure"] is None and done != job["steps"]:
        record["failure"] = f"stopped at step {done} of {job['steps']}"
    if record["failure"] is not None:
        record["status"] = "failed"
    seconds = history["seconds"][-1] if history["seconds"] else 0.0
    record["steps_done"] = done
    record["train_seconds"] = seconds
    record["ms_per_step"] = 1e3 * seconds / done if done else None
    record["final_error"] = history["errors"][-1] if done else None
    record["torch_threads"] = torch.get_num_threads()
    return record


def _train(job, record):
    """Build and train one PINN, filling ``record`` as it goes."""
    import lightning
    import torch
    from pina.optim import TorchOptimizer, TorchScheduler
    from pina.solver import PhysicsInformedSingleModelSolver

    from pina_ntk.integration.resampling import (
        ResampleCallback,
        discretise_conditions,
    )
    from pina_ntk.paper.experiments.models import ScaledMLP
    from pina_ntk.paper.experiments.outputs import (
        grid_points,
        relative_error_fn,
    )
    from pina_ntk.paper.experiments.training import (
        ErrorHistory,
        make_trainer,
    )

    # the evaluation grid and the exact solution on it, before seeding:
    # they are the same for every run of a problem
    problem = fresh_problem(problem_class(job["problem"]))
    lower, upper = problem_box(problem)
    axes = [
        torch.linspace(low, high, job["grid"])
        for low, high in zip(lower, upper)
    ]
    points = grid_points(problem.input_variables, axes)
    reference = torch.Tensor.as_subclass(problem.solution(points), torch.Tensor)
    error_fn = relative_error_fn(points, reference)

    lightning.seed_everything(job["seed"], verbose=False)
    counts = job["counts"]
    discretise_conditions(problem, counts)
    model = ScaledMLP(
        lower,
        upper,
        len(problem.output_variables),
        job["width"],
        job["depth"],
        fourier_features=job.get("fourier_features", 0),
        fourier_scale=job.get("fourier_scale", 1.0),
    )
    weighting = make_weighting(
        job["weighting"], job["update_every"], job["seed"]
    )
    record["weighting_options"] = describe_weighting(weighting)
    gamma = job["lr_decay"] ** (1.0 / job["lr_decay_steps"])
    solver = PhysicsInformedSingleModelSolver(
        problem,
        model,
        optimizer=TorchOptimizer(torch.optim.Adam, lr=job["lr"]),
        scheduler=TorchScheduler(
            torch.optim.lr_scheduler.ExponentialLR, gamma=gamma
        ),
        weighting=weighting,
    )
    history = record["history"]
    # the untrained network's error, at 0 s: every run has a point at or
    # before any time budget
    history["steps"].append(0)
    history["seconds"].append(0.0)
    history["errors"].append(float(error_fn(solver)))
    solver.train()  # error_fn left it in evaluation mode
    every = max(1, job["steps"] // job["records"])
    watch = _failure_watch()
    errors = ErrorHistory(every, error_fn)
    callbacks = [watch, ResampleCallback(1, counts), errors]
    try:
        with _quiet():
            trainer = make_trainer(solver, job["steps"], callbacks)
            trainer.train()
    finally:
        for key, values in errors.as_dict().items():
            history[key] += values
        record["failure"] = watch.failure
        record["failed_at_step"] = watch.failed_at
        try:
            record["final_weights"] = current_weights(solver)
        except Exception:  # a failed run may leave no weights to read
            pass


def _quiet():
    # the experiments' silencing, and a notice that does not apply here (one
    # in-memory batch per step needs no data-loading workers)
    from pina_ntk.paper.experiments.training import quiet_lightning

    return quiet_lightning(".*does not have many workers.*")


def _ignore_interrupts():
    # Ctrl-C is the parent's to handle: it keeps the finished runs and stops
    # the workers. Lightning would catch it in a worker and end the run
    # early as if it had finished.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# ------------------------------------------------------------------ driver
def default_weightings(problem):
    """
    The weightings a problem runs without ``--weightings``: all, the
    smoothing study's on :data:`SMOOTHING_PROBLEMS` only.

    :param str problem: The problem's key.
    :rtype: list[str]
    """
    return [
        w
        for w in WEIGHTINGS
        if w not in SMOOTHING_WEIGHTINGS or problem in SMOOTHING_PROBLEMS
    ]


def plan_jobs(problems, weightings_of, settings, steps_of, seeds_of):
    """
    Every job of the run, longest first.

    :param list problems: Problem keys.
    :param callable weightings_of: ``problem -> weighting keys``.
    :param dict settings: :data:`FULL` or :data:`QUICK`.
    :param callable steps_of: ``problem -> steps``.
    :param callable seeds_of: ``problem -> seeds``.
    :return: The jobs.
    :rtype: list[dict]
    """
    jobs = []
    for problem in problems:
        counts = point_counts(problem, settings["point_scale"])
        own = problem_settings(problem, settings)
        for weighting in weightings_of(problem):
            for seed in range(seeds_of(problem)):
                jobs.append(
                    dict(
                        own,
                        problem=problem,
                        weighting=weighting,
                        seed=seed,
                        steps=steps_of(problem),
                        counts=counts,
                    )
                )
    jobs.sort(key=estimated_seconds, reverse=True)
    return jobs


def estimated_seconds(job):
    """
    A job's duration from :data:`MS_PER_STEP` (1 ms a step where
    unmeasured) and :data:`RUN_OVERHEAD_S`.

    :param dict job: The job.
    :rtype: float
    """
    ms = MS_PER_STEP.get(job["problem"], {}).get(job["weighting"], 1.0)
    return job["steps"] * ms / 1e3 + RUN_OVERHEAD_S


def job_key(job):
    """:return: ``(problem, weighting, seed)`` of a job. :rtype: tuple"""
    return job["problem"], job["weighting"], job["seed"]


def write_json(path, data):
    """Write ``data`` to ``path`` atomically (a reader never sees half)."""
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1)
    os.replace(partial, path)


def run_jobs(jobs, workers, on_record, log):
    """
    Run jobs in ``workers`` processes, calling ``on_record`` as each ends.

    On ``KeyboardInterrupt`` the jobs not started are cancelled and the
    running ones stopped (their runs are not recorded), then it is raised.

    :param list jobs: The jobs, in start order.
    :param int workers: Processes at once.
    :param callable on_record: Called with each record.
    :param callable log: Progress messages.
    """
    # one thread in the OpenMP and MKL pools too: set before the workers
    # import torch (they inherit the environment)
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    # spawned, not forked: a fork would inherit the parent's torch state
    pool = concurrent.futures.ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_ignore_interrupts,
    )
    futures = {pool.submit(run_job, job): job for job in jobs}
    try:
        finished = concurrent.futures.as_completed(futures)
        for done, future in enumerate(finished, 1):
            job = futures[future]
            try:
                record = future.result()
            except Exception as error:  # the worker process itself died
                record = dict(
                    job,
                    status="failed",
                    failure=f"worker died: {type(error).__name__}: {error}",
                    history={"steps": [], "seconds": [], "errors": []},
                    final_weights={},
                    final_error=None,
                    ms_per_step=None,
                    train_seconds=None,
                )
            on_record(record)
            error = record["final_error"]
            shown = "—" if error is None else f"{error:.3g}"
            log(
                f"{done}/{len(jobs)} {job['problem']} {job['weighting']} "
                f"seed {job['seed']}: {record['status']}, error {shown}, "
                f"{record['train_seconds'] or 0:.0f} s"
            )
    except KeyboardInterrupt:
        log("interrupted: stopping the workers; finished runs are kept")
        # the executor has no public way to stop running jobs; its worker
        # processes are ours to end
        workers_alive = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for process in workers_alive:
            process.terminate()
        raise
    pool.shutdown()


# ---------------------------------------------------------------- analysis
def error_at(record, budget):
    """
    The error a run had reached at a training-time budget: the last
    recorded error at or before ``budget`` seconds.

    :param dict record: A run's record.
    :param float budget: Seconds.
    :return: The error (``nan`` for a run that failed before the budget).
    :rtype: float
    """
    history = record["history"]
    found = math.nan
    for seconds, error in zip(history["seconds"], history["errors"]):
        if seconds > budget:
            break
        found = error
    if record["status"] != "ok":
        stopped = history["seconds"][-1] if history["seconds"] else 0.0
        if stopped <= budget:
            return math.nan  # it failed before the budget
    return found


def summary(values):
    """
    Median and range of the finite values, and how many were not.

    :param list values: Floats (``nan`` for failed runs).
    :return: ``(median, low, high, failed)``; ``None`` for the first three
        without a finite value.
    :rtype: tuple
    """
    finite = [v for v in values if v is not None and math.isfinite(v)]
    failed = len(values) - len(finite)
    if not finite:
        return None, None, None, failed
    return statistics.median(finite), min(finite), max(finite), failed


def error_cell(values):
    """A table cell: ``median (low–high)``, with failed runs counted."""
    median, low, high, failed = summary(values)
    if median is None:
        return f"**failed** ({failed}/{len(values)})"
    cell = f"{median:.2e}"
    if len(values) - failed > 1:
        cell += f" ({low:.2e}–{high:.2e})"
    if failed:
        cell += f", **{failed}/{len(values)} failed**"
    return cell


def analyse(records, problem, weightings):
    """
    The numbers of one problem's table.

    :param list records: Every record of the run.
    :param str problem: The problem.
    :param list weightings: The weightings, in table order.
    :return: ``budget`` (seconds: the smallest median final training time
        over weightings) and, per weighting, ``runs``, ``final``
        (errors at the last step), ``at_budget``, ``ms_per_step`` (median),
        ``cost_ratio`` (against ``none``), ``steps``.
    :rtype: dict
    """
    rows = {}
    for weighting in weightings:
        runs = sorted(
            (
                r
                for r in records
                if r["problem"] == problem and r["weighting"] == weighting
            ),
            key=lambda r: r["seed"],
        )
        if not runs:
            continue
        ok = [r for r in runs if r["status"] == "ok"]
        ms = [r["ms_per_step"] for r in (ok or runs) if r["ms_per_step"]]
        times = [r["train_seconds"] for r in ok]
        rows[weighting] = dict(
            runs=runs,
            final=[
                r["final_error"] if r["status"] == "ok" else math.nan
                for r in runs
            ],
            ms_per_step=statistics.median(ms) if ms else None,
            time=statistics.median(times) if times else None,
            steps=runs[0]["steps"],
        )
    times = [row["time"] for row in rows.values() if row["time"]]
    budget = min(times) if times else None
    base = rows.get("none", {}).get("ms_per_step")
    for row in rows.values():
        row["at_budget"] = [
            error_at(r, budget) if budget is not None else math.nan
            for r in row["runs"]
        ]
        ms = row["ms_per_step"]
        row["cost_ratio"] = ms / base if ms and base else None
    return {"budget": budget, "rows": rows}


def options_text(records, weighting, names):
    """
    Some options a weighting ran with, as recorded by its first run.

    :param list records: The runs.
    :param str weighting: The weighting's key.
    :param tuple names: The options to show.
    :return: ``name = value`` pairs, or ``"not run"``.
    :rtype: str
    """
    for record in records:
        options = record.get("weighting_options")
        if record["weighting"] == weighting and options:
            return ", ".join(
                f"`{name}={_shown(options[name])}`"
                for name in names
                if name in options
            )
    return "not run"


def _shown(value):
    """An option's value as in code; objects as ``<class name>``."""
    if isinstance(value, str) and value.startswith("<"):
        return value
    return repr(value)


#: The options of pina-ntk's weightings the report names (all are in the
#: JSON).
EXACT_SHOWN = ("alpha", "safeguard", "chunk_size")
SKETCH_SHOWN = (
    "alpha",
    "sample_every_n_steps",
    "warmup_samples",
    "sample_after_backward",
    "safeguard",
)
#: The sketches' options the smoothing section names.
SKETCH_ALPHA_SHOWN = ("alpha", "sample_every_n_steps")


def label(weighting, update_every):
    """The report's label of a weighting, with its actual spacing."""
    return WEIGHTINGS[weighting].format(
        every=update_every,
        slow=SPACED_FACTOR * update_every,
        alpha=SMOOTHING_ALPHA,
    )


def failure_notes(runs):
    """Seed-by-seed failures and weights that left finite values."""
    notes = []
    for run in runs:
        if run["status"] != "ok":
            notes.append(f"seed {run['seed']}: {run['failure']}")
        elif run["final_error"] >= run["history"]["errors"][0]:
            notes.append(
                f"seed {run['seed']}: final error above the untrained "
                f"network's ({run['history']['errors'][0]:.2e})"
            )
    return notes


def weights_cell(runs):
    """Range of the final weights over conditions and seeds."""
    values = [w for r in runs for w in r.get("final_weights", {}).values()]
    if not values:
        return "—"
    finite = [w for w in values if math.isfinite(w)]
    cell = f"{min(finite):.2g}–{max(finite):.2g}" if finite else ""
    if len(finite) < len(values):
        cell += " **non-finite**"
    return cell.strip()


# ----------------------------------------------------------------- figures
def make_figure(problem, analysis, update_every, path):
    """
    Error against training time on a log scale, one colour per weighting:
    thin lines are the seeds, the thick line the median over seeds at each
    recorded step (median error against median time); the dotted line is
    the time budget.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    for index, (weighting, row) in enumerate(analysis["rows"].items()):
        colour = f"C{index}"
        for run in row["runs"]:
            history = run["history"]
            ax.plot(
                history["seconds"],
                history["errors"],
                color=colour,
                lw=0.7,
                alpha=0.35,
            )
        ok = [r["history"] for r in row["runs"] if r["status"] == "ok"]
        if ok:
            length = min(len(h["errors"]) for h in ok)
            seconds = [
                statistics.median(h["seconds"][i] for h in ok)
                for i in range(length)
            ]
            errors = [
                statistics.median(h["errors"][i] for h in ok)
                for i in range(length)
            ]
            ax.plot(seconds, errors, color=colour, lw=2.0)
        ax.plot(
            [],
            [],
            color=colour,
            lw=2.0,
            label=_plain(label(weighting, update_every)),
        )
    if analysis["budget"]:
        ax.axvline(
            analysis["budget"], color="0.4", ls=":", lw=1.0, label="time budget"
        )
    ax.set_yscale("log")
    ax.set_xlabel("training time (s, evaluations excluded)")
    ax.set_ylabel("relative L2 error")
    ax.set_title(f"{problem}: error against training time")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def short(value):
    """An error in two significant digits, as the summary shows it."""
    if value >= 10:
        return f"{value:.0f}"
    if 1 <= value < 10:
        return f"{value:.1f}"
    if 0.1 <= value < 1:
        return f"{value:.2f}"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def summary_section(records, problems, weightings, every, parts):
    """
    The report's summary: the median error of every problem and
    weighting, at equal steps and at equal training time, the lowest of
    each problem in bold.

    :param list records: Every record of the run.
    :param list problems: The problems, in column order.
    :param list weightings: The weightings, in row order.
    :param int every: The settings' ``update_every``.
    :param list parts: :func:`parts_of` the report.
    :return: Markdown lines.
    :rtype: list[str]
    """
    analyses = {p: analyse(records, p, weightings) for p in problems}
    problems = [p for p in problems if analyses[p]["rows"]]
    mixed = [p for p in problems if len(origins(records, p, parts)) > 1]
    lines = [
        "## Summary",
        "",
        "Median relative L2 over seeds (failed runs counted in brackets; "
        "— where the weighting was not run); per problem the lowest in "
        "bold. The sections below give ranges, costs and weights.",
        "",
    ]
    for title, key in (
        ("After the same number of steps", "final"),
        ("After the same training time (each problem's time budget)", None),
    ):
        # {(problem, weighting): (median, failed runs, runs)}
        cells = {}
        for problem in problems:
            if key is None and (
                problem in mixed or analyses[problem]["budget"] is None
            ):
                continue  # not compared at equal time
            for weighting, row in analyses[problem]["rows"].items():
                values = row["final"] if key else row["at_budget"]
                median, _, _, failed = summary(values)
                cells[problem, weighting] = (median, failed, len(values))
        # the lowest median per problem, as shown: ties are all bold
        best = {}
        for (problem, _), (median, _, _) in cells.items():
            if median is not None:
                best[problem] = min(best.get(problem, median), median)
        table = []
        for weighting in weightings:
            if not any((p, weighting) in cells for p in problems):
                continue
            row = [label(weighting, every)]
            for problem in problems:
                if (problem, weighting) not in cells:
                    row.append("—")
                    continue
                median, failed, runs = cells[problem, weighting]
                text = "failed" if median is None else short(median)
                if median is not None and text == short(best[problem]):
                    text = f"**{text}**"
                if failed:
                    text += f" ({failed}/{runs} failed)"
                row.append(text)
            table.append(row)
        header = ["weighting"] + problems
        if key is None:
            budgets = [
                (
                    "—"
                    if p in mixed or analyses[p]["budget"] is None
                    else f"{analyses[p]['budget']:.0f} s"
                )
                for p in problems
            ]
            table.insert(0, ["*time budget*"] + budgets)
        steps = sorted(
            {
                next(iter(analyses[p]["rows"].values()))["steps"]
                for p in problems
            }
        )
        lines += [
            f"{title}"
            + (f" ({', '.join(map(str, steps))} steps)" if key else "")
            + ":",
            "",
            *harness.markdown_table(header, "l" + "r" * len(problems), table),
            "",
        ]
    if mixed:
        lines += [
            f"Not compared at equal time: {', '.join(mixed)} (runs on "
            "several machines).",
            "",
        ]
    # the smoothing study's two weightings do the same work per step: their
    # cost difference is the timing noise under each equal-time column
    twins = []
    for problem in problems:
        rows = analyses[problem]["rows"]
        costs = [
            rows.get(w, {}).get("ms_per_step") for w in SMOOTHING_WEIGHTINGS
        ]
        if all(costs):
            twins.append(f"{problem} {costs[0]:.1f} and {costs[1]:.1f} ms")
    if twins:
        lines += [
            "Timing noise: the equal-time table rests on each run's own "
            "wall time, measured while another run shared the machine. "
            f"{label(SMOOTHING_WEIGHTINGS[0], every)} and "
            f"{label(SMOOTHING_WEIGHTINGS[1], every)} do the same work per "
            "step (a moving average costs nothing measurable), yet their "
            f"median steps took {'; '.join(twins)}: differences of that "
            "size in *cost per step* are noise, not cost.",
            "",
        ]
    return lines


def network_text(settings):
    """
    The network and optimiser of a run's settings, in words.

    :param dict settings: :data:`FULL`, :data:`QUICK` or a run's record.
    :rtype: str
    """
    features = settings.get("fourier_features", 0)
    embedding = (
        f"{features} random Fourier features (scale "
        f"{settings.get('fourier_scale', 1.0):g}) into "
        if features
        else ""
    )
    return (
        f"{embedding}a tanh MLP with {settings['depth']} hidden layers of "
        f"{settings['width']}{'' if features else ', no Fourier features'}; "
        f"Adam, learning rate {settings['lr']:g}, multiplied by "
        f"{settings['lr_decay']:g} every {settings['lr_decay_steps']} steps "
        "(smoothly, per step)"
    )


def _plain(text):
    """A label without markdown code marks, for the figure."""
    return text.replace("`", "")


# ------------------------------------------------------------------ report
def render(data, output_dir):
    """
    The markdown report, writing the figures on the way.

    :param dict data: The JSON document (``meta`` and ``runs``).
    :param str output_dir: Where the report goes (figures under
        ``figures/weightings/``).
    :return: The report.
    :rtype: str
    """
    meta = data["meta"]
    records = data["runs"]
    every = meta["settings"]["update_every"]
    weightings = list(meta["weightings"])
    figures = os.path.join(output_dir, "figures", "weightings")
    os.makedirs(figures, exist_ok=True)
    settings = meta["settings"]
    parts = parts_of(meta)
    runs_line = (
        f"- Runs: {len(records)} of {meta['planned_runs']} planned "
        f"({sum(r['status'] != 'ok' for r in records)} failed"
        + (
            f"; {meta['kept_runs']} kept from an earlier run by `--resume`, "
            "whose times are not in the total"
            + (" above" if len(parts) == 1 else "s below")
            if meta.get("kept_runs")
            else ""
        )
        + (
            "; **interrupted**: the missing runs were not measured"
            if meta.get("interrupted")
            else ""
        )
        + ")"
    )
    lines = [
        "# Loss weightings: error against training time",
        "",
        "Generated by `benchmarks/weightings.py`; do not edit by hand. "
        "Every number is in `weightings.json` next to this page.",
        "",
    ]
    if len(parts) == 1:
        part = parts[0]
        lines += [
            f"- Command: `{part['command']}`",
            f"- Started {part['started']}, ended {part.get('ended') or '—'}; "
            f"total {_minutes(part.get('duration_min'))}",
            f"- Machine: {machine_text(part)}",
            f"- Versions: {part['versions']}",
            runs_line,
            "",
        ]
    else:
        lines += [
            f"- Combined from {len(parts)} runs by `{meta['command']}` "
            f"({meta['started']}); each run's command, machine and duration "
            "are in the set-up section",
            runs_line,
            "",
        ]
    lines += summary_section(
        records, meta["problems"], weightings, every, parts
    )
    lines += [
        "## Set-up",
        "",
    ]
    if len(parts) > 1:
        lines += [
            "The runs were made on several machines, each problem on one "
            "(its equal-time comparison is within the problem):",
            "",
            *where_text(records, meta["problems"], parts),
            "",
            "The runs combined:",
            "",
        ]
        for index, part in enumerate(parts, 1):
            lines.append(
                f"{index}. `{part['command']}`: "
                f"{', '.join(part.get('problems') or [])}; "
                f"{part.get('runs', '?')} runs of "
                f"{part.get('planned_runs', '?')} planned"
                + (", **interrupted**" if part.get("interrupted") else "")
                + f". Machine: {machine_text(part)}. Started "
                f"{part['started']}, ended {part.get('ended') or '—'}; total "
                f"{_minutes(part.get('duration_min'))}. Versions: "
                f"{part['versions']}."
            )
        lines.append("")
    lines += [
        "Every run of a problem trains the same network from the same "
        "seeded initialisation on the same fresh random points each step "
        "(PINA's `random` sampling of each condition's domain; the counts "
        "below), with the same optimiser; only the loss weighting differs. "
        "The network and optimiser, unless a problem's section says "
        f"otherwise: {network_text(settings)}. The network is pina-ntk's "
        "`ScaledMLP` (inputs mapped from the problem's box to [-1, 1], "
        "Xavier-normal weights). One full batch per step (PINA's `PhysicsInformedSingleModelSolver`, "
        "mean-squared residuals). Seeds 0, 1, ... set the initialisation, "
        "the points and the sketches' probes.",
        "",
        "The error: relative L2 of the network's output against the "
        f"problem's analytical `solution` on a {settings['grid']}×"
        f"{settings['grid']} grid of the input box, after every 1/"
        f"{settings['records']} of the steps and before the first, with "
        "the training time spent so far (each run's own wall time inside "
        "PINA's training loop; the evaluations' time excluded).",
        "",
        "The weightings:",
        "",
        f"- {label('none', every)}: PINA's default, `weighting=None`.",
        f"- {label('pina_ntk', every)}: PINA's own NTK weighting at its "
        "defaults: alpha = 0.5, updated every epoch (= every step here), "
        "`w_c <- alpha w_c + (1 - alpha) |grad L_c| / sum_k |grad L_k|` "
        "from the gradient norms of the condition losses `L_c` (one "
        "backward pass per condition per update).",
        f"- {label('pina_self_adaptive', every)}: PINA's gradient-norm "
        "balancing, `w_c = sum_k |grad L_k| / |grad L_c|`, without a "
        f"moving average, updated every {every} steps. Not every step: "
        "with fresh points at every step an unsmoothed every-step update "
        "follows each batch's noise, and the gradient-norm weights of Wang "
        "et al.'s expert's guide (arXiv:2308.08468), which its reference "
        "builds on, are recomputed every 1000 steps and smoothed. "
        f"{every} steps gives tens of updates per run here, the same "
        "spacing as the exact NTK weights below, and a small cost (one "
        "backward pass per condition per update).",
        f"- {label('exact', every)}: pina-ntk's exact NTK trace weights, "
        "otherwise at the class defaults "
        f"({options_text(records, 'exact', EXACT_SHOWN)}). An update "
        "costs one "
        "backward pass per residual entry, hence the spacing; the *cost "
        "per step* column shows its share of the training.",
        f"- {label('sketch_parameter', every)} and "
        f"{label('sketch_predictor', every)}: pina-ntk's sketched weights "
        "at the class defaults "
        f"({options_text(records, 'sketch_parameter', SKETCH_SHOWN)}; "
        "predictor: "
        f"{options_text(records, 'sketch_predictor', SKETCH_SHOWN)}), with "
        "`seed=` the "
        "run's seed.",
        *smoothing_bullets(records, weightings, every),
        "",
        "*final weights*: the range, over conditions and seeds, of the "
        "weights applied at the last step (`last_saved_weights()` of the "
        "solver's weighting).",
        "",
        "Per problem: the error of each weighting after the same number "
        "of steps, and at the same training time: the *time budget* is the "
        "smallest, over weightings, of the median (over seeds) training "
        "time of the full run; a run's error at the budget is the last one "
        "it recorded at or before it. Cells give the median over seeds "
        "and, in brackets, the smallest and largest. A run whose loss or "
        "weights turned non-finite stopped there, and one that raised, are "
        "counted as failed (they do not enter the medians); the notes give "
        "each failure's message. *cost per step* is the median training "
        "time per step against `none`'s.",
        "",
    ]
    for problem in meta["problems"]:
        analysis = analyse(records, problem, weightings)
        if not analysis["rows"]:
            continue
        rows = analysis["rows"]
        any_row = next(iter(rows.values()))
        counts = any_row["runs"][0]["counts"]
        path = os.path.join(figures, f"{problem}.png")
        make_figure(problem, analysis, every, path)
        budget = analysis["budget"]
        budget_text = "—" if budget is None else f"{budget:.0f} s"
        if budget is not None and budget < 10:
            budget_text = f"{budget:.2f} s"
        lines += [
            f"## {problem}",
            "",
            f"`{PROBLEMS[problem][0]}`; points per step: "
            + ", ".join(f"{c} {n}" for c, n in counts.items())
            + f"; {any_row['steps']} steps, "
            f"{len(any_row['runs'])} seed(s); time budget {budget_text}. "
            + origin_text(origins(records, problem, parts)),
            "",
        ]
        own = any_row["runs"][0]
        if any(own.get(k) != settings.get(k) for k in TUTORIAL_NETWORK):
            lines += [f"Network of this problem: {network_text(own)}.", ""]
        if problem in PROBLEM_NOTES:
            lines += [PROBLEM_NOTES[problem], ""]
        table = []
        for weighting, row in rows.items():
            ms = row["ms_per_step"]
            ratio = row["cost_ratio"]
            table.append(
                [
                    label(weighting, every),
                    error_cell(row["final"]),
                    error_cell(row["at_budget"]),
                    "—" if ms is None else f"{ms:.1f}",
                    "—" if ratio is None else f"{ratio:.2f}×",
                    weights_cell(row["runs"]),
                ]
            )
        lines += harness.markdown_table(
            [
                "weighting",
                f"rel. L2 at step {any_row['steps']}",
                f"rel. L2 at {budget_text}",
                "ms/step",
                "cost per step",
                "final weights",
            ],
            "lrrrrr",
            table,
        )
        notes = [
            f"- {label(w, every)}, {note}"
            for w, row in rows.items()
            for note in failure_notes(row["runs"])
        ]
        if notes:
            lines += ["", "Failures and notes:", "", *notes]
        relative = os.path.relpath(path, output_dir).replace(os.sep, "/")
        lines += ["", f"![{problem}: error against time]({relative})", ""]
    lines += smoothing_section(records, meta["problems"], every)
    return "\n".join(lines).rstrip() + "\n"


def _minutes(value):
    """A duration in minutes, ``—`` if unknown."""
    return "—" if value is None else f"{value:.1f} min"


def default_machine_label(machine=None, cpus=None):
    """
    ``--machine-label``'s default: the CPU model and the logical CPUs.

    :param str machine: The CPU model (default this machine's).
    :param int cpus: Logical CPUs (default this machine's).
    :rtype: str
    """
    machine = harness.machine_name() if machine is None else machine
    cpus = os.cpu_count() if cpus is None else cpus
    return f"{machine}, {cpus} CPUs"


#: The meta entries of one run (``weightings.py`` without ``--combine``)
#: that a combined report keeps in ``meta["parts"]``.
PART_KEYS = (
    "command",
    "started",
    "ended",
    "duration_min",
    "machine_label",
    "machine",
    "processor",
    "cpus",
    "workers",
    "torch_threads",
    "versions",
    "problems",
    "weightings",
    "planned_runs",
    "kept_runs",
    "interrupted",
    "quick",
)


def part_meta(meta, runs=None):
    """
    One run's entry of ``meta["parts"]``.

    :param dict meta: The run's meta (JSON files from before
        ``--machine-label`` get the default label of their machine).
    :param int runs: Its recorded runs.
    :rtype: dict
    """
    part = {key: meta.get(key) for key in PART_KEYS}
    if not part["machine_label"]:
        part["machine_label"] = default_machine_label(
            meta.get("machine"), meta.get("cpus")
        )
    part["runs"] = runs
    return part


def parts_of(meta):
    """
    The runs a report's records come from: ``meta["parts"]`` of a combined
    report, else the one run of ``meta``.

    :param dict meta: The JSON document's meta.
    :rtype: list[dict]
    """
    return meta.get("parts") or [part_meta(meta)]


def machine_text(part):
    """A run's machine, its CPUs and its workers, for the report."""
    hardware = (
        f"{part.get('machine')}, "
        f"{part.get('processor') or platform.machine()}, "
        f"{part.get('cpus')} logical CPUs"
    )
    default = default_machine_label(part.get("machine"), part.get("cpus"))
    if part["machine_label"] != default:
        hardware = f"{part['machine_label']} ({hardware})"
    return (
        f"{hardware}; {part.get('workers')} worker processes at once, torch "
        f"threads {part.get('torch_threads')} each"
    )


def run_origin(record, parts):
    """
    Where a run ran: the machine label and workers it recorded, else those
    of the part that planned its problem.

    :param dict record: The run.
    :param list parts: :func:`parts_of` the report.
    :return: ``(machine label, workers)``.
    :rtype: tuple
    """
    found, workers = record.get("machine_label"), record.get("workers")
    if found is None or workers is None:
        part = next(
            (
                p
                for p in parts
                if record["problem"] in (p.get("problems") or [])
            ),
            parts[0],
        )
        found = found or part["machine_label"]
        workers = workers or part.get("workers")
    return found, workers


def origins(records, problem, parts):
    """
    Where a problem's runs ran.

    :return: ``{(machine label, workers): runs}``, in the runs' order.
    :rtype: dict
    """
    found = {}
    for record in records:
        if record["problem"] == problem:
            key = run_origin(record, parts)
            found[key] = found.get(key, 0) + 1
    return found


def origin_text(found):
    """A problem's machine(s), from :func:`origins`, as a sentence."""
    if len(found) == 1:
        (machine, workers), _ = next(iter(found.items()))
        return f"Ran on {machine}, {workers} worker processes at once."
    listed = "; ".join(
        f"{machine}, {workers} workers: {runs} runs"
        for (machine, workers), runs in found.items()
    )
    return (
        f"**Ran on several machines** ({listed}): its equal-time "
        "comparison mixes machines."
    )


def where_text(records, problems, parts):
    """
    The report's list of which problems ran where: one line per machine
    (and worker count), one per problem whose runs mix machines.

    :rtype: list[str]
    """
    grouped, mixed = {}, []
    for problem in problems:
        found = origins(records, problem, parts)
        if len(found) == 1:
            grouped.setdefault(next(iter(found)), []).append(problem)
        elif found:
            mixed.append(f"- {problem}: {origin_text(found)}")
    return [
        f"- {', '.join(names)}: {machine}, {workers} worker processes at "
        "once"
        for (machine, workers), names in grouped.items()
    ] + mixed


def smoothing_bullets(records, weightings, every):
    """The set-up section's description of the smoothing study's runs."""
    if not any(w in weightings for w in SMOOTHING_WEIGHTINGS):
        return []
    slow = SPACED_FACTOR * every
    rate = 1 - (1 - SMOOTHING_ALPHA) ** slow
    ran = [
        p
        for p in PROBLEMS
        if any(
            r["problem"] == p and r["weighting"] in SMOOTHING_WEIGHTINGS
            for r in records
        )
    ]
    return [
        f"- {label('exact_500', every)} and "
        f"{label('exact_500_smoothed', every)}: the smoothing study (its "
        "section at the end): pina-ntk's exact weights updated "
        f"{SPACED_FACTOR} times more rarely than {label('exact', every)}, "
        "from the latest traces alone and from a moving average of the "
        f"traces at alpha = {SMOOTHING_ALPHA:g} per step (an update every "
        f"{slow} steps folds its traces in with rate 1 - (1 - alpha)^{slow}"
        f" = {rate:.2f}); recorded options "
        f"{options_text(records, 'exact_500_smoothed', EXACT_SHOWN)}. Run "
        f"on {', '.join(ran) or 'no problem'} (by default on "
        f"{', '.join(SMOOTHING_PROBLEMS)} only).",
    ]


def smoothing_verdict(plain, smoothed, every):
    """
    Whether smoothing lowered the median final error of the exact weights
    updated every ``SPACED_FACTOR * every`` steps, and by what factor.

    :param dict plain: :func:`analyse`'s row of ``exact_500`` (``None``
        if not run).
    :param dict smoothed: Its row of ``exact_500_smoothed``.
    :param int every: The settings' ``update_every``.
    :return: The verdict, a sentence.
    :rtype: str
    """
    names = {
        "plain": label("exact_500", every),
        "smoothed": label("exact_500_smoothed", every),
    }
    rows = {"plain": plain, "smoothed": smoothed}
    for key, row in rows.items():
        if row is None:
            return f"not compared: {names[key]} was not run."
    stats = {key: summary(row["final"]) for key, row in rows.items()}
    for key, (median, _, _, _) in stats.items():
        if median is None:
            return f"not compared: every run of {names[key]} failed."
    m0, low0, high0, failed0 = stats["plain"]
    m1, low1, high1, failed1 = stats["smoothed"]
    change = f"{m0:.2e} → {m1:.2e}"
    if m1 < m0:
        text = (
            f"smoothing lowered the median final error of {names['plain']} "
            f"by a factor {m0 / m1:.2f} ({change})"
        )
    elif m1 > m0:
        text = (
            "smoothing did not lower the median final error of "
            f"{names['plain']}: it rose by a factor {m1 / m0:.2f} ({change})"
        )
    else:
        text = (
            f"smoothing left the median final error of {names['plain']} "
            f"unchanged ({change})"
        )
    counts = [len(plain["final"]) - failed0, len(smoothed["final"]) - failed1]
    details = [f"{counts[0]} and {counts[1]} finished seeds"]
    if min(counts) > 1:
        overlap = low1 <= high0 and low0 <= high1
        details.append(
            "the seeds' ranges overlap (the difference is within the "
            "seed-to-seed spread)"
            if overlap
            else "the seeds' ranges do not overlap"
        )
    if failed0 or failed1:
        details.append(
            f"failed runs: {failed0}/{len(plain['final'])} without, "
            f"{failed1}/{len(smoothed['final'])} with smoothing"
        )
    return f"{text}; {'; '.join(details)}."


def smoothing_section(records, problems, every):
    """
    The report's section *Smoothing exact weights*: per problem of
    :data:`SMOOTHING_PROBLEMS` with runs of the study, the final errors of
    :data:`SMOOTHING_COMPARED` and a verdict computed from them.

    :param list records: Every run.
    :param list problems: The report's problems.
    :param int every: The settings' ``update_every``.
    :return: The section's lines (none without such runs).
    :rtype: list[str]
    """
    shown = [
        p
        for p in SMOOTHING_PROBLEMS
        if p in problems
        and any(
            r["problem"] == p and r["weighting"] in SMOOTHING_WEIGHTINGS
            for r in records
        )
    ]
    if not shown:
        return []
    rows = {p: analyse(records, p, SMOOTHING_COMPARED)["rows"] for p in shown}
    slow = SPACED_FACTOR * every
    rate = 1 - (1 - SMOOTHING_ALPHA) ** slow
    sketches = options_text(records, "sketch_predictor", SKETCH_ALPHA_SHOWN)
    sketches = (
        ""
        if sketches == "not run"
        else f" (moving averages of sampled " f"traces: {sketches})"
    )
    lines = [
        "## Smoothing exact weights",
        "",
        f"Exact NTK weights updated every {slow} steps jump at each update "
        "to the traces of that step's batch; a moving average of the "
        f"traces (alpha = {SMOOTHING_ALPHA:g} per step, rate {rate:.2f} "
        f"per update) damps the jumps at the same cost. Against them: the "
        f"exact weights every {every} steps and the two sketches"
        f"{sketches}. Cells: the median over "
        "seeds of the relative L2 at the last step, in brackets the "
        "smallest and largest; the verdicts below are computed from these "
        "medians.",
        "",
    ]
    header = ["weighting"]
    for problem in shown:
        steps = next(iter(rows[problem].values()))["steps"]
        header.append(f"{problem} (step {steps})")
    table = [
        [label(w, every)]
        + [
            error_cell(rows[p][w]["final"]) if w in rows[p] else "not run"
            for p in shown
        ]
        for w in SMOOTHING_COMPARED
        if any(w in rows[p] for p in shown)
    ]
    lines += harness.markdown_table(header, "l" + "r" * len(shown), table)
    lines += ["", "Verdicts:", ""]
    for problem in shown:
        verdict = smoothing_verdict(
            rows[problem].get("exact_500"),
            rows[problem].get("exact_500_smoothed"),
            every,
        )
        lines.append(f"- **{problem}**: {verdict}")
    return lines + [""]


#: What the report says about a problem beyond its numbers.
PROBLEM_NOTES = {
    "advection": (
        "PINA's `AdvectionProblem` has no boundary condition (its docstring "
        "states periodic boundaries, which no condition imposes), so the "
        "solution in the inflow region x < c t is not determined by the "
        "loss: every weighting's error there depends on how the network "
        "extrapolates."
    ),
    "acoustic_wave": (
        "The same equation and solution as `wave`, with PINA's lumped "
        "conditions: `t0` holds the initial value and velocity as two "
        "residual columns of one loss term, `boundary` both ends. It keeps "
        "the plain MLP of the other zoo problems, as a PINA user would "
        "start; `wave` shows the same solution with the tutorial's network."
    ),
    "wave": (
        "pina-ntk's `WaveProblem` (the paper's Section 5.2.2, c = 2), one "
        "condition per loss term, at the paper's points per step "
        "(`WaveProblem.PAPER_POINTS`), with the wave tutorial's network and "
        "learning-rate schedule: with the plain 3×64 MLP no weighting "
        "learnt it in 2000 steps (relative L2 0.57-1.0 in a first, reduced "
        "run), so that column compared nothing."
    ),
}


# -------------------------------------------------------------- calibrate
def calibrate(problems, weightings_of, steps, workers, log):
    """
    Per-step costs of each weighting on each problem, and the steps they
    suggest for a 90-minute run.

    :param list problems: Problem keys.
    :param callable weightings_of: ``problem -> weighting keys``.
    :param int steps: Steps of each run.
    :param int workers: Processes at once.
    :param callable log: Progress messages.
    :return: The markdown table.
    :rtype: str
    """
    weightings = run_weightings(problems, weightings_of)
    jobs = plan_jobs(
        problems,
        weightings_of,
        dict(FULL, records=1),
        lambda p: steps,
        lambda p: 1,
    )
    measured = {}

    def keep(record):
        measured.setdefault(record["problem"], {})[record["weighting"]] = (
            record["ms_per_step"] or math.nan,
            record["status"],
        )

    run_jobs(jobs, workers, keep, log)
    rows = []
    for problem in problems:
        costs = measured.get(problem, {})
        total = sum(ms for ms, _ in costs.values() if math.isfinite(ms))
        # two workers for 85 min, equal time per problem, 3 seeds
        budget_ms = 2 * 85 * 60e3 / len(problems)
        suggested = int(budget_ms / (3 * total) // 500 * 500) if total else 0
        rows.append(
            [
                problem,
                *(
                    (
                        f"{costs[w][0]:.1f}"
                        + ("" if costs[w][1] == "ok" else "!")
                        if w in costs
                        else "—"
                    )
                    for w in weightings
                ),
                f"{total:.0f}",
                str(suggested),
            ]
        )
    table = harness.markdown_table(
        ["problem", *weightings, "sum", "steps (3 seeds)"],
        "l" + "r" * (len(weightings) + 2),
        rows,
    )
    return "\n".join(table)


# -------------------------------------------------------------------- main
def parse_args(argv):
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: {QUICK['depth']}x{QUICK['width']} network, "
        f"{QUICK_STEPS} steps, {QUICK_SEEDS} seed, problems "
        f"{' '.join(QUICK_PROBLEMS)}",
    )
    parser.add_argument(
        "--problems",
        nargs="+",
        choices=list(PROBLEMS),
        help="problems to run (default all; --quick "
        f"{' '.join(QUICK_PROBLEMS)})",
    )
    parser.add_argument(
        "--weightings",
        nargs="+",
        choices=list(WEIGHTINGS),
        help="weightings to run on every selected problem (default all, "
        f"{' and '.join(SMOOTHING_WEIGHTINGS)} only on "
        f"{' '.join(SMOOTHING_PROBLEMS)})",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        help="seeds per weighting (default per problem, see FULL_RUNS; "
        f"--quick {QUICK_SEEDS})",
    )
    parser.add_argument(
        "--steps",
        type=int,
        help="steps of every run (default per problem, see FULL_RUNS; "
        f"--quick {QUICK_STEPS})",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="worker processes at once, one torch thread each (default 2)",
    )
    parser.add_argument(
        "--output-dir",
        default=DEFAULT_OUTPUT_DIR,
        help="folder of weightings.md, weightings.json and "
        "figures/weightings/ (default docs/)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the runs already in the output folder's weightings.json "
        "(same settings) and run only the missing ones",
    )
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="rewrite weightings.md and the figures from weightings.json",
    )
    parser.add_argument(
        "--machine-label",
        default=default_machine_label(),
        help="where the run runs, recorded in the meta and every run and "
        "named by the report (default the CPU model and CPU count: "
        "%(default)s)",
    )
    parser.add_argument(
        "--combine",
        nargs="+",
        metavar="DIR",
        help="merge the runs of the weightings.json in each DIR (made on "
        "different machines, a problem's runs on one) and write the "
        "report of all of them into --output-dir; runs nothing",
    )
    parser.add_argument(
        "--calibrate",
        type=int,
        metavar="STEPS",
        help="measure the ms per step of every problem and weighting over "
        "STEPS steps (1 seed) and print them; writes nothing",
    )
    args = parser.parse_args(argv)
    for name in ("seeds", "steps", "calibrate"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be >= 1.")
    if args.workers < 1:
        parser.error("--workers must be >= 1.")
    if args.combine:
        for name in ("resume", "render_only", "calibrate"):
            if getattr(args, name):
                option = name.replace("_", "-")
                parser.error(f"--combine does not go with --{option}.")
    return args


def main(argv=None):
    """
    Run the benchmark (or calibrate, or re-render).

    :param list argv: Command-line arguments (default ``sys.argv[1:]``).
    :return: The exit code.
    :rtype: int
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    started = time.perf_counter()

    def log(message):
        elapsed = time.perf_counter() - started
        print(f"[{elapsed:7.1f} s] {message}", file=sys.stderr, flush=True)

    problems = args.problems or list(QUICK_PROBLEMS if args.quick else PROBLEMS)
    if args.weightings:
        chosen = list(dict.fromkeys(args.weightings))

        def weightings_of(problem):
            return chosen

    else:
        weightings_of = default_weightings
    weightings = run_weightings(problems, weightings_of)
    if args.calibrate:
        print(
            calibrate(
                problems, weightings_of, args.calibrate, args.workers, log
            )
        )
        return 0
    output_dir = os.path.abspath(args.output_dir)
    os.makedirs(output_dir, exist_ok=True)
    json_path = os.path.join(output_dir, "weightings.json")
    md_path = os.path.join(output_dir, "weightings.md")
    if args.combine:
        try:
            data = combine(args.combine, argv)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        write_json(json_path, data)
        _write_report(data, output_dir, md_path)
        log(f"wrote {md_path} and {json_path}")
        return 0
    if args.render_only:
        with open(json_path, encoding="utf-8") as handle:
            data = json.load(handle)
        _write_report(data, output_dir, md_path)
        log(f"wrote {md_path}")
        return 0

    settings = dict(QUICK if args.quick else FULL)

    def steps_of(problem):
        if args.steps:
            return args.steps
        return QUICK_STEPS if args.quick else FULL_RUNS[problem][0]

    def seeds_of(problem):
        if args.seeds:
            return args.seeds
        return QUICK_SEEDS if args.quick else FULL_RUNS[problem][1]

    jobs = plan_jobs(problems, weightings_of, settings, steps_of, seeds_of)
    records = []
    if args.resume and os.path.exists(json_path):
        with open(json_path, encoding="utf-8") as handle:
            previous = json.load(handle)
        wanted = {job_key(j): j for j in jobs}
        for record in previous["runs"]:
            job = wanted.get(job_key(record))
            if job is not None and all(
                k in record and record[k] == job[k] for k in job
            ):
                records.append(record)
        done = {job_key(r) for r in records}
        jobs = [j for j in jobs if job_key(j) not in done]
        log(f"resuming: {len(records)} runs kept, {len(jobs)} to run")
    estimate = sum(estimated_seconds(j) for j in jobs) / args.workers / 60
    log(f"{len(jobs)} runs on {args.workers} workers, about {estimate:.1f} min")
    meta = {
        "command": shlex.join(["python", "benchmarks/weightings.py", *argv]),
        "started": _now(),
        "machine_label": args.machine_label,
        "machine": harness.machine_name(),
        "processor": platform.processor(),
        "cpus": os.cpu_count(),
        "workers": args.workers,
        "torch_threads": 1,
        "versions": (
            f"Python {platform.python_version()}, torch "
            f"{harness.package_version('torch')}, pina-mathlab "
            f"{harness.package_version('pina-mathlab')}, lightning "
            f"{harness.package_version('lightning')}, pina-ntk "
            f"{harness.package_version('pina-ntk')}"
        ),
        "problems": problems,
        "weightings": weightings,
        "settings": settings,
        "planned_runs": len(jobs) + len(records),
        "kept_runs": len(records) if args.resume else 0,
        "quick": args.quick,
    }
    data = {"meta": meta, "runs": records}
    write_json(json_path, data)

    def keep(record):
        # where it ran, for reports that combine machines (not part of the
        # job: --resume keeps runs made elsewhere with their own label)
        record["machine_label"] = args.machine_label
        record["workers"] = args.workers
        records.append(record)
        write_json(json_path, data)

    interrupted = False
    try:
        run_jobs(jobs, args.workers, keep, log)
    except KeyboardInterrupt:
        interrupted = True
        # a second Ctrl-C must not cut the writing of what was measured
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    threads = {r.get("torch_threads") for r in records} - {None}
    if threads:
        meta["torch_threads"] = ", ".join(map(str, sorted(threads)))
    meta["ended"] = _now()
    meta["duration_min"] = (time.perf_counter() - started) / 60
    meta["interrupted"] = interrupted
    write_json(json_path, data)
    _write_report(data, output_dir, md_path)
    log(f"wrote {md_path} and {json_path}")
    return 130 if interrupted else 0


def run_weightings(problems, weightings_of):
    """
    Every weighting some problem runs, in first-seen order.

    :param list problems: Problem keys.
    :param callable weightings_of: ``problem -> weighting keys``.
    :rtype: list[str]
    """
    found = {}
    for problem in problems:
        found.update(dict.fromkeys(weightings_of(problem)))
    return list(found)


def combine(directories, argv):
    """
    The JSON document of the runs of several ``weightings.json``.

    Each file's runs keep (or, from before ``--machine-label``, get) their
    machine label and workers; each file's meta goes into
    ``meta["parts"]`` (a combined file's parts, flattened). Warns (prints)
    when one problem's runs come from several machines.

    :param list directories: The folders of the ``weightings.json`` files.
    :param list argv: This command's arguments, for the meta.
    :return: ``{"meta": ..., "runs": ...}``.
    :rtype: dict
    :raises ValueError: If a file is missing, the settings differ, or one
        (problem, weighting, seed) run is in two files.
    """
    parts, runs, seen = [], [], {}
    settings = None
    for directory in directories:
        path = os.path.join(directory, "weightings.json")
        if not os.path.isfile(path):
            raise ValueError(f"{path} does not exist.")
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        meta = data["meta"]
        if settings is None:
            settings, first = meta["settings"], path
        elif meta["settings"] != settings:
            raise ValueError(
                f"the settings of {path} differ from those of {first}: "
                f"{meta['settings']} against {settings}."
            )
        own = parts_of(meta)
        if not meta.get("parts"):
            own[0]["runs"] = len(data["runs"])
        for part in own:
            part.setdefault("source", os.path.abspath(directory))
        parts += own
        for record in data["runs"]:
            key = job_key(record)
            if key in seen:
                raise ValueError(
                    f"the run {key} is in both {seen[key]} and {path}."
                )
            seen[key] = path
            machine, workers = run_origin(record, own)
            runs.append(dict(record, machine_label=machine, workers=workers))
    problems = {p for part in parts for p in part.get("problems") or []}
    weightings = {w for part in parts for w in part.get("weightings") or []}
    for problem in PROBLEMS:
        machines = {r["machine_label"] for r in runs if r["problem"] == problem}
        if len(machines) > 1:
            print(
                f"warning: the runs of {problem} come from "
                f"{len(machines)} machines ({'; '.join(sorted(machines))}): "
                "its equal-time comparison mixes machines.",
                file=sys.stderr,
            )
    threads = {str(p.get("torch_threads")) for p in parts}
    now = _now()
    meta = {
        "command": shlex.join(["python", "benchmarks/weightings.py", *argv]),
        "started": now,
        "ended": now,
        "parts": parts,
        "problems": [p for p in PROBLEMS if p in problems],
        "weightings": [w for w in WEIGHTINGS if w in weightings],
        "settings": settings,
        "planned_runs": sum(p.get("planned_runs") or 0 for p in parts),
        "kept_runs": sum(p.get("kept_runs") or 0 for p in parts),
        "interrupted": any(p.get("interrupted") for p in parts),
        "quick": any(p.get("quick") for p in parts),
        "torch_threads": ", ".join(sorted(threads)),
    }
    return {"meta": meta, "runs": runs}


def _write_report(data, output_dir, md_path):
    with open(md_path, "w", encoding="utf-8") as handle:
        handle.write(render(data, output_dir))


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC"
    )


if __name__ == "__main__":
    sys.exit(main())
