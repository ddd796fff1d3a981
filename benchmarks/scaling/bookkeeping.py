"""The default's bookkeeping, timed inside one run.

Trains the default ``SketchNTKWeighting()`` in a fresh one-thread worker
per round, on the scaling study's problem at n = 100 and width 100
(``scaling.py``), and times with ``time.perf_counter`` each step and every
call of the default's own code that it makes: the hooks of ``NTKCallback``
and the weighting's ``update_weights`` (which PINA calls from its loss
aggregation). Inside them run the sample's unavoidable work, the work the
floor counts (``prepare_sample``, the ``Jᵀg`` backward; ``complete_sample``,
the displaced evaluation); the bookkeeping is the rest. Per sample period,
as a share of the same run's plain step (a step less the default's calls
within it: what an unweighted step takes), so that no ratio is taken
between runs; written to ``docs/scaling-bookkeeping.json``, which
``scaling.py`` renders on ``docs/scaling.md``::

    python benchmarks/scaling/bookkeeping.py    # about a minute, one thread
    python benchmarks/scaling/scaling.py --from-json docs/scaling.json --readme

``--quick``: a smoke run, written to a new temporary folder."""

import argparse
import contextlib
import functools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

from pina_ntk import NTKCallback, SketchNTKWeighting

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness
from benchmarks.cost import configurations
from benchmarks.cost.step_time import median_period_mean
from benchmarks.scaling.scaling_setup import SAMPLE_PERIOD, SPECS, floor_margin

SCRIPT = "scaling/bookkeeping.py"
#: The worker job of one round.
JOB = "benchmarks.scaling.bookkeeping:run_round"
RESULTS = os.path.join(harness.ROOT, "docs", "scaling-bookkeeping.json")
#: The default's calls a step makes, timed: ``(owner, method)``. The last
#: two, the sample's unavoidable work, run inside the others (a deferred
#: sample is prepared in ``update_weights`` and completed in
#: ``on_after_backward``; the warm start's, all in ``update_weights``).
TIMED = (
    (NTKCallback, "on_train_batch_start"),
    (SketchNTKWeighting, "update_weights"),
    (NTKCallback, "on_after_backward"),
    (NTKCallback, "on_train_batch_end"),
    (SketchNTKWeighting, "prepare_sample"),
    (SketchNTKWeighting, "complete_sample"),
)
NAMES = tuple(name for _, name in TIMED)
UNAVOIDABLE = ("prepare_sample", "complete_sample")
#: The calls within a step's timed span (:class:`CallTimer`, the first
#: callback, has closed it when ``NTKCallback.on_train_batch_end`` runs).
WITHIN = ("on_train_batch_start", "update_weights", "on_after_backward")
#: Settings of a full run and of ``--quick``: the first ``warmup_periods``
#: sample periods (the warm start's samples at step 0) are left out.
FULL = dict(n=100, width=100, depth=3, seed=0, threads=1)
FULL.update(rounds=5, warmup_periods=1, periods=40)
QUICK = dict(FULL, n=40, width=20, rounds=1, periods=2)


class CallTimer(harness.StepTimer):
    """Each training step's seconds (``durations``) and those spent in each
    of :data:`TIMED`'s calls (``steps``: a ``{name: seconds}`` per step),
    while :meth:`patched` holds. Put it first among the callbacks: it opens
    each step's record before the other callbacks' hooks run."""

    def __init__(self):
        super().__init__()
        self.steps = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.steps.append(dict.fromkeys(NAMES, 0.0))
        super().on_train_batch_start(trainer, pl_module, batch, batch_idx)

    def timed(self, name, function):
        """:return: ``function``, its seconds added to this step's
        ``name``."""

        @functools.wraps(function)
        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.steps[-1][name] += time.perf_counter() - start

        return call

    @contextlib.contextmanager
    def patched(self):
        """Time the calls of :data:`TIMED` until the block ends."""
        with contextlib.ExitStack() as stack:
            for owner, name in TIMED:
                call = self.timed(name, getattr(owner, name))
                stack.enter_context(mock.patch.object(owner, name, call))
            yield self


