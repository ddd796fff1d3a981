"""Fixtures and session-wide settings of the pina-ntk tests.

The shared builders (solvers, trainers, recorders) are in ``helpers.py``,
the independent reference computations in ``reference.py``.
"""

import logging
import warnings

import pytest
import torch

# every test fails that changes the conditions a problem class declares
pytest_plugins = ["problem_isolation"]

logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
warnings.filterwarnings("ignore", message=".*val_dataloader.*")
warnings.filterwarnings("ignore", message=".*does not have many workers.*")
warnings.filterwarnings("ignore", message=".*Checkpoint directory.*")


@pytest.fixture(autouse=True)
def _one_thread():
    # Small networks: one thread is faster and keeps timings reproducible.
    torch.set_num_threads(1)
    yield


@pytest.fixture
def float64():
    """Run the test with ``torch.float64`` as the default dtype."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def pytest_terminal_summary(terminalreporter, config):
    # the order of this run, shown under -q too (pytest-randomly's own line
    # is a header, which -q hides): --randomly-seed=N repeats it
    seed = getattr(config.option, "randomly_seed", None)
    if isinstance(seed, int):
        terminalreporter.write_line(f"test order: --randomly-seed={seed}")
