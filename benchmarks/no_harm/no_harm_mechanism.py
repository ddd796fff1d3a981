r"""Why the default ``SketchNTKWeighting()`` can lag the kernel (issue #76):
the mechanism study, on PINA's tutorials 1 and 2 and the suite's
``lshape``.

Issue #76: on PINA's tutorial 2 Poisson example the default weighting ends
above no weighting, while with tutorial 2's fixed extra feature it helps.
The hypothesis measured here: the default's weights lag the kernel. It
folds one predictor sketch every 10 steps into a moving average of rate
``alpha=1e-3`` per step (about 1,000 steps) after a warm start of 32
samples at step 0; a trace that grows by orders of magnitude within that
span leaves the average, and the weights formed from it, behind.

The set-ups (each run seeded with ``lightning.seed_everything(seed)`` and
trained in a fresh single-threaded process, one step per epoch, full
batch):

- ``ode``: tutorial 1, :math:`u' = u` on :math:`[0, 1]`, :math:`u(0) = 1`;
  1 boundary point and 20 Latin-hypercube points; ``FeedForward`` [10, 10]
  Tanh; RAdam 0.005; 1,500 epochs.
- ``poisson``: tutorial 2's first network: PINA's
  ``Poisson2DSquareProblem``, a 30-per-axis grid inside and 100 boundary
  points; ``FeedForward`` [10, 10] Softplus; Adam 0.006 (weight decay
  1e-8); 1,000 epochs; ``train_size=0.8, test_size=0.2``, shuffled.
- ``poisson_feature``: the same with tutorial 2's fixed extra feature
  :math:`2\pi^2 \sin\pi x \sin\pi y` appended to the inputs.
- ``lshape``: the problem suite's ``LShapeProblem`` (Laplace on the L,
  ``suite_plane_problems.py``) as ``weightings.py`` trains it, simplified:
  the suite's tanh ``ScaledMLP`` 3×64, Adam 1e-3 decaying by 0.9 per
  1,000 steps, 750 and 250 random points drawn once; the suite's
  ``SketchNTKWeighting`` gets the run's seed, this one the default
  ``seed=None`` (drawn from the seeded generator).

Each set-up's residuals have one column, so a condition's entries are its
points. The errors are relative L2 errors on a 64-point grid per axis
(``lshape``: the grid's points in the L).

What it measures (:data:`FULL`):

a. *trajectories*: the first 300 steps under the default, every 10 steps:
   the weights the default applied, the exact weights and traces at the
   same parameters (``pina_ntk.solver_ntk_weights``, ``ntk_traces``, on the
   conditions' points), the default's averaged trace behind its weights,
   its rejected proposals and isolated blocks, each condition's loss. From
   them: each trace's log-growth rate per step over windows
   (:func:`growth_rate`), the ratio of the applied to the exact weight
   (:func:`weight_ratios`), and the same ratio for the default's average
   replayed on the exact traces (:func:`replayed_weight_ratios`): what the
   default would apply if every sketch were exact.
b. *outcome*: the final error of each row of :data:`ROWS` against no
   weighting, per seed, on the tutorial's budget.
c. *budget*: no weighting against the default on ``poisson`` at longer
   budgets; one run per seed and row, its errors read at each budget (a
   run is the start of a longer one: no schedule depends on the budget).

Writes ``docs/no-harm-mechanism.json`` (after each run) and the block of
``docs/weights.md`` between ``no_harm_mechanism_page.MARKERS``. The
settings and set-ups: ``no_harm_mechanism_setups.py``; the growth rates,
lags and replay: ``no_harm_mechanism_analysis.py``; the page:
``no_harm_mechanism_page.py``.

    python benchmarks/no_harm/no_harm_mechanism.py     # the committed files
    python benchmarks/no_harm/no_harm_mechanism.py --quick  # a temporary folder
    python benchmarks/no_harm/no_harm_mechanism.py --from-json \
        docs/no-harm-mechanism.json                    # the page only
"""

