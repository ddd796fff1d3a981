"""Independent reference computations of the NTK for the tests.

The full Jacobian is assembled row by row with plain autograd on the
solver's own parameters (no functional call, no pina_ntk estimator), and
the kernel ``K = J J^T`` is formed in float64 with NumPy. One sketch sample
is recomputed from its probe (or parameter direction) with that kernel.
"""

import numpy as np
import torch

from pina_ntk.integration.diagnostics import condition_calls


def jacobian_blocks(solver):
    """
    Rows of the residual Jacobian, grouped by condition.

    :return: ``{condition: (n_c, p) float64 array}``.
    """
    params = [p for p in solver.parameters() if p.requires_grad]
    return {
        name: jacobian_rows(evaluate(batch, solver), params)
        for name, evaluate, batch in condition_calls(solver)
    }


def jacobian_rows(residual, params):
    """
    The rows ``grad_theta R_i`` of one residual, in its entries' order: one
    ``torch.autograd.grad`` per entry (the graph is retained).

    :return: ``(numel, p)`` float64 array, parameters in ``params`` order.
    """
    flat = torch.Tensor.as_subclass(residual, torch.Tensor).reshape(-1)
    rows = []
    for i in range(flat.numel()):
        grads = torch.autograd.grad(
            flat[i], params, retain_graph=True, allow_unused=True
        )
        rows.append(
            torch.cat(
                [
                    (g if g is not None else torch.zeros_like(p)).reshape(-1)
                    for g, p in zip(grads, params)
                ]
            )
            .detach()
            .double()
            .numpy()
        )
    return np.stack(rows)


def kernel(blocks):
    """The full kernel ``J J^T`` (rows in block order) and block slices."""
    jac = np.concatenate(list(blocks.values()))
    slices, start = {}, 0
    for name, rows in blocks.items():
        slices[name] = slice(start, start + len(rows))
        start += len(rows)
    return jac @ jac.T, slices


def block_traces(blocks):
    """``{condition: Tr(K_cc)}`` from the Jacobian rows."""
    return {name: float((rows**2).sum()) for name, rows in blocks.items()}


def hutchinson_variances(K, slices, probe, scales=None):
    """Exact variance of ``g_c^T (K g)_c`` for each block; with ``scales``
    (``{name: s_c}``) of ``v_c^T (K v)_c / s_c^2``, ``v = S g``."""
    diag = np.ones(K.shape[0])
    for name, sl in slices.items():
        diag[sl] = 1.0 if scales is None else scales[name]
    out = {}
    for name, sl in slices.items():
        proj = np.zeros_like(K)
        proj[sl, :] = (diag[:, None] * K * diag[None, :])[sl, :] / diag[sl][
            0
        ] ** 2
        sym = 0.5 * (proj + proj.T)
        frob = float((sym**2).sum())
        if probe == "gaussian":
            out[name] = 2.0 * frob
        else:
            out[name] = 2.0 * (frob - float((np.diag(sym) ** 2).sum()))
    return out


def predictor_sample(blocks, probe, scales=None):
    """
    One predictor sketch given its probe ``v`` (blocks ``v_c = s_c g_c``):
    ``v_c . (K v)_c / s_c^2`` per block, with ``K = J J^T`` in float64.

    :param blocks: Jacobian rows per block, in the probe's entry order.
    :param probe: The probe blocks (tensors).
    :param scales: ``s_c`` per block, or ``None`` (all ``1``).
    :return: ``(C,)`` float64 array.
    """
    jac = np.concatenate(list(blocks))
    v = np.concatenate(
        [
            torch.Tensor.as_subclass(g, torch.Tensor)
            .detach()
            .double()
            .numpy()
            .reshape(-1)
            for g in probe
        ]
    )
    kv = jac @ (jac.T @ v)
    out, start = [], 0
    for c, rows in enumerate(blocks):
        sl = slice(start, start + len(rows))
        s = 1.0 if scales is None else float(scales[c])
        out.append(float(v[sl] @ kv[sl]) / s**2)
        start += len(rows)
    return np.array(out)


def parameter_sample(blocks, z):
    """One parameter-space sketch given its direction ``z``: ``||J_c z||^2``
    per block (independent of the order of a block's rows)."""
    z = z.detach().double().numpy()
    return np.array([float(((rows @ z) ** 2).sum()) for rows in blocks])
