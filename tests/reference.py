"""Independent reference computations of the NTK for the tests.

The full Jacobian is assembled row by row with plain autograd on the
solver's own parameters (no functional call, no pina_ntk estimator), and
the kernel ``K = J J^T`` is formed in float64 with NumPy.
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
    blocks = {}
    for name, evaluate, batch in condition_calls(solver):
        residual = torch.Tensor.as_subclass(
            evaluate(batch, solver), torch.Tensor
        )
        flat = residual.reshape(-1)
        rows = []
        for i in range(flat.numel()):
            grads = torch.autograd.grad(
                flat[i], params, retain_graph=True, allow_unused=True
            )
            rows.append(
                torch.cat(
                    [
                        (g if g is not None else torch.zeros_like(p)).reshape(
                            -1
                        )
                        for g, p in zip(grads, params)
                    ]
                )
                .detach()
                .double()
                .numpy()
            )
        blocks[name] = np.stack(rows)
    return blocks


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
