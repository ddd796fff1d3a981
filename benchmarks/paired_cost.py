"""What the cost studies of a weighting on one set-up against another share
(``inverse_cost.py``, ``multi_model_cost.py``): rows trained a few steps
each, in an order rotated by the round, every round in a fresh
single-threaded worker; each row's mean step over a window of whole sample
periods; a measure per round judged by its interval over rounds
(``harness.judged``)."""

import argparse
import os
import statistics
import sys
import tempfile
import time

import lightning
from pina_ntk.paper.experiments import training

from benchmarks import harness

#: The default's sample period: a window of whole periods holds as many
#: samples per step as a long run.
PERIOD = 10
FULL = dict(rounds=7, warmup=5, steps=4 * PERIOD, seed=883)
QUICK = dict(rounds=1, warmup=1, steps=2, seed=883)


def rotated(rows, index):
    """The rows of round ``index``, rotated by it."""
    shift = index % len(rows)
    return rows[shift:] + rows[:shift]


def step_durations(solver, steps):
    """The wall time (s) of each of ``steps`` full-batch training steps of
    ``solver`` (one step an epoch), in the experiments' quiet Trainer."""
    timer = harness.StepTimer()
    training.make_trainer(solver, steps, [timer]).train()
    return timer.durations


def time_rows(task, rows, build):
    """A worker job: ``{row: durations}`` of one round, each row's solver
    ``build(row)`` seeded with the task's seed."""
    found = {}
    for row in rotated(list(rows), task["round"]):
        lightning.seed_everything(task["seed"], verbose=False)
        steps = task["warmup"] + task["steps"]
        found[row] = step_durations(build(row), steps)
    return found


def mean_steps(durations, warmup):
    """``{row: mean step (s)}`` of a round, after ``warmup`` steps."""
    return {
        row: statistics.fmean(values[warmup:])
        for row, values in durations.items()
    }


def run_rounds(script, job, args, argv):
    """Run the rounds of ``job`` (``"module:function"``, a worker job of a
    task), each in a fresh single-threaded worker; return the document."""
    settings = dict(QUICK if args.quick else FULL)
    part = harness.provenance(script, argv, args.machine_label, threads=1)
    document = dict(script=script, part=part, settings=settings, rounds=[])
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as workdir:
        for index in range(settings["rounds"]):
            task = dict(settings, round=index, threads=1, jobs=[job])
            result = harness.run_worker(task, workdir)
            document["rounds"].append(result["results"][job])
            print(f"round {index + 1} done", file=sys.stderr, flush=True)
    harness.finish(part, started)
    return document


def window_line(settings):
    """The page's line on the rounds and the window."""
    return (
        f"{settings['rounds']} interleaved round(s), each a fresh worker of "
        f"one thread; per row the mean step over {settings['steps']} steps "
        f"({settings['steps'] // PERIOD} whole sample periods of the "
        f"default) after {settings['warmup']} warm-up steps; medians over "
        "rounds."
    )


def cost_main(script, results, page, render, job, argv=None, run=None):
    """Time the rounds and write ``results`` and ``page``'s block, or
    re-render it (``--from-json``); the exit code. ``run(args, argv)``, if
    given, makes the document instead of :func:`run_rounds` of ``job``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=f"{script}: see its docstring")
    docs = os.path.join(harness.ROOT, "docs")
    harness.add_run_flags(parser, docs)
    args = parser.parse_args(argv)
    output_dir = harness.output_location(args, "output_dir", docs)
    if args.from_json:
        document = harness.read_json(args.from_json)
    else:
        if run is None:
            document = run_rounds(script, job, args, argv)
        else:
            document = run(args, argv)
        harness.write_json(os.path.join(output_dir, results), document)
    begin = harness.BEGIN.format(script=script)
    harness.write_block(
        os.path.join(output_dir, page),
        begin,
        harness.END,
        render(document),
        f"# {script}\n\n{begin}\n{harness.END}\n",
    )
    return 0
