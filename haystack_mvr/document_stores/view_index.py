"""The view rows of a multi-view store: vectors, row → (document, view) maps, and the FAISS index over them."""

from __future__ import annotations

import logging

import faiss
import numpy as np

logger = logging.getLogger(__name__)


class ViewIndex:
    """
    Every view is one row. Rows of a document are contiguous; row ``r`` belongs to document slot ``row_doc[r]``
    and is that document's view number ``row_view[r]``. The FAISS index is rebuilt lazily after a change.

    :param dim: Vector dimension.
    :param index_factory: Any FAISS ``index_factory`` string, built with inner-product metric. Trainable
        indexes (IVF, PQ, OPQ) are trained on all stored vectors at the first search after a change; until
        there are enough vectors to train, search is exact.
    """

    def __init__(self, dim: int, index_factory: str = "Flat") -> None:
        self.dim = dim
        self.index_factory = index_factory
        self.reset()

    def reset(self) -> None:
        """Remove every row."""
        self.vectors = np.zeros((0, self.dim), dtype=np.float32)
        self.row_doc = np.zeros(0, dtype=np.int64)
        self.row_view = np.zeros(0, dtype=np.int32)
        self._index: faiss.Index | None = None
        self._indexed_rows = 0

    @property
    def ntotal(self) -> int:
        return int(self.vectors.shape[0])

    def add_many(self, slots: list[int], views: list[np.ndarray]) -> None:
        if not views:
            return
        self.vectors = np.concatenate([self.vectors, *views])
        self.row_doc = np.concatenate(
            [self.row_doc, *[np.full(len(v), s, dtype=np.int64) for s, v in zip(slots, views, strict=True)]]
        )
        self.row_view = np.concatenate([self.row_view, *[np.arange(len(v), dtype=np.int32) for v in views]])

    def remove_slots(self, slots: np.ndarray) -> None:
        keep = ~np.isin(self.row_doc, slots)
        if keep.all():
            return
        self.vectors, self.row_doc, self.row_view = self.vectors[keep], self.row_doc[keep], self.row_view[keep]
        self._index, self._indexed_rows = None, 0

    def views_of(self, slot: int) -> np.ndarray:
        return self.vectors[self.row_doc == slot]

    def _ensure_index(self) -> faiss.Index:
        if self._index is not None and self._indexed_rows == self.ntotal:
            return self._index
        if self._index is not None and self._index.is_trained and _is_flat(self._index):
            self._index.add(self.vectors[self._indexed_rows :])  # appending to a flat index is cheap
        else:
            self._index = self._build()
        self._indexed_rows = self.ntotal
        return self._index

    def _build(self) -> faiss.Index:
        index = faiss.index_factory(self.dim, self.index_factory, faiss.METRIC_INNER_PRODUCT)
        if not index.is_trained:
            try:
                index.train(self.vectors)
            except RuntimeError as e:
                logger.info("Too few vectors to train %s (%s); searching exactly for now.", self.index_factory, e)
                index = faiss.IndexFlatIP(self.dim)
        index.add(self.vectors)
        return index

    def search(self, query: np.ndarray, k: int, allowed_rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The best ``k`` rows for one query ``(d,)``: ``(scores, rows)``, best first, restricted to allowed rows."""
        index = self._ensure_index()
        q = query.reshape(1, -1)
        if allowed_rows is None:
            scores, rows = index.search(q, k)
        else:
            params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(allowed_rows.astype(np.int64)))
            try:
                scores, rows = index.search(q, k, params=params)
            except RuntimeError:  # an index type without selector support: filter afterwards
                scores, rows = index.search(q, min(self.ntotal, k * 4))
                keep = np.isin(rows[0], allowed_rows)
                scores, rows = scores[:, keep][:, :k], rows[:, keep][:, :k]
        valid = rows[0] >= 0
        return scores[0][valid], rows[0][valid]

    def faiss_index(self) -> faiss.Index:
        return self._ensure_index()

    def set_faiss_index(self, index: faiss.Index) -> None:
        self._index, self._indexed_rows = index, int(index.ntotal)


def _is_flat(index: faiss.Index) -> bool:
    return isinstance(index, faiss.IndexFlat)


def collapse_to_documents(
    scores: np.ndarray, rows: np.ndarray, row_doc: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """
    Keep each document's best row, in score order (vectorised: rows arrive sorted by score).

    :returns: ``(slots, scores, rows)`` of the unique documents, best first.
    """
    slots = row_doc[rows]
    _, first = np.unique(slots, return_index=True)
    first.sort()
    return slots[first], scores[first], rows[first]
