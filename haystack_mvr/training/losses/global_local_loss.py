"""MVR's global-local loss (Zhang et al. 2022, §3.3, Eq. 5-7)."""

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


class GlobalLocalLoss(WeightedLocalLoss):
    r"""
    MVR Eq. 5: ``L = L_global + lambda_local * L_local``, averaged over the queries of a batch.

    With ``f_i(q, d) = <E(q), E_i(d)>`` and ``f(q, d) = max_i f_i(q, d)`` (Eq. 4, padding views excluded):

    - Eq. 6, global contrastive loss over the positive and every other document of the batch (in-batch and
      hard negatives alike):
      ``L_global = -log( e^{f(q,d+)/tau} / (e^{f(q,d+)/tau} + sum_l e^{f(q,d_l-)/tau}) )``
    - Eq. 7, local uniformity loss over the positive's own views:
      ``L_local = -log( e^{f(q,d+)/tau} / sum_i e^{f_i(q,d+)/tau} )``

    ``tau`` is the annealed temperature of Eq. 8 (:func:`annealed_temperature`), shared by both terms.
    With one view (``K = 1``) the local term is exactly 0 and, like with ``lambda_local = 0``, the loss is DPR's
    in-batch negative log-likelihood (at ``tau = 1``).

    ```python
    loss_fn = GlobalLocalLoss(lambda_local=0.01)
    loss = loss_fn(query, doc_views, view_mask, positive_index, temperature=1.0)   # scalar
    ```

    :param lambda_local: ``lambda``, the weight of the local uniformity loss (the paper's best: 0.01).
    """

    def __init__(self, *, lambda_local: float = 0.01) -> None:
        super().__init__(lambda_local=lambda_local)

    def parts(
        self,
        query: Tensor,
        doc_views: Tensor,
        view_mask: Tensor,
        positive_index: Tensor,
        temperature: float = 1.0,
        exclude: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """
        ``(L_global, L_local, winning view)`` with the gradient kept (``L_local`` before ``lambda_local``); calling
        the loss (``forward``) gives the scalar loss and :meth:`compute` a :class:`LossOutput`, from these arguments.

        :param query: ``(B, d)`` query vectors.
        :param doc_views: ``(N, K, d)`` view vectors of every document of the batch (positives and negatives).
        :param view_mask: ``(N, K)`` bool, ``False`` for padding views (they never change a score).
        :param positive_index: ``(B,)`` long, the row of ``doc_views`` holding each query's positive.
        :param temperature: ``tau`` of Eq. 8.
        :param exclude: Optional ``(B, N)`` bool: documents left out of a query's denominator (e.g. a duplicate of
            its positive gathered from another process). Never set it on a query's own positive.
        """
        check_inputs(query, doc_views, view_mask, positive_index, temperature)
        scores, logits, _ = scores_and_logits(query, doc_views, view_mask, temperature, exclude)
        global_loss = F.cross_entropy(logits, positive_index)
        own = positive_view_scores(scores, view_mask, positive_index) / temperature  # (B, K)
        best, winning_view = own.max(dim=-1)
        local_loss = (torch.logsumexp(own, dim=-1) - best).mean()
        return global_loss, local_loss, winning_view
