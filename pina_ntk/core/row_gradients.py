"""Exact block traces from one reverse pass: per-row gradient norms.

``Tr(K_cc) = sum_i ||grad_theta R_i||^2`` needs each residual entry's
gradient on its own. When the residual's rows are points that the model
treats independently, and every parameter enters the residual's graph only
through matrix products whose rows are those points (the weights of linear
layers: ``x W^T + b`` in the forward pass, ``g W`` and ``g W^T`` in the
derivatives that PINA's operators take of it), the gradient of entry ``i``
with respect to a weight ``W`` is a sum of outer products of row ``i`` of
each product's input and of its output gradient,
``grad_W R_i = sum_u a_ui b_ui^T``. Its squared norm,
``sum_uv (a_ui . a_vi)(b_ui . b_vi)``, needs only those rows, and every row's
output gradients come from *one* reverse pass of ``sum_i R_i``: a few
backward passes per residual column (:data:`GROUPS`, to bound the memory),
instead of a pass per entry. This is the *ghost norm* of per-example
gradient clipping (Goodfellow, 2015; Li et al., 2022), taken here through
the input derivatives' double-backward graph as well.

The graph is read, not changed: the products' saved inputs
(``grad_fn._saved_self``, ``_saved_mat1``: PyTorch's *Autograd mechanics*,
*Saved tensors*) and, through node pre-hooks removed afterwards, their
output gradients. Where
the graph holds anything else (a parameter multiplied elementwise, a
convolution, a product whose rows are not the residual's), the function
says so by returning ``None``, and the caller takes another exact path. The
per-row gradients must add up to the gradient autograd computes for the
sum; a parameter whose uses do not is reported the same way. That check
needs a residual in single or double precision: in half precision autograd's
own rounding of the gradient is as large as a missed use, so a half-precision
residual is reported the same way too.
"""

import itertools
import math

import torch

#: Each reverse pass holds at most ``1 / GROUPS`` of a column's output
#: gradients; packed in order, fewer than ``2 GROUPS`` passes per column
#: (see :func:`_groups`).
GROUPS = 4
#: Nodes of a flattening ``reshape``.
_VIEWS = ("ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0")
#: Nodes that pass a parameter on unchanged but transposed.
_TRANSPOSES = ("TBackward0",)
#: Matrix products a parameter may enter as their second factor (input
#: index of that factor), and ``addmm``'s bias (input index 0).
_PRODUCTS = {"MmBackward0": 1, "AddmmBackward0": 2}
#: Where each product saves its first factor.
_FIRST_FACTOR = {"MmBackward0": "_saved_self", "AddmmBackward0": "_saved_mat1"}
#: The precisions in which the rows' sum can be told from a missed use.
_CHECKED_DTYPES = (torch.float32, torch.float64)


def row_gradient_traces(residual, params):
    """
    ``sum_i ||grad_theta R_i||^2`` over the entries of ``residual`` from one
    reverse pass per column, or ``None`` where the graph does not allow it.

    :param torch.Tensor residual: The residual of ``rows`` points, computed
        from ``params`` with its graph, shape ``(rows, ...)``, or that
        tensor flattened by ``reshape(-1)``: row ``i`` depends on point
        ``i`` only (checked by the caller; the function cannot see it).
    :param params: Parameters the kernel is taken with respect to.
    :type params: list[torch.Tensor]
    :return: The trace as a 0-d tensor of the residual's dtype, or ``None``
        if a parameter enters the graph other than through the products
        above, or the residual is not in single or double precision.
    :rtype: torch.Tensor | None

    :Example:
        >>> layer = torch.nn.Linear(2, 3)
        >>> x = torch.randn(5, 2)
        >>> residual = torch.tanh(layer(x)).sum(dim=1)
        >>> fast = row_gradient_traces(residual, list(layer.parameters()))
        >>> rows = [torch.autograd.grad(r, list(layer.parameters()),
        ...         retain_graph=True) for r in residual]
        >>> slow = sum(sum(g.pow(2).sum() for g in row) for row in rows)
        >>> bool(torch.isclose(fast, slow))
        True
    """
    residual = _plain(residual)
    if residual.grad_fn is None:  # independent of every parameter
        return residual.new_zeros(())
    if residual.dim() == 0 or residual.shape[0] == 0:
        return None
    if residual.dtype not in _CHECKED_DTYPES:
        return None
    flat = _point_rows(residual)
    rows = flat.shape[0]
    uses = _parameter_uses(flat.grad_fn, params)
    if uses is None:
        return None
    pairs = [(p, found) for p, found in zip(params, uses) if found]
    captured, active, handles = {}, set(), []
    for node in {use[0] for _, found in pairs for use in found}:
        handles.append(node.register_prehook(_capture(captured, active, node)))
    total = flat.new_zeros(())
    try:
        for column, group in itertools.product(
            range(flat.shape[1]), _groups(pairs)
        ):
            captured.clear()
            active.clear()
            active.update(use[0] for _, found in group for use in found)
            summed = torch.autograd.grad(
                flat[:, column].sum(), [p for p, _ in group],
                retain_graph=True, allow_unused=True,
            )  # fmt: skip
            for grad, (_, found) in zip(summed, group):
                norms = _row_norms(found, captured, rows, grad)
                if norms is None:
                    return None
                total = total + norms
    finally:
        for handle in handles:
            handle.remove()
    return total


