"""
Retrieval metrics from ranked results: gold and answer top-k accuracy, MRR@10, nDCG@10, Recall@100.

Every value is a **fraction in [0, 1]**; :func:`haystack_mvr.evaluation.report.markdown_table` prints the
rank-cutoff metrics (every name ending in ``@k``) as percentages, as the papers do.

Gold-id metrics come from ``ranx.evaluate`` (on qrels/run dicts): ``hit_rate@k`` is the gold top-k
accuracy of the MVR/DPR tables, ``mrr@10``, ``ndcg@10`` and ``recall@100`` are the MS MARCO / BEIR ones.
Answer top-k accuracy uses DPR's ``has_answer`` and is computed here (ranx has no notion of answers).
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Sequence

import numpy as np

from haystack_mvr.evaluation.answer_matching import has_answer

DEFAULT_KS: tuple[int, ...] = (1, 5, 20, 100)


def _check_ks(ks: Sequence[int]) -> list[int]:
    checked = sorted({int(k) for k in ks})
    if not checked or checked[0] < 1:
        msg = f"ks must be a non-empty list of positive integers, got {list(ks)}."
        raise ValueError(msg)
    return checked


def _check_same_length(name: str, values: Sequence, n: int) -> None:
    if len(values) != n:
        msg = f"{name} has {len(values)} entries but there are {n} queries; pass one entry per query."
        raise ValueError(msg)


def first_answer_ranks(
    retrieved_texts: Sequence[Sequence[str]], answers: Sequence[Sequence[str]], max_k: int
) -> np.ndarray:
    """
    0-based rank of the first passage among the top ``max_k`` that contains an answer (DPR ``has_answer``).

    :param retrieved_texts: Per query, the texts of its ranked results, best first.
    :param answers: Per query, its list of answer strings.
    :param max_k: Only the first ``max_k`` texts of each query are checked.
    :returns: ``(n_queries,)`` int array; ``max_k`` where no checked text contains an answer.
    """
    _check_same_length("answers", answers, len(retrieved_texts))
    ranks = np.full(len(retrieved_texts), max_k, dtype=np.int64)
    for q, (texts, query_answers) in enumerate(zip(retrieved_texts, answers, strict=True)):
        for rank, text in enumerate(texts[:max_k]):
            if has_answer(query_answers, text):
                ranks[q] = rank
                break
    return ranks


def answer_top_k_accuracy(
    retrieved_texts: Sequence[Sequence[str]], answers: Sequence[Sequence[str]], ks: Sequence[int] = DEFAULT_KS
) -> dict[int, float]:
    """
    DPR answer top-k accuracy: the fraction of queries with an answer-bearing text among their top k.

    :param retrieved_texts: Per query, the texts of its ranked results (passages, or matched snippets), best first.
    :param answers: Per query, its list of answer strings.
    :param ks: Cutoffs.
    :returns: ``{k: fraction}``; an empty query list gives 0.0 for every k.
    """
    ks = _check_ks(ks)
    if not retrieved_texts:
        return {k: 0.0 for k in ks}
    ranks = first_answer_ranks(retrieved_texts, answers, ks[-1])
    return {k: float(np.mean(ranks < k)) for k in ks}


def _ranx_gold_metrics(
    retrieved_ids: Sequence[Sequence[str]], gold_ids: Sequence[str | Collection[str]], ks: list[int]
) -> dict[str, float]:
    try:
        from ranx import evaluate
    except ImportError as e:
        msg = 'Gold-id metrics need ranx: pip install "haystack-mvr[eval]"'
        raise ImportError(msg) from e

    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q, (ids, gold) in enumerate(zip(retrieved_ids, gold_ids, strict=True)):
        golds = [gold] if isinstance(gold, str) else list(gold)
        if not golds:
            msg = f"Query {q} has no gold id; drop it or give it at least one relevant document id."
            raise ValueError(msg)
        if len(set(ids)) != len(ids):
            msg = f"Query {q} retrieved the same document id twice; deduplicate the ranked list first."
            raise ValueError(msg)
        if not ids:
            continue  # every gold metric is 0 for an empty ranking; ranx cannot take one (weighted in below)
        qid = f"q{q}"
        qrels[qid] = {str(g): 1 for g in golds}
        # Strictly decreasing scores reproduce the given order exactly (ranx sorts by score).
        run[qid] = {str(doc_id): float(len(ids) - rank) for rank, doc_id in enumerate(ids)}

    ranx_names = {f"gold_R@{k}": f"hit_rate@{k}" for k in ks}
    ranx_names |= {"MRR@10": "mrr@10", "nDCG@10": "ndcg@10", "Recall@100": "recall@100"}
    if not run:
        return dict.fromkeys(ranx_names, 0.0)
    with warnings.catch_warnings():
        # ranx's numba hit_rate kernel warns about an int cast that cannot matter for hit counts.
        warnings.filterwarnings("ignore", message=".*unsafe cast.*")
        # Plain dicts, not ranx.Qrels / ranx.Run: the same metric kernels, without the typed-dict wrappers that
        # cost several seconds of numba compilation in every new process.
        scores = evaluate(qrels, run, list(ranx_names.values()), save_results_in_run=False)
    share = len(run) / len(retrieved_ids)
    return {name: share * float(scores[ranx_name]) for name, ranx_name in ranx_names.items()}


def compute_retrieval_metrics(
    retrieved_ids: Sequence[Sequence[str]],
    gold_ids: Sequence[str | Collection[str]] | None = None,
    *,
    retrieved_texts: Sequence[Sequence[str]] | None = None,
    answers: Sequence[Sequence[str]] | None = None,
    ks: Sequence[int] = DEFAULT_KS,
) -> dict[str, float]:
    """
    All retrieval metrics of one system on one query set, as fractions in [0, 1].

    :param retrieved_ids: Per query, its ranked document ids, best first (no duplicates).
    :param gold_ids: Per query, its gold document id, or a collection of relevant ids (BEIR qrels, all
        relevance 1). Gives ``gold_R@k`` (gold top-k accuracy: a gold id is among the top k, ranx
        ``hit_rate@k``), ``MRR@10``, ``nDCG@10`` and ``Recall@100`` (ranx).
    :param retrieved_texts: Per query, the texts of its ranked documents, aligned with ``retrieved_ids``.
    :param answers: Per query, its answer strings. With ``retrieved_texts`` gives ``answer_R@k``
        (DPR answer top-k accuracy). The two must be given together.
    :param ks: Cutoffs for ``gold_R@k`` and ``answer_R@k``.
    :returns: ``{"gold_R@1": ..., "gold_R@5": ..., "MRR@10": ..., "nDCG@10": ..., "Recall@100": ...,
        "answer_R@1": ..., ...}``; only the families whose inputs were given.
    :raises ValueError: on mismatched lengths, a query without gold id, duplicate ids in a ranked list,
        ``retrieved_texts`` without ``answers`` (or the reverse), or no gold ids and no answers at all.

    Example:
        >>> compute_retrieval_metrics([["d2", "d1"]], ["d1"], ks=[1, 2])["gold_R@2"]
        1.0
    """
    ks = _check_ks(ks)
    n = len(retrieved_ids)
    if (retrieved_texts is None) != (answers is None):
        msg = "Pass retrieved_texts and answers together: answer accuracy needs both (or neither)."
        raise ValueError(msg)
    if gold_ids is None and answers is None:
        msg = "Nothing to evaluate: pass gold_ids, or retrieved_texts and answers, or both."
        raise ValueError(msg)
    if n == 0:
        msg = "retrieved_ids is empty; evaluate at least one query."
        raise ValueError(msg)

    metrics: dict[str, float] = {}
    if gold_ids is not None:
        _check_same_length("gold_ids", gold_ids, n)
        metrics |= _ranx_gold_metrics(retrieved_ids, gold_ids, ks)
    if retrieved_texts is not None and answers is not None:
        _check_same_length("retrieved_texts", retrieved_texts, n)
        for q, (ids, texts) in enumerate(zip(retrieved_ids, retrieved_texts, strict=True)):
            if len(ids) != len(texts):
                msg = f"Query {q}: {len(ids)} ids but {len(texts)} texts; give one text per retrieved id."
                raise ValueError(msg)
        accuracy = answer_top_k_accuracy(retrieved_texts, answers, ks)
        metrics |= {f"answer_R@{k}": value for k, value in accuracy.items()}
    return metrics
