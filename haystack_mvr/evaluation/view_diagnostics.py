"""
Multi-view diagnostics of MVR (Zhang et al. 2022, Sec. 5.2) and CAMVR (Sec. 4.4-4.5): pure numpy functions.

- :func:`local_variation` (MVR Eq. 9) and :func:`view_perplexity` (MVR Eq. 10), MVR Table 6;
- :func:`per_view_accuracy`: retrieval with one view of every document alone, CAMVR Table 2;
- :func:`viewer_attention_kl`: KL divergence between viewer-token attention vectors, CAMVR Eq. 14 / Table 3;
- :func:`answer_view_accuracy`: answer accuracy of the matched snippets, CAMVR Eq. 15 / Table 4.

Inputs may be numpy arrays or CPU torch tensors (anything ``np.asarray`` accepts).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from haystack_mvr.evaluation.retrieval_metrics import _check_ks, answer_top_k_accuracy


def _view_mask(view_mask, shape: tuple[int, ...]) -> np.ndarray:
    if view_mask is None:
        return np.ones(shape, dtype=bool)
    mask = np.asarray(view_mask).astype(bool)
    if mask.shape != shape:
        msg = f"view_mask has shape {mask.shape} but the views have shape {shape}; pass one flag per view."
        raise ValueError(msg)
    return mask


def local_variation(view_scores, view_mask=None, *, reduce: bool = True) -> float | np.ndarray:
    """
    MVR Eq. 9, Local Variation: the best view's score minus the mean score of the other views.

    ``LV = max_i f_i(q, d) - (sum_i f_i(q, d) - max_i f_i(q, d)) / (k - 1)``, computed per query-gold-document
    pair and averaged over pairs (MVR Table 6: 0.126 for MVR, 0.052 without the local uniformity loss).
    The paper uses "normalized scores" ``f_i``: pass the scores exactly as the model scores (cosine
    scores for a normalising encoder); LV is not scale invariant.

    :param view_scores: ``(n, k)`` scores ``f_i(q, d)`` of each query with every view of its gold document.
    :param view_mask: ``(n, k)`` bool, ``True`` for real views; padded views are left out of both the max
        and the mean of the others (``k`` becomes the number of real views of that document).
    :param reduce: ``True``: the mean over pairs; ``False``: the ``(n,)`` per-pair values.
    :returns: The mean LV (float), or per-pair LVs; a pair with fewer than two real views has no LV
        (``NaN`` per pair, left out of the mean).
    :raises ValueError: if no pair has two real views.

    Example:
        >>> round(local_variation([[0.9, 0.1, 0.2]]), 6)
        0.75
    """
    scores = np.asarray(view_scores, dtype=np.float64)
    if scores.ndim != 2:
        msg = f"view_scores must be (n_pairs, k), got shape {scores.shape}."
        raise ValueError(msg)
    mask = _view_mask(view_mask, scores.shape)
    k = mask.sum(axis=1)
    best = np.where(mask, scores, -np.inf).max(axis=1, initial=-np.inf)
    total = np.where(mask, scores, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        lv = np.where(k >= 2, best - (total - best) / (k - 1), np.nan)
    if not reduce:
        return lv
    if not np.any(k >= 2):
        msg = "Local variation needs at least one query-document pair with two or more real views."
        raise ValueError(msg)
    return float(np.nanmean(lv))


def view_perplexity_per_doc(
    argmax_views, doc_ids: Sequence[Hashable], *, min_queries: int = 1
) -> dict[Hashable, float]:
    """
    MVR Eq. 10 for each document: ``PPL_d = exp(-sum_i p_i log p_i)`` over its winning-view distribution.

    ``p_i`` is the fraction of the document's queries whose max-scoring view (MVR Eq. 4) is view ``i``.
    Natural logarithm, ``0 log 0 = 0``.

    :param argmax_views: ``(n,)`` int, per query the index of the view that won the max on its gold document.
    :param doc_ids: ``(n,)``, per query its gold document id.
    :param min_queries: Documents with fewer queries are left out (a document with one query always has PPL 1).
    :returns: ``{doc_id: PPL}``, each between 1 and ``min(k, number of the document's queries)``.
    """
    views = np.asarray(argmax_views)
    if views.ndim != 1 or not np.issubdtype(views.dtype, np.integer) or (views.size and views.min() < 0):
        msg = "argmax_views must be a 1-d array of non-negative view indices (one per query)."
        raise ValueError(msg)
    if len(doc_ids) != len(views):
        msg = f"doc_ids has {len(doc_ids)} entries but argmax_views has {len(views)}; pass one gold id per query."
        raise ValueError(msg)
    groups: dict[Hashable, list[int]] = {}
    for view, doc_id in zip(views.tolist(), doc_ids, strict=True):
        groups.setdefault(doc_id, []).append(view)
    result: dict[Hashable, float] = {}
    for doc_id, doc_views in groups.items():
        if len(doc_views) < min_queries:
            continue
        p = np.bincount(doc_views) / len(doc_views)
        p = p[p > 0]
        result[doc_id] = float(np.exp(-np.sum(p * np.log(p))))
    return result


def view_perplexity(argmax_views, doc_ids: Sequence[Hashable], *, min_queries: int = 1) -> float:
    """
    MVR Eq. 10, the perplexity of the winning views, averaged over documents (MVR Table 6: 3.19 for MVR).

    Our reading of the paper (Sec. 5.2): for each query-gold-document pair take the index of the view with
    the max score; group these indices by document; ``p_i`` is the share of the document's queries won by
    view ``i``; ``PPL_d = exp(-sum_i p_i log p_i)`` (natural log, the exponential of the Shannon entropy);
    report the unweighted mean of ``PPL_d`` over documents (each document counts once, however many
    queries it has). PPL is ``k`` when the views win uniformly and 1 when one view wins every query
    (collapse). The paper evaluates documents with on average 4.8 queries; ``min_queries`` lets you leave
    out documents whose PPL is capped by having few queries.

    :param argmax_views: ``(n,)`` int, per query the winning view index on its gold document.
    :param doc_ids: ``(n,)``, per query its gold document id.
    :param min_queries: Leave out documents with fewer queries than this (default 1: every document).
    :returns: The mean PPL over documents.
    :raises ValueError: if no document has ``min_queries`` queries.

    Example:
        >>> round(view_perplexity([0, 1, 2, 0, 0, 0], ["a", "a", "a", "b", "b", "b"]), 6)
        2.0
    """
    per_doc = view_perplexity_per_doc(argmax_views, doc_ids, min_queries=min_queries)
    if not per_doc:
        msg = f"No document has at least {min_queries} queries; lower min_queries or evaluate more queries."
        raise ValueError(msg)
    return float(np.mean(list(per_doc.values())))


def _gold_ranks(scores: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """0-based rank of each query's gold document; ties count against the gold; ``-inf`` gold never hits."""
    rows = np.arange(len(gold))
    gold_scores = scores[rows, gold]
    ranks = (scores >= gold_scores[:, None]).sum(axis=1) - 1
    return np.where(np.isneginf(gold_scores), scores.shape[1], ranks)


def per_view_accuracy(
    query_embeddings,
    doc_views,
    gold_indices,
    view_mask=None,
    *,
    ks: Sequence[int] = (1, 5, 20),
    batch_size: int = 64,
) -> dict[str, float]:
    """
    CAMVR Table 2: gold top-k accuracy when every document is represented by its view ``i`` alone, per view,
    and with the usual max over all real views ("overall", MVR Eq. 4). Exhaustive inner-product search.

    A document whose view ``i`` is padding cannot be retrieved by view ``i`` alone (so a query whose gold
    document lacks view ``i`` is a miss for that view). A gold document tied with others counts as ranked
    after them (no credit for ties, e.g. collapsed views on duplicate passages).

    :param query_embeddings: ``(n, d)`` query embeddings.
    :param doc_views: ``(N, k, d)`` view embeddings of the whole corpus.
    :param gold_indices: ``(n,)`` int, the row of each query's gold document in ``doc_views``.
    :param view_mask: ``(N, k)`` bool, ``True`` for real views; default all real.
    :param ks: Cutoffs.
    :param batch_size: Queries scored at once (memory ``batch_size * N * k`` floats).
    :returns: Fractions ``{"view1_R@1": ..., "view1_R@5": ..., ..., "viewk_R@20": ..., "overall_R@1": ...}``;
        views are numbered from 1, as in the paper.
    """
    queries = np.asarray(query_embeddings)
    views = np.asarray(doc_views)
    gold = np.asarray(gold_indices, dtype=np.int64)
    if queries.ndim != 2 or views.ndim != 3 or queries.shape[1] != views.shape[2]:
        msg = f"Expected queries (n, d) and doc_views (N, k, d); got {queries.shape} and {views.shape}."
        raise ValueError(msg)
    n_docs, k, dim = views.shape
    if gold.shape != (len(queries),) or (gold.size and (gold.min() < 0 or gold.max() >= n_docs)):
        msg = f"gold_indices must hold one row index in [0, {n_docs}) per query."
        raise ValueError(msg)
    if len(queries) == 0:
        msg = "query_embeddings is empty; evaluate at least one query."
        raise ValueError(msg)
    mask = _view_mask(view_mask, (n_docs, k))
    cutoffs = _check_ks(ks)
    flat_views = views.reshape(n_docs * k, dim)

    view_ranks = np.empty((k, len(queries)), dtype=np.int64)
    overall_ranks = np.empty(len(queries), dtype=np.int64)
    for start in range(0, len(queries), batch_size):
        batch = slice(start, start + batch_size)
        scores = (queries[batch] @ flat_views.T).reshape(-1, n_docs, k)
        scores = np.where(mask[None], scores, -np.inf)
        for i in range(k):
            view_ranks[i, batch] = _gold_ranks(scores[:, :, i], gold[batch])
        overall_ranks[batch] = _gold_ranks(scores.max(axis=2), gold[batch])

    result: dict[str, float] = {}
    for i in range(k):
        result |= {f"view{i + 1}_R@{c}": float(np.mean(view_ranks[i] < c)) for c in cutoffs}
    result |= {f"overall_R@{c}": float(np.mean(overall_ranks < c)) for c in cutoffs}
    return result


def answer_view_accuracy(
    matched_snippets: Sequence[Sequence[str]], answers: Sequence[Sequence[str]], ks: Sequence[int] = (5, 20, 100)
) -> dict[str, float]:
    """
    CAMVR Eq. 15, answer-view accuracy: the fraction of queries for which at least one of the top-K retrieved
    documents' *matched snippet* (the snippet of the view that won the max for that query) contains an answer.

    Answers are matched with DPR ``has_answer`` (:func:`haystack_mvr.evaluation.has_answer`), as the overall
    answer accuracy is; compare with ``answer_R@k`` of :func:`compute_retrieval_metrics` on the same ranking
    (CAMVR Table 4: "Overall" vs "Answer View"; their difference is the "Other Views" row).

    :param matched_snippets: Per query, the matched snippet text of each retrieved document, best first
        (``""`` for a padded, empty snippet).
    :param answers: Per query, its answer strings.
    :param ks: Cutoffs K.
    :returns: ``{"answer_view_R@5": ..., "answer_view_R@20": ..., "answer_view_R@100": ...}`` fractions.
    """
    if len(matched_snippets) != len(answers):
        msg = f"{len(matched_snippets)} snippet lists but {len(answers)} answer lists; pass one of each per query."
        raise ValueError(msg)
    if not matched_snippets:
        msg = "matched_snippets is empty; evaluate at least one query."
        raise ValueError(msg)
    accuracy = answer_top_k_accuracy(matched_snippets, answers, ks)
    return {f"answer_view_R@{k}": value for k, value in accuracy.items()}


def viewer_attention_kl(attention, token_mask=None, view_mask=None, *, eps: float = 1e-8) -> np.ndarray:
    """
    CAMVR Eq. 14: KL divergences between the attention vectors of the viewer tokens, averaged over documents.

    ``D_KL(i, j) = sum_l alpha_jl log(alpha_jl / alpha_il)`` (note the order, as printed: the divergence of
    view ``j``'s vector from view ``i``'s), where ``alpha_i`` is the last-layer attention probability vector of
    ``[VIE_i]`` over the ``L`` input positions. CAMVR Table 3: all 0.0 for collapsed MVR, 0.07-0.81 for CAMVR.

    Smoothing: attention to a position can be exactly 0 (softmax underflow, or padding), which makes the
    log infinite. Every real position gets ``eps`` added and each vector is renormalised over the real
    positions: ``alpha <- (alpha + eps) / sum_l (alpha_l + eps)``. Padding positions (``token_mask`` False)
    are dropped before smoothing, so padding never changes a divergence. Tiny negative round-off is
    clipped to 0.

    :param attention: ``(N, k, L)`` attention probabilities of the ``k`` viewer tokens of ``N`` documents
        (average the heads, or pick one, before calling).
    :param token_mask: ``(N, L)`` bool, ``True`` for real tokens (the tokenizer's attention mask).
    :param view_mask: ``(N, k)`` bool, ``True`` for real viewers; a pair ``(i, j)`` is averaged only over
        documents where both are real (``NaN`` where there is none).
    :param eps: Smoothing mass added per real position (``>= 0``; 0 disables smoothing).
    :returns: ``(k, k)`` matrix of mean ``D_KL(i, j)``; the diagonal is 0.
    """
    attn = np.asarray(attention, dtype=np.float64)
    if attn.ndim != 3:
        msg = f"attention must be (N_docs, k, L), got shape {attn.shape}."
        raise ValueError(msg)
    if eps < 0:
        msg = f"eps must be >= 0, got {eps}."
        raise ValueError(msg)
    n_docs, k, length = attn.shape
    tokens = np.ones((n_docs, length), dtype=bool) if token_mask is None else np.asarray(token_mask).astype(bool)
    if tokens.shape != (n_docs, length):
        msg = f"token_mask has shape {tokens.shape}; expected (N_docs, L) = {(n_docs, length)}."
        raise ValueError(msg)
    views = _view_mask(view_mask, (n_docs, k))

    real = np.broadcast_to(tokens[:, None, :], attn.shape)
    p = np.where(real, attn + eps, 0.0)
    if np.any(real & (p <= 0)):
        msg = "An attention vector puts no mass on a real token; smooth it with eps > 0 (the default 1e-8)."
        raise ValueError(msg)
    if not tokens.any(axis=1).all():
        msg = "A document has no real token in token_mask; drop it or fix its mask."
        raise ValueError(msg)
    p = p / p.sum(axis=2, keepdims=True)
    log_p = np.log(np.where(real, p, 1.0))  # padding: p = 0 and log p := 0, so it adds nothing
    neg_entropy = np.sum(p * log_p, axis=2)  # (N, k): sum_l p_jl log p_jl
    cross = np.einsum("njl,nil->nij", p, log_p)  # (N, i, j): sum_l p_jl log p_il
    kl = np.maximum(neg_entropy[:, None, :] - cross, 0.0)  # (N, i, j)

    pair = views[:, :, None] & views[:, None, :]
    counts = pair.sum(axis=0)
    with np.errstate(invalid="ignore"):
        mean = np.where(pair, kl, 0.0).sum(axis=0) / counts
    np.fill_diagonal(mean, 0.0)
    return mean