def _groups(pairs):
    """The parameters in consecutive groups whose uses' output gradients
    take at most a quarter of all of theirs (a parameter larger than that
    alone): each group is one reverse pass, and holding a quarter of the
    gradients keeps the extra memory well below a training step's."""
    sizes = [sum(_gradient_width(p, use) for use in f) for p, f in pairs]
    budget, groups, held = sum(sizes) / GROUPS, [], math.inf
    for pair, size in zip(pairs, sizes):
        if held + size > budget:
            groups.append([])
            held = 0
        groups[-1].append(pair)
        held += size
    return groups


def _gradient_width(param, use):
    """The columns of a use's output gradient (its rows are the points)."""
    _, kind, transposed, _ = use
    return param.shape[0] if kind == "bias" or transposed else param.shape[1]


def _point_rows(residual):
    """The residual as ``(rows, columns)``. A 1-d residual that flattens a
    tensor of rows (its last node a view of that tensor, as
    ``reshape(-1)`` leaves it) has that tensor's rows, in row-major order."""
    node = residual.grad_fn
    while type(node).__name__ == "AliasBackward0":  # as_subclass's alias
        node = node.next_functions[0][0]
    if residual.dim() == 1 and type(node).__name__ in _VIEWS:
        sizes = node._saved_self_sym_sizes
        if len(sizes) >= 2:
            return residual.reshape(sizes[0], -1)
    return residual.reshape(residual.shape[0], -1)


def _capture(captured, active, node):
    def hook(grad_outputs):
        if node in active:
            captured[node] = grad_outputs[0]

    return hook


def _parameter_uses(root, params):
    """For each parameter, its uses ``(node, kind, transposed, scale)``:
    ``kind`` ``"product"`` (the parameter, transposed or not, is the node's
    second factor) or ``"bias"``; ``None`` if a use is of another kind."""
    consumers, seen, stack = {}, set(), [root]
    while stack:  # every node's consumers, by input node
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for index, (child, _) in enumerate(node.next_functions):
            if child is not None:
                consumers.setdefault(child, []).append((node, index))
                stack.append(child)
    leaves = {
        id(n.variable): n
        for n in consumers
        if type(n).__name__ == "AccumulateGrad"
    }
    found = []
    for param in params:
        leaf = leaves.get(id(param))
        uses = [] if leaf is None else _uses_of(leaf, consumers, param)
        if uses is None:
            return None
        found.append(uses)
    return found


def _uses_of(leaf, consumers, param):
    uses, stack = [], [(leaf, False)]
    while stack:
        node, transposed = stack.pop()
        for user, index in consumers.get(node, []):
            kind = type(user).__name__
            if kind in _TRANSPOSES:
                stack.append((user, not transposed))
            elif _PRODUCTS.get(kind) == index and param.dim() == 2:
                alpha = getattr(user, "_saved_alpha", 1)
                uses.append((user, "product", transposed, alpha))
            elif kind == "AddmmBackward0" and index == 0 and param.dim() == 1:
                if transposed:
                    return None
                uses.append((user, "bias", False, user._saved_beta))
            else:
                return None
    return uses


def _row_norms(uses, captured, rows, summed):
    """``sum_i ||grad_p R_i||^2`` of one parameter from its uses' rows, or
    ``None`` if the rows do not add up to autograd's gradient ``summed``."""
    left, right = [], []
    for node, kind, transposed, scale in uses:
        grad = captured.get(node)
        if grad is None:
            continue  # the use does not reach this column
        grad = _plain(grad)
        if kind == "bias":
            if grad.dim() != 2 or grad.shape[0] != rows:
                return None
            left.append(scale * grad)
            continue
        inputs = _plain(
            getattr(node, _FIRST_FACTOR[type(node).__name__])
        ).detach()
        if grad.dim() != 2 or inputs.dim() != 2 or inputs.shape[0] != rows:
            return None
        a, b = (grad, inputs) if transposed else (inputs, grad)
        left.append(scale * a)
        right.append(b)
    if summed is None:  # autograd finds no gradient: nor may the rows
        return None if left else torch.zeros(())
    summed = _plain(summed)
    if not left:
        return None
    if not right:  # a bias: its row gradient is the sum of the uses' rows
        per_row = sum(left)
        return (
            per_row.pow(2).sum() if _adds_up(per_row.sum(0), summed) else None
        )
    if not _adds_up(sum(a.T @ b for a, b in zip(left, right)), summed):
        return None
    # sum_uv (a_u . a_v)(b_u . b_v) row by row, pair by pair: no copies
    total = summed.new_zeros(())
    for u, v in itertools.combinations_with_replacement(range(len(left)), 2):
        rows_uv = (left[u] * left[v]).sum(1) @ (right[u] * right[v]).sum(1)
        total = total + (rows_uv if u == v else 2 * rows_uv)
    return total


def _adds_up(rows_sum, summed):
    """Whether the rows' sum is autograd's gradient: of the same shape, and
    no entry apart by more than ``1e3`` rounding units (``eps``) of the
    larger of the two's largest magnitudes (at least ``1e-30``): a missed or
    misread use moves the sum by its own size."""
    if rows_sum.shape != summed.shape:
        return False
    eps = torch.finfo(summed.dtype).eps
    scale = max(summed.abs().max().item(), rows_sum.abs().max().item(), 1e-30)
    return (rows_sum - summed).abs().max().item() <= 1e3 * eps * scale


def _plain(tensor):
    return tensor.as_subclass(torch.Tensor)
