"""MVR's global-local loss (Zhang et al. 2022, §3.3, Eq. 5-7): its equation and its sentence-transformers loss."""

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


def global_local_loss(
    query: Tensor,
    doc_views: Tensor,
    view_mask: Tensor,
    positive_index: Tensor,
    temperature: float = 1.0,
    exclude: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    r"""
    The two terms of MVR Eq. 5, ``L = L_global + lambda_local * L_local``, averaged over the queries of a batch.

    With ``f_i(q, d) = <E(q), E_i(d)>`` and ``f(q, d) = max_i f_i(q, d)`` (Eq. 4, padding views excluded):

    - Eq. 6, global contrastive loss over the positive and every other document of the batch (in-batch and
      hard negatives alike):
      ``L_global = -log( e^{f(q,d+)/tau} / (e^{f(q,d+)/tau} + sum_l e^{f(q,d_l-)/tau}) )``
    - Eq. 7, local uniformity loss over the positive's own views:
      ``L_local = -log( e^{f(q,d+)/tau} / sum_i e^{f_i(q,d+)/tau} )``

    ``tau`` is the annealed temperature of Eq. 8 (:func:`annealed_temperature`), shared by both terms. With one view
    (``K = 1``) ``L_local`` is exactly 0 and ``L_global`` is DPR's in-batch negative log-likelihood (at ``tau = 1``).

    :param query: ``(B, d)`` query vectors.
    :param doc_views: ``(N, K, d)`` view vectors of every document of the batch (positives and negatives).
    :param view_mask: ``(N, K)`` bool, ``False`` for padding views (they never change a score).
    :param positive_index: ``(B,)`` long, the row of ``doc_views`` holding each query's positive.
    :param temperature: ``tau`` of Eq. 8.
    :param exclude: Optional ``(B, N)`` bool: documents left out of a query's denominator (e.g. a duplicate of its
        positive gathered from another process). Never set it on a query's own positive.
    :returns: ``(L_global, L_local, winning view)``: two scalars with their gradient, and ``(B,)`` long, the view of
        each positive with the highest score ``argmax_i f_i(q, d+)``.
    """
    check_inputs(query, doc_views, view_mask, positive_index, temperature)
    scores, logits = scores_and_logits(query, doc_views, view_mask, temperature, exclude)
    global_loss = F.cross_entropy(logits, positive_index)
    own = positive_view_scores(scores, view_mask, positive_index) / temperature  # (B, K)
    best, winning_view = own.max(dim=-1)
    local_loss = (torch.logsumexp(own, dim=-1) - best).mean()
    return global_loss, local_loss, winning_view


class MultiViewGlobalLocalLoss(MultiViewLoss):
    r"""
    MVR Eq. 5: ``L_global + lambda_local * L_local`` (:func:`global_local_loss`) on a ``MultiVectorEncoder`` batch.

    Takes the model like sentence-transformers' losses and plugs into ``MultiVectorEncoderTrainer``. A batch is
    ``(query, positive, negative_1, ..., negative_n)`` text columns (the negatives optional): every document of the
    batch (all positives and hard negatives, over all processes with ``gather_across_devices``) is a negative of
    every other query, the in-batch negatives of DPR and MVR; another process's copy of a query's own positive is
    left out of its denominator (the no-duplicates sampler sees one process's batch only). Documents are scored by
    their best real view (Eq. 4: MaxSim of a one-vector query), padding views never count.

    **Temperature.** ``tau`` is the attribute :attr:`temperature`; MVR's annealing (Eq. 8,
    ``tau = max(0.3, exp(-0.1 t))`` per epoch) is :class:`~haystack_mvr.training.AnnealedTemperatureCallback`,
    which sets it from the trainer's epoch before each step (and so also after resuming).

    **Logged parts.** ``forward`` returns ``{"global_loss": L_global, "local_loss": lambda_local * L_local}``;
    the trainer adds them up and logs each.

    **Large batches (GradCache).** With ``lambda_local=0`` this loss equals sentence-transformers'
    ``MultiVectorMultipleNegativesRankingLoss(model, scale=1 / tau)`` (tested), so its GradCache variant
    ``CachedMultiVectorMultipleNegativesRankingLoss`` trains Eq. 6 with large batches on a small GPU; the
    temperature callback anneals its ``scale``. The local term (Eq. 7) has no cached variant.

    ```python
    from sentence_transformers import MultiVectorEncoderTrainer
    loss = MultiViewGlobalLocalLoss(model, lambda_local=0.01)
    trainer = MultiVectorEncoderTrainer(model=model, train_dataset=dataset, loss=loss,
                                        callbacks=[AnnealedTemperatureCallback(loss)])
    ```

    :param model: A ``MultiVectorEncoder`` whose query task gives one vector and document task the views.
    :param lambda_local: ``lambda``, the weight of Eq. 7 (the paper's best: 0.01).
    :param temperature: The starting (or fixed) ``tau``.
    :param mini_batch_size: Rows per document forward (bounds padding, not memory).
    :param gather_across_devices: Under DDP, every query also sees the other processes' documents.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        lambda_local: float = 0.01,
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
        :param sentence_features: The tokenized columns, query first (as the trainer passes them).
        :param labels: Not part of the loss. An integer ``answer_view`` column (each positive's answer view, ``-1``
            when unknown, as :class:`~haystack_mvr.training.MultiViewDataCollator` hands it over) is counted in the
            view statistics: how often the answer snippet's view is the one that wins.
        :returns: ``{"global_loss": ..., "local_loss": ...}``, scalars whose sum is Eq. 5.
        """
        query, doc_views, view_mask, positive_index, exclude = self.embed(sentence_features)
        global_loss, local_loss, winning_view = global_local_loss(
            query, doc_views, view_mask, positive_index, self.temperature, exclude
        )
        answer_view = None
        if labels is not None and not labels.is_floating_point() and labels.numel() == winning_view.numel():
            answer_view = self.answer_views(labels, view_mask, positive_index)
        self.view_stats.add(winning_view, doc_views.shape[1], answer_view)
        return {"global_loss": global_loss, "local_loss": self.lambda_local * local_loss}

    @property
    def citation(self) -> str:
        return """
@inproceedings{zhang-etal-2022-multi,
    title = "Multi-View Document Representation Learning for Open-Domain Dense Retrieval",
    author = "Zhang, Shunyu and Liang, Yaobo and Gong, Ming and Jiang, Daxin and Duan, Nan",
    booktitle = "Proceedings of the 60th Annual Meeting of the Association for Computational Linguistics",
    year = "2022",
}
"""
