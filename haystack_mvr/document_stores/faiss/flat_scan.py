"""Exact scans of a Flat index's rows: each document's best view for every query (:class:`DocumentScan`), and the
exact top-k rows of a batch of queries (:func:`flat_top_k`)."""

from __future__ import annotations

import numpy as np

from haystack_mvr.document_stores.faiss.faiss_import import faiss
from haystack_mvr.document_stores.faiss.view_labels import keys_of

_FIRST_BLOCK_ROWS = 4096  # rows whose best k set the first thresholds of a batched Flat search
_BLOCK_SCORES = 1 << 20  # scores per block of a batched Flat search (4 MiB: 16,384 rows for 64 queries)


def flat_top_k(queries: np.ndarray, k: int, rows: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The labels of each query's ``k`` best rows by inner product, best first: exact, like ``IndexFlatIP``.

    One sgemm per block of rows (``rows @ queries.T`` into a reused buffer: the faster orientation), then a
    threshold per query: a row can enter a query's best ``k`` only when it scores above the ``k``-th best so far,
    so after a small first block only a few scores per block pass one vectorised comparison (every query at once)
    and are merged with the best ``k`` in one small partition. A partition of every score of every block cost as
    much as the sgemm. Rows tied at the ``k``-th best score are chosen among arbitrarily; the scores returned are
    exactly the best ``k``.
    """
    n, nq = len(rows), len(queries)
    k = min(k, n)
    first = min(n, max(_FIRST_BLOCK_ROWS, 4 * k))
    scores = rows[:first] @ queries.T  # (rows, queries)
    if k < first:
        best_rows = np.ascontiguousarray(np.argpartition(scores, first - k, axis=0)[first - k :].T)
    else:
        best_rows = np.broadcast_to(np.arange(first), (nq, first)).copy()
    best_scores = np.take_along_axis(scores.T, best_rows, 1)
    threshold = best_scores.min(axis=1)  # the k-th best score so far, per query
    block = max(first, _BLOCK_SCORES // max(1, nq))
    buffer = np.empty((min(block, max(0, n - first)), nq), dtype=np.float32)
    transposed = queries.T
    for lo in range(first, n, block):
        hi = min(n, lo + block)
        scores = np.matmul(rows[lo:hi], transposed, out=buffer[: hi - lo])
        hits = np.flatnonzero(scores > threshold)  # flat: far faster than a 2-D np.nonzero
        if not len(hits):
            continue
        new_scores = scores.reshape(-1)[hits]
        row, query = np.divmod(hits, nq)
        order = np.argsort(query, kind="stable")
        row, query, new_scores = row[order] + lo, query[order], new_scores[order]
        per_query = np.bincount(query, minlength=nq)
        width = k + int(per_query.max())
        merged_scores = np.full((nq, width), -np.inf, dtype=np.float32)
        merged_rows = np.zeros((nq, width), dtype=np.int64)
        merged_scores[:, :k], merged_rows[:, :k] = best_scores, best_rows
        column = k + np.arange(len(query)) - np.repeat(np.cumsum(per_query) - per_query, per_query)
        merged_scores[query, column], merged_rows[query, column] = new_scores, row
        keep = np.argpartition(merged_scores, width - k, axis=1)[:, width - k :]
        best_scores = np.take_along_axis(merged_scores, keep, 1)
        best_rows = np.take_along_axis(merged_rows, keep, 1)
        threshold = best_scores.min(axis=1)
    order = np.argsort(-best_scores, axis=1, kind="stable")
    return labels[np.take_along_axis(best_rows, order, 1)]


class DocumentScan:
    """
    Every document's best view for one query, exactly, in one pass over a Flat index's rows: no top-k of rows to
    collapse, so no search to widen when a document's views crowd the best rows (they do: a document's views
    resemble each other, and each widening was another pass over every row).

    The query is scored by FAISS's SIMD kernel (``fvec_inner_products_ny``: twice numpy's sgemv per row here) and
    the rows of each document, contiguous in a Flat index (rows are added a document at a time and removal keeps
    the order), are reduced to their maximum by ``np.maximum.reduceat``. Valid while the index is unchanged (its
    owner makes a new one after every change). A batch stays on :func:`flat_top_k`: a reduction of every score of
    a ``(rows, queries)`` block cost as much as its sgemm.

    :param rows: The index's ``(n, d)`` float32 rows (a zero-copy view is fine).
    :param labels: Their labels (``(key << VIEW_BITS) | view``).
    :param documents: How many documents the rows belong to.
    """

    def __init__(self, rows: np.ndarray, labels: np.ndarray, documents: int) -> None:
        keys = keys_of(labels)
        self.order: np.ndarray | None = None  # rows in document order, where they are not already
        if len(keys) and int(np.count_nonzero(keys[1:] != keys[:-1])) + 1 != documents:
            self.order = np.argsort(keys, kind="stable")
            keys = keys[self.order]
        self.starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        self.keys = keys[self.starts]
        self.rows = rows

    def best(self, query: np.ndarray) -> np.ndarray:
        """Each document's best inner product with ``query`` ``(d,)``, documents in :attr:`keys` order."""
        rows = self.rows
        scores = np.empty(len(rows), dtype=np.float32)
        query = np.ascontiguousarray(query, dtype=np.float32)
        ptr = faiss.swig_ptr
        faiss.fvec_inner_products_ny(ptr(scores), ptr(query), ptr(rows), rows.shape[1], len(rows))
        if self.order is not None:
            scores = scores[self.order]
        return np.maximum.reduceat(scores, self.starts)

    def top(self, query: np.ndarray, want: int, allowed_keys: np.ndarray | None = None) -> np.ndarray:
        """The best ``want`` document keys for ``query`` (among ``allowed_keys``, all of them with rows), best first."""
        best = self.best(query)
        if allowed_keys is not None:
            best[~np.isin(self.keys, allowed_keys)] = -np.inf
            want = min(want, len(allowed_keys))
        want = min(want, len(best))
        top = np.argpartition(-best, want - 1)[:want] if want < len(best) else np.arange(len(best))
        return self.keys[top[np.argsort(-best[top], kind="stable")]]
