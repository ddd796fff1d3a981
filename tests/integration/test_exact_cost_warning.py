"""``NTKWeighting.refresh_cost_warning``: when exact updates would take most
of the training time, and what the warning proposes, from the numbers
alone (no training)."""

from pina_ntk import NTKWeighting
from pina_ntk.integration.ntk_weighting import EXACT_SHARE_WARNING


def test_no_warning_at_the_threshold_and_one_above_it():
    # one update of s steps every step: a share of s / (s + 1) of the time;
    # s = 4 puts it at 4/5, the threshold itself, which does not warn
    weighting = NTKWeighting()
    assert 4.0 / (4.0 + 1) == EXACT_SHARE_WARNING
    assert weighting.refresh_cost_warning(100, 4.0, 1.0) is None
    assert weighting.refresh_cost_warning(100, 4.5, 1.0) is not None
    # spaced every 2 steps the same update takes 4/6 of the time
    assert NTKWeighting(2).refresh_cost_warning(100, 4.5, 1.0) is None


def test_the_message_names_the_work_and_the_ways_out():
    trace = NTKWeighting().refresh_cost_warning(100, 9.0, 1.0)
    assert "differentiates each of the 100 residual entries" in trace
    assert "about 9 training steps" in trace and "90%" in trace
    assert "update_every_n_steps=9) or more" in trace
    assert trace.endswith(
        "or SketchNTKWeighting (a sample costs about one more residual "
        "evaluation)."
    )
    rayleigh = NTKWeighting(statistic="rayleigh")
    message = rayleigh.refresh_cost_warning(100, 9.0, 1.0)
    assert "takes one backward pass per condition" in message
    assert "residual entries" not in message
