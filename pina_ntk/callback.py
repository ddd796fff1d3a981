"""The Lightning callback that drives the NTK weightings in PINA's loop."""

import hashlib
import warnings

import torch
from lightning.pytorch.callbacks import Callback

from .estimators import balanced_probe_scales
from .lightning_logging import is_logging_step, log_values
from .moving_average import MovingAverage
from .residuals import (
    ResidualRecorder,
    check_kernel_solver,
    to_device,
    trainable_parameters,
)
from .weighting import _KernelWeighting
from .validation import check_optional_interval
from .weights import entry_weights, guarded_weights


def probe_seed(seed, rank, step):
    """
    The seed of the probes drawn by process ``rank`` at ``step``.

    A BLAKE2b hash of the three integers: well mixed (neighbouring steps and
    ranks get unrelated streams, also in the low 32 bits that seed torch's
    CPU generator) and cheap enough to run at every step.

    :param int seed: The run's base seed.
    :param int rank: The global rank of the process.
    :param int step: The optimisation step.
    :return: A 63-bit seed.
    :rtype: int
    """
    digest = hashlib.blake2b(
        f"{seed},{rank},{step}".encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "little") >> 1


class NTKCallback(Callback):
    """
    Computes NTK weights inside each PINA training step.

    On every training batch it records the residual each condition's
    ``evaluate`` returns (reusing the step's own forward pass), runs the
    weighting's estimator when due (exact traces, or the predictor /
    parameter-space sketch at displaced copies of the parameters), folds the
    result into the moving-average kernel buffer, applies the spaced-update
    safeguard and hands the weights to the solver's loss aggregation.

    Exact weights, the sketch's warm start and, with
    ``SketchNTKWeighting(sample_after_backward=False)``, every sketch sample
    are computed before the step's backward pass, so the step uses the
    weights of its own parameters ``theta_t`` (Algorithms 1 and 3). By
    default a sketch sample is split: what needs the training graph (the
    predictor's ``J^T g``) runs before the backward pass, the evaluations at
    displaced parameters in ``on_after_backward``, still at ``theta_t`` but
    with the training graph freed; that sample enters the weights of step
    ``t + 1``.

    Logged through the solver (``pl_module.log``) every
    ``log_every_n_steps`` optimisation steps: ``ntk_weight/<condition>``,
    ``ntk_trace/<condition>`` (the trace estimate behind the weights),
    ``ntk_safeguard/accepted``, ``ntk_safeguard/rejected`` and
    ``ntk_safeguard/sum``. The whole state (buffers, safeguard, step counter,
    probe generator, weights) is saved in and restored from Lightning
    checkpoints.

    The step counter counts optimisation steps (training batches); with
    ``Trainer(batch_size=...)`` the statistics of a step use that step's
    batch.

    :param int log_every_n_steps: Steps between logged values; ``None``
        (default) uses the trainer's ``log_every_n_steps``, or Lightning's
        default of 50 when PINA has set it to 0 (full-batch training).
    :raises ValueError: If ``log_every_n_steps`` is not ``None`` or a
        positive integer.

    :Example:
        >>> from pina import Trainer
        >>> from pina_ntk import SketchNTKWeighting, NTKCallback
        >>> solver = PhysicsInformedSingleModelSolver(
        ...     problem, model, weighting=SketchNTKWeighting())  # doctest: +SKIP
        >>> trainer = Trainer(solver, max_epochs=500,
        ...                   callbacks=[NTKCallback()])  # doctest: +SKIP
        >>> trainer.train()  # doctest: +SKIP
    """

    def __init__(self, log_every_n_steps=None):
        super().__init__()
        check_optional_interval("log_every_n_steps", log_every_n_steps)
        self.log_every_n_steps = log_every_n_steps
        self._solver = None
        self._weighting = None
        self._recorder = None
        self._pending_state = None
        # (prepared sample, parameters, global sizes) awaiting the backward
        self._prepared = None
        self.in_training_step = False
        self._reset_statistics()

    def _reset_statistics(self):
        self.step = 0
        self._names = None
        self._weights = None  # (C,) weights of the reduced condition losses
        self._traces = None  # (C,) trace estimates behind the weights
        self._diag = None  # MovingAverage of mean diag(K_cc) per condition
        self._kernel = None  # MovingAverage of the full kernel sketch
        self._points = None  # inputs of the last step (full-kernel check)
        self._generator = None
        self._seed = None
        self._invalid = None  # 0-d bool: an estimate was unusable
        # ((entry counts, dtype, device), counts tensor) of this process
        self._counts = None
        self._warned_invalid = False

    # ------------------------------------------------------------ set-up
    def setup(self, trainer, pl_module, stage):
        """Check the solver and its weighting; install the recorder."""
        weighting = getattr(pl_module, "weighting", None)
        if not isinstance(weighting, _KernelWeighting):
            raise ValueError(
                "NTKCallback drives pina_ntk weightings only: build the solver "
                "with weighting=pina_ntk.NTKWeighting(...) or "
                "weighting=pina_ntk.SketchNTKWeighting(...); got "
                f"{type(weighting).__name__}."
            )
        check_kernel_solver(pl_module, "NTKCallback")
        if weighting.solver is not pl_module:
            raise ValueError(
                "This weighting object is attached to another solver: create "
                "one weighting instance per solver."
            )
        if weighting._callback not in (None, self):
            raise ValueError(
                "This weighting is already driven by another NTKCallback: "
                "pass a single NTKCallback to the Trainer."
            )
        if weighting.full_kernel and trainer.world_size > 1:
            raise ValueError(
                "full_kernel=True is not available in distributed training: "
                "each process only sees its share of the points. Use "
                "full_kernel=False (per-condition traces are all-reduced)."
            )
        if not isinstance(pl_module._loss_fn, torch.nn.MSELoss):
            warnings.warn(
                "NTK weights assume a squared-residual loss (torch.nn.MSELoss);"
                f" the solver uses {type(pl_module._loss_fn).__name__}.",
                stacklevel=2,
            )
        self._solver = pl_module
        self._weighting = weighting
        weighting._callback = self
        if self._recorder is None:
            self._recorder = ResidualRecorder(pl_module.problem)
        self._recorder.attach()

    def teardown(self, trainer, pl_module, stage):
        """Remove the recorder from the problem's conditions."""
        if self._recorder is not None:
            self._recorder.detach()
        self.in_training_step = False
        self._prepared = None

    def on_train_start(self, trainer, pl_module):
        """Create the probe stream and apply a restored checkpoint state."""
        seed = getattr(self._weighting, "seed", None)
        if seed is None:
            # from torch's global generator: lightning.seed_everything fixes it
            seed = int(torch.randint(0, 2**62, (1,)).item())
        self._seed = seed
        self._generator = torch.Generator(device=pl_module.device)
        if self._pending_state is not None:
            self._apply_state(self._pending_state, pl_module.device)
            self._pending_state = None

    # ------------------------------------------------------- training step
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        """Start recording the residuals of this step; seed its probes."""
        self._recorder.attach()
        self._recorder.start()
        self.in_training_step = True
        # Probes depend only on (seed, rank, step): independent across ranks,
        # and identical after a resume without saving generator states.
        self._generator.manual_seed(
            probe_seed(self._seed, trainer.global_rank, self.step)
        )

    def weights_for_step(self, losses):
        """
        The condition weights of the current training step.

        Called by the weighting from inside PINA's loss aggregation, after
        every condition's residual has been computed.

        :param dict losses: ``{condition: scalar loss}``.
        :return: ``{condition: weight}``.
        :rtype: dict
        """
        names = list(losses)
        if self._names is None:
            self._names = names
        elif names != self._names:
            raise RuntimeError(
                "NTK weights compare all conditions within one optimisation "
                f"step, but this batch holds {names} and an earlier one "
                f"{self._names}. Use pina.Trainer(batching_mode="
                "'common_batch_size') (the default) so that every batch "
                "contains every condition."
            )
        weighting = self._weighting
        if weighting.is_due(self.step):
            residuals = self._recorder.blocks(names)
            # Under data parallelism each rank holds a share of every
            # condition's points. Block traces only involve diagonal kernel
            # entries, so the sums over ranks of local traces and entry
            # counts are exactly those of the union of the points; every
            # rank then forms the same weights.
            sizes = self._global_sum(self._local_sizes(residuals))
            params = trainable_parameters(self._solver)
            deferred = weighting.sample_after_backward
            if self._diag is None or not deferred:
                self._draw_now(weighting, names, params, residuals, sizes)
            if deferred:
                # finished in on_after_backward, once the graph is freed
                prepared = weighting.prepare_sample(
                    params,
                    residuals,
                    self._generator,
                    self._probe_scales(weighting, sizes),
                )
                self._prepared = (prepared, params, sizes)
            self._update_weights(weighting, residuals, sizes)
        weighting._saved_weights = dict(zip(names, self._weights))
        return weighting._saved_weights

    def _local_sizes(self, residuals):
        """Entry counts of this process's blocks, rebuilt only when they
        change: building the tensor on a GPU is a host-to-device copy,
        which would synchronise every step."""
        like = residuals[0]
        key = (tuple(r.numel() for r in residuals), like.dtype, like.device)
        if self._counts is None or self._counts[0] != key:
            sizes = torch.tensor(key[0], dtype=like.dtype, device=like.device)
            self._counts = (key, sizes)
        return self._counts[1]

    def _draw_now(self, weighting, names, params, residuals, sizes):
        """Samples while the training graph is alive: the warm start, and
        every sample of a weighting that does not defer them."""
        # Only displaced evaluations go through residual_fn here (R(theta)
        # comes from the training step), so values suffice: chunked.
        residual_fn = self._recorder.residual_fn(
            self._solver, names, weighting.evaluation_chunk_size
        )
        draws = weighting.warmup_samples if self._diag is None else 1
        local_sizes = self._local_sizes(residuals)
        samples = []
        for _ in range(draws):
            scales = self._probe_scales(weighting, sizes, samples, local_sizes)
            samples.append(
                weighting.sample(
                    residual_fn, params, residuals, self._generator, scales
                )
            )
        self._fold_in(weighting, samples, sizes)

    def _probe_scales(self, weighting, sizes, warm=(), local_sizes=None):
        """The predictor probe's scales of a weighting with a balanced
        probe (``None`` otherwise): from the moving average, or during the
        warm start from the mean of this process's ``warm`` samples so far
        (none before the first). Scales fixed before the probe is drawn
        keep each sample unbiased."""
        if not weighting.balances_probe:
            return None
        if self._diag is not None:
            return balanced_probe_scales(self._diag.value * sizes, sizes)
        if not warm:
            return None
        traces = torch.stack([t for t, _ in warm]).mean(dim=0)
        return balanced_probe_scales(traces, local_sizes)

    def on_after_backward(self, trainer, pl_module):
        """Complete a deferred sample at the step's parameters ``theta_t``:
        the backward pass has freed the training graph and the optimiser has
        not stepped yet."""
        if self._prepared is None:
            return
        prepared, params, sizes = self._prepared
        self._prepared = None
        # No training graph is alive now: evaluate every point at once.
        residual_fn = self._recorder.residual_fn(pl_module, self._names)
        sample = self._weighting.complete_sample(
            residual_fn, params, prepared, self._generator
        )
        self._fold_in(self._weighting, [sample], sizes)

    def _fold_in(self, weighting, samples, sizes):
        """Fold samples into the moving-average buffers (Algorithm 3);
        ``sizes`` are the entry counts summed over the processes."""
        if self._diag is None:
            self._diag = MovingAverage(weighting.alpha)
            if weighting.full_kernel:
                self._kernel = MovingAverage(weighting.alpha)
        local = torch.stack([t for t, _ in samples])
        per_entry = self._global_sum(local) / sizes
        self._diag.update(per_entry)
        self._flag_invalid(torch.isfinite(per_entry).all())
        if weighting.full_kernel:
            self._check_fixed_points()
            self._kernel.update(torch.stack([k for _, k in samples]))

    def _flag_invalid(self, ok):
        self._invalid = ~ok if self._invalid is None else self._invalid | ~ok

    @torch.no_grad()
    def _update_weights(self, weighting, residuals, sizes):
        """Weights from the kernel buffer, through the safeguard;
        ``residuals`` are the flat blocks of ``R(theta_t)``."""
        solver = self._solver
        traces = self._diag.value * sizes
        previous = self._weights
        if previous is None:
            previous = torch.ones_like(traces)
        weights, ok = guarded_weights(
            traces,
            sizes,
            previous,
            solver._reduction,
            weighting.weight_bounds,
        )
        self._flag_invalid(ok)

        guard = weighting.safeguard
        if guard is not None:
            local_sq = sum(torch.dot(r, r) for r in residuals)
            residual_sq = self._global_sum(local_sq)
            proposed = entry_weights(weights, sizes, solver._reduction)
            if self._weights is None:
                guard.start(proposed, residual_sq)
            else:
                current = entry_weights(previous, sizes, solver._reduction)
                accept, _ = guard.review(
                    proposed, current, residual_sq, self.step - 1
                )
                weights = torch.where(accept, weights, previous)
        self._weights = weights.detach()
        self._traces = traces.detach()

    def _global_sum(self, tensor):
        """Sum over the processes of a distributed run (identity otherwise)."""
        trainer = self._solver.trainer
        if trainer.world_size == 1:
            return tensor
        # Lightning's all-reduce works in place: keep the caller's tensor
        return trainer.strategy.reduce(tensor.clone(), reduce_op="sum")

    def _check_fixed_points(self):
        points = torch.cat(
            [
                torch.Tensor.as_subclass(b["input"], torch.Tensor)
                .detach()
                .reshape(-1)
                for _, _, b in self._recorder.calls
            ]
        )
        if self._points is not None and not (
            points.shape == self._points.shape
            and torch.equal(points, self._points)
        ):
            raise ValueError(
                "full_kernel=True needs the same points at every step, but "
                "they changed (resampling or several batches per epoch). Use "
                "full_kernel=False, which keeps per-condition traces only."
            )
        self._points = points

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        """Stop recording, log the statistics and advance the step."""
        # A sample still pending had no backward pass (the step was skipped);
        # the parameters may have moved since, so it is dropped.
        self._prepared = None
        self._recorder.stop()
        self.in_training_step = False
        logging_step = is_logging_step(
            trainer, self.step, self.log_every_n_steps
        )
        if self._weights is not None and logging_step:
            self._log(pl_module)
            self._warn_if_invalid()
        self.step += 1

    def on_train_end(self, trainer, pl_module):
        """Report an unusable estimate not yet reported at a logging step."""
        self._warn_if_invalid()

    def _log(self, pl_module):
        values = {}
        for name, weight, trace in zip(
            self._names, self._weights, self._traces
        ):
            values[f"ntk_weight/{name}"] = weight
            values[f"ntk_trace/{name}"] = trace
        guard = self._weighting.safeguard
        if guard is not None and guard.total is not None:
            values["ntk_safeguard/accepted"] = guard.accepted.to(torch.float32)
            values["ntk_safeguard/rejected"] = guard.rejected.to(torch.float32)
            values["ntk_safeguard/sum"] = guard.total
        log_values(pl_module, values)

    def _warn_if_invalid(self):
        # Reading the flag synchronises with the device: done on logging
        # steps only, and only until the warning has been given once.
        if not self._warned_invalid and self._invalid is not None:
            if bool(self._invalid):
                self._warned_invalid = True
                warnings.warn(
                    "An NTK trace estimate was non-finite or non-positive; the "
                    "previous weights were kept. Warning once; check "
                    "ntk_trace/* in the logs (a larger warmup_samples, a "
                    "smaller alpha or, for blocks whose trace is far below "
                    "the others', estimator='parameter' steadies the "
                    "sketch).",
                    RuntimeWarning,
                    stacklevel=2,
                )

    # -------------------------------------------------------- diagnostics
    @property
    def weights(self):
        """:return: The current weights ``{condition: float}``. :rtype: dict"""
        if self._weights is None:
            return {}
        return dict(zip(self._names, self._weights.tolist()))

    @property
    def traces(self):
        """:return: The trace estimates behind the weights. :rtype: dict"""
        if self._traces is None:
            return {}
        return dict(zip(self._names, self._traces.tolist()))

    @property
    def kernel(self):
        """
        The moving-average kernel sketch (``full_kernel=True`` only).

        :return: An ``n × n`` tensor, rows ordered by condition, or ``None``.
        :rtype: torch.Tensor
        """
        return None if self._kernel is None else self._kernel.value

    # ---------------------------------------------------------- checkpoint
    def state_dict(self):
        """:return: Everything needed to resume identically. :rtype: dict"""
        guard = self._weighting.safeguard if self._weighting else None
        return {
            "step": self.step,
            "names": self._names,
            "weights": self._weights,
            "traces": self._traces,
            "diag": None if self._diag is None else self._diag.state_dict(),
            "kernel": (
                None if self._kernel is None else self._kernel.state_dict()
            ),
            "points": self._points,
            "safeguard": None if guard is None else guard.state_dict(),
            "seed": self._seed,
            "invalid": self._invalid,
            "warned_invalid": self._warned_invalid,
        }

    def load_state_dict(self, state_dict):
        """:param dict state_dict: A state from :meth:`state_dict`."""
        self._pending_state = state_dict

    def _apply_state(self, state, device):
        self.step = state["step"]
        self._names = state["names"]
        self._weights = to_device(state["weights"], device)
        self._traces = to_device(state["traces"], device)
        self._points = to_device(state["points"], device)
        self._invalid = to_device(state["invalid"], device)
        self._warned_invalid = state["warned_invalid"]
        for attr in ("diag", "kernel"):
            saved = state[attr]
            average = None
            if saved is not None:
                average = MovingAverage(saved["alpha"])
                average.load_state_dict(
                    {
                        "alpha": saved["alpha"],
                        "value": to_device(saved["value"], device),
                    }
                )
            setattr(self, f"_{attr}", average)
        guard = self._weighting.safeguard
        if guard is not None and state["safeguard"] is not None:
            guard.load_state_dict(
                {k: to_device(v, device) for k, v in state["safeguard"].items()}
            )
        self._seed = state["seed"]
        if self._weights is not None:
            self._weighting._saved_weights = dict(
                zip(self._names, self._weights)
            )
