"""Log which view of the positives wins: MVR's view-collapse diagnostic, for the multi-view losses."""

from __future__ import annotations

from torch import nn
from transformers import TrainerCallback

from haystack_mvr.training.temperature_callback import add_to_log


class ViewStatsCallback(TrainerCallback):
    """
    Adds to each training log line ``view_wins`` (per view: how many positives it won, ``argmax_i f_i(q, d+)``, since
    the last line, summed over processes) and, where the batches carry an ``answer_view`` column (CAMVR and snippet
    models on squad-mv), ``answer_view_agreement`` (the share of positives whose winning view is the answer view).
    One view winning everything is the collapse MVR's local loss prevents.

    :param loss: A :class:`~haystack_mvr.training.losses.MultiViewGlobalLocalLoss` or
        :class:`~haystack_mvr.training.losses.MultiViewAnswerViewLoss` (anything with ``view_stats``).
    """

    def __init__(self, loss: nn.Module) -> None:
        super().__init__()
        if not hasattr(loss, "view_stats"):
            msg = f"{type(loss).__name__} keeps no view statistics (use a haystack-mvr multi-view loss)."
            raise ValueError(msg)
        self.loss = loss

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is not None and "loss" in logs:
            add_to_log(state, logs, self.loss.view_stats.pop())
