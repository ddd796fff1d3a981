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


def log_values(trainer, values, step):
    """
    Write scalars to the trainer's loggers, at optimisation step ``step``.

    Straight to ``trainer.loggers``, as Lightning's own monitoring callbacks
    (``LearningRateMonitor``, ``DeviceStatsMonitor``) do, not through
    ``pl_module.log``: Lightning keeps every key logged through the module
    in its result collection and resets them all at every epoch, which in
    PINA's full-batch training is every step: each key so logged costs
    every step some Python work, even when written every 50 steps, which a
    small PINN's step on a CPU shows. Values written here cost nothing
    between logging steps; they do not appear in
    ``trainer.callback_metrics``.

    :param trainer: The Lightning trainer.
    :param dict values: ``{name: scalar or 0-d tensor}``.
    :param int step: The optimisation step the values belong to (PINA's
        per-condition losses of that step carry the same step).
    """
    if not trainer.loggers or not values:
        return
    scalars = {key: float(value) for key, value in values.items()}
    for logger in trainer.loggers:
        logger.log_metrics(scalars, step=step)
