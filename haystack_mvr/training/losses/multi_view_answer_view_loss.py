"""CAMVR's answer-view loss (Eq. 13) as a sentence-transformers loss of a ``MultiVectorEncoder``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from haystack_mvr.training.losses._st_common import MultiViewLoss
from haystack_mvr.training.losses.answer_view_loss import AnswerViewLoss


class MultiViewAnswerViewLoss(MultiViewLoss):
    r"""
    CAMVR Eq. 13 (:class:`AnswerViewLoss`) on a ``MultiVectorEncoder`` batch: the positive is scored by the view of
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
            AnswerViewLoss(lambda_local=lambda_local),
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
        loss, local_loss, winning_view = self.loss.parts(
            query, doc_views, view_mask, positive_index, answer_view, self.temperature, exclude
        )
        self.view_stats.add(winning_view, doc_views.shape[1], answer_view)
        return {"answer_view_loss": loss, "local_loss": self.lambda_local * local_loss}
