"""The problem suite's split and decision protocol (issues #32 and #42).

The split (``suite-split.toml``) names the tuning and the confirmation
settings; :func:`read_split` checks it. The protocol compares weightings on
the runs of one or more halves:

* a run's error is the median of its last five recorded errors (steadier
  than the final record, which Adam's loss spikes near the end of training
  can catch); a failed (diverged) run's is infinite;
* comparisons are paired by seed: the ratio of a weighting's error to the
  error of the plain sum (``none``) or of the published sketch
  (``gradient_band=None``) with the same seed, problem and points (a pair
  whose reference failed is left out);
* a problem's ratio is the geometric mean over the seeds whose runs
  finished; a diverged run is counted (``diverged``) and counts as worse;
  a weighting is *worse than none* on a problem when it is worse on every
  seed;
* at equal steps (the whole runs) and at equal time: each run's records
  within the steps its weighting makes in the plain sum's training time,
  from the weighting's time per step on that setting over the plain sum's,
  measured in interleaved rounds (:func:`step_costs`);
* every geometric-mean ratio over problems carries a paired bootstrap
  interval (:data:`harness.LEVEL`): problems drawn with replacement, then
  each drawn problem's seeds (:func:`paired_interval`).

:func:`decide`, on the two confirmation halves together: a candidate
replaces the published sketch as the default only if, at equal steps and
at equal time, (a) its ratio to the published sketch is below 1 and the
interval's upper end at most 1, (b) no problem has it above
:data:`WORST_PROBLEM` times the published sketch and (c) it is worse than
none on no more problems; of those that pass, the lowest ratio to the
published sketch at equal steps wins. Otherwise the published sketch is the
default."""

import math
import os
import random
import statistics
import tomllib

from benchmarks import harness

SPLIT = os.path.join(os.path.dirname(__file__), "suite-split.toml")
HALVES = ("tuning", "confirmation", "confirmation-2")
#: The halves the default is decided on, together.
CONFIRMATION = ("confirmation", "confirmation-2")
#: Per half: the least stationary and time-dependent settings.
LEAST = {"tuning": (3, 3), "confirmation": (3, 3), "confirmation-2": (6, 0)}
#: Recorded errors a run's error is the median of.
LAST_RECORDS = 5
NONE, PUBLISHED = "none", "sketch_predictor"
BASES = ("steps", "time")
#: Rule (b): no problem's ratio to the published sketch above this.
WORST_PROBLEM = 1.25
#: Bootstrap draws of :func:`paired_interval`.
DRAWS = 4000
FIELDS = {"setting": str, "stationary": bool, "network": str, "points": str}
CHOICES = dict(network=("benchmark", "feedforward"), points=("fresh", "fixed"))


def read_split(path=SPLIT):
    """The split: ``{half: [setting entries]}``.

    :raises ValueError: If an entry lacks a field or has a wrong value, a
        setting is in two halves or twice, or a half has fewer settings than
        :data:`LEAST` (``confirmation-2``, if in the file)."""
    with open(path, "rb") as handle:
        split, seen = tomllib.load(handle), set()
    for half in [h for h in HALVES if h in split or h in HALVES[:2]]:
        entries = split.get(half, [])
        for entry in entries:
            for field, kind in FIELDS.items():
                if not isinstance(entry.get(field), kind):
                    why = f"{field!r} must be a {kind.__name__}"
                    raise ValueError(f"{half} entry {entry}: {why}.")
            for field, allowed in CHOICES.items():
                if entry[field] not in allowed:
                    why = f"must be one of {allowed}, got {entry[field]!r}"
                    raise ValueError(f"{entry['setting']}: {field} {why}.")
            if entry["setting"] in seen:
                raise ValueError(f"{entry['setting']} is listed twice.")
            seen.add(entry["setting"])
        kinds = ((True, "stationary"), (False, "time-dep."))
        for (stationary, kind), least in zip(kinds, LEAST[half]):
            count = sum(e["stationary"] is stationary for e in entries)
            if count < least:
                why = f"{count} {kind} settings; at least {least} are needed"
                raise ValueError(f"the {half} half has {why}.")
    return {half: split[half] for half in HALVES if half in split}


