"""What the multi-view tensor losses share: the ``lambda_local`` weighting, shape checks, score helpers (private)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from haystack_mvr.modeling.scoring import max_over_views, view_scores
from haystack_mvr.training.losses.output import LossOutput


class WeightedLocalLoss(nn.Module):
    """
    A loss whose :meth:`parts` gives ``(contrastive loss, local term, winning view)``: the loss is
    ``contrastive + lambda_local * local``. :meth:`forward` and :meth:`compute` take the arguments of :meth:`parts`.
    """

    def __init__(self, *, lambda_local: float) -> None:
        super().__init__()
        if lambda_local < 0:
            msg = f"lambda_local must be non-negative, got {lambda_local}."
            raise ValueError(msg)
        self.lambda_local = lambda_local

    def parts(self, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor, Tensor]:
        raise NotImplementedError

    def forward(self, *args: Any, **kwargs: Any) -> Tensor:
        """The scalar loss (the arguments of :meth:`parts`)."""
        return self.compute(*args, **kwargs).loss

    def compute(self, *args: Any, **kwargs: Any) -> LossOutput:
        """Like :meth:`forward`, but returns the loss with its parts and the positives' winning views."""
        contrastive, local_loss, winning_view = self.parts(*args, **kwargs)
        loss = contrastive + self.lambda_local * local_loss if self.lambda_local else contrastive
        return LossOutput(loss, contrastive.detach(), local_loss.detach(), winning_view.detach())


def check_inputs(query: Tensor, doc_views: Tensor, view_mask: Tensor, positive_index: Tensor, temperature: float):
    if query.dim() != 2 or doc_views.dim() != 3 or query.shape[1] != doc_views.shape[2]:
        msg = f"Expected query (B, d) and doc_views (N, K, d); got {tuple(query.shape)} and {tuple(doc_views.shape)}."
        raise ValueError(msg)
    if view_mask.shape != doc_views.shape[:2]:
        msg = f"view_mask must be (N, K) = {tuple(doc_views.shape[:2])}, got {tuple(view_mask.shape)}."
        raise ValueError(msg)
    if positive_index.shape != (query.shape[0],):
        msg = f"positive_index must be (B,) = ({query.shape[0]},), got {tuple(positive_index.shape)}."
        raise ValueError(msg)
    if not temperature > 0:
        msg = f"temperature must be positive, got {temperature}."
        raise ValueError(msg)


def scores_and_logits(
    query: Tensor, doc_views: Tensor, view_mask: Tensor, temperature: float, exclude: Tensor | None
) -> tuple[Tensor, Tensor, Tensor]:
    """
    :returns: view scores ``(B, N, K)`` (float32), aggregated logits ``max_i f_i(q, d) / tau`` ``(B, N)`` with
        excluded pairs at ``-inf``, and the per-pair winning view ``(B, N)``.
    """
    scores = view_scores(query.float(), doc_views.float())
    best, best_view = max_over_views(scores, view_mask[None].bool())
    logits = best / temperature
    if exclude is not None:
        logits = logits.masked_fill(exclude.bool(), float("-inf"))
    return scores, logits, best_view


def positive_view_scores(scores: Tensor, view_mask: Tensor, positive_index: Tensor) -> Tensor:
    """The positive document's view scores ``f_i(q, d+)`` ``(B, K)``, padding views at ``-inf``."""
    rows = torch.arange(scores.shape[0], device=scores.device)
    own = scores[rows, positive_index]  # (B, K)
    return own.masked_fill(~view_mask[positive_index].bool(), float("-inf"))
