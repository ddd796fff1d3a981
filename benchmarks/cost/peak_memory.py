"""Peak extra memory of PINA training with each NTK loss weighting, against
unweighted training, in a fresh worker per network; its target. Method:
``docs/benchmark-method.md``."""

import math
import sys
from pathlib import Path

# run as a file (not with -m): the repository root first on sys.path
sys.path[0] = sys.path[0] if __package__ else str(Path(__file__).parents[2])

from benchmarks import harness
from benchmarks.cost import configurations
from benchmarks.cost.configurations import config_label, train_row

SCRIPT = "cost/peak_memory.py"
#: The settings this study takes as flags.
SETTINGS = ("threads", "widths", "depth", "points", "period", "memory_steps")
SETTINGS += ("seed", "rows")
#: The largest allowed ratio of a sketch's peak to unweighted training's.
MEMORY_TARGET = 1.3


def run_memory(task):
    """A worker job: ``{"peaks": {key: bytes}, "parameters"}`` of a network."""
    # One unmeasured step first: the process's one-time allocations (CUDA
    # context, cuBLAS workspace, lazy buffers) are charged to no run, as in
    # overhead.py, where the timing runs come first.
    train_row(task, "unweighted", 1)
    peaks = {}
    for key in configurations.measured_keys(task):
        probe = harness.MemoryProbe(cuda=task["accelerator"] == "cuda")
        steps = 1 if key == "exact_every_step" else task["memory_steps"]
        parameters = train_row(task, key, steps, probe)
        peaks[key] = probe.peak_bytes
    return {"peaks": peaks, "parameters": parameters}


def numbers(results, settings, width):
    """A network's parameters, ``{key: [MiB, ratio]}`` and targets."""
    peaks = results["memory"][width]["peaks"]
    memory, checks, base = {}, [], peaks["unweighted"]
    for key in configurations.measured_keys(settings):
        ratio = peaks[key] / base if base > 0 else math.inf
        memory[key] = [peaks[key] / 2**20, ratio]
    for key in [k for k in configurations.SKETCH_KEYS if k in memory]:
        label = f"memory, {config_label(key, settings)}"
        measured = round(memory[key][1], 3)
        check = dict(width=width, label=label, measured=measured)
        checks.append(dict(check, limit=MEMORY_TARGET))
    return results["memory"][width]["parameters"], memory, checks


def settings_line(settings):
    """The page's line on this study's settings."""
    method = (
        "`torch.cuda.max_memory_allocated()` during training minus "
        "`torch.cuda.memory_allocated()` at its start"
        if settings["accelerator"] == "cuda"
        else "peak running sum of the CPU allocator's events in torch's "
        "profiler (`profile_memory=True`) above the level at the start of "
        "training"
    )
    return (
        f"Peak extra memory: one run per configuration, "
        f"{settings['memory_steps']} steps (exact every step: 1); {method}"
    )


main = configurations.study_main(SCRIPT, SETTINGS, ("memory",))

if __name__ == "__main__":
    raise SystemExit(main())
