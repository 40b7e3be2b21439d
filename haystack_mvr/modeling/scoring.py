"""Pure scoring functions shared by training, evaluation and the encoders (torch only)."""

from __future__ import annotations

import torch
from torch import Tensor


def view_scores(queries: Tensor, views: Tensor) -> Tensor:
    """
    Inner products of every query with every view of every document (MVR Eq. 4, individual scores).

    :param queries: ``(B, d)``.
    :param views: ``(N, K, d)``.
    :returns: ``(B, N, K)`` scores ``f_i(q, d)``.
    """
    return torch.einsum("bd,nkd->bnk", queries, views)


def max_over_views(scores: Tensor, view_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """
    Aggregate score ``f(q, d) = max_i f_i(q, d)`` (MVR Eq. 4); masked (padding) views never win.

    :param scores: ``(..., K)`` individual view scores.
    :param view_mask: ``(..., K)`` or broadcastable bool, ``True`` for real views.
    :returns: ``(values, indices)``, each of shape ``(...)``.
    """
    if view_mask is not None:
        scores = scores.masked_fill(~view_mask.bool(), torch.finfo(scores.dtype).min)
    return scores.max(dim=-1)