import argparse
import math
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness
from benchmarks.no_harm.no_harm_mechanism_page import write_outputs
from benchmarks.no_harm.no_harm_mechanism_setups import EPOCHS, FULL, QUICK
from benchmarks.no_harm.no_harm_mechanism_setups import build

SCRIPT = "no_harm/no_harm_mechanism.py"
#: The worker job of one run.
JOB = "benchmarks.no_harm.no_harm_mechanism:run_job"
JSON = "no-harm-mechanism.json"


# ------------------------------------------------------------ measurement
def _recorder(job, error):
    """The Lightning callback that measures a run (see :func:`run_job`)."""
    import pina_ntk
    from lightning.pytorch.callbacks import Callback

    trajectory = job.get("trajectory")
    error_steps = set(job.get("error_steps", []))

    class Recorder(Callback):
        def __init__(self):
            self.errors = {}  # steps done: error
            self.records = []  # one dict per trajectory step
            self._open = None

        def on_train_batch_start(self, trainer, solver, batch, index):
            step = trainer.global_step
            if not trajectory or step % trajectory["every"]:
                return
            if step > trajectory["last"]:
                return
            names = list(solver.problem.conditions)
            traces = pina_ntk.ntk_traces(solver)
            points = {
                c: len(solver.problem.conditions[c].data.input) for c in names
            }
            self._open = {
                "step": step,
                "error": error(solver),
                "exact_traces": {c: float(traces[c]) for c in names},
                "exact_weights": pina_ntk.solver_ntk_weights(solver),
                "points": points,
                "train_points": {c: len(d["input"]) for c, d in batch},
            }

        def on_train_epoch_end(self, trainer, solver):
            done = trainer.global_step
            if done in error_steps:
                self.errors[done] = error(solver)
            if self._open is None:
                return
            record, self._open = self._open, None
            metrics = trainer.callback_metrics
            record["losses"] = {
                k: float(v) for k, v in metrics.items() if k.endswith("_loss")
            }
            record["applied_weights"] = harness.applied_weights(solver)
            driver = getattr(solver.weighting, "driver", None)
            behind = driver.traces if driver is not None else {}
            record["averaged_traces"] = behind
            record["rejections"] = driver.rejections if driver else {}
            record["isolated"] = driver.isolated_blocks if driver else []
            self.records.append(record)

    return Recorder()


def run_job(job):
    """A worker's run (``harness.run_worker``): train one set-up and row
    for ``job["steps"]`` steps; the errors after ``job["error_steps"]``
    steps and, with ``job["trajectory"]`` (``every``, ``last``), a record
    every ``every`` steps up to ``last`` of the step's parameters: its
    error, the exact traces and weights, the points, the applied weights,
    the trace estimates behind them, the losses, rejections and isolated
    blocks."""
    import torch
    from pina import Trainer

    from pina_ntk.paper.experiments.training import quiet_lightning

    torch.set_num_threads(1)
    solver, sizes, error = build(
        job["case"], job["row"], job["seed"], job["grid"]
    )
    recorder = _recorder(job, error)
    trainer = Trainer(
        solver=solver,
        max_epochs=job["steps"],
        accelerator="cpu",
        callbacks=[recorder],
        enable_model_summary=False,
        enable_progress_bar=False,
        logger=False,
        enable_checkpointing=False,
        **sizes,
    )
    started = time.perf_counter()
    with quiet_lightning(".*does not have many workers.*"):
        trainer.train()
    seconds = time.perf_counter() - started
    driver = getattr(solver.weighting, "driver", None)
    errors = sorted(recorder.errors.items())
    record = {k: job[k] for k in ("case", "row", "seed", "steps")}
    record.update(
        status="ok",
        seconds=seconds,
        steps_done=trainer.global_step,
        error_steps=[s for s, _ in errors],
        errors=[e for _, e in errors],
        final_weights=harness.applied_weights(solver),
        rejections=driver.rejections if driver else {},
        isolated=driver.isolated_blocks if driver else [],
    )
    if job.get("trajectory"):
        record["trajectory"] = recorder.records
    finite = all(math.isfinite(e) for e in record["errors"])
    if trainer.global_step != job["steps"] or not finite:
        record["status"] = "failed"
    return record


