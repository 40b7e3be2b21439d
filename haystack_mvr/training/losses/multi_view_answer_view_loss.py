"""CAMVR's answer-view contrastive loss (Eq. 13): its equation and its sentence-transformers loss."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from haystack_mvr.training.losses._multi_view_loss import (
    MultiViewLoss,
    check_inputs,
    positive_view_scores,
    scores_and_logits,
)


def answer_view_loss(
    query: Tensor,
    doc_views: Tensor,
    view_mask: Tensor,
    positive_index: Tensor,
    answer_view: Tensor,
    temperature: float = 1.0,
    exclude: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    r"""
    CAMVR Eq. 13, the positive scored by the view of the snippet that holds the answer, negatives by their best view:

    ``L = -log( e^{f_a(q,d+)/tau} / (e^{f_a(q,d+)/tau} + sum_l e^{f(q,d_l-)/tau}) )``

    with ``a`` the answer view of the positive ``d+`` and ``f(q, d) = max_i f_i(q, d)`` over the real views of
    each negative (in-batch and hard negatives), averaged over the queries of a batch.

    **Unknown answer view.** Where ``answer_view[b] < 0`` (no answer offset, or an offset outside every snippet)
    the positive is scored by its best view, ``f(q, d+)``: that query's term is then exactly MVR's Eq. 6.

    **Optional local term** (not in the CAMVR paper): ``-log( e^{f_a(q,d+)/tau} / sum_i e^{f_i(q,d+)/tau} )``,
    MVR's Eq. 7 with the answer view in place of the best view, which pushes the answer view above the positive's
    other views; the loss adds it times ``lambda_local``.

    :param query: ``(B, d)`` query vectors.
    :param doc_views: ``(N, K, d)`` view vectors of every document of the batch.
    :param view_mask: ``(N, K)`` bool, ``False`` for padding views.
    :param positive_index: ``(B,)`` long, the row of ``doc_views`` holding each query's positive.
    :param answer_view: ``(B,)`` long, the positive's answer view, ``-1`` where unknown (best view used).
    :param temperature: ``tau`` (MVR Eq. 8).
    :param exclude: Optional ``(B, N)`` bool: documents left out of a query's denominator.
    :returns: ``(Eq. 13 loss, local term, winning view)``: two scalars with their gradient, and ``(B,)`` long, each
        positive's best view (reported even where the answer view scores it).
    :raises ValueError: if an answer view is out of range or a padding view.
    """
    check_inputs(query, doc_views, view_mask, positive_index, temperature)
    if answer_view.shape != positive_index.shape:
        msg = f"answer_view must be (B,) = {tuple(positive_index.shape)}, got {tuple(answer_view.shape)}."
        raise ValueError(msg)
    answer_view = answer_view.to(positive_index.device)
    known = answer_view >= 0
    safe_view = answer_view.clamp(min=0)
    positive_mask = view_mask[positive_index].bool()
    if bool((answer_view >= doc_views.shape[1]).any()) or not bool(
        positive_mask.gather(1, safe_view[:, None])[:, 0][known].all()
    ):
        msg = "answer_view must index a real (unmasked) view of the positive, or be -1 when unknown."
        raise ValueError(msg)

    scores, logits = scores_and_logits(query, doc_views, view_mask, temperature, exclude)
    own = positive_view_scores(scores, view_mask, positive_index) / temperature  # (B, K)
    best, winning_view = own.max(dim=-1)
    answer = own.gather(1, safe_view[:, None])[:, 0]
    positive_logit = torch.where(known, answer, best)
    logits = logits.scatter(1, positive_index[:, None], positive_logit[:, None])
    loss = F.cross_entropy(logits, positive_index)
    local_loss = (torch.logsumexp(own, dim=-1) - positive_logit).mean()
    return loss, local_loss, winning_view


class MultiViewAnswerViewLoss(MultiViewLoss):
    r"""
    CAMVR Eq. 13 (:func:`answer_view_loss`) on a ``MultiVectorEncoder`` batch: the positive is scored by the view of
    the snippet holding the answer, every other document of the batch by its best view.

    The dataset has ``(query, positive, negative_1, ..., negative_n)`` text columns and an integer
    ``answer_view`` column (the positive's answer view, ``-1`` when unknown: that query's term is then MVR's Eq. 6).
    Sentence-transformers hands a label column to the loss as ``labels``; train with
    :class:`~haystack_mvr.training.MultiViewDataCollator`, which treats ``answer_view`` as that column
    (:func:`~haystack_mvr.training.build_st_dataset` writes it). An answer view that the model masks in this batch
    (its snippet was truncated away) counts as unknown.

    The temperature is the attribute :attr:`temperature`, annealed by
    :class:`~haystack_mvr.training.AnnealedTemperatureCallback` as for :class:`MultiViewGlobalLocalLoss`.
    No sentence-transformers loss computes Eq. 13, so there is no GradCache variant.

    :param model: A ``MultiVectorEncoder`` with one-vector queries and snippet views.
    :param lambda_local: Weight of the optional local term (``0``: Eq. 13 alone, as in the paper).
    :param temperature: The starting (or fixed) ``tau``.
    :param mini_batch_size: Rows per document forward.
    :param gather_across_devices: Under DDP, every query also sees the other processes' documents.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        lambda_local: float = 0.0,
        temperature: float = 1.0,
        mini_batch_size: int | None = None,
        gather_across_devices: bool = False,
    ) -> None:
        super().__init__(
            model,
            lambda_local=lambda_local,
            temperature=temperature,
            mini_batch_size=mini_batch_size,
            gather_across_devices=gather_across_devices,
        )

    def forward(self, sentence_features: Iterable[dict[str, Any]], labels: Tensor | None = None) -> dict[str, Tensor]:
        """
        :param sentence_features: The tokenized columns, query first.
        :param labels: ``(B,)`` long: each positive's answer view, ``-1`` when unknown.
        :returns: ``{"answer_view_loss": ..., "local_loss": ...}``, scalars whose sum is the loss.
        :raises ValueError: without labels, or with an answer view outside the model's views.
        """
        if labels is None:
            msg = (
                "The answer-view loss needs each positive's answer view: add an 'answer_view' column and train with "
                "haystack_mvr.training.MultiViewDataCollator (or name the column 'label')."
            )
            raise ValueError(msg)
        query, doc_views, view_mask, positive_index, exclude = self.embed(sentence_features)
        answer_view = labels.to(device=query.device, dtype=torch.long).reshape(-1)
        if bool((answer_view >= doc_views.shape[1]).any()):
            msg = f"answer_view must be below the model's {doc_views.shape[1]} views, got {answer_view.tolist()}."
            raise ValueError(msg)
        # a snippet truncated away in this batch is a padding view: score that positive by its best view instead
        answer_view = self.answer_views(answer_view, view_mask, positive_index)
        loss, local_loss, winning_view = answer_view_loss(
            query, doc_views, view_mask, positive_index, answer_view, self.temperature, exclude
        )
        self.view_stats.add(winning_view, doc_views.shape[1], answer_view)
        return {"answer_view_loss": loss, "local_loss": self.lambda_local * local_loss}
