"""Accuracy of the sketched NTK loss weights along PINA training runs.

On PINA's ``AcousticWaveProblem``, trains one run per sketch estimator and
seed (safeguard off: the weights are the estimator's own) in a fresh
single-threaded worker and compares, at chosen steps, the weights the
sketch used with the exact weights at that step's parameters; the exact
weights' own change since step 0 gives the scale. Method:
``docs/benchmark-method.md``; ``overhead.py`` runs it with the other two
studies.

    python benchmarks/sketch_accuracy.py --quick
    python benchmarks/sketch_accuracy.py --output accuracy.md
"""

import gc
import statistics

from lightning.pytorch.callbacks import Callback

import configurations
import harness
from pina_ntk import solver_ntk_weights

#: The settings this study takes as flags.
SETTINGS = ("threads", "depth", "points", "accuracy_width", "accuracy_seeds")
SETTINGS += ("accuracy_checkpoints", "seed")
#: The worker job of the study.
JOB = "sketch_accuracy:run_accuracy"
#: Sketch estimators compared with the exact weights.
ACCURACY_KEYS = configurations.SKETCH_KEYS
#: Label of the row giving the exact weights' own change.
DRIFT_LABEL = "*for scale: exact weights' own change since step 0*"


class ExactReference(Callback):
    """At the ``checkpoints`` (steps from 0): the exact weights at the
    step's parameters (before its update) and the weights the sketch used."""

    def __init__(self, checkpoints):
        super().__init__()
        self.checkpoints = set(checkpoints)
        self.step = 0
        self.exact = {}
        self.sketch = {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.step in self.checkpoints:
            # With one full batch per step the solver's stored points are
            # the step's points, and the optimiser has not moved theta_t.
            self.exact[self.step] = solver_ntk_weights(pl_module, "exact")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.step in self.checkpoints:
            self.sketch[self.step] = harness.applied_weights(pl_module)
        self.step += 1


def run_accuracy(task):
    """Sketched and exact weights along runs of each estimator and seed
    (``seed, seed + 1, ...``), a worker job: ``{key: [{"exact": {step:
    weights}, "sketch": {...}}]}``, one record per seed."""
    checkpoints = task["accuracy_checkpoints"]
    result = {key: [] for key in ACCURACY_KEYS}
    for offset in range(task["accuracy_seeds"]):
        seeded = dict(task, seed=task["seed"] + offset)
        for key in ACCURACY_KEYS:
            solver, callbacks = configurations.build_solver(
                seeded, key, safeguard=None
            )
            reference = ExactReference(checkpoints)
            steps = max(checkpoints) + 1
            configurations.train(seeded, solver, steps, [reference] + callbacks)
            result[key].append(
                {
                    "exact": {str(t): w for t, w in reference.exact.items()},
                    "sketch": {str(t): w for t, w in reference.sketch.items()},
                }
            )
            del solver, callbacks, reference
            gc.collect()
    return result


def weight_error(estimate, reference):
    """``max_c |estimate_c - reference_c| / reference_c`` of two
    ``{condition: weight}``."""
    return max(
        abs(estimate[c] - reference[c]) / reference[c] for c in reference
    )


def summarise_accuracy(accuracy):
    """Each estimator's relative weight errors: ``{key: {step: [error per
    seed]}}``."""
    errors = {}
    for key, records in accuracy.items():
        errors[key] = {}
        for record in records:
            for step, exact in record["exact"].items():
                error = weight_error(record["sketch"][step], exact)
                errors[key].setdefault(int(step), []).append(error)
    return errors


def exact_drift(accuracy, key=ACCURACY_KEYS[0]):
    """How far the exact weights move from step 0 along the runs of
    ``key``: ``{step: [change per seed]}``."""
    drift = {}
    for record in accuracy[key]:
        exact = {int(t): w for t, w in record["exact"].items()}
        start = exact[min(exact)]
        for step, weights in exact.items():
            drift.setdefault(step, []).append(weight_error(weights, start))
    return drift


def settings_line(settings):
    """The page's line on this study's settings."""
    steps = ", ".join(map(str, settings["accuracy_checkpoints"]))
    return (
        f"Accuracy: {settings['depth']}×{settings['accuracy_width']} "
        f"network, {settings['accuracy_seeds']} seed(s) from "
        f"{settings['seed']}, safeguard off, compared at steps {steps}"
    )


def section_numbers(accuracy, settings):
    """The accuracy section's numbers (see :func:`configurations.render`)."""
    checkpoints = settings["accuracy_checkpoints"]
    labelled = [
        (configurations.config_label(key, settings), errors)
        for key, errors in summarise_accuracy(accuracy).items()
    ]
    labelled.append((DRIFT_LABEL, exact_drift(accuracy)))
    errors = [
        [
            label,
            [100 * statistics.median(values[c]) for c in checkpoints],
            100 * max(max(per_seed) for per_seed in values.values()),
        ]
        for label, values in labelled
    ]
    last = str(checkpoints[-1])
    names = list(accuracy[ACCURACY_KEYS[0]][0]["exact"][last])
    weights = []
    for key in ACCURACY_KEYS:
        record = accuracy[key][0]  # the first seed
        weights.append(
            [
                configurations.config_label(key, settings),
                [record["exact"][last][n] for n in names],
                [record["sketch"][last][n] for n in names],
            ]
        )
    return dict(
        checkpoints=checkpoints,
        errors=errors,
        step=checkpoints[-1],
        seed=settings["seed"],
        names=names,
        weights=weights,
    )


def summarise(results, settings):
    """The page's numbers: the settings ``line`` and ``accuracy``."""
    accuracy = section_numbers(results["accuracy"], settings)
    return dict(line=settings_line(settings), accuracy=accuracy)


def main(argv=None):
    """Run the study (or render ``--from-json``) and write its page."""
    return configurations.study_main(
        argv, "sketch_accuracy.py", SETTINGS, ("accuracy",)
    )


if __name__ == "__main__":
    raise SystemExit(main())
