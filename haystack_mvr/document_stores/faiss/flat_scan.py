"""Exact scans of a Flat index's rows: each document's best view for every query (:class:`DocumentScan`), and the
exact top-k rows of a batch of queries (:func:`flat_top_k`)."""

from __future__ import annotations

import numpy as np

from haystack_mvr.document_stores.faiss.faiss_import import faiss
from haystack_mvr.document_stores.faiss.view_labels import keys_of
from haystack_mvr.maxsim import BestDocuments, document_scores, similarities

_COARSE_ROWS = 4096  # from this many rows a single query's first pass reads a float16 copy (half the bytes)
_COARSE_AFTER = 32  # single queries on the same rows before their float16 copy is made (the copy costs a scan)
_COARSE_CHUNK = 65536  # rows converted to float16 at once (bounds the temporary float32 decode)
_ROUNDING = 1e-4  # float32 rounding of a product of d terms, relative to |q| |x|: far above the 2e-5 of d=384
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
    the order), are reduced to their maximum by ``np.maximum.reduceat``. The scan waits on memory more than on
    arithmetic, so once the same rows (at least ``_COARSE_ROWS``) have answered ``_COARSE_AFTER`` queries, a float16
    copy (half the bytes, kept beside the rows: half their memory again) is searched first and its documents are
    re-scored exactly (:meth:`_two_pass`), which returns what the full scan returns. Valid while the index is
    unchanged (its owner makes a new one after every change). A batch stays on :func:`flat_top_k`: a reduction of
    every score of a ``(rows, queries)`` block cost as much as its sgemm.

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
        self.bounds = np.r_[self.starts, len(keys)]  # document i's rows: bounds[i]:bounds[i + 1] (made once)
        self.keys = keys[self.starts]
        self.rows = rows
        self._coarse: faiss.IndexScalarQuantizer | None = None  # the float16 copy, made by _two_pass
        self._searches = 0  # top() calls: the float16 copy pays off only for rows searched many times
        self._error = 0.0  # bound on |<q, x> - <q, x16>| / |q| over every row: float16 error plus float32 rounding
        self._position: dict[int, int] | None = None  # key -> its place in keys, made at the first rows_of

    def rows_of(self, keys: np.ndarray) -> np.ndarray | None:
        """Every row of ``keys``, grouped by key in the given order, copied from the scanned matrix (FAISS's
        ``reconstruct_batch`` looks each label up and copies one row at a time); ``None`` if not in order."""
        if self.order is not None:
            return None
        if self._position is None:
            self._position = dict(zip(self.keys.tolist(), range(len(self.keys)), strict=True))
        at = [self._position[k] for k in keys.tolist()]
        ends = self.bounds
        return np.concatenate([self.rows[ends[i] : ends[i + 1]] for i in at])

    def best(self, query: np.ndarray) -> np.ndarray:
        """Each document's best inner product with the one-vector ``query`` ``(1, d)``, documents in :attr:`keys`
        order: every row scored by FAISS's kernel, each document's maximum by ``haystack_mvr.maxsim``."""
        rows = self.rows
        scores = np.empty(len(rows), dtype=np.float32)
        query = np.ascontiguousarray(query, dtype=np.float32)
        ptr = faiss.swig_ptr
        faiss.fvec_inner_products_ny(ptr(scores), ptr(query), ptr(rows), rows.shape[1], len(rows))
        if self.order is not None:
            scores = scores[self.order]
        return document_scores(scores[:, None], self.starts)

    def top_maxsim(
        self, query: np.ndarray, n_best: int, allowed_keys: np.ndarray | None = None, with_rows: bool = False
    ) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray | None]]:
        """
        The best ``n_best`` documents by exact MaxSim with ``query`` ``(m, d)`` among ``allowed_keys``, best first:
        their keys, the ``(k, m)`` similarities of each one's rows and (``with_rows``) those rows. Every row is scored,
        ``_BLOCK_SCORES`` scores at a time (``haystack_mvr.maxsim.BestDocuments`` keeps the best documents'
        similarities, so the results are annotated with the scores ranked on).
        """
        allowed = None if allowed_keys is None else np.isin(self.keys, allowed_keys)
        best = BestDocuments(min(n_best, len(self.keys) if allowed_keys is None else len(allowed_keys)), with_rows)
        bounds = self.bounds
        step = max(1, _BLOCK_SCORES // max(1, query.shape[0]))
        first = 0
        while first < len(self.keys):
            last = int(np.searchsorted(bounds, bounds[first] + step, side="right")) - 1
            last = min(max(last, first + 1), len(self.keys))
            lo, hi = int(bounds[first]), int(bounds[last])
            rows = self.rows[lo:hi] if self.order is None else self.rows[self.order[lo:hi]]
            mask = None if allowed is None else allowed[first:last]
            best.add(first, similarities(rows, query), bounds[first:last] - lo, rows, mask)
            first = last
        positions, scores, held = best.best()
        return self.keys[positions], scores, held

    def _float16_copy(self) -> faiss.IndexScalarQuantizer | None:
        """The rows in float16 (FAISS's ``QT_fp16`` scalar quantizer) and the bound :attr:`_error`, made once."""
        rows = self.rows
        if self._coarse is None and self.order is None and len(rows) >= _COARSE_ROWS:
            coarse = faiss.IndexScalarQuantizer(
                rows.shape[1], faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT
            )
            for lo in range(0, len(rows), _COARSE_CHUNK):
                chunk = rows[lo : lo + _COARSE_CHUNK]
                codes = coarse.sa_encode(chunk)
                error = np.linalg.norm(coarse.sa_decode(codes) - chunk, axis=1).max()
                rounding = _ROUNDING * np.linalg.norm(chunk, axis=1).max()
                self._error = max(self._error, float(error + rounding))
                coarse.add_sa_codes(codes)
            self._document_of = np.repeat(np.arange(len(self.starts)), np.diff(self.bounds))
            self._coarse = coarse
        return self._coarse

    def top(self, query: np.ndarray, n_best: int, allowed_keys: np.ndarray | None = None) -> np.ndarray:
        """The best ``n_best`` document keys for the one-vector ``query`` ``(1, d)`` among ``allowed_keys`` (all with
        rows), best first."""
        self._searches += 1
        two_pass = allowed_keys is None and self._searches > _COARSE_AFTER  # a store written between queries
        found = self._two_pass(query, min(n_best, len(self.keys))) if two_pass else None  # never pays for the copy
        if found is not None:
            return found
        return self._best_keys(self.best(query), n_best, allowed_keys)

    def _best_keys(self, best: np.ndarray, n_best: int, allowed_keys: np.ndarray | None) -> np.ndarray:
        """The keys of the ``n_best`` highest of ``best`` (one score per document) among ``allowed_keys``."""
        if allowed_keys is not None:
            best[~np.isin(self.keys, allowed_keys)] = -np.inf
            n_best = min(n_best, len(allowed_keys))
        n_best = min(n_best, len(best))
        top = np.argpartition(-best, n_best - 1)[:n_best] if n_best < len(best) else np.arange(len(best))
        return self.keys[top[np.argsort(-best[top], kind="stable")]]

    def _two_pass(self, query: np.ndarray, n_best: int) -> np.ndarray | None:
        """:meth:`top` with the same keys, reading half the bytes: the best rows of the float16 copy, then their
        documents scored exactly; ``None`` below ``_COARSE_ROWS`` rows, or where the bound cannot prove that no
        other document scores higher.

        A float16 score is within ``eps = |q| * error`` of the exact one. The first pass takes the ``2 x n_best x
        rows per document`` best float16 rows (the ``depth``-th scores ``m``): a document without a row among them
        scores at most ``m + eps``. Found documents whose bound (their best float16 row, or ``m``, plus ``eps``)
        reaches the ``n_best``-th best lower bound are scored over every row; the answer stands when its ``n_best``-th
        exact score is at least ``m + eps``.
        """
        coarse = self._float16_copy()
        if coarse is None:
            return None
        query = np.ascontiguousarray(query, dtype=np.float32)
        n = len(self.rows)
        depth = min(n, max(16, 2 * n_best * -(-n // len(self.keys))))
        approx, found = coarse.search(query, depth)
        approx, found = approx[0], found[0]
        eps = float(np.linalg.norm(query)) * self._error
        floor = float(approx[-1]) if depth < n else -np.inf
        documents, inverse = np.unique(self._document_of[found], return_inverse=True)
        if len(documents) < n_best:
            return None
        upper = np.full(len(documents), -np.inf, dtype=np.float32)
        np.maximum.at(upper, inverse, approx)
        lower = upper - eps
        threshold = np.partition(lower, len(lower) - n_best)[len(lower) - n_best]
        candidates = documents[np.maximum(upper, floor) + eps >= threshold]
        ends = self.bounds
        rows = np.concatenate([self.rows[ends[i] : ends[i + 1]] for i in candidates.tolist()])
        scores = np.empty(len(rows), dtype=np.float32)
        ptr = faiss.swig_ptr
        faiss.fvec_inner_products_ny(ptr(scores), ptr(query), ptr(rows), rows.shape[1], len(rows))
        exact = document_scores(scores[:, None], np.r_[0, np.cumsum(ends[candidates + 1] - ends[candidates])[:-1]])
        order = np.argsort(-exact, kind="stable")[:n_best]
        if exact[order[-1]] < floor + eps:
            return None
        return self.keys[candidates[order]]
