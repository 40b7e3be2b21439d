"""Multi-view retrieval losses, one per file: MVR's global-local loss and CAMVR's answer-view loss.

Each file holds the loss's equation as a function on tensors (``global_local_loss``, ``answer_view_loss``) and the
sentence-transformers loss of a ``MultiVectorEncoder`` that computes it (``MultiViewGlobalLocalLoss``,
``MultiViewAnswerViewLoss``).
"""

from haystack_mvr.training.losses.multi_view_answer_view_loss import MultiViewAnswerViewLoss, answer_view_loss
from haystack_mvr.training.losses.multi_view_global_local_loss import MultiViewGlobalLocalLoss, global_local_loss
from haystack_mvr.training.losses.temperature import annealed_temperature

__all__ = [
    "MultiViewAnswerViewLoss",
    "MultiViewGlobalLocalLoss",
    "annealed_temperature",
    "answer_view_loss",
    "global_local_loss",
]
