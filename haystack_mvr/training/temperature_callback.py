"""MVR's annealed temperature (Eq. 8) for sentence-transformers losses, set from the trainer's epoch."""

from __future__ import annotations

from torch import nn
from transformers import TrainerCallback

from haystack_mvr.training.losses.temperature import annealed_temperature


class AnnealedTemperatureCallback(TrainerCallback):
    """
    Before every training step, sets ``tau = max(minimum, exp(-alpha * t))`` (MVR Eq. 8) on a loss from the
    trainer's epoch ``t`` (the completed epochs with ``per_epoch=True``, as in the paper).

    Works on a loss with a ``temperature`` attribute (:class:`~haystack_mvr.training.losses.MultiViewGlobalLocalLoss`,
    :class:`~haystack_mvr.training.losses.MultiViewAnswerViewLoss`) or a ``scale = 1 / tau`` one (sentence-transformers'
    ``MultiVectorMultipleNegativesRankingLoss`` and its GradCache variant). The epoch comes from the trainer's
    state, so a resumed run continues at the right temperature. Each log line (and the trainer's
    ``log_history``) gets ``temperature``.

    Like sentence-transformers' ``SpladeRegularizerWeightSchedulerCallback``; add it with
    :func:`~haystack_mvr.training.add_temperature_callback` so that the logs show it.

    :param loss: The loss to anneal.
    :param alpha: Annealing speed (the paper's best: 0.1).
    :param minimum: The floor (0.3).
    :param per_epoch: Step once per epoch (the paper) or anneal with the fractional epoch.
    :raises ValueError: if the loss has neither ``temperature`` nor ``scale``.
    """

    def __init__(self, loss: nn.Module, *, alpha: float = 0.1, minimum: float = 0.3, per_epoch: bool = True) -> None:
        super().__init__()
        if not (hasattr(loss, "temperature") or hasattr(loss, "scale")):
            msg = f"{type(loss).__name__} has neither a 'temperature' nor a 'scale' attribute to anneal."
            raise ValueError(msg)
        annealed_temperature(0.0, alpha, minimum)  # validates alpha and minimum
        self.loss = loss
        self.alpha = alpha
        self.minimum = minimum
        self.per_epoch = per_epoch
        self.temperature = annealed_temperature(0.0, alpha, minimum, per_epoch=per_epoch)

    def set_epoch(self, epoch: float) -> float:
        """Set the loss's temperature for training progress ``epoch`` and return it."""
        self.temperature = annealed_temperature(epoch, self.alpha, self.minimum, per_epoch=self.per_epoch)
        if hasattr(self.loss, "temperature"):
            self.loss.temperature = self.temperature
        else:
            self.loss.scale = 1.0 / self.temperature
        return self.temperature

    def on_train_begin(self, args, state, control, **kwargs):
        self.set_epoch(state.epoch or 0.0)

    def on_step_begin(self, args, state, control, **kwargs):
        self.set_epoch(state.epoch or 0.0)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is not None and ("loss" in logs or "eval_loss" in logs):
            add_to_log(state, logs, {"temperature": round(self.temperature, 4)})


def add_to_log(state, logs: dict, values: dict) -> None:
    """Add ``values`` to a log line and to the trainer's copy of it (``trainer_state.json``), stored before
    the callbacks run."""
    logs.update(values)
    history = getattr(state, "log_history", None)
    if history and history[-1].get("step") == getattr(state, "global_step", None):
        history[-1].update(values)


def add_temperature_callback(trainer, callback: TrainerCallback) -> TrainerCallback:
    """
    Add ``callback`` to ``trainer`` right after its flow callback, before the printers and loggers, so that each
    log line carries what it adds (callbacks added the usual way run after the printers). For
    :class:`AnnealedTemperatureCallback` and :class:`~haystack_mvr.training.ViewStatsCallback`.
    """
    callbacks = trainer.callback_handler.callbacks
    callbacks.insert(min(1, len(callbacks)), callback)
    return callback
