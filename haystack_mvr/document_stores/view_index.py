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
    view number ``row_view[r]``. The FAISS index is brought up to date lazily, at the first search after a change.

    :param dim: Vector dimension.
    :param index_factory: Any FAISS ``index_factory`` string, built with inner-product metric. Trainable
        indexes (IVF, PQ, OPQ) are trained on all stored vectors at the first search after a change; until
        there are enough vectors to train, search is exact.
    :param search_parameters: ``faiss.ParameterSpace`` settings (``nprobe``, ``efSearch`` ...) applied to the
        index whenever it is built or replaced.
    :param keep_vectors: Keep the float32 rows beside the index (4·d bytes per view). ``False`` keeps only the
        index: rows are dropped once indexed, read back as the index's reconstruction (exact for Flat and HNSW,
        approximate for PQ codes), and a trained index is extended and re-encoded rather than retrained.
    """

    def __init__(
        self,
        dim: int,
        index_factory: str = "Flat",
        search_parameters: dict[str, int | float] | None = None,
        keep_vectors: bool = True,
    ) -> None:
        self.dim = dim
        self.index_factory = index_factory
        self.search_parameters = search_parameters or {}
        self.keep_vectors = keep_vectors
        self.reset()

    def reset(self) -> None:
        """Remove every row."""
        self.set_rows(
            np.zeros((0, self.dim), dtype=np.float32), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
        )

    def set_rows(
        self, vectors: np.ndarray, row_doc: np.ndarray, row_view: np.ndarray, index: faiss.Index | None = None
    ) -> None:
        """
        Replace every row (and drop the FAISS index built over the old ones).

        :param index: A FAISS index already holding the first ``index.ntotal`` rows; ``vectors`` then holds
            either every row or only the rows after those.
        """
        indexed = int(index.ntotal) if index is not None else 0
        if (
            len(row_doc) != len(row_view)
            or len(vectors) not in {len(row_doc), len(row_doc) - indexed}
            or indexed > len(row_doc)
            or np.any(np.diff(row_doc) < 0)
        ):
            msg = (
                "View rows are inconsistent: vectors, row_doc, row_view and the index differ in length "
                "or slots are unordered."
            )
            raise ValueError(msg)
        self._row_doc, self._row_view = row_doc, row_view
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._pending_rows = 0
        self._documents = len(np.unique(row_doc))
        self._last_slot = int(row_doc[-1]) if len(row_doc) else -1
        self._index: faiss.Index | None = None
        self._index_is_fallback = False
        self._indexed_rows = 0
        if index is None:
            self._vectors = vectors
            return
        complete = len(vectors) == len(row_doc)
        self.set_faiss_index(index)
        if self.keep_vectors:
            self._vectors = vectors if complete else np.concatenate([self._reconstruct(0, indexed), vectors])
        else:  # only the rows after the index's; a copy, since a slice would keep every row alive
            self._vectors = vectors[indexed:].copy() if complete else vectors

    # Writes append to a pending list, joined into one array on the next read: writing N rows in B batches
    # copies O(N) bytes, not O(N * B).
    @property
    def vectors(self) -> np.ndarray:
        """Every row's vector (reconstructed from the index for rows that are kept only there)."""
        return self.rows(0, self.ntotal)

    @property
    def stored_vectors(self) -> np.ndarray:
        """The float32 rows held beside the index: all of them, or with ``keep_vectors=False`` the unindexed ones."""
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
        return int(self._row_doc.shape[0]) + self._pending_rows

    @property
    def document_count(self) -> int:
        """How many documents have at least one row (kept up to date, so searching never counts them)."""
        return self._documents

    @property
    def _vector_start(self) -> int:
        """The row of ``_vectors[0]``: rows before it live only in the index."""
        return 0 if self.keep_vectors else self._indexed_rows

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

    def rows(self, lo: int, hi: int) -> np.ndarray:
        """The ``(hi - lo, d)`` vectors of rows ``lo..hi-1``."""
        self._consolidate()
        start = self._vector_start
        parts = []
        if lo < start:
            parts.append(self._reconstruct(lo, min(hi, start)))
        if hi > start:
            parts.append(self._vectors[max(lo, start) - start : hi - start])
        return np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else self._vectors[:0]

    def _reconstruct(self, lo: int, hi: int) -> np.ndarray:
        if hi <= lo:
            return np.zeros((0, self.dim), dtype=np.float32)
        assert self._index is not None
        return self._index.reconstruct_n(lo, hi - lo)

    def remove_slots(self, slots: np.ndarray) -> None:
        keep = ~np.isin(self.row_doc, slots)
        if keep.all():
            return
        removed = len(np.unique(self._row_doc[~keep]))
        vectors = self.vectors[keep]
        self._row_doc, self._row_view = self._row_doc[keep], self._row_view[keep]
        self._documents -= removed
        self._vectors, self._indexed_rows = vectors, 0
        if not self.keep_vectors and self._index is not None and not self._index_is_fallback:
            # The only copy of the rows is the index: re-encode the survivors into an emptied copy of the
            # trained index instead of retraining on reconstructions.
            self._index = faiss.clone_index(self._index)
            self._index.reset()
        else:
            self._index, self._index_is_fallback = None, False

    def views_of(self, slot: int) -> np.ndarray:
        """The ``(views, d)`` rows of one document slot (empty when it has none)."""
        lo, hi = np.searchsorted(self.row_doc, [slot, slot + 1])
        return self.rows(int(lo), int(hi))

    def first_view(self, slot: int) -> np.ndarray | None:
        views = self.views_of(slot)
        return views[0] if len(views) else None

    def _ensure_index(self) -> faiss.Index:
        if self._index is not None and self._indexed_rows == self.ntotal:
            return self._index
        extendable = self._index is not None and not self._index_is_fallback
        if extendable and (_is_flat(self._index) or not self.keep_vectors):
            # appending to a flat index is cheap; without kept vectors a trained index is extended, not retrained
            self._index.add(self.rows(self._indexed_rows, self.ntotal))  # an IVF direct map is extended too
        else:
            self._index = self._build()
        self._indexed_rows = self.ntotal
        if not self.keep_vectors:
            self._vectors = np.empty((0, self.dim), dtype=np.float32)  # not a slice: that would keep the buffer
        return self._index

    def _build(self) -> faiss.Index:
        vectors = self.vectors
        index = self._new_index()
        self._index_is_fallback = False
        if not index.is_trained:
            try:
                index.train(vectors)
            except RuntimeError as e:
                logger.info("Too few vectors to train %s (%s); searching exactly for now.", self.index_factory, e)
                index = faiss.IndexFlatIP(self.dim)
                self._index_is_fallback = True
        index.add(vectors)
        if not self._index_is_fallback:
            self._prepare(index)
        return index

    def _new_index(self) -> faiss.Index:
        return faiss.index_factory(self.dim, self.index_factory, faiss.METRIC_INNER_PRODUCT)

    def _prepare(self, index: faiss.Index) -> None:
        if not self.keep_vectors:
            _make_reconstructible(index)
        if _is_flat(index):
            return
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
        """Use ``index`` for the first ``index.ntotal`` rows (e.g. one read back from a saved store)."""
        # a saved exact stand-in for a trainable index that had too few vectors: retrain once there are enough
        self._index_is_fallback = _is_flat(index) and not _is_flat(self._new_index())
        self._prepare(index)
        self._index, self._indexed_rows = index, int(index.ntotal)


def _make_reconstructible(index: faiss.Index) -> None:
    """IVF indexes reconstruct a row only through a direct map from row to inverted-list entry."""
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None and ivf.direct_map.type == faiss.DirectMap.NoMap:
        ivf.make_direct_map()


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
