"""Exact NTK diagnostics during training, for small problems.

:class:`NTKDiagnosticsCallback` follows the quantities of the convergence
theory of Hirsch & Pichi along a PINA training run: the eigenvalues of the
exact kernel ``K(theta_t) = J J^T`` (Assumption 1.3 asks them to stay in
``[k_min, k_max]``), the loss weights (Assumption 1.2), and the time
averages of Theorems *convergence-residuals* and *convergence-gradients*,

    (1/T) sum_{t<T} ||R(theta_t)||^2  and
    (1/T) sum_{t<T} ||grad_theta G(theta_t; theta_t)||^2,

with ``G(theta; z) = 1/2 R(theta)^T Lambda(z) R(theta)`` and ``Lambda`` the
diagonal matrix of the effective per-entry weights of the solver's loss
(:func:`~pina_ntk.core.weights.entry_weights`). PINA minimises
``sum_c w_c reduce(R_c^2) = R^T Lambda R = 2 G``, so a plain gradient step of
learning rate ``lr`` is the paper's step ``theta - eta grad G`` with
``eta = 2 lr``.
"""

import copy

import torch
from lightning.pytorch.callbacks import Callback
from typing_extensions import override

from ..core.residual_functions import residual_jacobian
from .lightning_logging import is_logging_step, log_values
from .pina_adapter import (
    check_kernel_solver,
    solver_reduction,
    trainable_parameters,
)
from .recording import batch_calls, replay_residual_fn
from ..core.checks import check_int, check_optional_interval
from ..core.weights import entry_weights

#: Prefix of the logged names.
LOG_PREFIX = "ntk_diagnostics"


def empty_history():
    """
    A diagnostics history with no steps.

    Keys (lists grow by one entry per training step unless noted):

    * ``names``: condition names, in block order (set at the first step);
    * ``step``: the optimisation step ``t``;
    * ``residual_sq``: ``||R(theta_t)||^2``;
    * ``grad_sq``: ``||grad_theta G(theta_t; theta_t)||^2``;
    * ``avg_residual_sq``, ``avg_grad_sq``: their running means over the
      steps recorded so far, ``(1/T) sum_{t<T}`` with ``T`` the count;
    * ``condition_loss``: ``{name: [unweighted reduced loss of the
      condition]}`` (``mean`` or ``sum`` of ``R_c^2``, as the solver);
    * ``weighted_loss``: the training loss ``sum_c w_c reduce(R_c^2)``;
    * ``weights``: ``{name: [w_c]}``, the solver's condition weights used
      at step ``t``;
    * ``kernel_step``: the steps at which the kernel was built (every
      ``kernel_every_n_steps``), with, per such step, ``eigenvalues``
      (ascending) and ``kernel_traces`` ``{name: [Tr K_cc]}``.

    :return: The empty history.
    :rtype: dict
    """
    return {
        "names": None,
        "step": [],
        "residual_sq": [],
        "grad_sq": [],
        "avg_residual_sq": [],
        "avg_grad_sq": [],
        "condition_loss": {},
        "weighted_loss": [],
        "weights": {},
        "kernel_step": [],
        "eigenvalues": [],
        "kernel_traces": {},
    }


