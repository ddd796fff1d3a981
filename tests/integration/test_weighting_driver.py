"""``KernelWeighting``, the face PINA sees, without training: how it hands
the step to its driver, what it returns outside a training step, when it is
due, and the probe scales of its warm start, each value worked out here."""

import math
from types import SimpleNamespace

import pytest
import torch

from pina_ntk.integration.kernel_weighting import KernelWeighting, block_sizes

LOSSES = {"a": torch.tensor(2.0), "b": torch.tensor(3.0)}


class ScriptedWeighting(KernelWeighting):
    """Samples whose block traces are scripted; the scales each got are
    recorded."""

    def __init__(self, traces=(), **options):
        options = {"safeguard": None, "weight_bounds": (1e-6, 1e6),
                   "gradient_band": None, "unknowns": "excluded",
                   "ramp_steps": 0,
                   **options}  # fmt: skip
        super().__init__(**options)
        self.traces, self.scales = list(traces), []

    def prepare_sample(self, params, residuals, generator, scales=None,
                       isolated=None):  # fmt: skip
        self.scales.append(scales)
        return {}

    def complete_sample(self, residual_fn, params, prepared, generator):
        return torch.tensor(self.traces.pop(0)), None


class Driver:
    def __init__(self, in_step=True, weights=None):
        self.in_training_step = in_step
        self.weight_tensors = weights or {}
        self.asked = []

    def weights_for_step(self, losses):
        self.asked.append(losses)
        return {"a": 0.5, "b": 4.0}


def attached(weighting, training=True):
    """Give ``weighting`` a solver whose trainer is (not) training, as PINA's
    attribute would, without the callback PINA's attachment offers."""
    solver = SimpleNamespace(trainer=SimpleNamespace(training=training))
    weighting.__dict__["_attached_solver"] = solver
    return weighting


def test_in_a_training_step_the_driver_forms_the_weights():
    driver = Driver()
    weighting = attached(ScriptedWeighting())
    weighting.connect(driver)
    assert weighting.update_weights(LOSSES) == {"a": 0.5, "b": 4.0}
    assert driver.asked == [LOSSES]


@pytest.mark.parametrize("training,in_step", [(False, True), (True, False)])
def test_outside_a_training_step_the_last_weights_are_kept(training, in_step):
    # validation or testing (the trainer is not training), or a call outside
    # the step the callback opened: the last weights, else ones
    saved = {"a": torch.tensor(0.25)}
    driver = Driver(in_step=in_step, weights=saved)
    weighting = attached(ScriptedWeighting(), training=training)
    weighting.connect(driver)
    assert weighting.update_weights(LOSSES) == {"a": saved["a"], "b": 1.0}
    assert driver.asked == []
    assert weighting.last_saved_weights() is saved


def test_before_any_weights_pinas_saved_weights_and_ones_are_used():
    weighting = attached(ScriptedWeighting(), training=False)
    pinas = weighting.last_saved_weights()  # PINA's own, before a driver
    assert pinas == {}
    weighting.connect(Driver())
    assert weighting.last_saved_weights() is pinas  # none formed yet
    assert weighting.update_weights(LOSSES) == {"a": 1.0, "b": 1.0}


def test_a_weighting_takes_one_driver():
    weighting, driver = ScriptedWeighting(), Driver()
    weighting.connect(driver)
    weighting.connect(driver)  # the same callback again (a second fit)
    assert weighting.driver is driver
    with pytest.raises(ValueError) as raised:
        weighting.connect(Driver())
    assert str(raised.value) == (
        "This weighting is already driven by another NTKCallback: pass a "
        "single NTKCallback to the Trainer."
    )


def test_without_a_driver_the_weighting_names_the_callback():
    with pytest.raises(RuntimeError) as raised:
        attached(ScriptedWeighting()).update_weights(LOSSES)
    assert str(raised.value) == (
        "ScriptedWeighting needs its Lightning callback, which the solver "
        "adds through configure_callbacks; it was not set up (a solver whose "
        "configure_callbacks was replaced?). Pass callbacks=[pina_ntk."
        "NTKCallback()] to pina.Trainer(...)."
    )


def test_refreshes_are_due_every_n_steps_from_step_0():
    weighting = ScriptedWeighting()
    weighting.refresh_every_n_steps = 3
    due = [step for step in range(10) if weighting.is_due(step)]
    assert due == [0, 3, 6, 9]


def test_the_statistic_of_each_block_before_the_conditions_are_known():
    weighting = ScriptedWeighting()
    blocks = [torch.zeros(2)] * 3
    assert weighting.rayleigh_blocks(blocks) == (False,) * 3
    weighting.statistic = "rayleigh"
    assert weighting.rayleigh_blocks(blocks) == (True,) * 3
    weighting.statistic = "boundary"  # depends on the conditions' roles
    with pytest.raises(RuntimeError) as raised:
        weighting.rayleigh_blocks(blocks)
    assert str(raised.value) == (
        "statistic='boundary' depends on the conditions: set_conditions("
        "names, problem) must come first (the NTKCallback calls it)."
    )


def test_block_sizes_are_exact_counts_in_the_blocks_dtype():
    # 2^24 + 1 entries (a broadcast view: no memory) has no float32 value
    huge = torch.zeros(1, dtype=torch.float64).expand(2**24 + 1)
    sizes = block_sizes([huge, torch.zeros(3, 2, dtype=torch.float64)])
    assert sizes.dtype == torch.float64
    assert sizes.tolist() == [2**24 + 1, 6]
    assert block_sizes([torch.zeros(2, dtype=torch.float32)]).dtype == (
        torch.float32
    )


def test_an_unknown_safeguard_is_named_with_the_choices():
    with pytest.raises(ValueError) as raised:
        ScriptedWeighting(safeguard="strict")
    assert str(raised.value) == (
        "safeguard must be 'default', None, a callable budget h(t) or a "
        "SpacedUpdateSafeguard, got 'strict'."
    )


def sqrt_weights(traces, sizes):
    """``sqrt(w_c)`` of the mean reduction, by hand."""
    mean_diag = sum(traces) / sum(sizes)
    return [math.sqrt(mean_diag / (t / n)) for t, n in zip(traces, sizes)]


def test_the_warm_starts_probes_are_balanced_by_the_samples_so_far():
    # blocks of 3 and 1 entries; samples with block traces (6, 1), (12, 3)
    # and (3, 5): the first probe unscaled, the second scaled by the first
    # sample's weights, the third by the mean of the first two
    weighting = ScriptedWeighting([[6.0, 1.0], [12.0, 3.0], [3.0, 5.0]])
    weighting.warmup_samples, weighting.uses_probe_scales = 3, True
    residuals = [torch.zeros(3), torch.zeros(1)]
    samples = weighting.warm_start(None, {}, residuals, None)
    assert [t.tolist() for t, _ in samples] == [[6, 1], [12, 3], [3, 5]]
    first, second, third = weighting.scales
    assert first is None
    assert second.tolist() == pytest.approx(sqrt_weights([6, 1], [3, 1]))
    assert third.tolist() == pytest.approx(sqrt_weights([9, 2], [3, 1]))


def test_an_unbalanced_warm_start_draws_unscaled_probes():
    weighting = ScriptedWeighting([[6.0, 1.0], [12.0, 3.0]])
    weighting.warmup_samples = 2
    samples = weighting.warm_start(None, {}, [torch.zeros(3)] * 2, None)
    assert len(samples) == 2 and weighting.scales == [None, None]