def run_error(run, until=None):
    """A run's error: the median of its last :data:`LAST_RECORDS` recorded
    errors (those at or before step ``until``, if given); infinite for a
    failed run or one without records."""
    history = run["history"]
    if run.get("status") != "ok" or not history["errors"]:
        return math.inf
    records = zip(history["errors"], history["steps"])
    errors = [e for e, s in records if until is None or s <= until]
    return statistics.median(errors[-LAST_RECORDS:])


def geometric_mean(values):
    """:return: The geometric mean; infinite if any value is, else zero if
    any value is, NaN for no values."""
    values = list(values)
    if not values:
        return math.nan
    if any(math.isinf(v) for v in values):
        return math.inf
    if any(v == 0 for v in values):  # e.g. none's error reached at step 0
        return 0.0
    return math.exp(statistics.fmean(math.log(v) for v in values))


def finite(values):
    """The finite values, in order."""
    return [v for v in values if math.isfinite(v)]


def paired_interval(ratios, draws=DRAWS, seed=0):
    """The percentile bootstrap interval (:data:`harness.LEVEL`) of the
    geometric mean over problems of each problem's geometric mean over its
    seeds: the problems drawn with replacement, then each drawn problem's
    paired ratios, seeded.

    :param dict ratios: ``{problem: [paired ratio per seed]}``; infinite
        ratios (diverged runs) and problems left without any are left out.
    :return: ``(low, high)``; NaNs without a problem."""
    logs = [[math.log(v) for v in finite(r)] for r in ratios.values()]
    logs = [values for values in logs if values]
    if not logs:
        return math.nan, math.nan
    rng, means = random.Random(seed), []
    for _ in range(draws):
        drawn = (rng.choice(logs) for _ in logs)
        # a list: fmean counts iterators
        resampled = [statistics.fmean(rng.choices(v, k=len(v))) for v in drawn]
        means.append(statistics.fmean(resampled))
    means.sort()
    tail = round((1 - harness.LEVEL) / 2 * draws)
    return math.exp(means[tail]), math.exp(means[draws - 1 - tail])


def step_costs(document):
    """``{problem: {weighting: cost}}``: the median over interleaved rounds
    of each weighting's time per step over the plain sum's on the setting
    (``document["step_costs"]``; ``none``: 1); empty if not measured."""
    found = document.get("step_costs", {}).get("ratios", {})
    return {
        problem: {w: statistics.median(v) for w, v in by.items()} | {NONE: 1}
        for problem, by in found.items()
    }


def current(runs):
    """The runs not superseded by a rerun (every run stays in the results;
    a rerun's reason is on the superseded one)."""
    return [r for r in runs if "superseded" not in r]


def paired(runs, problem, weighting, against):
    """``[(run, reference run)]`` of one problem, paired by seed."""
    found = {
        (r["weighting"], r["seed"]): r
        for r in current(runs)
        if r["problem"] == problem
    }
    return [
        (found[(name, seed)], found[(against, seed)])
        for name, seed in sorted(found, key=str)
        if name == weighting and (against, seed) in found
    ]


def problem_ratios(pairs, basis, costs=None, measure=run_error):
    """Per seed: the paired error ratio at equal ``steps`` or ``time`` (each
    run's records within ``steps / costs[weighting]``, the steps it makes
    in the plain sum's training time); infinite where the run failed. Pairs
    whose reference failed, or without both costs at equal time, are left
    out. ``measure(run, until)``: the error compared (an inverse setting's
    parameter error, ``inverse_measures.py``)."""
    ratios, costs = [], costs or {}
    for pair in pairs:
        if basis == "time" and not all(r["weighting"] in costs for r in pair):
            continue
        ends = [
            r["steps"] / costs[r["weighting"]] if basis == "time" else None
            for r in pair
        ]
        error, reference = (measure(r, end) for r, end in zip(pair, ends))
        if math.isfinite(reference):
            ratios.append(error / reference)
    return ratios


