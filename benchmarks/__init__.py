"""The benchmarks of pina-ntk: one sub-package per study, and what the
studies share beside this file (``harness.py``: worker processes, step
timer, memory probe, provenance, pages and flags; ``paired_cost.py``: the
interleaved rounds of the cost studies of one set-up against another).

Each script runs as a file from the repository root, as the pages' commands
write it (``python benchmarks/suite/weightings.py --quick``), or as a module
(``python -m benchmarks.suite.weightings --quick``); either way it imports
the others by their full names (``from benchmarks.suite import
weightings``). A script run as a file puts the repository root first on
``sys.path`` (the line after its other imports) in place of its own
folder. Worker jobs are named ``"benchmarks.<study>.<module>:<function>"``.
The layout: ``docs/architecture.md``, *The benchmarks*."""