class NTKDiagnosticsCallback(Callback):
    """
    Records exact NTK eigenvalues, loss weights and the convergence theory's
    time averages of a PINA single-model solver, one training step at a time.

    At the start of each training batch the residual of every condition on
    that batch is evaluated at a detached copy of ``theta_t``; every
    ``kernel_every_n_steps`` steps its Jacobian ``J`` (one backward pass per
    residual entry) gives ``K = J J^T`` and its eigenvalues. At the end of the
    batch the weights the solver actually used (``weighting.
    last_saved_weights()``, ones without a weighting) give ``Lambda`` and
    ``grad G = J^T Lambda R`` (one vector-Jacobian product when ``J`` was not
    built). It works with any weighting, NTK-based or not, and costs one
    extra forward and backward pass per step, plus ``n`` backward passes and
    an ``n × n`` eigendecomposition on kernel steps: use it on small problems.

    Written to the trainer's loggers under ``ntk_diagnostics/``:
    ``residual_sq``, ``grad_sq``, ``avg_residual_sq``, ``avg_grad_sq``,
    ``weight/<condition>`` and, on kernel steps, ``eig_min``, ``eig_max`` and
    every eigenvalue as ``eig/<i>`` (ascending), every ``log_every_n_steps``
    steps (as :class:`~pina_ntk.NTKCallback`). The full histories, one entry
    per step, are kept in ``history`` and saved in, and restored from,
    Lightning checkpoints.

    :param int max_entries: The largest number of residual entries ``n`` of a
        batch for which the kernel is built; a larger batch raises
        :class:`ValueError`. Default is ``100``.
    :param int kernel_every_n_steps: Steps between kernel eigendecompositions.
        The residual and gradient averages are updated at every step.
        Default is ``1``.
    :param int log_every_n_steps: Steps between logged values; ``None``
        (default) uses the trainer's ``log_every_n_steps``, or Lightning's
        default of 50 when PINA has set it to 0 (full-batch training).
    :raises ValueError: If an argument is not a positive integer (or
        ``None`` for ``log_every_n_steps``).

    :Example:
        >>> from pina import Trainer
        >>> from pina_ntk import NTKWeighting, NTKCallback
        >>> from pina_ntk.integration.diagnostics_callback import NTKDiagnosticsCallback
        >>> diagnostics = NTKDiagnosticsCallback(max_entries=16)
        >>> solver = PhysicsInformedSingleModelSolver(
        ...     problem, model, weighting=NTKWeighting())  # doctest: +SKIP
        >>> Trainer(solver, max_epochs=100,
        ...         callbacks=[NTKCallback(), diagnostics]).train()
        ... # doctest: +SKIP
        >>> diagnostics.history["avg_residual_sq"][-1]  # doctest: +SKIP
    """

    def __init__(
        self, max_entries=100, kernel_every_n_steps=1, log_every_n_steps=None
    ):
        super().__init__()
        check_int("max_entries", max_entries, 1)
        check_int("kernel_every_n_steps", kernel_every_n_steps, 1)
        check_optional_interval("log_every_n_steps", log_every_n_steps)
        self.max_entries = max_entries
        self.kernel_every_n_steps = kernel_every_n_steps
        self.log_every_n_steps = log_every_n_steps
        self.history = empty_history()
        self._sums = {"residual_sq": 0.0, "grad_sq": 0.0}
        self._pending = None

    @property
    def state_key(self):
        """:return: The checkpoint key, unique per configuration. :rtype: str"""
        return self._generate_state_key(
            max_entries=self.max_entries,
            kernel_every_n_steps=self.kernel_every_n_steps,
        )

    # ------------------------------------------------------------ set-up
    @override
    def setup(self, trainer, pl_module, stage):
        """Check that the solver's residuals can be replayed: a
        single-model solver (the time averages are those of the plain
        residual's loss, which multi-model solvers do not minimise)."""
        check_kernel_solver(
            pl_module, "NTKDiagnosticsCallback", multi_model=False
        )

    # ------------------------------------------------------- training step
    @override
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        """Evaluate ``R(theta_t)`` on the batch and, when due, ``K``."""
        calls = batch_calls(pl_module, batch)
        names = [name for name, _, _ in calls]
        if self.history["names"] is None:
            self.history["names"] = names
        elif names != self.history["names"]:
            raise RuntimeError(
                f"The conditions of the batches changed: "
                f"{self.history['names']} before, {names} now."
            )
        # A detached copy: the optimizer updates the parameters in place
        # before on_train_batch_end, which must still see theta_t's graph.
        params = {
            name: p.detach().clone().requires_grad_(True)
            for name, p in trainable_parameters(pl_module).items()
        }
        residuals = replay_residual_fn(pl_module, calls, names)(params)
        entries = sum(r.numel() for r in residuals)
        if entries > self.max_entries:
            raise ValueError(
                f"NTKDiagnosticsCallback: the batch has {entries} residual "
                f"entries, more than max_entries={self.max_entries}. The exact "
                "kernel costs one backward pass per entry and n x n memory; "
                "raise max_entries if that is affordable, or use "
                "pina_ntk.ntk_traces(solver, method='sketch') instead."
            )
        step = trainer.global_step
        jacobian = None
        if step % self.kernel_every_n_steps == 0:
            jacobian = residual_jacobian(residuals, params)
        self._pending = (step, residuals, params, jacobian)

    @override
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        """Combine ``R(theta_t)`` with the weights the step used; record."""
        if self._pending is None:
            return
        step, residuals, params, jacobian = self._pending
        self._pending = None
        names = self.history["names"]
        sizes = torch.tensor([r.numel() for r in residuals])
        weights = self._step_weights(pl_module, names, residuals[0])
        reduction = solver_reduction(pl_module)
        per_entry = entry_weights(weights, sizes, reduction)
        lam = torch.repeat_interleave(per_entry, sizes.to(per_entry.device))
        flat = torch.cat([r.reshape(-1) for r in residuals])
        weighted = lam * flat.detach()
        if jacobian is None:
            grads = torch.autograd.grad(
                flat,
                list(params.values()),
                grad_outputs=weighted,
                allow_unused=True,
                materialize_grads=True,
            )
            grad_sq = sum(g.pow(2).sum() for g in grads)
        else:
            grad_sq = (jacobian.T @ weighted).pow(2).sum()
        block_sq = torch.stack([r.detach().pow(2).sum() for r in residuals])
        reduced = block_sq
        if reduction == "mean":
            reduced = block_sq / sizes.to(block_sq)
        record = {
            "step": step,
            "residual_sq": float(block_sq.sum()),
            "grad_sq": float(grad_sq),
            "condition_loss": dict(zip(names, reduced.tolist())),
            "weighted_loss": float((weights * reduced).sum()),
            "weights": dict(zip(names, weights.tolist())),
        }
        if jacobian is not None:
            kernel = jacobian @ jacobian.T
            record["eigenvalues"] = torch.linalg.eigvalsh(kernel).tolist()
            bounds = torch.cumsum(torch.cat([sizes.new_zeros(1), sizes]), 0)
            diag = torch.diagonal(kernel)
            record["kernel_traces"] = {
                name: float(diag[bounds[i] : bounds[i + 1]].sum())
                for i, name in enumerate(names)
            }
        self._append(record)
        if is_logging_step(trainer, step, self.log_every_n_steps):
            self._log(trainer, record, step)

    @override
    def on_train_end(self, trainer, pl_module):
        """Drop the references to the last step's graph."""
        self._pending = None

    # ------------------------------------------------------------ helpers
    @staticmethod
    def _step_weights(solver, names, like):
        weighting = getattr(solver, "weighting", None)
        saved = {} if weighting is None else weighting.last_saved_weights()
        values = [saved.get(name, 1.0) for name in names]
        return torch.stack(
            [torch.as_tensor(v).detach().to(like) for v in values]
        )

    def _append(self, record):
        history = self.history
        for key in ("residual_sq", "grad_sq"):
            self._sums[key] += record[key]
        history["step"].append(record["step"])
        history["residual_sq"].append(record["residual_sq"])
        history["grad_sq"].append(record["grad_sq"])
        count = len(history["step"])
        history["avg_residual_sq"].append(self._sums["residual_sq"] / count)
        history["avg_grad_sq"].append(self._sums["grad_sq"] / count)
        history["weighted_loss"].append(record["weighted_loss"])
        for key in ("condition_loss", "weights"):
            for name, value in record[key].items():
                history[key].setdefault(name, []).append(value)
        if "eigenvalues" in record:
            history["kernel_step"].append(record["step"])
            history["eigenvalues"].append(record["eigenvalues"])
            for name, value in record["kernel_traces"].items():
                history["kernel_traces"].setdefault(name, []).append(value)

    def _log(self, trainer, record, step):
        history = self.history
        values = {
            "residual_sq": record["residual_sq"],
            "grad_sq": record["grad_sq"],
            "avg_residual_sq": history["avg_residual_sq"][-1],
            "avg_grad_sq": history["avg_grad_sq"][-1],
        }
        values.update({f"weight/{n}": w for n, w in record["weights"].items()})
        if "eigenvalues" in record:
            eigenvalues = record["eigenvalues"]
            values["eig_min"] = eigenvalues[0]
            values["eig_max"] = eigenvalues[-1]
            values.update(
                {f"eig/{i}": value for i, value in enumerate(eigenvalues)}
            )
        log_values(
            trainer, {f"{LOG_PREFIX}/{k}": v for k, v in values.items()}, step
        )

    # ---------------------------------------------------------- checkpoint
    @override
    def state_dict(self):
        """:return: The histories and running sums. :rtype: dict"""
        return {
            "history": copy.deepcopy(self.history),
            "sums": dict(self._sums),
        }

    @override
    def load_state_dict(self, state_dict):
        """:param dict state_dict: A state from :meth:`state_dict`."""
        self.history = copy.deepcopy(state_dict["history"])
        self._sums = dict(state_dict["sums"])
