r"""Does NTK weighting still pay under Adam then L-BFGS? (issue #68, part 5)

The standard PINN recipe: the suite's Adam for :data:`ADAM_STEPS` steps,
then PINA's ``SwitchOptimizer`` to L-BFGS (:data:`LBFGS`) for
:data:`LBFGS_STEPS` more optimisation steps. On the tuning half's three
settings whose points are drawn once (L-BFGS needs a fixed objective), with
:data:`SEEDS` seeds, three rows (:data:`STUDY_ROWS`): the plain sum, the
default ``SketchNTKWeighting()`` and a candidate, the default with its
weights held fixed from the switch on (its prototype: :class:`HoldWeights`).
Each run is a job of ``weightings.run_job`` (the suite's network, points,
Adam and error grid), recorded every :data:`RECORD_EVERY` steps and judged
by the suite's protocol (``suite_protocol.py``). Then, single-threaded and
alone, in interleaved rounds: the price of an Adam step and of an L-BFGS
step with each row, and with exact ``NTKWeighting`` on one setting, over
the plain sum's (:func:`price_jobs`). Writes ``lbfgs.json`` (after each
run) and the block of ``lbfgs.md`` (``lbfgs_page.py``).

    python benchmarks/lbfgs/lbfgs.py            # docs/lbfgs.json, lbfgs.md
    python benchmarks/lbfgs/lbfgs.py --quick    # a temporary folder
    python benchmarks/lbfgs/lbfgs.py --from-json docs/lbfgs.json
"""

import functools
import os
import sys
import time
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback
from pina.callback import SwitchOptimizer
from pina.optim import TorchOptimizer

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness
from benchmarks.lbfgs.lbfgs_page import write_outputs
from benchmarks.suite import weightings
from benchmarks.suite.weightings_setup import FULL, QUICK

SCRIPT = "lbfgs/lbfgs.py"
#: The recipe, fixed before the run that judges: Adam steps, then L-BFGS
#: optimisation steps (each up to ``max_iter`` iterations, 25 evaluations).
ADAM_STEPS, LBFGS_STEPS = 1000, 100
LBFGS = dict(lr=1.0, max_iter=20, history_size=50)
LBFGS.update(line_search_fn="strong_wolfe")
#: Steps between recorded errors: the suite's metric, the median of the
#: last five records, reads the last 40 L-BFGS steps.
RECORD_EVERY = 10
#: The tuning half's settings whose points are fixed, and seeds per row.
SETTINGS = ("poisson_fixed", "multiscale_1d", "heat_data")
SEEDS = 3
#: Rows: the weighting of ``weightings_setup.WEIGHTINGS`` and job options
#: (``hold``: :class:`HoldWeights`; ``update_every``: exact's spacing).
ROWS = {
    "none": ("none", {}),
    "sketch_predictor": ("sketch_predictor", {}),
    "sketch_held": ("sketch_predictor", {"hold": True}),
    "exact_every_step": ("exact", {"update_every": 1}),
    "exact_100": ("exact", {"update_every": 100}),
}
STUDY_ROWS = ("none", "sketch_predictor", "sketch_held")
#: The rows priced per setting (besides the plain sum): exact weights on
#: the first setting only.
EXACT_ROWS = ("exact_every_step", "exact_100")
#: Interleaved rounds of the prices, and each priced run: the switch step,
#: its L-BFGS steps and the windows ``[start, stop)`` of step indices
#: timed, past the sketch's warm start (step 0) and L-BFGS's first three
#: steps: under Adam 8 of the sketch's 10-step periods, under L-BFGS one,
#: with the refresh of exact weights every 100 steps (step 100).
ROUNDS = 5
PRICE = dict(switch=97, lbfgs=13, windows=dict(adam=[10, 90], lbfgs=[100, 110]))
#: ``--quick``: one setting and seed, a few steps.
QUICK_RUN = dict(settings=SETTINGS[:1], seeds=1, adam=6, lbfgs=2, every=1)
QUICK_PRICE = dict(switch=12, lbfgs=10)
QUICK_PRICE["windows"] = dict(adam=[0, 12], lbfgs=[12, 22])


class HoldWeights(Callback):
    """The candidate's prototype: the weighting's weights held fixed from
    the switch step on. The weighting instance's public ``is_due(step)`` is
    wrapped to answer ``False`` from that optimisation step on, so no
    sample or refresh is taken after it (a sample prepared before the
    switch, as the sketch's of step ``t`` enters at ``t + 1``, still
    enters). A weighting without ``is_due`` (the plain sum) is left as is.
    """

    def __init__(self, switch):
        super().__init__()
        self.switch = switch

    def on_train_start(self, trainer, solver):
        weighting = solver.weighting
        due = getattr(weighting, "is_due", None)
        if due is None:
            return
        switch = self.switch

        def held(step):
            return step < switch and due(step)

        weighting.is_due = held


