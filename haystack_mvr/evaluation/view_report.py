"""All multi-view diagnostics of one model on one question set, from the Haystack components' outputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from haystack import Document

from haystack_mvr.datasets import Question
from haystack_mvr.evaluation.pipeline_evaluation import RankedResults
from haystack_mvr.evaluation.view_diagnostics import (
    answer_view_accuracy,
    local_variation,
    per_view_accuracy,
    view_perplexity,
    viewer_attention_kl,
)
from haystack_mvr.views import MATCHED_TEXT_KEY, extract_views


def stack_views(documents: Sequence[Document]) -> tuple[np.ndarray, np.ndarray]:
    """
    The views of embedded documents as one padded array.

    :returns: ``(N, k_max, d)`` float32 views (padding is zeros) and the ``(N, k_max)`` bool mask of real views.
    """
    views = []
    for document in documents:
        matrix = extract_views(document)[0]
        if matrix is None:
            msg = f"Document {document.id!r} has no views; run the multi-view document embedder first."
            raise ValueError(msg)
        views.append(matrix)
    k_max = max(v.shape[0] for v in views)
    dim = views[0].shape[1]
    stacked = np.zeros((len(views), k_max, dim), dtype=np.float32)
    mask = np.zeros((len(views), k_max), dtype=bool)
    for i, v in enumerate(views):
        stacked[i, : v.shape[0]] = v
        mask[i, : v.shape[0]] = True
    return stacked, mask


def view_diagnostics_report(
    documents: Sequence[Document],
    query_embeddings: np.ndarray,
    questions: Sequence[Question],
    *,
    ranked: RankedResults | None = None,
    attention: Sequence[np.ndarray] | None = None,
    ks: Sequence[int] = (1, 5, 20),
) -> dict[str, Any]:
    """
    Collapse diagnostics of MVR (Table 6) and CAMVR (Tables 2, 3, 4) for one model.

    :param documents: The corpus after the multi-view document embedder (views in the meta).
    :param query_embeddings: ``(n, d)``, the text embedder's embedding of each question.
    :param questions: The questions, whose ``positive_id`` must be a document id.
    :param ranked: The retriever's rankings for the same questions; adds answer-view accuracy (CAMVR Eq. 15)
        when the matched views are snippets.
    :param attention: Per document a ``(k, L)`` viewer attention array (``MultiVectorEncoderAdapter.viewer_attention``)
        for a sample of documents; adds the mean off-diagonal viewer KL divergence (CAMVR Table 3).
    :returns: ``local_variation`` (MVR Eq. 9), ``view_perplexity`` (MVR Eq. 10, over documents with at least two
        questions), ``winning_view_share`` (how often each view wins the max on the gold document), and
        ``per_view`` accuracies (``view{i}_R@k`` and ``overall_R@k``), plus the optional entries above.
    """
    views, mask = stack_views(documents)
    row = {d.id: i for i, d in enumerate(documents)}
    missing = [q.positive_id for q in questions if q.positive_id not in row]
    if missing:
        msg = f"{len(missing)} questions have a gold document that is not in the corpus, e.g. {missing[0]!r}."
        raise ValueError(msg)
    queries = np.asarray(query_embeddings, dtype=np.float32)
    gold = np.array([row[q.positive_id] for q in questions], dtype=np.int64)
    gold_scores = np.einsum("nkd,nd->nk", views[gold], queries)
    gold_mask = mask[gold]
    winners = np.where(gold_mask, gold_scores, -np.inf).argmax(axis=1)
    k = views.shape[1]
    report: dict[str, Any] = {
        "views_per_document": float(mask.sum(axis=1).mean()),
        "local_variation": float(local_variation(gold_scores, gold_mask)) if k > 1 else 0.0,
        "view_perplexity": float(view_perplexity(winners, gold.tolist(), min_queries=2)),
        "winning_view_share": [float(np.mean(winners == i)) for i in range(k)],
        "per_view": per_view_accuracy(queries, views, gold, mask, ks=ks),
    }
    if ranked is not None:
        snippets = [[d.meta.get(MATCHED_TEXT_KEY) for d in docs] for docs in ranked.documents]
        if any(s is not None for docs in snippets for s in docs):  # views are snippets (camvr, snippet modes)
            texts = [[s or "" for s in docs] for docs in snippets]  # a global or empty view quotes nothing
            report |= answer_view_accuracy(texts, [q.answers for q in ranked.questions], ks=(5, 20, 100))
    if attention is not None and k > 1:
        length = max(a.shape[1] for a in attention)
        padded = np.zeros((len(attention), k, length))
        token_mask = np.zeros((len(attention), length), dtype=bool)
        attention_view_mask = np.zeros((len(attention), k), dtype=bool)
        for i, a in enumerate(attention):
            padded[i, : a.shape[0], : a.shape[1]] = a
            token_mask[i, : a.shape[1]] = True
            attention_view_mask[i, : a.shape[0]] = True
        kl = viewer_attention_kl(padded, token_mask, attention_view_mask)
        off_diagonal = kl[~np.eye(k, dtype=bool)]
        report["viewer_attention_kl_mean"] = float(np.nanmean(off_diagonal))
        report["viewer_attention_kl"] = np.where(np.isnan(kl), None, kl).tolist()
    return report
