"""Multi-view retrieval losses, one per file: MVR's global-local loss and CAMVR's answer-view loss."""

from haystack_mvr.training.losses.answer_view_loss import AnswerViewLoss
from haystack_mvr.training.losses.global_local_loss import GlobalLocalLoss
from haystack_mvr.training.losses.output import LossOutput
from haystack_mvr.training.losses.temperature import annealed_temperature

__all__ = ["AnswerViewLoss", "GlobalLocalLoss", "LossOutput", "annealed_temperature"]
