r"""Which loss weighting reaches the lowest error, and at what cost?

Trains the same network, points and optimiser on each problem of
:data:`PROBLEMS` with each weighting of :data:`WEIGHTINGS`, recording the
relative L2 error on a fixed grid against the training time (evaluations
excluded), and each condition's loss and applied weight; on an inverse
setting, the identified unknowns and their parameter error beside each
error record (``inverse_measures.py``). Writes
``weightings.json`` (after each finished run, so an interrupted run keeps
what it measured), the block of ``weightings.md`` and two figures per
problem rendered from it (error against time; condition losses and
weights), README.md's headline figure from the wave runs, and with
``--half`` a half of the problem suite (its page: ``suite_page.py``).
A full run first times ``--calibrate`` steps of each pair to start the
longest jobs first. The problems, weightings and settings are in
``weightings_setup.py``, the page in ``weightings_page.py``.

    python benchmarks/suite/weightings.py           # docs/weightings.md
    python benchmarks/suite/weightings.py --quick   # a temporary folder
    python benchmarks/suite/weightings.py --from-json docs/weightings.json
    python benchmarks/suite/weightings.py --half confirmation \
        --output-dir docs/suite/confirmation --resume
"""

import argparse
import copy
import functools
import importlib
import inspect
import math
import os
import pkgutil
import sys
import time
import traceback
from pathlib import Path

import lightning
import torch
from lightning.pytorch.callbacks import Callback
from pina.model import FeedForward
from pina_ntk.integration import resampling
from pina_ntk.paper.experiments import training
from pina_ntk.paper.experiments.models import ScaledMLP, input_box
from pina_ntk.paper.experiments.outputs import grid_points, relative_error_fn
from pina_ntk.paper.experiments.settings import make_weighting
from pina_ntk.paper.experiments.wave import WaveSettings

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness
from benchmarks.suite import inverse_measures, weightings_solvers
from benchmarks.suite.weightings_page import write_outputs
from benchmarks.suite.weightings_setup import CAUSAL, FEEDFORWARD, FIXED_POINTS
from benchmarks.suite.weightings_setup import FULL, HALF_SEEDS, PROBLEMS, QUICK
from benchmarks.suite.weightings_setup import QUICK_PROBLEMS, SCRIPT, SEEDS
from benchmarks.suite.weightings_setup import SMOOTHING_PROBLEMS
from benchmarks.suite.weightings_setup import SMOOTHING_WEIGHTINGS, SPLIT
from benchmarks.suite.weightings_setup import SPACED_FACTOR, SUITE_WEIGHTINGS
from benchmarks.suite.weightings_setup import TUTORIAL_NETWORK
from benchmarks.suite.weightings_setup import TUTORIAL_NETWORK_PROBLEMS
from benchmarks.suite.weightings_setup import WEIGHTINGS, key


def build_weighting(job):
    """A fresh weighting of a job, from the experiments' shared factory
    (``None`` for ``"none"``)."""
    _, kind, options = WEIGHTINGS[job["weighting"]]
    every = job["update_every"]
    spacing = {"every": every, "slow": SPACED_FACTOR * every}
    options = {k: spacing.get(v, v) for k, v in options.items()}
    if kind == "sketch":
        options["seed"] = job["seed"]
    return make_weighting(kind, **options)


def describe_weighting(weighting):
    """The class of a weighting and its constructor options, for JSON."""
    if weighting is None:
        return {"class": None}
    cls = type(weighting)
    found = {"class": f"{cls.__module__}.{cls.__qualname__}"}
    for name in inspect.signature(cls).parameters:
        value = getattr(weighting, name, None)
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, dict):  # statistic={condition: ...}
            value = {str(k): str(v) for k, v in value.items()}
        elif not isinstance(value, (int, float, str, bool, type(None))):
            value = f"<{type(value).__name__}>"
        found[name] = value
    return found


def problem_class(name):
    """The class of a problem of :data:`PROBLEMS` (a module named alone,
    as the pages show it, is the suite's: ``benchmarks.suite``)."""
    module, _, attribute = PROBLEMS[name][0].partition(":")
    if "." not in module:
        module = f"benchmarks.suite.{module}"
    return getattr(importlib.import_module(module), attribute)


