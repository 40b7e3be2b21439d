"""Exact top-k of a batch of queries over a flat matrix of rows: one sgemm per block, thresholds per query."""

from __future__ import annotations

import numpy as np

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