def run_round(task):
    """One round (a worker job): the default's run, ``{"durations":
    [seconds per step], "calls": [[seconds of each of NAMES] per step]}``."""
    steps = (task["warmup_periods"] + task["periods"]) * SAMPLE_PERIOD
    timer = CallTimer()
    with timer.patched():
        spec = SPECS["default"]
        configurations.train_row(task, "default", steps, timer, spec=spec)
    # to a tenth of a microsecond: the calls take tens of them
    calls = [[round(s[n], 7) for n in NAMES] for s in timer.steps]
    return {"durations": timer.durations, "calls": calls}


def measure(settings, workdir, log):
    """Every round, each in a fresh worker: ``[run_round's result]``."""
    n = settings["n"]
    rounds = []
    for index in range(settings["rounds"]):
        # as the scaling study: a quarter of the entries on the boundary
        task = dict(settings, problem="poisson", round=index)
        task.update(points=[n - n // 4, 0, n // 4], accelerator="cpu")
        task["jobs"] = [JOB]
        found = harness.run_worker(task, workdir)
        rounds.append(found["results"][JOB])
        log(f"round {index + 1} of {settings['rounds']} done")
    return rounds


def period_parts(calls):
    """:return: ``{part: seconds}`` of one sample period's timed calls
    (``calls``: a row of seconds per step, the sample's step first): the
    sample's unavoidable work; the bookkeeping at the sample's step beyond
    it, at the step after (the weights formed), on the other steps, and
    all of it."""
    unavoidable = []
    bookkeeping = []
    for step in calls:
        timed = dict(zip(NAMES, step))
        inner = sum(timed[name] for name in UNAVOIDABLE)
        unavoidable.append(inner)
        # the unavoidable calls are timed inside the outer ones too
        bookkeeping.append(sum(timed.values()) - 2 * inner)
    return {
        "unavoidable": sum(unavoidable),
        "sample_step": bookkeeping[0],
        "next_step": bookkeeping[1],
        "other_steps": sum(bookkeeping[2:]),
        "bookkeeping": sum(bookkeeping),
    }


def plain_steps(measured):
    """:return: A run's steps less the default's calls within them (those
    of :data:`WITHIN`): what the steps take without the weighting."""
    within = [NAMES.index(name) for name in WITHIN]
    return [
        duration - sum(step[i] for i in within)
        for duration, step in zip(measured["durations"], measured["calls"])
    ]


def summarise(document):
    """:return: The page's numbers: the plain step (the median over rounds
    of each round's median period mean of :func:`plain_steps`), each part's
    mean seconds per sample period over every period measured, the
    bookkeeping's share of a step in each round."""
    settings = document["settings"]
    skip = settings["warmup_periods"] * SAMPLE_PERIOD
    steps, periods, shares = [], [], []
    for measured in document["rounds"]:
        plain = plain_steps(measured)[skip:]
        step = median_period_mean(plain, SAMPLE_PERIOD)
        calls = measured["calls"][skip:]
        found = [
            period_parts(calls[i : i + SAMPLE_PERIOD])
            for i in range(0, len(calls) - SAMPLE_PERIOD + 1, SAMPLE_PERIOD)
        ]
        total = statistics.fmean(p["bookkeeping"] for p in found)
        steps.append(step)
        periods += found
        shares.append(total / (SAMPLE_PERIOD * step))
    means = {k: statistics.fmean(p[k] for p in periods) for k in periods[0]}
    return {
        "step": statistics.median(steps),
        "periods": len(periods),
        "parts": means,
        "shares": shares,
    }


#: The section's prose: paragraphs, each one line once its whitespace is
#: joined.
TEXT = """`SketchNTKWeighting()` at n = {n:,}, width {width}, the study's
problem and network, seed {seed}: {rounds} round(s), each a fresh worker
that trains the default, its first {skipped} steps (the warm start at step 0) left out,
then {periods} sample periods of {period} steps. Timed with
`time.perf_counter` inside the default's run: each step, the hooks of
`NTKCallback` (`on_train_batch_start`, `on_after_backward`,
`on_train_batch_end`) and the weighting's `update_weights`, which PINA calls
from its loss aggregation at every step; within them, the sample's
unavoidable work. The bookkeeping is the rest; the recording wrappers on the
conditions' `evaluate` (a call and a list append per condition) are not
timed. Mean per sample period over the {count} periods measured; its share
of a step: over {period} plain steps of the same run, each a step's time
less the default's calls within it, what an unweighted step takes
({step_ms:.2f} ms, the median over rounds):

The bookkeeping is {share:.3f} of a step ({low:.3f}–{high:.3f} over the
rounds), against the allowance over the floor of {margin:g} of a step at
n = {n:,}. It is measured within one run, no ratio taken between runs, so
the run-to-run noise above does not enter it; the verdicts stay with the
measure between separate runs."""
#: The page's rows: part, label.
PARTS = (
    (
        "unavoidable",
        "the sample's unavoidable work, which the floor counts: "
        "`prepare_sample` (the `Jᵀg` backward) and `complete_sample` (the "
        "displaced evaluation)",
    ),
    ("sample_step", "bookkeeping at the sample's step, beyond the sample"),
    ("next_step", "bookkeeping at the step after (the weights formed)"),
    ("other_steps", "bookkeeping on the other {others} steps (the hooks)"),
    ("bookkeeping", "**bookkeeping, all**"),
)


def page_lines(document):
    """:return: The scaling page's section on the default's bookkeeping,
    with its run's provenance."""
    settings = document["settings"]
    found = summarise(document)
    step = found["step"]
    rows = []
    for key, label in PARTS:
        seconds = found["parts"][key]
        label = label.format(others=SAMPLE_PERIOD - 2)
        share = seconds / (SAMPLE_PERIOD * step)
        rows.append([label, f"{seconds * 1e3:.2f}", f"{share:.3f}"])
    header = [f"per sample period ({SAMPLE_PERIOD} steps)", "ms"]
    header.append("share of a step")
    values = dict(settings, period=SAMPLE_PERIOD, count=found["periods"])
    values["skipped"] = settings["warmup_periods"] * SAMPLE_PERIOD
    values["step_ms"] = step * 1e3
    values["share"] = found["parts"]["bookkeeping"] / (SAMPLE_PERIOD * step)
    values.update(low=min(found["shares"]), high=max(found["shares"]))
    values["margin"] = floor_margin(settings["n"])
    intro, close = harness.paragraphs(TEXT, values)
    return [
        "## The default's bookkeeping, timed inside one run",
        "",
        intro,
        "",
        *harness.parts_lines(document, lambda _, p: p["machine_label"]),
        *harness.markdown_table(header, rows),
        "",
        close,
    ]


def main(argv=None):
    """Measure (or read ``--from-json``), write the results, print the
    page's section."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--output",
        help="the results file (default docs/scaling-bookkeeping.json; "
        "--quick: a temporary folder)",
    )
    harness.add_run_flags(parser)
    args = parser.parse_args(argv)
    output = harness.output_location(args, "output", RESULTS)
    if args.from_json:
        document = harness.read_json(args.from_json)
    else:
        settings = dict(QUICK if args.quick else FULL)
        started = time.perf_counter()
        part = harness.provenance(
            SCRIPT, argv, args.machine_label, device="cpu", workers=1
        )
        part["threads"] = settings["threads"]

        def log(message):
            elapsed = time.perf_counter() - started
            print(f"[{elapsed:7.1f} s] {message}", file=sys.stderr, flush=True)

        with tempfile.TemporaryDirectory() as workdir:
            rounds = measure(settings, workdir, log)
        document = {"script": SCRIPT}
        document["parts"] = [harness.finish(part, started)]
        document.update(settings=settings, rounds=rounds)
        harness.write_json(output, document)
    print("\n".join(page_lines(document)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