# ---------------------------------------------------------------- the run
def plan(settings):
    """The jobs of a study: ``(part, job)`` pairs, in running order."""
    grid = settings["grid"]
    jobs = []
    found = settings["trajectory"]
    for case in found["cases"]:
        for seed in found["seeds"]:
            job = dict(case=case, row="default", seed=seed, grid=grid)
            job.update(steps=found["last"] + 1, error_steps=[])
            job["trajectory"] = {"every": found["every"], "last": found["last"]}
            jobs.append(("trajectories", job))
    found = settings["outcome"]
    for case in found["cases"]:
        steps = found["steps"] or EPOCHS[case]
        every = found["error_every"]
        for seed in found["seeds"]:
            for row in found["rows"]:
                job = dict(case=case, row=row, seed=seed, grid=grid)
                errors = list(range(every, steps, every)) + [steps]
                job.update(steps=steps, error_steps=errors)
                jobs.append(("outcome", job))
    found = settings["budget"]
    for seed in found["seeds"]:
        for row in found["rows"]:
            job = dict(case=found["case"], row=row, seed=seed, grid=grid)
            job.update(steps=max(found["budgets"]))
            job["error_steps"] = sorted(found["budgets"])
            jobs.append(("budget", job))
    return jobs


def run_study(args, argv, path):
    """Run every job of the settings, one fresh process each
    (``args.workers`` at once), writing the document to ``path`` after
    each; return it."""
    settings = QUICK if args.quick else FULL
    extra = dict(workers=args.workers, threads=1)
    part = harness.provenance(SCRIPT, argv, args.machine_label, **extra)
    document = dict(script=SCRIPT, part=part, settings=settings)
    document.update(trajectories=[], outcome=[], budget=[])
    jobs = plan(settings)
    started = time.perf_counter()
    workdir = tempfile.mkdtemp(prefix="no-harm-mechanism-")

    def one(numbered):
        index, (name, job) = numbered
        task = dict(job, threads=1, jobs=[JOB])
        try:
            result = harness.run_worker(task, workdir)["results"]
            record = result[JOB]
        except RuntimeError as error:
            record = {k: job[k] for k in ("case", "row", "seed", "steps")}
            record.update(status="failed", failure=str(error)[-2000:])
            record.update(error_steps=[], errors=[])
        return index, name, record

    done = 0
    with ThreadPoolExecutor(args.workers) as pool:
        for index, name, record in pool.map(one, enumerate(jobs)):
            document[name].append(record)
            harness.write_json(path, document)
            done += 1
            minutes = (time.perf_counter() - started) / 60
            final = record["errors"][-1] if record["errors"] else math.nan
            if record.get("trajectory"):
                final = record["trajectory"][-1]["error"]
            print(
                f"{done}/{len(jobs)} {name} {record['case']} {record['row']} "
                f"seed {record['seed']}: {record['status']}, error "
                f"{final:.3e}, {record.get('seconds', 0):.0f} s "
                f"({minutes:.1f} min in all)",
                file=sys.stderr,
                flush=True,
            )
    harness.finish(part, started)
    harness.write_json(path, document)
    return document


def main(argv=None):
    """Run the study, or re-render the page from ``--from-json``; the exit
    code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.add_run_flags(parser)
    add = parser.add_argument
    text = "default: docs/; --quick: a new temporary folder"
    add("--output-dir", help=text)
    text = "runs at once, each a fresh one-thread process (default 1)"
    add("--workers", type=int, default=1, help=text)
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be >= 1.")
    docs = os.path.join(harness.ROOT, "docs")
    args.output_dir = harness.output_location(args, "output_dir", docs)
    if args.from_json:
        document = harness.read_json(args.from_json)
    else:
        path = os.path.join(args.output_dir, JSON)
        os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        document = run_study(args, argv, path)
    write_outputs(document, args.output_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
