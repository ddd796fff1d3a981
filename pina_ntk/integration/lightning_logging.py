"""How the callbacks log through Lightning (one rule for all of them)."""

#: Steps between logged values when PINA's full-batch ``Trainer`` has set
#: ``log_every_n_steps=0``: Lightning's own default.
FALLBACK_LOG_EVERY = 50


def is_logging_step(trainer, step, every=None):
    """
    Whether ``step`` is a logging step.

    Each ``log`` call costs about 0.3 ms on a CPU, a sizeable share of a
    small PINN step, so values are logged every few steps only.

    :param trainer: The Lightning trainer.
    :param int step: The optimisation step, from 0.
    :param int every: Steps between logged values; ``None`` uses the
        trainer's ``log_every_n_steps``, or Lightning's default of 50 when
        PINA has set it to 0 (full-batch training, one step per epoch):
        :data:`FALLBACK_LOG_EVERY`.
    :rtype: bool
    """
    if every is None:
        every = trainer.log_every_n_steps or FALLBACK_LOG_EVERY
    return step % every == 0


def log_values(pl_module, values):
    """
    Log scalars through the solver, at step or epoch level as PINA does.

    PINA sets ``log_every_n_steps=0`` in full-batch mode, where Lightning
    only writes epoch-level values (an epoch is one step there).

    :param pl_module: The solver.
    :param dict values: ``{name: scalar or 0-d tensor}``.
    """
    per_step = pl_module.trainer.log_every_n_steps > 0
    # batch_size=1: one value per step, nothing for Lightning to infer
    options = dict(on_step=per_step, on_epoch=not per_step, batch_size=1)
    for key, value in values.items():
        pl_module.log(key, value, **options)
