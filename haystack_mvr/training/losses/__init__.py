"""Multi-view retrieval losses, one per file: MVR's global-local loss and CAMVR's answer-view loss.

``GlobalLocalLoss`` / ``AnswerViewLoss`` compute the equations on tensors; ``MultiViewGlobalLocalLoss`` /
``MultiViewAnswerViewLoss`` are the same losses as sentence-transformers losses of a ``MultiVectorEncoder``.
"""

from haystack_mvr.training.losses.answer_view_loss import AnswerViewLoss
from haystack_mvr.training.losses.global_local_loss import GlobalLocalLoss
from haystack_mvr.training.losses.multi_view_answer_view_loss import MultiViewAnswerViewLoss
from haystack_mvr.training.losses.multi_view_global_local_loss import MultiViewGlobalLocalLoss
from haystack_mvr.training.losses.output import LossOutput
from haystack_mvr.training.losses.temperature import annealed_temperature

__all__ = [
    "AnswerViewLoss",
    "GlobalLocalLoss",
    "LossOutput",
    "MultiViewAnswerViewLoss",
    "MultiViewGlobalLocalLoss",
    "annealed_temperature",
]
