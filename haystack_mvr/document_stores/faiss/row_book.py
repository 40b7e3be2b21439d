"""Which document key owns how many view rows, and the float32 rows held beside the FAISS index (no FAISS here)."""

from __future__ import annotations

import numpy as np

from haystack_mvr.document_stores.faiss.view_checks import MAX_SQUARED_NORM, InvalidViews, first_invalid, squared_norm
from haystack_mvr.document_stores.faiss.view_labels import labels_of_keys

CHUNK_ROWS = 65536  # rows copied (or scored, or added to FAISS) at once: bounds the float32 rows held at once


class DocumentRows:
    """
    The rows of a :class:`~haystack_mvr.document_stores.faiss.view_index.ViewIndex`, by document key.

    - ``counts``: key -> views, live documents only (the key's rows are labelled by ``view_labels.labels_of_keys``);
    - ``kept``: key -> ``(k, d)`` float32 rows kept beside a lossy index (``keep_vectors``);
    - ``staging``: key -> ``(k, d)`` rows waiting for a trainable index to be trained;
    - ``tombstones``: labels removed from the store but still in an HNSW graph;
    - ``rows`` and ``staged_rows``: the live and the staged rows.
    """

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.counts: dict[int, int] = {}
        self.kept: dict[int, np.ndarray] = {}
        self.staging: dict[int, np.ndarray] = {}
        self.staged_rows = 0
        self.tombstones: set[int] = set()
        self.rows = 0

    def keys(self) -> np.ndarray:
        return np.fromiter(self.counts, dtype=np.int64, count=len(self.counts))

    def labels(self, keys: np.ndarray) -> np.ndarray:
        """The labels of every row of ``keys``, grouped by key in the given order."""
        return labels_of_keys(keys, [self.counts[k] for k in keys.tolist()])

    def record(self, keys: list[int], counts: np.ndarray, views: list[np.ndarray], keep: bool, stage: bool) -> None:
        """Count new keys' rows; hold their ``views`` as kept rows (``keep``) and as staged rows (``stage``)."""
        self.counts.update(zip(keys, counts.tolist(), strict=True))
        self.rows += int(counts.sum())
        if keep:
            self.kept.update(zip(keys, views, strict=True))
        if stage:
            self.staging.update(zip(keys, views, strict=True))
            self.staged_rows += int(counts.sum())

    def forget(self, keys: list[int]) -> np.ndarray | None:
        """Drop the known ones of ``keys`` (each once): the labels of their rows, ``None`` when none was known."""
        keys = [k for k in dict.fromkeys(keys) if k in self.counts]
        if not keys:
            return None
        labels = labels_of_keys(np.array(keys, dtype=np.int64), [self.counts[k] for k in keys])
        for k in keys:
            self.rows -= self.counts.pop(k)
            self.kept.pop(k, None)
            staged = self.staging.pop(k, None)
            if staged is not None:
                self.staged_rows -= len(staged)
        return labels

    def unstage(self) -> None:
        """Drop the staged rows (the index they waited for has them now)."""
        self.staging, self.staged_rows = {}, 0

    def restore(
        self, counts: dict[int, int], held: dict[int, np.ndarray], tombstones: np.ndarray, staged: bool, kept: bool
    ) -> None:
        """Set every row at once from a saved copy (``held``: the staged rows or the kept ones)."""
        self.counts = counts if isinstance(counts, dict) else dict(counts)
        self.rows = sum(counts.values())
        self.tombstones = set(tombstones.tolist())
        self.staging, self.staged_rows, self.kept = {}, 0, {}
        if staged:
            self.staging = held
            self.staged_rows = sum(len(v) for v in held.values())
        if kept:
            self.kept = dict(held)

    def sorted_tombstones(self) -> np.ndarray:
        return np.sort(np.fromiter(self.tombstones, dtype=np.int64, count=len(self.tombstones)))


def owned_rows(views: list[np.ndarray], counts: np.ndarray) -> list[np.ndarray]:
    """Copies of ``views`` the store owns (one float32 matrix per chunk of rows, each document a slice of it),
    checked as :func:`~haystack_mvr.document_stores.faiss.view_checks.first_invalid` does; :class:`InvalidViews`
    otherwise."""
    out: list[np.ndarray] = []
    start = 0
    while start < len(views):
        end, rows = start, 0
        while end < len(views) and (rows == 0 or rows + len(views[end]) <= CHUNK_ROWS):
            rows += len(views[end])
            end += 1
        block = np.concatenate(views[start:end]).astype(np.float32, copy=False)  # always a new array
        if not squared_norm(block) <= MAX_SQUARED_NORM:
            bad = first_invalid(views[start:end])
            if bad is not None:
                raise InvalidViews(start + bad[0], bad[1])
        offsets = np.concatenate([[0], np.cumsum(counts[start:end])]).tolist()
        out.extend(block[offsets[i] : offsets[i + 1]] for i in range(end - start))
        start = end
    return out
