"""The problem suite's split and decision protocol (issue #32).

The split (``suite-split.toml``) names the tuning and the confirmation
settings; :func:`read_split` checks it. The protocol compares weightings on
the runs of one half:

* a run's error is the median of its last five recorded errors (steadier
  than the final record); a failed run's is infinite;
* comparisons are paired by seed: the ratio of a weighting's error to the
  error of the plain sum (``none``) or of the published sketch
  (``gradient_band=None``) with the same seed, problem and points;
* a problem's ratio is the geometric mean over its seeds; a weighting is
  *worse than none beyond the seeds' spread* on a problem when it is worse
  on every seed;
* at equal steps (the whole runs) and at equal time (each weighting's
  errors recorded within the paired ``none`` run's training time);
* the time to reach ``none``'s error: the first recorded time at which the
  error is at most that of the paired ``none`` run, over ``none``'s time.

:func:`decide`: a candidate becomes or stays the default only if, at equal
steps and at equal time, its geometric-mean ratio to ``none`` is at most
the published sketch's and it is worse than ``none`` on no more problems;
of those that pass, the lowest geometric-mean ratio at equal steps wins.
"""

import math
import statistics
import tomllib

import harness

SPLIT = f"{harness.HERE}/suite-split.toml"
HALVES = ("tuning", "confirmation", "confirmation-2")
#: Per half: the least stationary and time-dependent settings.
LEAST = {"tuning": (3, 3), "confirmation": (3, 3), "confirmation-2": (6, 0)}
#: Recorded errors a run's error is the median of.
LAST_RECORDS = 5
NONE, PUBLISHED = "none", "sketch_predictor"
BASES = ("steps", "time")
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
    errors (those at or before ``until`` seconds, if given); infinite for a
    failed run or one without records."""
    history = run["history"]
    if run.get("status") != "ok" or not history["errors"]:
        return math.inf
    records = zip(history["errors"], history["seconds"])
    errors = [e for e, s in records if until is None or s <= until]
    return statistics.median(errors[-LAST_RECORDS:])


def time_to_reach(run, target):
    """:return: The first recorded time with an error at most ``target``,
    ``math.inf`` if never."""
    if run.get("status") != "ok":
        return math.inf
    history = run["history"]
    for error, seconds in zip(history["errors"], history["seconds"]):
        if error <= target:
            return seconds
    return math.inf


def geometric_mean(values):
    """:return: The geometric mean; infinite if any value is, else zero if
    any value is, NaN for no values."""
    values = list(values)
    if not values:
        return math.nan
    if any(math.isinf(v) for v in values):
        return math.inf
    if any(v == 0 for v in values):  # e.g. none's error reached at 0 s
        return 0.0
    return math.exp(statistics.fmean(math.log(v) for v in values))


def current(runs):
    """The runs not superseded by a rerun (every run stays in the results;
    a rerun's reason is on the superseded one)."""
    return [r for r in runs if "superseded" not in r]


def paired(runs, problem, weighting, against):
    """``[(run, reference run)]`` of one problem, paired by seed."""
    found = {(r["weighting"], r["seed"]): r for r in current(runs)
             if r["problem"] == problem}  # fmt: skip
    return [
        (run, found[(against, seed)])
        for (name, seed), run in sorted(found.items(), key=str)
        if name == weighting and (against, seed) in found
    ]


def problem_ratios(pairs, basis):
    """Per seed: the paired error ratio at equal ``steps`` or ``time``
    (within the reference run's training time)."""
    ratios = []
    for run, reference in pairs:
        until = reference["history"]["seconds"][-1] if basis == "time" else None
        ratios.append(run_error(run, until) / run_error(reference))
    return ratios


def summarise(runs, weightings, problems):
    """Per weighting and basis: the geometric mean over problems of the
    ratio to ``none`` (``to_none``) and to the published sketch
    (``to_published``), the worst problem, the problems worse than ``none``
    on every seed; per weighting the geometric mean over problems of the
    time to reach ``none``'s error over ``none``'s time (``time_to_none``).
    """
    summary = {}
    for weighting in weightings:
        entry = {}
        for basis in BASES:
            per_problem, to_published, worse = {}, [], []
            for problem in problems:
                pairs = paired(runs, problem, weighting, NONE)
                ratios = problem_ratios(pairs, basis)
                if not ratios:
                    continue
                per_problem[problem] = geometric_mean(ratios)
                if all(r > 1 for r in ratios):
                    worse.append(problem)
                pairs = paired(runs, problem, weighting, PUBLISHED)
                published = problem_ratios(pairs, basis)
                if published:
                    to_published.append(geometric_mean(published))
            worst = max(per_problem, key=per_problem.get, default=None)
            entry[basis] = {
                "to_none": geometric_mean(per_problem.values()),
                "to_published": geometric_mean(to_published),
                "per_problem": per_problem,
                "worst": worst,
                "worse_than_none": worse,
            }
        reach = []
        for problem in problems:
            times = [
                time_to_reach(run, run_error(reference))
                / reference["history"]["seconds"][-1]
                for run, reference in paired(runs, problem, weighting, NONE)
            ]
            if times:
                reach.append(statistics.median(times))
        entry["time_to_none"] = geometric_mean(reach)
        summary[weighting] = entry
    return summary


def decide(summary, candidates):
    """The default by the protocol (see the module docstring).

    :return: ``(default, {candidate: passes})``.
    :raises ValueError: If the published sketch is not in ``summary``."""
    if PUBLISHED not in summary:
        raise ValueError(f"summary lacks the published sketch {PUBLISHED!r}.")
    bar = summary[PUBLISHED]
    passes = {
        c: all(
            summary[c][b]["to_none"] <= bar[b]["to_none"]
            and len(summary[c][b]["worse_than_none"])
            <= len(bar[b]["worse_than_none"])
            for b in BASES
        )
        for c in candidates
    }
    chosen = [c for c in candidates if passes[c]]
    key = lambda c: summary[c]["steps"]["to_none"]  # noqa: E731
    return min(chosen, key=key, default=None), passes
