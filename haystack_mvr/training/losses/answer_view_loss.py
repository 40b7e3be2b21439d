"""CAMVR's answer-view contrastive loss (Eq. 13)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from haystack_mvr.training.losses._common import (
    WeightedLocalLoss,
    check_inputs,
    positive_view_scores,
    scores_and_logits,
)


class AnswerViewLoss(WeightedLocalLoss):
    r"""
    CAMVR Eq. 13: the positive is scored by the view of the snippet that holds the answer, negatives by their best view.

    ``L = -log( e^{f_a(q,d+)/tau} / (e^{f_a(q,d+)/tau} + sum_l e^{f(q,d_l-)/tau}) )``

    with ``a`` the answer view of the positive ``d+`` and ``f(q, d) = max_i f_i(q, d)`` over the real views of
    each negative (in-batch and hard negatives). Averaged over the queries of a batch.

    **Unknown answer view.** Where ``answer_view[b] < 0`` (no answer offset, or an offset outside every snippet)
    the positive is scored by its best view, ``f(q, d+)``: that query's term is then exactly MVR's Eq. 6.

    **Optional local term** (not in the CAMVR paper, off by default): with ``lambda_local > 0`` the loss adds
    ``lambda_local * -log( e^{f_a(q,d+)/tau} / sum_i e^{f_i(q,d+)/tau} )``, MVR's Eq. 7 with the answer view in
    place of the best view, which pushes the answer view above the positive's other views.

    :param lambda_local: Weight of the optional local term (``0.0``: Eq. 13 alone, as in the paper).
    """

    def __init__(self, *, lambda_local: float = 0.0) -> None:
        super().__init__(lambda_local=lambda_local)

    def parts(
        self,
        query: Tensor,
        doc_views: Tensor,
        view_mask: Tensor,
        positive_index: Tensor,
        answer_view: Tensor,
        temperature: float = 1.0,
        exclude: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """
        ``(Eq. 13 loss, local term, best view)`` with the gradient kept (the local term before ``lambda_local``);
        calling the loss (``forward``) gives the scalar loss and :meth:`compute` a :class:`LossOutput` (its
        ``winning_view`` the positive's best view), from these arguments.

        :param query: ``(B, d)`` query vectors.
        :param doc_views: ``(N, K, d)`` view vectors of every document of the batch.
        :param view_mask: ``(N, K)`` bool, ``False`` for padding views.
        :param positive_index: ``(B,)`` long, the row of ``doc_views`` holding each query's positive.
        :param answer_view: ``(B,)`` long, the positive's answer view, ``-1`` where unknown (best view used).
        :param temperature: ``tau`` (MVR Eq. 8).
        :param exclude: Optional ``(B, N)`` bool: documents left out of a query's denominator.
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

        scores, logits, _ = scores_and_logits(query, doc_views, view_mask, temperature, exclude)
        own = positive_view_scores(scores, view_mask, positive_index) / temperature  # (B, K)
        best, winning_view = own.max(dim=-1)
        answer = own.gather(1, safe_view[:, None])[:, 0]
        positive_logit = torch.where(known, answer, best)
        logits = logits.scatter(1, positive_index[:, None], positive_logit[:, None])
        global_loss = F.cross_entropy(logits, positive_index)
        local_loss = (torch.logsumexp(own, dim=-1) - positive_logit).mean()
        return global_loss, local_loss, winning_view
