"""Peak extra memory of PINA training with each NTK loss weighting.

Measures the peak extra tensor memory of a short training run of every row
of :data:`configurations.CONFIGS` on PINA's ``AcousticWaveProblem``,
relative to unweighted training, in one fresh single-threaded worker per
network, and checks the memory target (every sketch at most 1.3x). Method:
``docs/benchmark-method.md``; ``overhead.py`` runs it with the other two
studies.

    python benchmarks/peak_memory.py --quick
    python benchmarks/peak_memory.py --output memory.md
"""

import gc
import math

import configurations
import harness

#: The settings this study takes as flags.
SETTINGS = ("threads", "widths", "depth", "points", "period", "memory_steps")
SETTINGS += ("seed",)
#: The worker job measuring one network.
JOB = "peak_memory:run_memory"
#: The largest allowed peak-memory ratio to unweighted training.
MEMORY_TARGET = 1.3
#: The configurations the memory target applies to.
MEMORY_TARGET_KEYS = configurations.SKETCH_KEYS


def run_memory(task):
    """Peak extra memory of every row for one network (a worker job):
    ``{"peaks": {key: bytes}, "parameters": int}``. Exact every step trains
    one step, the others ``memory_steps``."""
    # One unmeasured step first, so that one-time allocations of the
    # process (CUDA context and cuBLAS workspace, lazily built buffers) are
    # not charged to the first measured run: in overhead.py the timing runs
    # come first, and this study run on its own must measure the same.
    solver, callbacks = configurations.build_solver(task, "unweighted")
    configurations.train(task, solver, 1, callbacks)
    del solver, callbacks
    gc.collect()
    peaks = {}
    parameters = None
    for key in configurations.CONFIG_KEYS:
        solver, callbacks = configurations.build_solver(task, key)
        parameters = configurations.parameter_count(solver)
        probe = harness.MemoryProbe(cuda=task["accelerator"] == "cuda")
        steps = 1 if key == "exact_every_step" else task["memory_steps"]
        configurations.train(task, solver, steps, [probe] + callbacks)
        peaks[key] = probe.peak_bytes
        del solver, callbacks, probe
        gc.collect()
    return {"peaks": peaks, "parameters": parameters}


def memory_ratio(peaks, key):
    """:return: Peak extra memory of ``key`` over the unweighted run's."""
    if peaks["unweighted"] <= 0:
        return math.inf
    return peaks[key] / peaks["unweighted"]


def target_checks(width, peaks, settings):
    """The memory targets of one network, on the ratios rounded to the
    three decimals the page shows."""
    return [
        dict(
            width=width,
            label=f"memory, {configurations.config_label(key, settings)}",
            measured=round(memory_ratio(peaks, key), 3),
            limit=MEMORY_TARGET,
        )
        for key in MEMORY_TARGET_KEYS
    ]


def settings_line(settings):
    """The page's line on this study's settings."""
    if settings["accelerator"] == "cuda":
        method = (
            "`torch.cuda.max_memory_allocated()` during training minus "
            "`torch.cuda.memory_allocated()` at its start"
        )
    else:
        method = (
            "peak running sum of the CPU allocator's events in torch's "
            "profiler (`profile_memory=True`) above the level at the start "
            "of training"
        )
    return (
        f"Peak extra memory: one run per configuration, "
        f"{settings['memory_steps']} steps (exact every step: 1); {method}"
    )


def summarise(results, settings):
    """The page's numbers (:func:`configurations.render`): per network and
    row the peak in MiB and its ratio to unweighted training; the targets."""
    rows, targets, parameters = [], [], {}
    for width in settings["widths"]:
        peaks = results["memory"][width]["peaks"]
        parameters[str(width)] = results["memory"][width]["parameters"]
        for key in configurations.CONFIG_KEYS:
            memory = [peaks[key] / 2**20, memory_ratio(peaks, key)]
            label = configurations.config_label(key, settings)
            rows.append(dict(width=width, key=key, label=label, memory=memory))
        targets += target_checks(width, peaks, settings)
    line = settings_line(settings)
    return dict(line=line, parameters=parameters, rows=rows, targets=targets)


def main(argv=None):
    """Run the study (or render ``--from-json``) and write its page."""
    return configurations.study_main(
        argv, "peak_memory.py", SETTINGS, ("memory",)
    )


if __name__ == "__main__":
    raise SystemExit(main())
