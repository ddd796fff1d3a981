"""The parameter error of an inverse setting: the measure
(:func:`parameter_error`), its record during a run (:func:`recording`) and
what the runs' pages (``weightings_page.py``) and the suite's
(``suite_page.py``) show of it.

An inverse setting's problem has ``TRUE_PARAMETERS`` (``{name: true
value}``); PINA keeps its unknowns in ``problem.unknown_parameters``
(``{name: torch.nn.Parameter}``). Its runs record, at every record of the
error history, the identified values (``history["parameters"]``) and their
parameter error (``history["parameter_errors"]``), and the values the run
ends with (``record["parameters"]``, ``record["parameter_error"]``). A
forward setting's runs have none of these keys; an inverse setting's runs
made before they were recorded lack them, and the pages say *not
recorded*: a value is never made up for them."""

import math

from benchmarks.suite import suite_protocol as protocol

#: A cell of runs that did not record their parameter error.
NOT_RECORDED = "not recorded"
#: From when on runs record it, as the pages say.
SINCE = "issue #69 (inverse problems)"


def parameter_error(values, true):
    """The largest relative error of the identified unknowns,
    :math:`\\max_k |v_k - t_k| / |t_k|`.

    :param dict values: ``{name: identified value}``.
    :param dict true: ``{name: true value}``, the same names, none zero.
    :return: The error; NaN if any value is NaN (``max`` would skip it).
    :rtype: float
    :raises ValueError: If the names differ or are none, or a true value
        is zero (no relative error).
    """
    if set(values) != set(true) or not true:
        raise ValueError(
            f"identified {sorted(values)} against true {sorted(true)}: "
            "the same unknowns, at least one, are needed."
        )
    if any(value == 0 for value in true.values()):
        raise ValueError(f"a true value is zero in {true}: no relative error.")
    errors = [abs(values[k] - t) / abs(t) for k, t in true.items()]
    return math.nan if any(map(math.isnan, errors)) else max(errors)


def is_inverse(problem):
    """Whether a problem (or its class) is an inverse setting: it has the
    true values of its unknowns."""
    return hasattr(problem, "TRUE_PARAMETERS")


def identified(problem):
    """``{name: float}``: the unknowns' present values, as PINA holds them
    (it moves them to the device as it trains, so they are read anew)."""
    return {
        name: float(value.detach())
        for name, value in problem.unknown_parameters.items()
    }


def keep_final(record, problem):
    """Set a run's ``parameters`` and ``parameter_error`` to the problem's
    present unknowns."""
    values = identified(problem)
    record["parameters"] = values
    record["parameter_error"] = parameter_error(values, problem.TRUE_PARAMETERS)


def recording(error_fn, problem, record):
    """``error_fn`` (``solver -> error``) that also appends the problem's
    unknowns and their parameter error to ``record["history"]`` at each
    call, after the error (a call that raises records neither), so that
    they stand beside the error history's records; the run's final values
    start as the untrained ones.

    :return: The function, for ``training.ErrorHistory`` and step 0.
    """
    history = record["history"]
    history.update(parameters=[], parameter_errors=[])
    keep_final(record, problem)

    def error(solver):
        found = error_fn(solver)
        keep_final(record, problem)
        history["parameters"].append(record["parameters"])
        history["parameter_errors"].append(record["parameter_error"])
        return found

    return error


def recorded(runs):
    """Whether every finished run of ``runs`` recorded its parameter error
    (a failed run counts as failed whatever it recorded: a worker that died
    leaves a record without it)."""
    return all("parameter_error" in r for r in runs if r["status"] == "ok")


def final_errors(runs):
    """Per run its final parameter error, NaN for a failed run (as its
    solution error); ``None`` unless every finished run recorded it."""
    if not recorded(runs):
        return None
    return [
        run["parameter_error"] if run["status"] == "ok" else math.nan
        for run in runs
    ]


def run_parameter_error(run, until=None):
    """A run's parameter error: that of its last record at or before step
    ``until`` (its final one without ``until``); infinite for a failed run,
    as the protocol's :func:`~suite_protocol.run_error`."""
    if run.get("status") != "ok":
        return math.inf
    if until is None:
        return run["parameter_error"]
    history = run["history"]
    found = zip(history["parameter_errors"], history["steps"])
    errors = [error for error, step in found if step <= until]
    return errors[-1] if errors else math.inf


def paired_ratios(pairs, basis, costs=None):
    """The paired ratios of the parameter errors (the protocol's pairing
    and equal-time cut, :func:`~suite_protocol.problem_ratios`); ``None``
    unless every finished run of the pairs recorded its parameter error."""
    if not all(recorded(pair) for pair in pairs):
        return None
    return protocol.problem_ratios(pairs, basis, costs, run_parameter_error)


def inverse_of(document, known):
    """The inverse settings of a results document, in its order: those in
    ``known`` (the runner's, from their classes) and those with a run that
    recorded a parameter error."""
    found = {r["problem"] for r in document["runs"] if "parameter_error" in r}
    return [p for p in document["problems"] if p in known or p in found]


def column(problem):
    """The header of an inverse setting's parameter column."""
    return f"{problem}: parameter"


def columns(problem, inverse):
    """A problem's columns in a table of problems: its own, and its
    parameter column after it if it is in ``inverse``."""
    return [problem, column(problem)] if problem in inverse else [problem]


def shown(values, cell):
    """``cell(values)``, or :data:`NOT_RECORDED` for ``None``."""
    return NOT_RECORDED if values is None else cell(values)


#: What the suite page's parameter columns hold.
RATIOS = (
    "the geometric mean over seeds of the paired ratio of the final "
    "parameter errors (at equal time: of the last records within the "
    "steps), the seeds' range after it"
)


def census_error(run, inverse):
    """A run's error (the protocol's) and, for a setting of ``inverse``, its
    final parameter error after it, to 3 digits."""
    text = f"{protocol.run_error(run):.3g}"
    if run["problem"] not in inverse:
        return text
    found = NOT_RECORDED
    if recorded([run]):
        found = f"{run_parameter_error(run):.3g}"
    return f"{text} (parameter: {found})"


def note(headers, what):
    """The sentence under a table with parameter columns (their
    ``headers``): ``what`` they hold, the measure, and from when it is
    recorded."""
    names = ", ".join(f"*{header}*" for header in headers)
    return (
        f"{names}: {what}; the parameter error is the largest over the "
        "setting's unknowns of |identified − true| / |true|, recorded by "
        f"the runs made from {SINCE} on (those made before: "
        f"“{NOT_RECORDED}”)."
    )