def check_equal_steps(runs):
    """Refuse runs of different step counts: their errors are not at equal
    steps. :raises ValueError: naming each step count and its runs."""
    counts = {}
    for run in current(runs):
        counts.setdefault(run["steps"], set()).add(run["weighting"])
    if len(counts) > 1:
        found = "; ".join(
            f"{s} steps: {', '.join(sorted(w))}"
            for s, w in sorted(counts.items())
        )
        raise ValueError(
            f"runs of different step counts ({found}): run "
            "them again with one --steps"
        )


def summarise(runs, weightings, problems, costs=None):
    """Per weighting: the failed runs (``diverged``) and, per basis, the
    geometric mean over problems of the ratio to ``none`` (``to_none``) and
    to the published sketch (``to_published``) with their intervals, both
    per problem, the worst problem and the problems worse than ``none`` on
    every seed.

    :param dict costs: ``{problem: {weighting: cost}}``, :func:`step_costs`."""
    check_equal_steps(runs)
    summary, costs = {}, costs or {}
    for weighting in weightings:
        entry = {"diverged": 0, "runs": 0}
        for run in current(runs):
            if run["weighting"] == weighting and run["problem"] in problems:
                entry["runs"] += 1
                entry["diverged"] += run["status"] != "ok"
        for basis in BASES:
            found = {NONE: {}, PUBLISHED: {}}
            for problem, against in [(p, a) for p in problems for a in found]:
                pairs = paired(runs, problem, weighting, against)
                ratios = problem_ratios(pairs, basis, costs.get(problem))
                if ratios:
                    found[against][problem] = ratios
            means = {
                a: {
                    p: geometric_mean(finite(r) or [math.inf])
                    for p, r in by.items()
                }
                for a, by in found.items()
            }
            per_problem, published = means[NONE], means[PUBLISHED]
            entry[basis] = {
                "to_none": geometric_mean(finite(per_problem.values())),
                "to_none_interval": paired_interval(found[NONE]),
                "to_published": geometric_mean(finite(published.values())),
                "to_published_interval": paired_interval(found[PUBLISHED]),
                "per_problem": per_problem,
                "per_problem_published": published,
                "worst": max(per_problem, key=per_problem.get, default=None),
                "worse_than_none": [
                    p for p, r in found[NONE].items() if all(v > 1 for v in r)
                ],
            }
        summary[weighting] = entry
    return summary


def decide(summary, candidates, no_harm=None):
    """The default by the protocol's rule (see the module docstring), on
    the summary of the confirmation halves together; with ``no_harm``
    (``{candidate: bool}``, the introductory half's criterion (d) of issue
    #76, ``introductory.summarise``) a candidate also needs (d), and one
    without an entry fails it.

    :return: ``(default, {candidate: {"a", "b", "c" per basis (and "d"):
        bool}})``; the published sketch where no candidate passes.
    :raises ValueError: If the published sketch is not in ``summary``."""
    if PUBLISHED not in summary:
        raise ValueError(f"summary lacks the published sketch {PUBLISHED!r}.")
    bar, checks = summary[PUBLISHED], {}
    for candidate in [c for c in candidates if c != PUBLISHED]:
        checks[candidate] = {}
        for basis in BASES:
            own, worse = summary[candidate][basis], bar[basis]
            high = own["to_published_interval"][1]
            rules = {
                "a": own["to_published"] < 1 and high <= 1,
                "b": max(own["per_problem_published"].values(), default=0)
                <= WORST_PROBLEM,
                "c": len(own["worse_than_none"])
                <= len(worse["worse_than_none"]),
            }
            checks[candidate] |= {f"{k} ({basis})": v for k, v in rules.items()}
        if no_harm is not None:
            checks[candidate]["d"] = bool(no_harm.get(candidate, False))
    passing = [c for c, found in checks.items() if all(found.values())]
    key = lambda c: summary[c]["steps"]["to_published"]  # noqa: E731
    return min(passing, key=key, default=PUBLISHED), checks