def fresh_problem(name):
    """A new instance of a problem with conditions of its own: the zoo
    problems keep them in a class-level dict that the trainer fills."""
    cls = problem_class(name)
    if isinstance(cls.__dict__.get("conditions"), dict):
        own = {"conditions": copy.deepcopy(cls.conditions)}
        cls = type(cls.__name__, (cls,), dict(own, domains=dict(cls.domains)))
    return cls()


class FailureWatch(Callback):
    """Stops at the first non-finite loss or weight (Lightning would train
    on with NaN to the last step)."""

    failure = failed_at = None

    def on_train_batch_end(self, trainer, solver, outputs, batch, index):
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        loss = math.nan if loss is None else float(loss)
        weights = harness.applied_weights(solver)
        bad = {c: w for c, w in weights.items() if not math.isfinite(w)}
        if math.isfinite(loss) and not bad:
            return
        self.failed_at = step = trainer.global_step
        self.failure = f"non-finite weights {bad} at step {step}"
        if not math.isfinite(loss):
            self.failure = f"non-finite loss ({loss}) at step {step}"
        trainer.should_stop = True


class ConditionHistory(Callback):
    """Each condition's loss, applied weight and NTK trace (pina-ntk's
    weightings) every ``every`` steps (with the error history's steps):
    where the error sits and how the weights follow it."""

    def __init__(self, every):
        self.every = every
        self.steps, self.losses, self.weights, self.traces = [], [], [], []

    def on_train_epoch_end(self, trainer, solver):
        # one step per epoch: PINA's per-condition losses are logged per
        # epoch, so they are complete here and not yet at the batch's end
        step = trainer.global_step
        if step % self.every and step != trainer.max_epochs:
            return
        metrics = trainer.callback_metrics
        names = solver.problem.conditions
        losses = {c: float(metrics[f"{c}_loss"]) for c in names}
        self.steps.append(step)
        self.losses.append(losses)
        self.weights.append(harness.applied_weights(solver))
        driver = getattr(solver.weighting, "driver", None)
        self.traces.append(driver.traces if driver else {})


def failed_record(job, failure):
    """The record of a job whose worker died."""
    record = dict(job, status="failed", failure=failure, final_weights={})
    record.update(history={"steps": [], "seconds": [], "errors": []})
    return record


def study_keeper(document, path, total, log):
    """What a study keeps of each finished run of ``run_job`` (through
    ``harness.map_jobs``): the record under the job's ``row`` (where the
    protocol reads the weighting's; the weighting it was built as kept as
    ``built_as``) in ``document["runs"]``, written to ``path`` at once.

    :return: ``keep(job, record)``."""

    def keep(job, record):
        if "worker_error" in record:
            record = failed_record(job, record["worker_error"])
        record = dict(record, weighting=job["row"], built_as=job["weighting"])
        document["runs"].append(record)
        harness.write_json(path, document)
        name = f"{job['problem']}/{job['row']}/{job['seed']}"
        log(f"{len(document['runs'])}/{total} {name}: {record['status']}")

    return keep


def run_study(document, jobs, args, argv, path):
    """Run a study's ``jobs`` (:func:`run_job`) in ``args.workers``
    workers, as a new part of ``document`` (its provenance, ``what:
    "runs"``), each run kept by :func:`study_keeper` and the document
    written to ``path`` after each; return the document."""
    log = functools.partial(print, file=sys.stderr, flush=True)
    extra = dict(workers=args.workers, threads=1)
    script = document["script"]
    part = harness.provenance(script, argv, args.machine_label, **extra)
    document["parts"].append(dict(part, what="runs"))
    started = time.perf_counter()
    keep = study_keeper(document, path, len(jobs), log)
    harness.map_jobs(run_job, jobs, args.workers, keep)
    harness.finish(document["parts"][-1], started)
    harness.write_json(path, document)
    return document


