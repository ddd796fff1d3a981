"""Run PINA's own solver, weighting and callback tests three ways: as PINA
ships them, with ``SketchNTKWeighting()`` and with ``NTKWeighting()`` in
every solver built without a weighting; report each test that fails with a
weighting but passes without, by cause.

    python conformance/run.py                  # all three kinds
    python conformance/run.py --kinds none sketch --keep out/

Each kind runs in a fresh folder of its own (PINA's tests write
``./lightning_logs``), at most ``--jobs`` at a time. The run without a
weighting must fail exactly the tests listed in ``known-failures.toml``
(PINA's tests against its released wheel); the exit status is non-zero when
a weighting adds a failure, when the run without one fails a test that is
not listed, when a weighting was never injected, or when a run breaks off.
"""

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: PINA's tests, copied unmodified (README.md says from where).
PINA_TESTS = HERE / "pina-0.3.2" / "tests"
KNOWN_FAILURES = HERE / "known-failures.toml"
#: The folders of PINA's tests this command runs.
SUITES = ("tests/test_solver", "tests/test_weighting", "tests/test_callback")
KINDS = ("none", "sketch", "exact")
#: What each kind puts into a solver built without a weighting.
INJECTED = {
    "none": "nothing",
    "sketch": "SketchNTKWeighting()",
    "exact": "NTKWeighting()",
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--kinds",
        nargs="+",
        choices=KINDS,
        default=list(KINDS),
        help="which runs to make; 'none' is always made, as the reference",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(len(KINDS), os.cpu_count() or 1),
        help="runs at the same time (default: three, at most one per core)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="folder for each run's results and log (default: a temporary "
        "folder, removed afterwards)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=1800.0,
        help="seconds one run may take (default: 1800)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if "none" not in args.kinds:
        args.kinds = ["none", *args.kinds]
    return args


def start(kind, folder):
    """Start PINA's tests with ``kind`` injected, in a fresh copy of them in
    ``folder``; return the process."""
    folder.mkdir(parents=True)
    shutil.copytree(PINA_TESTS, folder / "tests")
    # an ini file of its own: PINA's tests run under pytest's defaults, not
    # under this repository's pytest options
    (folder / "pytest.ini").write_text("[pytest]\n")
    env = dict(os.environ)
    env.update(
        PINA_NTK_INJECT=kind,
        PINA_NTK_RESULTS=str(folder / "results.json"),
        PYTHONPATH=os.pathsep.join(
            filter(None, [str(HERE), env.get("PYTHONPATH")])
        ),
        PYTHONWARNINGS="ignore",
    )
    # PINA's networks are tiny: one thread each, so that the runs share the
    # cores instead of fighting for them
    env.setdefault("OMP_NUM_THREADS", "1")
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "pina_ntk_injection",
        # PINA's tests depend on their order (see known-failures.toml)
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        "-q",
        *SUITES,
    ]
    log = open(folder / "pytest.log", "w")
    return subprocess.Popen(
        command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT
    )


def run_all(kinds, root, jobs, timeout):
    """Run every kind (at most ``jobs`` at a time); return
    ``{kind: (exit status, results or None)}``."""
    waiting, running, done = list(kinds), {}, {}
    while waiting or running:
        while waiting and len(running) < jobs:
            kind = waiting.pop(0)
            running[kind] = start(kind, root / kind)
        kind, process = next(iter(running.items()))
        try:
            status = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            status = process.wait()
        del running[kind]
        results = root / kind / "results.json"
        done[kind] = (
            status,
            json.loads(results.read_text()) if results.exists() else None,
        )
    return done


def load_known(path=KNOWN_FAILURES):
    """``{test id: cause}`` of PINA's own failures without a weighting."""
    known = {}
    for entry in tomllib.loads(path.read_text())["failure"]:
        for test in entry["tests"]:
            known[test] = entry["cause"]
    return known


def failures(results):
    """``{test id: cause}`` of the tests that failed in one run."""
    return {
        test: outcome["cause"]
        for test, outcome in results["tests"].items()
        if outcome["outcome"] == "failed"
    }


def compare(done, known):
    """The verdict on finished runs: ``(problems, lines)``, where
    ``problems`` counts what makes the command fail and ``lines`` is the
    report."""
    lines, problems = [], 0
    status, reference = done["none"]
    if reference is None:
        return 1, [f"none: the run broke off (exit status {status})"]
    base = failures(reference)
    unknown = sorted(set(base) - set(known))
    fixed = sorted(set(known) - set(base))
    lines.append(
        f"none: {len(reference['tests'])} tests, {len(base)} failed, "
        f"{len(base) - len(unknown)} of them listed as PINA's own"
    )
    if unknown:
        problems += len(unknown)
        lines.append(
            f"  {len(unknown)} failed without a weighting and are not in "
            "known-failures.toml:"
        )
        lines.extend(f"    {test}: {base[test]}" for test in unknown)
    if fixed:
        lines.append(
            f"  {len(fixed)} listed in known-failures.toml passed "
            "(remove them from the list):"
        )
        lines.extend(f"    {test}" for test in fixed)
    for kind in [k for k in done if k != "none"]:
        status, results = done[kind]
        if results is None:
            problems += 1
            lines.append(f"{kind}: the run broke off (exit status {status})")
            continue
        new = {
            test: cause
            for test, cause in failures(results).items()
            if test not in base
        }
        missing = set(reference["tests"]) ^ set(results["tests"])
        lines.append(
            f"{kind}: {len(results['tests'])} tests with "
            f"{INJECTED[kind]} injected into {results['injected']} solvers, "
            f"{len(new)} new failures"
        )
        if results["injected"] == 0:
            problems += 1
            lines.append("  no weighting was injected: nothing was tested")
        if missing:
            problems += 1
            lines.append(
                f"  {len(missing)} tests ran in only one of 'none' and "
                f"'{kind}', e.g. {sorted(missing)[0]}"
            )
        problems += len(new)
        by_cause = collections.defaultdict(list)
        for test, cause in new.items():
            by_cause[cause].append(test)
        for cause, tests in sorted(by_cause.items(), key=lambda x: -len(x[1])):
            lines.append(f"  {len(tests)} x {cause}")
            lines.extend(f"    {test}" for test in sorted(tests))
    return problems, lines


def main(argv=None):
    args = parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="pina-ntk-conformance-"))
    if args.keep is not None:
        for kind in args.kinds:
            shutil.rmtree(root / kind, ignore_errors=True)
    try:
        done = run_all(args.kinds, root, args.jobs, args.timeout)
        problems, lines = compare(done, load_known())
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print("PINA's tests (solver, weighting, callback) with pina-ntk injected")
    print("\n".join(lines))
    print(f"{problems} problems: FAIL" if problems else "no new failures: PASS")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
