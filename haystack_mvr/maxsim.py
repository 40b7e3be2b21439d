"""Scoring documents' views against a query in numpy: max over views and MaxSim are one formula, written here once.

A query is a matrix ``(m, d)``: a one-vector query is ``m = 1``, a late-interaction (ColBERT) query one row per
vector. A document's score is MaxSim, the sum over the query's rows of each row's best view,
``sum_j max_i <q_j, v_i>``; for ``m = 1`` that is the best view's inner product, ``max_i <q, v_i>`` (MVR's max over
views). Every FAISS search path (``document_stores.faiss``) and every store's annotation (``views``) scores through
these functions. Training scores in torch with ``haystack_mvr.training.negatives.maxsim_scores``, a twin that
``tests/test_maxsim.py`` keeps equal to this one.

Rows of several documents are scored together: ``rows`` ``(r, d)`` grouped by document, document ``i``'s rows
starting at ``starts[i]``.
"""

from __future__ import annotations

import numpy as np


def similarities(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``(r, m)`` float32: each row's inner product with each of the query's ``m`` vectors (``rows @ query.T``; one
    matrix-vector product for ``m = 1``)."""
    if len(query) == 1:
        return (rows @ query[0])[:, None]
    return rows @ query.T


def best_per_vector(scores: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``(n, m)``: each document's best view for each query vector, from the ``(r, m)`` :func:`similarities` of its
    rows (also each document's score for each of ``m`` one-vector queries, scored together)."""
    return np.maximum.reduceat(scores, starts, axis=0)


def document_scores(scores: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``(n,)``: each document's MaxSim (max over views for ``m = 1``) from the ``(r, m)`` :func:`similarities` of its
    rows."""
    if scores.shape[1] == 1:
        return np.maximum.reduceat(scores[:, 0], starts)
    return best_per_vector(scores, starts).sum(axis=1)


def maxsim(views: np.ndarray, query: np.ndarray) -> float:
    """One document's score: MaxSim of its ``(k, d)`` views with the ``(m, d)`` query (its best view for ``m = 1``)."""
    return float(document_scores(similarities(views, query), np.zeros(1, dtype=np.int64))[0])


def best_matches(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For one document's ``(k, m)`` :func:`similarities`: each query vector's best view (the first of equal ones) and
    its score; the document's score is their sum."""
    views = scores.argmax(axis=0)
    return views, scores[views, np.arange(scores.shape[1])]


class BestDocuments:
    """
    Documents scored a block at a time (:meth:`add`), keeping the ``keep`` best so far with their ``(k, m)``
    :func:`similarities` (and, when asked, their rows), so that what a search scored is what its results are
    annotated with: nothing is scored or decoded again, and what is held does not grow with the documents scored.

    A document is dropped only when ``keep`` others score strictly higher, so the ``keep`` best at the end (equal
    scores in the order they were added, as a stable sort orders them) are all held.
    """

    def __init__(self, keep: int, with_rows: bool = False) -> None:
        self.keep = keep
        self.with_rows = with_rows
        self._positions = np.zeros(0, dtype=np.int64)
        self._scores = np.zeros(0, dtype=np.float32)
        self._held: list[tuple[np.ndarray, np.ndarray | None]] = []

    def add(
        self,
        first: int,
        scores: np.ndarray,
        starts: np.ndarray,
        rows: np.ndarray | None = None,
        allowed: np.ndarray | None = None,
    ) -> None:
        """Score the documents ``first, first + 1, ...`` from the ``(r, m)`` :func:`similarities` of their rows
        (document ``i``'s from ``starts[i]``); ``rows`` are those rows (kept with ``with_rows``); ``allowed``: which
        of these documents may be kept (``None``: all)."""
        totals = document_scores(scores, starts)
        candidates = np.arange(len(totals))
        if allowed is not None:
            candidates = candidates[allowed]
        if not len(candidates):
            return
        merged = np.concatenate([self._scores, totals[candidates]])
        if len(merged) > self.keep:
            threshold = np.partition(merged, len(merged) - self.keep)[len(merged) - self.keep]
            kept = np.flatnonzero(merged >= threshold)
        else:
            kept = np.arange(len(merged))
        old = kept[kept < len(self._scores)]
        new = candidates[kept[kept >= len(self._scores)] - len(self._scores)]
        ends = np.r_[starts, len(scores)]
        self._held = [self._held[i] for i in old.tolist()] + [
            (
                scores[ends[i] : ends[i + 1]].copy(),
                rows[ends[i] : ends[i + 1]].copy() if self.with_rows and rows is not None else None,
            )
            for i in new.tolist()
        ]
        self._positions = np.concatenate([self._positions[old], first + new])
        self._scores = merged[kept]

    def best(self) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray | None]]:
        """The ``keep`` best documents, best first (equal scores in the order they were added): their positions,
        their ``(k, m)`` similarities and their rows (``None`` without ``with_rows``)."""
        order = np.lexsort((self._positions, -self._scores))[: self.keep]
        held = [self._held[i] for i in order.tolist()]
        return self._positions[order], [s for s, _ in held], [r for _, r in held]


__all__ = ["BestDocuments", "best_matches", "best_per_vector", "document_scores", "maxsim", "similarities"]
