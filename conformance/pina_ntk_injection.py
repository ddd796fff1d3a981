"""pytest plugin: every PINA solver built without a weighting gets one of
pina-ntk's, and each test's outcome is written down.

Loaded by ``conformance/run.py`` as ``-p pina_ntk_injection`` into a run of
PINA's own tests. The environment variable ``PINA_NTK_INJECT`` names what
to inject: ``sketch`` (``SketchNTKWeighting()``), ``exact``
(``NTKWeighting()``) or ``none`` (nothing: the reference run). A solver
given a weighting keeps it, so PINA's tests of its own weightings still
test those.

Every PINA solver, including one a test defines, receives its weighting in
``BaseSolver._init_weighting_and_loss``, where ``None`` means no weighting;
wrapping that one method reaches them all, whatever their signature.

``PINA_NTK_RESULTS`` (a file path) receives, as JSON, the kind, how many
weightings were injected (so that a run which injected nothing cannot pass
for a clean one) and each test's outcome with the first line of its error.
"""

import functools
import json
import os

import pytest
from pina._src.solver.base_solver import BaseSolver

import pina_ntk

#: The weighting each kind injects, built afresh for every solver.
WEIGHTINGS = {
    "none": None,
    "sketch": pina_ntk.SketchNTKWeighting,
    "exact": pina_ntk.NTKWeighting,
}


class Injector:
    """Wraps ``BaseSolver._init_weighting_and_loss`` while the session runs,
    counts the weightings it supplies and collects the tests' outcomes."""

    def __init__(self, kind):
        if kind not in WEIGHTINGS:
            raise pytest.UsageError(
                f"PINA_NTK_INJECT must be one of {sorted(WEIGHTINGS)}, "
                f"got {kind!r}"
            )
        self.kind = kind
        self.injected = 0
        self.outcomes = {}
        self._original = None

    def install(self):
        if WEIGHTINGS[self.kind] is None:
            return
        self._original = original = BaseSolver._init_weighting_and_loss

        @functools.wraps(original)
        def init_weighting_and_loss(solver, weighting=None, loss=None):
            if weighting is None:
                weighting = WEIGHTINGS[self.kind]()
                self.injected += 1
            return original(solver, weighting=weighting, loss=loss)

        BaseSolver._init_weighting_and_loss = init_weighting_and_loss

    def uninstall(self):
        if self._original is not None:
            BaseSolver._init_weighting_and_loss = self._original

    def pytest_report_header(self):
        return f"pina-ntk: injecting {self.kind} (PINA_NTK_INJECT)"

    def pytest_runtest_logreport(self, report):
        """Keep a test's worst phase: a failed setup, call or teardown makes
        the test failed, with the first line of its error as the cause."""
        if report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            cause = crash.message if crash is not None else str(report.longrepr)
            cause = (cause.strip().splitlines() or ["?"])[0][:200]
            self.outcomes[report.nodeid] = {"outcome": "failed", "cause": cause}
        elif report.when == "call" or report.skipped:
            self.outcomes.setdefault(
                report.nodeid, {"outcome": report.outcome, "cause": None}
            )

    def results(self):
        return {
            "kind": self.kind,
            "injected": self.injected,
            "tests": self.outcomes,
        }

    def pytest_unconfigure(self):
        self.uninstall()
        path = os.environ.get("PINA_NTK_RESULTS")
        if path:
            with open(path, "w") as handle:
                json.dump(self.results(), handle, indent=1)


def pytest_configure(config):
    injector = Injector(os.environ.get("PINA_NTK_INJECT", "sketch"))
    injector.install()
    config.pluginmanager.register(injector, "pina-ntk-injector")
