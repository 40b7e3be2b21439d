"""The view rows of a multi-view store: vectors, row → (document, view) maps, and the FAISS index over them."""

from __future__ import annotations

import logging

import faiss
import numpy as np

logger = logging.getLogger(__name__)


class ViewIndex:
    """
    Every view is one row. Rows of a document are contiguous and ordered by slot (``row_doc`` never decreases:
    new documents get larger slots); row ``r`` belongs to document slot ``row_doc[r]`` and is that document's
    view number ``row_view[r]``. The FAISS index is rebuilt lazily after a change.

    :param dim: Vector dimension.
    :param index_factory: Any FAISS ``index_factory`` string, built with inner-product metric. Trainable
        indexes (IVF, PQ, OPQ) are trained on all stored vectors at the first search after a change; until
        there are enough vectors to train, search is exact.
    :param search_parameters: ``faiss.ParameterSpace`` settings (``nprobe``, ``efSearch`` ...) applied to the
        index whenever it is built or replaced.
    """

    def __init__(
        self, dim: int, index_factory: str = "Flat", search_parameters: dict[str, int | float] | None = None
    ) -> None:
        self.dim = dim
        self.index_factory = index_factory
        self.search_parameters = search_parameters or {}
        self.reset()

    def reset(self) -> None:
        """Remove every row."""
        self.set_rows(
            np.zeros((0, self.dim), dtype=np.float32), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
        )

    def set_rows(self, vectors: np.ndarray, row_doc: np.ndarray, row_view: np.ndarray) -> None:
        """Replace every row (and drop the FAISS index built over the old ones)."""
        if len(vectors) != len(row_doc) or len(row_doc) != len(row_view) or np.any(np.diff(row_doc) < 0):
            msg = "View rows are inconsistent: vectors, row_doc and row_view differ in length or slots are unordered."
            raise ValueError(msg)
        self._vectors, self._row_doc, self._row_view = vectors, row_doc, row_view
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._pending_rows = 0
        self._documents = len(np.unique(row_doc))
        self._last_slot = int(row_doc[-1]) if len(row_doc) else -1
        self._index: faiss.Index | None = None
        self._indexed_rows = 0

    # Writes append to a pending list, joined into one array on the next read: writing N rows in B batches
    # copies O(N) bytes, not O(N * B).
    @property
    def vectors(self) -> np.ndarray:
        self._consolidate()
        return self._vectors

    @property
    def row_doc(self) -> np.ndarray:
        self._consolidate()
        return self._row_doc

    @property
    def row_view(self) -> np.ndarray:
        self._consolidate()
        return self._row_view

    @property
    def ntotal(self) -> int:
        return int(self._vectors.shape[0]) + self._pending_rows

    @property
    def document_count(self) -> int:
        """How many documents have at least one row (kept up to date, so searching never counts them)."""
        return self._documents

    def add_many(self, slots: list[int], views: list[np.ndarray]) -> None:
        """Append the views of new document slots (each slot once, never already present)."""
        for slot, v in zip(slots, views, strict=True):
            if len(v) == 0:
                continue
            if slot <= self._last_slot:
                msg = f"Slot {slot} is not after the last stored slot {self._last_slot}."
                raise ValueError(msg)
            self._last_slot = slot
            self._pending.append((v, np.full(len(v), slot, dtype=np.int64), np.arange(len(v), dtype=np.int32)))
            self._pending_rows += len(v)
            self._documents += 1

    def _consolidate(self) -> None:
        if not self._pending:
            return
        vectors, row_doc, row_view = zip(*self._pending, strict=True)
        self._vectors = np.concatenate([self._vectors, *vectors])
        self._row_doc = np.concatenate([self._row_doc, *row_doc])
        self._row_view = np.concatenate([self._row_view, *row_view])
        self._pending, self._pending_rows = [], 0

    def remove_slots(self, slots: np.ndarray) -> None:
        keep = ~np.isin(self.row_doc, slots)
        if keep.all():
            return
        removed = len(np.unique(self._row_doc[~keep]))
        self._vectors, self._row_doc, self._row_view = self._vectors[keep], self._row_doc[keep], self._row_view[keep]
        self._documents -= removed
        self._index, self._indexed_rows = None, 0

    def views_of(self, slot: int) -> np.ndarray:
        """The ``(views, d)`` rows of one document slot (empty when it has none)."""
        lo, hi = np.searchsorted(self.row_doc, [slot, slot + 1])
        return self.vectors[lo:hi]

    def first_view(self, slot: int) -> np.ndarray | None:
        views = self.views_of(slot)
        return views[0] if len(views) else None

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
        if not _is_flat(index):
            self._apply_search_parameters(index)
        return index

    def _apply_search_parameters(self, index: faiss.Index) -> None:
        space = faiss.ParameterSpace()
        for name, value in self.search_parameters.items():
            try:
                space.set_index_parameter(index, name, value)
            except RuntimeError as e:
                msg = f"FAISS search parameter {name}={value!r} does not apply to index {self.index_factory!r}: {e}"
                raise ValueError(msg) from e

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
        if not _is_flat(index):
            self._apply_search_parameters(index)
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
