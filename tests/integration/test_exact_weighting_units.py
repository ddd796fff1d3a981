"""``NTKWeighting`` on its own, without training: when its cost warning
comes and what it proposes, and its traces from a plain residual
function (one that cannot be evaluated in chunks)."""

import torch

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
    assert "one update takes one backward pass per condition (9 s" in message
    assert "residual entries" not in message


def test_a_plain_residual_function_takes_the_whole_batch():
    # no chunks to evaluate: the blocks' traces from the whole residual,
    # against one reverse pass per entry
    torch.manual_seed(0)
    layer = torch.nn.Linear(2, 1).double()
    params = dict(layer.named_parameters())
    x = torch.rand(6, 2, dtype=torch.float64)

    def residual_fn(p):
        out = torch.func.functional_call(layer, p, (x,)).reshape(-1)
        return [out[:4], torch.tanh(out[4:])]

    weighting = NTKWeighting(chunk_size=2)
    blocks = residual_fn(params)
    prepared = weighting.prepare_sample(params, blocks, None)
    traces, kernel = weighting.complete_sample(
        residual_fn, params, prepared, None
    )
    expected = [
        sum(
            sum(
                g.pow(2).sum()
                for g in torch.autograd.grad(
                    entry, list(params.values()), retain_graph=True
                )
            )
            for entry in block
        )
        for block in blocks
    ]
    assert kernel is None
    torch.testing.assert_close(traces, torch.stack(expected))