def run_job(job):
    """Train one PINN (a worker's job); return the job with its results. A
    run that raises or turns non-finite (it stops there) is recorded as
    failed, with what it measured before."""
    torch.set_num_threads(1)  # the jobs share the machine's cores
    record = dict(job, status="ok", failure=None, final_weights={})
    record["history"] = {"steps": [], "seconds": [], "errors": []}
    try:
        _train(job, record)
    except Exception as error:  # recorded, not hidden: see the page
        record["failure"] = f"raised {type(error).__name__}: {error}"
        record["traceback"] = traceback.format_exc()[-3000:]
    history = record["history"]
    done = history["steps"][-1] if history["steps"] else 0
    if record["failure"] is None:
        if not all(math.isfinite(e) for e in history["errors"]):
            record["failure"] = "non-finite error on the evaluation grid"
        elif done != job["steps"]:
            record["failure"] = f"stopped at step {done} of {job['steps']}"
    if record["failure"] is not None:
        record["status"] = "failed"
    seconds = history["seconds"][-1] if history["seconds"] else 0.0
    record.update(steps_done=done, train_seconds=seconds)
    record["ms_per_step"] = 1e3 * seconds / done if done else None
    record["final_error"] = history["errors"][-1] if done else None
    return record


def _train(job, record):
    """Build and train one PINN, filling ``record`` as it goes."""
    # seeded before the problem is built: an InverseProblem draws its
    # unknowns' initial values there (torch.rand)
    lightning.seed_everything(job["seed"], verbose=False)
    problem = fresh_problem(job["problem"])
    # the grid and exact solution: the same for every run
    if hasattr(problem, "temporal_domain"):
        lower, upper = input_box(problem)
    else:  # input_box reads a temporal domain, which these lack
        box, names = problem.spatial_domain.range, problem.input_variables
        lower, upper = ([float(box[v][i]) for v in names] for i in (0, 1))
    # about grid x grid points whatever the dimension
    size = round(job["grid"] ** (2 / len(lower)))
    axes = [torch.linspace(a, b, size) for a, b in zip(lower, upper)]
    points = grid_points(problem.input_variables, axes)
    if hasattr(problem, "evaluation_points"):  # a non-rectangular domain
        points = problem.evaluation_points(job["grid"])
    exact = torch.Tensor.as_subclass(problem.solution(points), torch.Tensor)
    error_fn = relative_error_fn(points, exact)
    inverse = inverse_measures.is_inverse(problem)
    if inverse:  # the unknowns and their error beside each error record
        error_fn = inverse_measures.recording(error_fn, problem, record)
    # again: the points and network as before this seed moved up
    lightning.seed_everything(job["seed"], verbose=False)
    resampling.discretise_conditions(problem, job["counts"])
    network = [job[k] for k in ("width", "depth")]
    fourier = {k: job[k] for k in ("fourier_features", "fourier_scale")}
    dimensions = len(problem.output_variables)

    def make_model():
        if job.get("network") == "feedforward":
            inputs = len(problem.input_variables)
            return FeedForward(inputs, dimensions, *network, func=torch.nn.Tanh)
        return ScaledMLP(lower, upper, dimensions, *network, **fourier)

    if job.get("network") == "feedforward" and job.get("draw_scaled", True):
        # until 2026-12-06 a ScaledMLP was built, and replaced, before the
        # FeedForward: its draw keeps the runs made then (the suite's
        # halves, the L-BFGS study) reproducible; the multi-model study's
        # runs lack it (tests/test_committed_runs_reproduce.py)
        ScaledMLP(lower, upper, dimensions, *network, **fourier)
    model = make_model()  # before the weighting, which may draw a seed
    weighting = build_weighting(job)
    record["weighting_options"] = describe_weighting(weighting)
    solver = weightings_solvers.build_solver(
        job, problem, (model, make_model), weighting
    )
    if job.get("solver") == "ensemble":  # scored on the members' mean
        error_fn = functools.partial(
            weightings_solvers.members_mean_error, error_fn
        )
    # the untrained network's error at step 0: every run has a record at
    # or before any step budget
    history = record["history"]
    history.update(steps=[0], seconds=[0.0], errors=[float(error_fn(solver))])
    solver.train()  # error_fn left it in evaluation mode
    watch = FailureWatch()
    every = max(1, job["steps"] // job["records"])
    errors = training.ErrorHistory(every, error_fn)
    conditions = ConditionHistory(every)
    callbacks = [watch, errors, conditions]
    if job["problem"] not in FIXED_POINTS:
        callbacks.insert(1, resampling.ResampleCallback(1, job["counts"]))
    if "callbacks" in job:  # a study's own: "package.module:function"
        callbacks += pkgutil.resolve_name(job["callbacks"])(job)
    try:
        with training.quiet_lightning(".*does not have many workers.*"):
            training.make_trainer(solver, job["steps"], callbacks).train()
    finally:
        for name, values in errors.as_dict().items():
            history[name] += values
        recorded = ("steps", "losses", "weights", "traces")
        history["conditions"] = {k: getattr(conditions, k) for k in recorded}
        record["failure"] = watch.failure
        record["failed_at_step"] = watch.failed_at
        if inverse:  # the values trained to, past the last record if raised
            inverse_measures.keep_final(record, problem)
        try:
            record["final_weights"] = harness.applied_weights(solver)
        except Exception:  # a failed run may leave no weights to read
            pass
        # proposals of weights not used, by reason, and the blocks sketched
        # on their own (pina-ntk's weightings; None for the others)
        driver = getattr(weighting, "driver", None)
        record["rejections"] = None
        if driver is not None:
            found = driver.rejections
            record["rejections"] = dict(found, isolated=driver.isolated_blocks)


def plan_jobs(problems, weightings_of, settings, seeds=None):
    """Every job of a run: each problem, weighting (``weightings_of(problem)``)
    and seed (``seeds``, else the settings' and :data:`SEEDS`)."""
    jobs = []
    for problem in problems:
        own = dict(settings)
        if problem in TUTORIAL_NETWORK_PROBLEMS:
            names = TUTORIAL_NETWORK
            if settings["quick"]:  # the embedding only, on the tiny MLP
                names = ("fourier_features", "fourier_scale")
            own.update({name: getattr(WaveSettings(), name) for name in names})
        found = PROBLEMS[problem][1] or problem_class(problem).PAPER_POINTS
        scale = settings["point_scale"]
        # at least 4 points, but a one-point condition stays one point
        counts = {c: max(min(n, 4), round(n * scale)) for c, n in found.items()}
        feedforward = problem in FEEDFORWARD
        own["network"] = "feedforward" if feedforward else "benchmark"
        count = seeds or settings["seeds"]
        if not (seeds or settings["quick"]):
            count = SEEDS.get(problem, count)
        jobs += [
            dict(own, problem=problem, weighting=w, seed=s, counts=counts)
            for w in weightings_of(problem)
            for s in range(count)
        ]
    return jobs


def pair(job):
    """:return: ``"problem/weighting"`` of a job, as calibrated."""
    return f"{job['problem']}/{job['weighting']}"


def calibrate(jobs, steps, workers, log):
    """The ms per step of each ``"problem/weighting"`` over a short run of
    ``steps`` steps, seed 0: what orders the jobs and estimates the time."""
    short = {}
    for job in jobs:
        short.setdefault(pair(job), dict(job, steps=steps, records=1, seed=0))
    costs = {}

    def keep(job, record):
        costs[pair(job)] = record.get("ms_per_step")

    harness.map_jobs(run_job, list(short.values()), workers, keep)
    log(f"calibrated {len(costs)} problem/weighting pairs over {steps} steps")
    return costs


#: Steps of a step-cost run, timed over their second half.
COST_STEPS = 400


def measure_step_costs(document, rounds, workers, log, steps):
    """Each weighting's time per step over the plain sum's on each setting
    of ``document``, in ``rounds`` interleaved rounds (the harness's
    method): per round and setting, its weightings in an order rotated by
    the round between two plain-sum runs, ``steps`` steps each from seed 0,
    timed over the second half (past the warm-up and the first samples).
    :return: ``{problem: {weighting: [ratio by round]}}``."""
    chosen = [w for w in document["weightings"] if w != "none"]
    jobs = []
    for index in range(rounds):
        shift = index % len(chosen)
        order = ["none", *chosen[shift:], *chosen[:shift], "none"]
        planned = plan_jobs(
            document["problems"], lambda _: order, document["settings"], seeds=1
        )
        jobs += [dict(j, steps=steps, records=2, round=index) for j in planned]
    timed = {}

    def keep(job, record):
        status = record.get("status", "failed")
        log(
            f"round {job['round']} {job['problem']} {job['weighting']}: "
            f"{status}"
        )
        if status == "ok":
            steps, seconds = (
                record["history"][k] for k in ("steps", "seconds")
            )
            by = timed.setdefault((job["problem"], job["round"]), {})
            per_step = (seconds[-1] - seconds[-2]) / (steps[-1] - steps[-2])
            by.setdefault(job["weighting"], []).append(per_step)

    harness.map_jobs(run_job, jobs, workers, keep)
    ratios = {}
    for (problem, _), found in sorted(timed.items()):
        none = found.pop("none", [math.nan])
        none = sum(none) / len(none)
        for weighting, (seconds,) in found.items():
            by = ratios.setdefault(problem, {})
            by.setdefault(weighting, []).append(seconds / none)
    return ratios


def main(argv=None):
    """Run the benchmark, time its steps or re-render results; the exit
    code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--problems", nargs="+", choices=list(PROBLEMS))
    smoothing = " ".join(SMOOTHING_PROBLEMS)
    text = f"on every problem (default all; {smoothing} only)"
    add("--weightings", nargs="+", choices=list(WEIGHTINGS), help=text)
    text = "a half of the problem suite (benchmarks/suite/suite-split.toml)"
    add("--half", choices=list(SPLIT), help=text + ": its runs")
    add("--seeds", type=int, help="per weighting (default 3, wave 2)")
    add("--steps", type=int, help="of every run (default 4000)")
    text = "steps of the calibration run made first (default 30; --quick: 0, "
    add("--calibrate", type=int, metavar="STEPS", help=text + "none)")
    text = "keep the runs of the same settings already in the output folder's "
    add("--resume", action="store_true", help=text + "weightings.json")
    text = "with --resume: run these again; the earlier run stays, marked "
    text += "superseded with --rerun-reason"
    rerun = dict(nargs="+", default=[], metavar="PROBLEM/WEIGHTING/SEED")
    add("--rerun", **rerun, help=text)
    add("--rerun-reason", help="why the --rerun runs are made again")
    text = "time each weighting's step against the plain sum's on each setting "
    text += "of the output folder's weightings.json, in ROUNDS interleaved "
    text += f"rounds of --steps steps (default {COST_STEPS}); kept in that file"
    add("--step-costs", type=int, metavar="ROUNDS", help=text)
    docs = os.path.join(harness.ROOT, "docs")
    harness.add_run_flags(parser, docs)
    args = parser.parse_args(argv)
    args.output_dir = harness.output_location(args, "output_dir", docs)
    if args.rerun and not (args.resume and args.rerun_reason):
        parser.error("--rerun needs --resume and --rerun-reason.")
    if args.step_costs is not None and args.step_costs < 1:
        parser.error("--step-costs must be >= 1.")
    for name in ("seeds", "steps", "workers"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1.")
    if args.from_json:
        document = harness.read_json(args.from_json)
    elif args.step_costs:
        path = os.path.join(args.output_dir, "weightings.json")
        if not os.path.isfile(path):
            parser.error(f"--step-costs times the runs of {path}: not found.")
        document = step_costs_run(args, argv, harness.read_json(path))
    else:
        document = run_all(args, argv)
    write_outputs(document, args.output_dir)
    return 130 if document.get("interrupted") else 0


def step_costs_run(args, argv, document):
    """``document`` with the step costs of its settings and weightings."""
    started = time.perf_counter()
    extra = dict(workers=args.workers, threads=1)
    part = harness.provenance(SCRIPT, argv, args.machine_label, **extra)
    log = functools.partial(print, file=sys.stderr, flush=True)
    rounds, steps = args.step_costs, args.steps or COST_STEPS
    ratios = measure_step_costs(document, rounds, args.workers, log, steps)
    found = dict(part=harness.finish(part, started), rounds=rounds, steps=steps)
    document["step_costs"] = dict(found, ratios=ratios)
    return document


def run_all(args, argv):
    """Train every job of the command line; return the results."""
    settings = dict(QUICK if args.quick else FULL)
    for name in ("steps", "calibrate"):
        if getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    problems = args.problems or list(QUICK_PROBLEMS if args.quick else PROBLEMS)
    if args.half:
        problems = args.problems or [e["setting"] for e in SPLIT[args.half]]
        args.weightings = args.weightings or list(SUITE_WEIGHTINGS)
        if args.seeds is None and not args.quick:
            args.seeds = HALF_SEEDS[args.half]

    def weightings_of(problem):
        if args.weightings:
            return list(dict.fromkeys(args.weightings))
        smoothing = problem in SMOOTHING_PROBLEMS
        # "default" repeats one of the sketches: the suite runs it by name
        skipped = ("default", *CAUSAL)
        skipped += () if smoothing else SMOOTHING_WEIGHTINGS
        return [w for w in WEIGHTINGS if w not in skipped]

    log = functools.partial(print, file=sys.stderr, flush=True)
    started = time.perf_counter()
    extra = dict(workers=args.workers, threads=1)
    part = harness.provenance(SCRIPT, argv, args.machine_label, **extra)
    jobs = plan_jobs(problems, weightings_of, settings, args.seeds)
    costs = {}
    if settings["calibrate"]:
        costs = calibrate(jobs, settings["calibrate"], args.workers, log)

    def seconds(job):
        ms = costs.get(pair(job)) or 0.0
        return job["steps"] * ms / 1e3

    path = os.path.join(args.output_dir, "weightings.json")
    earlier = {"parts": [], "runs": [], "problems": [], "weightings": []}
    if args.resume and os.path.exists(path):
        # every recorded run stays, with its part; a job is skipped when a
        # run has every setting of it (the calibration only orders jobs)
        earlier = harness.read_json(path)
        done = {key(r): r for r in earlier["runs"]}

        def same(job):
            if "/".join(map(str, key(job))) in args.rerun:
                return False
            setting = {k: v for k, v in job.items() if k != "calibrate"}
            return setting.items() <= done.get(key(job), {}).items()

        jobs = [j for j in jobs if not same(j)]
        kept = len(earlier["runs"])
        log(f"resuming: {kept} runs kept, {len(jobs)} to run")
    jobs.sort(key=seconds, reverse=True)  # longest first
    if costs:
        minutes = sum(map(seconds, jobs)) / args.workers / 60
        log(f"{len(jobs)} runs to make: about {minutes:.0f} min")
    chosen = [w for p in problems for w in weightings_of(p)]
    calibrated = earlier.get("calibration_ms_per_step", {})
    index = len(earlier["parts"])
    document = {
        "script": SCRIPT,
        "parts": earlier["parts"] + [part],
        "settings": settings,
        "problems": list(dict.fromkeys(earlier["problems"] + problems)),
        "weightings": list(dict.fromkeys(earlier["weightings"] + chosen)),
        "planned_runs": len(jobs) + len(earlier["runs"]),
        "calibration_ms_per_step": calibrated | costs,
        "runs": earlier["runs"],
    }
    if "step_costs" in earlier:  # measured on these settings: kept
        document["step_costs"] = earlier["step_costs"]

    def keep(job, record):
        if "worker_error" in record:
            record = dict(job, status="failed", failure=record["worker_error"])
            record.update(history={"steps": [], "seconds": [], "errors": []})
            record.update(final_weights={}, final_error=None, ms_per_step=None)
            record["train_seconds"] = None
        for run in document["runs"]:  # a rerun: the earlier run stays
            if key(run) == key(job) and "superseded" not in run:
                reason = args.rerun_reason or "run again with other settings"
                run["superseded"] = {"part": index, "reason": reason}
        document["runs"].append(dict(record, part=index))
        harness.write_json(path, document)
        done, planned = len(document["runs"]), document["planned_runs"]
        log(
            f"{done}/{planned} {'/'.join(map(str, key(job)))}: "
            f"{record['status']}"
        )

    try:
        harness.map_jobs(run_job, jobs, args.workers, keep)
    except KeyboardInterrupt:
        document["interrupted"] = True
    harness.finish(part, started)
    return document


if __name__ == "__main__":
    sys.exit(main())