def recipe_callbacks(job):
    """The callbacks ``weightings._train`` adds to a job of this study: the
    switch to L-BFGS at ``job["switch"]`` and, for the candidate, the
    hold."""
    lbfgs = TorchOptimizer(torch.optim.LBFGS, **LBFGS)
    found = [SwitchOptimizer(lbfgs, epoch_switch=job["switch"])]
    if job.get("hold"):
        found.append(HoldWeights(job["switch"]))
    return found


def make_job(base, row, switch, steps, records):
    """A job of ``weightings.run_job``: ``base`` (a planned job) trained
    with ``row``'s weighting and options, switching at ``switch``."""
    weighting, options = ROWS[row]
    found = dict(base, weighting=weighting, row=row, switch=switch)
    found.update(steps=steps, records=records, **options)
    return dict(found, callbacks="benchmarks.lbfgs.lbfgs:recipe_callbacks")


def base_jobs(settings, problems, seeds):
    """One planned job per problem and seed (the suite's set-up)."""
    return weightings.plan_jobs(problems, lambda _: ["none"], settings, seeds)


def study_jobs(settings, recipe):
    """Every run of the study: each setting, seed and row of
    :data:`STUDY_ROWS`."""
    steps = recipe["adam"] + recipe["lbfgs"]
    records = steps // recipe["every"]
    bases = base_jobs(settings, recipe["settings"], recipe["seeds"])
    return [
        make_job(base, row, recipe["adam"], steps, records)
        for base in bases
        for row in STUDY_ROWS
    ]


def price_jobs(settings, problems, price, rounds):
    """The priced runs, seed 0, every step recorded (a small error grid):
    per round and setting, its rows in an order rotated by the round
    between two plain-sum runs (as the suite times step costs)."""
    steps = price["switch"] + price["lbfgs"]
    jobs = []
    for index in range(rounds):
        for number, base in enumerate(base_jobs(settings, problems, 1)):
            chosen = ["sketch_predictor", "sketch_held"]
            chosen += list(EXACT_ROWS) * (number == 0)
            shift = index % len(chosen)
            order = ["none", *chosen[shift:], *chosen[:shift], "none"]
            jobs += [
                dict(
                    make_job(base, row, price["switch"], steps, steps),
                    grid=11,
                    round=index,
                )
                for row in order
            ]
    return jobs


def priced(record):
    """What a priced run keeps: its setting, row, round, status, weighting
    options and the duration of each step (the training time between
    records, evaluations excluded)."""
    history = record["history"]
    seconds = dict(zip(history["steps"], history["seconds"]))
    durations = [
        seconds[step + 1] - seconds[step]
        for step in range(record["steps"])
        if step in seconds and step + 1 in seconds
    ]
    names = ("problem", "row", "round", "status", "failure", "switch")
    found = {name: record.get(name) for name in names}
    return dict(
        found, options=record.get("weighting_options"), durations=durations
    )


def run_all(args, argv):
    """The study's runs, then the prices; return the document (written
    after each run)."""
    quick = args.quick
    settings = dict(QUICK if quick else FULL, calibrate=0)
    recipe = dict(QUICK_RUN) if quick else None
    recipe = recipe or dict(settings=SETTINGS, seeds=SEEDS)
    recipe.setdefault("adam", ADAM_STEPS)
    recipe.setdefault("lbfgs", LBFGS_STEPS)
    recipe.setdefault("every", RECORD_EVERY)
    recipe.update(lbfgs_options=LBFGS, settings=list(recipe["settings"]))
    price = dict(QUICK_PRICE if quick else PRICE, rounds=args.rounds)
    log = functools.partial(print, file=sys.stderr, flush=True)
    path = os.path.join(args.output_dir, "lbfgs.json")
    document = dict(script=SCRIPT, parts=[], recipe=recipe, price=price)
    document.update(settings=settings, runs=[], prices=[])
    jobs = study_jobs(settings, recipe)
    weightings.run_study(document, jobs, args, argv, path)
    if args.rounds:
        part = harness.provenance(SCRIPT, argv, args.machine_label, workers=1)
        document["parts"].append(dict(part, threads=1, what="prices"))
        started = time.perf_counter()
        jobs = price_jobs(settings, recipe["settings"], price, args.rounds)

        def keep_price(job, record):
            if "worker_error" in record:
                record = weightings.failed_record(job, record["worker_error"])
            document["prices"].append(priced(record))
            harness.write_json(path, document)
            log(f"price {len(document['prices'])}/{len(jobs)} {job['row']}")

        harness.map_jobs(weightings.run_job, jobs, 1, keep_price)
        harness.finish(document["parts"][1], started)
    harness.write_json(path, document)
    return document


def main(argv=None):
    """Run the study and the prices, or re-render; the exit code."""

    def flags(parser):
        text = (
            f"interleaved rounds of the step prices (default {ROUNDS}; 0: none)"
        )
        parser.add_argument("--rounds", type=int, default=ROUNDS, help=text)
        return lambda args: (
            "--rounds must be >= 0." if args.rounds < 0 else None
        )

    description = __doc__.splitlines()[0]
    return harness.study_main(argv, description, run_all, write_outputs, flags)


if __name__ == "__main__":
    sys.exit(main())
