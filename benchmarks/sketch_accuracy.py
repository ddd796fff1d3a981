"""Accuracy of the sketched NTK loss weights along PINA training runs, one
per estimator and seed, safeguard off, against the exact weights. Method:
``docs/benchmark-method.md``."""

import statistics

from lightning.pytorch.callbacks import Callback

import configurations
import harness
from configurations import SKETCH_KEYS, config_label, train_row
from pina_ntk import solver_ntk_weights

#: The settings this study takes as flags.
SETTINGS = ("threads", "depth", "points", "accuracy_width", "accuracy_seeds")
SETTINGS += ("accuracy_checkpoints", "seed")
#: Label of the row giving the exact weights' own change.
DRIFT_LABEL = "*for scale: exact weights' own change since step 0*"


class ExactReference(Callback):
    """At the ``checkpoints`` (steps from 0): the exact weights at the
    step's parameters (before its update) and the weights the sketch used,
    ``weights = {"exact": {step: weights}, "sketch": {...}}``."""

    def __init__(self, checkpoints):
        super().__init__()
        self.checkpoints, self.step = set(checkpoints), 0
        self.weights = {"exact": {}, "sketch": {}}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.step in self.checkpoints:
            # With one full batch per step the solver's stored points are
            # the step's points, and the optimiser has not moved theta_t.
            exact = solver_ntk_weights(pl_module, "exact")
            self.weights["exact"][str(self.step)] = exact

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.step in self.checkpoints:
            sketch = harness.applied_weights(pl_module)
            self.weights["sketch"][str(self.step)] = sketch
        self.step += 1


def run_accuracy(task):
    """A worker job: ``{key: [ExactReference.weights per seed]}``."""
    result = {key: [] for key in SKETCH_KEYS}
    for seed in range(task["seed"], task["seed"] + task["accuracy_seeds"]):
        for key in SKETCH_KEYS:
            reference = ExactReference(task["accuracy_checkpoints"])
            steps = max(reference.checkpoints) + 1
            seeded = dict(task, seed=seed)
            train_row(seeded, key, steps, reference, safeguard=None)
            result[key].append(reference.weights)
    return result


def weight_error(e, r):
    """``max_c |e_c - r_c| / r_c`` of two ``{condition: weight}``."""
    return max(abs(e[c] - r[c]) / r[c] for c in r)


def settings_line(settings):
    """The page's line on this study's settings."""
    steps = ", ".join(map(str, settings["accuracy_checkpoints"]))
    return (
        f"Accuracy: {settings['depth']}×{settings['accuracy_width']} "
        f"network, {settings['accuracy_seeds']} seed(s) from "
        f"{settings['seed']}, safeguard off, compared at steps {steps}"
    )


def numbers(accuracy, settings):
    """The section's numbers: weight errors per step (median over seeds)
    and at most; the first seed's weights at the last step."""
    checkpoints = settings["accuracy_checkpoints"]
    steps, last = [str(c) for c in checkpoints], str(checkpoints[-1])
    errors = []
    for key in (*SKETCH_KEYS, None):  # None: the exact weights' change
        table = []
        for record in accuracy[key or SKETCH_KEYS[0]]:
            estimate, exact = record["sketch"], record["exact"]
            if key is None:  # the exact weights against the first step's
                estimate, exact = exact, dict.fromkeys(steps, exact[steps[0]])
            table.append([weight_error(estimate[s], exact[s]) for s in steps])
        label = DRIFT_LABEL if key is None else config_label(key, settings)
        medians = [100 * statistics.median(seeds) for seeds in zip(*table)]
        errors.append([label, medians, 100 * max(map(max, table))])
    names = list(accuracy[SKETCH_KEYS[0]][0]["exact"][last])
    weights = []
    for key in SKETCH_KEYS:
        record = accuracy[key][0]  # the first seed
        row = [[record[p][last][n] for n in names] for p in ("exact", "sketch")]
        weights.append([config_label(key, settings), *row])
    section = dict(checkpoints=checkpoints, errors=errors, step=checkpoints[-1])
    return dict(section, seed=settings["seed"], names=names, weights=weights)


main = configurations.study_main("sketch_accuracy.py", SETTINGS, ("accuracy",))

if __name__ == "__main__":
    raise SystemExit(main())
