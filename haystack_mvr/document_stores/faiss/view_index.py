"""The view rows of a multi-view store: one FAISS row per view, under a stable label, searched max-over-views."""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import os
from collections.abc import Iterator

import numpy as np

from haystack_mvr.document_stores.faiss import gpu_index
from haystack_mvr.document_stores.faiss.faiss_import import faiss

logger = logging.getLogger(__name__)

VIEW_BITS = 12
MAX_VIEWS = 1 << VIEW_BITS  # views per document: a row's label is (document key << 12) | view
_VIEW_MASK = MAX_VIEWS - 1
_CHUNK_ROWS = 65536  # rows added to FAISS per call: bounds the float32 rows held at once while building
_ADD_ROWS = 2048  # rows copied into the reused buffer per FAISS add: ~3 MiB at d=384, still in cache when added
# rows per HNSW add: FAISS inserts one add's rows highest level first, and a graph built 2,048 rows at a time found
# fewer of the true top-10 documents (recall 0.26 against 0.33 for one add of 10^5 rows at efSearch 16)
_HNSW_ADD_ROWS = 1 << 18
_COMPACT_FRACTION = 0.25  # HNSW cannot remove rows: it is rebuilt once tombstones pass this share of its rows
# The largest L2 norm of a view or a query: two such vectors have an inner product of at most 1e36, finite in float32
# (whose largest value is 3.4e38), so scores, and the fusion and thresholds that use them, stay finite.
MAX_NORM = 1e18
_MAX_SQUARED_NORM = MAX_NORM * MAX_NORM
NON_FINITE = "contain NaN or infinite values"


class InvalidViews(ValueError):
    """A document's views hold a NaN or an infinity, or a view too long (``MAX_NORM``); ``position`` is its place in
    the keys given to ``add`` and ``problem`` what is wrong (``NON_FINITE``, or the view and its norm)."""

    def __init__(self, position: int, problem: str) -> None:
        super().__init__(f"The views of document {position} of the batch: {problem}.")
        self.position = position
        self.problem = problem


def labels_of(key: int, views: int) -> np.ndarray:
    """The FAISS labels of a document's ``views`` rows."""
    return (np.int64(key) << VIEW_BITS) | np.arange(views, dtype=np.int64)


def _labels_of_keys(keys: np.ndarray, counts: list[int]) -> np.ndarray:
    """The labels of every row of ``keys`` (``counts`` views each), grouped by key in the given order."""
    views = np.asarray(counts, dtype=np.int64)
    starts = np.cumsum(views) - views
    return (np.repeat(np.asarray(keys, dtype=np.int64), views) << VIEW_BITS) | (
        np.arange(int(starts[-1] + views[-1]) if len(views) else 0, dtype=np.int64) - np.repeat(starts, views)
    )


def keys_of(labels: np.ndarray) -> np.ndarray:
    return labels >> VIEW_BITS


@contextlib.contextmanager
def omp_threads(threads: int) -> Iterator[None]:
    """Run FAISS with ``threads`` OpenMP threads, restoring the process-wide setting afterwards."""
    before = faiss.omp_get_max_threads()
    if threads == before:
        yield
        return
    faiss.omp_set_num_threads(threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def default_threads(batch: bool, configured: int | None) -> int:
    if configured is not None:
        return configured
    return max(1, os.cpu_count() or 1) if batch else 1


class ViewIndex:
    """
    Every view of every document is one FAISS row labelled ``(key << 12) | view``; labels never change.

    - Flat, PQ, SQ, OPQ without IVF, HNSW: wrapped in ``faiss.IndexIDMap2`` (``add_with_ids``, ``remove_ids``,
      ``reconstruct(label)``). HNSW cannot remove rows: removed labels become tombstones, excluded at search, and
      the graph is rebuilt from its own rows once tombstones pass a quarter of them.
    - IVF (also under OPQ's ``IndexPreTransform``): the IVF's own ids, with a hashtable direct map
      (``remove_ids``, ``reconstruct(label)``).
    - Trainable indexes (IVF, PQ, OPQ) are trained once, when ``train_size`` rows have arrived; rows before that
      wait in a staging buffer searched exactly. After training every write is added in chunks and nothing is
      ever retrained.
    - Float32 rows are kept beside the index only when the index is lossy and ``keep_vectors`` is set; an index
      that reconstructs exactly (Flat, HNSW over flat storage, IVF-Flat) is the only copy.

    :param dim: Vector dimension.
    :param index_factory: A FAISS ``index_factory`` string, built with inner-product metric.
    :param search_parameters: ``faiss.ParameterSpace`` settings (``nprobe``, ``efSearch`` ...).
    :param keep_vectors: Keep float32 rows beside a lossy index (exact scores for returned documents).
    :param train_size: Rows to collect before training a trainable index (``None``: ``39 x`` its centroids).
    :param gpu_device: Search a copy of the index on this GPU (``haystack_mvr.document_stores.faiss.gpu_index``).
    """

    exact_rows = 4096  # filtered searches over at most this many rows (or 1% of the index) are scored exactly
    max_search_depth: int | None = None  # deepest FAISS search before the uncapped CPU index finishes (GPU: 2048)

    def __init__(
        self,
        dim: int,
        index_factory: str = "Flat",
        search_parameters: dict[str, int | float] | None = None,
        keep_vectors: bool = True,
        train_size: int | None = None,
        gpu_device: int | None = None,
    ) -> None:
        self.dim = dim
        self.index_factory = index_factory
        self.search_parameters = dict(search_parameters or {})
        self.keep_vectors = keep_vectors
        base = self._new_base()
        self._apply_parameters(base)  # a parameter that does not apply is refused before any row is written
        self._trainable = not base.is_trained
        self._ivf = faiss.try_extract_index_ivf(base) is not None
        self._hnsw = isinstance(faiss.downcast_index(base), faiss.IndexHNSW)
        self._exact = _reconstructs_exactly(base)
        least = _centroids(base)  # k-means needs at least one row per centroid
        self.train_size = max(train_size, least) if train_size else _default_train_size(least)
        self._gpu = None
        if gpu_device is not None:
            gpu_index.check_gpu_index(base, index_factory, self.search_parameters)
            self._gpu = gpu_index.GpuReplica(gpu_device, index_factory, self.search_parameters)
        self._generation = 0  # counts changes to the rows: a GPU copy older than the last one is made again
        self.reset()

    # ------------------------------------------------------------------------------------------- state
    def reset(self) -> None:
        """Remove every row (a trained index keeps its training: it is emptied, not retrained)."""
        self._counts: dict[int, int] = {}  # key -> views, live documents only
        self._kept: dict[int, np.ndarray] = {}  # key -> (k, d) float32, for a lossy index with keep_vectors
        self._staging: dict[int, np.ndarray] = {}  # key -> (k, d) rows waiting for training
        self._staged_rows = 0
        self._tombstones: set[int] = set()  # HNSW labels removed but still in the graph
        self._rows = 0
        self._selector_ok: bool | None = None
        self._generation += 1
        if getattr(self, "_index", None) is not None and not self._hnsw:
            self._index.reset()
            self._make_ids()
        else:
            self._index = None if self._trainable else self._wrap(self._new_base())

    @property
    def keeps_rows(self) -> bool:
        return self.keep_vectors and not self._exact

    @property
    def trained(self) -> bool:
        return self._index is not None

    @property
    def ntotal(self) -> int:
        """Live rows."""
        return self._rows

    @property
    def document_count(self) -> int:
        """Documents with at least one row."""
        return len(self._counts)

    def count(self, key: int) -> int:
        return self._counts.get(key, 0)

    def keys(self) -> np.ndarray:
        return np.fromiter(self._counts, dtype=np.int64, count=len(self._counts))

    # ------------------------------------------------------------------------------------------ writes
    def add(self, keys: list[int], views: list[np.ndarray]) -> None:
        """Add the rows of new document keys (each key once, never already present).

        ``views`` are ``(k, d)`` float32 matrices, possibly the caller's own: rows held beside the index (staged or
        kept) are copied first, so nothing the caller changes later reaches the store. Their finiteness is checked
        here, in the pass that copies them anyway: a NaN or infinite value, or a view whose L2 norm passes
        ``MAX_NORM``, raises :class:`InvalidViews` naming the document's position, with nothing of the call left
        behind (rows already added to the index are removed again; an HNSW graph, which cannot remove rows, is
        checked before anything is added).
        """
        if not keys:
            return
        counts = np.fromiter(map(len, views), dtype=np.int64, count=len(views))
        if int(counts.max()) > MAX_VIEWS:
            msg = f"A document can have at most {MAX_VIEWS} views, got {int(counts.max())}."
            raise ValueError(msg)
        self._generation += 1
        held = self.keeps_rows or self._index is None
        if held:
            views = _owned_rows(views, counts)  # raises before anything changes
        elif self._hnsw:
            bad = first_invalid(views)
            if bad is not None:
                raise InvalidViews(*bad)
        if self._index is not None:
            self._add_to_index(keys, views, counts, checked=held or self._hnsw)
        self._counts.update(zip(keys, counts.tolist(), strict=True))
        self._rows += int(counts.sum())
        if self.keeps_rows:
            self._kept.update(zip(keys, views, strict=True))
        if self._index is None:
            self._staging.update(zip(keys, views, strict=True))
            self._staged_rows += int(counts.sum())
            if self._staged_rows >= self.train_size:
                self._train()

    def _add_to_index(
        self, keys: list[int], views: list[np.ndarray], counts: np.ndarray | None = None, checked: bool = True
    ) -> None:
        """Add rows to the FAISS index in chunks copied into one small reused buffer (each chunk is still in the CPU
        cache when FAISS copies it, and when an unchecked chunk's sum of squares is taken for the checks of
        :func:`first_invalid`)."""
        if counts is None:
            counts = np.fromiter(map(len, views), dtype=np.int64, count=len(views))
        ends = np.cumsum(counts)
        total = int(ends[-1])
        labels = (np.repeat(np.asarray(keys, dtype=np.int64), counts) << VIEW_BITS) | (
            np.arange(total, dtype=np.int64) - np.repeat(ends - counts, counts)
        )
        # document boundaries of chunks of about `step` rows (a chunk holds at least one document)
        step = _HNSW_ADD_ROWS if self._hnsw else _ADD_ROWS
        cuts = np.unique(np.searchsorted(ends, np.arange(step, total, step), side="left") + 1)
        bounds = [0, *cuts[cuts < len(keys)].tolist(), len(keys)]
        row_at = [0, *ends.tolist()]
        buffer = np.empty((min(total, step + int(counts.max())), self.dim), dtype=np.float32)
        _reserve(self._index, total)
        for first, last in itertools.pairwise(bounds):
            lo, hi = row_at[first], row_at[last]
            if last - first == 1:
                matrix = np.ascontiguousarray(views[first], dtype=np.float32)
            else:
                matrix = np.concatenate(views[first:last], out=buffer[: hi - lo])
            if not checked and not _squared_norm(matrix) <= _MAX_SQUARED_NORM:
                bad = first_invalid(views[first:last])
                if bad is not None:  # else only the sum of many rows is that large
                    self._remove_labels(labels[:lo])
                    raise InvalidViews(first + bad[0], bad[1])
            self._index.add_with_ids(matrix, labels[lo:hi])

    def _remove_labels(self, labels: np.ndarray) -> None:
        if not len(labels):
            return
        if self._ivf:
            self._index.remove_ids(faiss.IDSelectorArray(labels))
        else:
            self._index.remove_ids(faiss.IDSelectorBatch(labels))

    def _add_rows(self, labels: np.ndarray, vectors: np.ndarray) -> None:
        step = _HNSW_ADD_ROWS if self._hnsw else _CHUNK_ROWS
        for lo in range(0, len(labels), step):
            self._index.add_with_ids(vectors[lo : lo + step], labels[lo : lo + step])

    def _train(self) -> None:
        keys, views = list(self._staging), list(self._staging.values())
        sample = np.concatenate(views)
        index = self._wrap(self._new_base())
        index.train(sample)  # with the caller's FAISS threads (the store's write setting)
        del sample
        self._index = index
        self._staging, self._staged_rows = {}, 0
        self._add_to_index(keys, views)
        logger.info("Trained %s on %d rows.", self.index_factory, sum(len(v) for v in views))

    def remove(self, keys: list[int]) -> None:
        """Remove every row of these keys (unknown keys are ignored)."""
        keys = [k for k in dict.fromkeys(keys) if k in self._counts]
        if not keys:
            return
        labels = np.concatenate([labels_of(k, self._counts[k]) for k in keys])
        self._generation += 1
        for k in keys:
            self._rows -= self._counts.pop(k)
            self._kept.pop(k, None)
            staged = self._staging.pop(k, None)
            if staged is not None:
                self._staged_rows -= len(staged)
        if self._index is None:
            return
        if self._hnsw:
            self._tombstones.update(labels.tolist())
            if len(self._tombstones) > _COMPACT_FRACTION * self._index.ntotal:
                self._compact()
        elif self._ivf:
            self._index.remove_ids(faiss.IDSelectorArray(labels))
        else:
            self._index.remove_ids(faiss.IDSelectorBatch(labels))

    def _compact(self) -> None:
        """Rebuild an HNSW graph from its live rows (no training involved)."""
        labels, vectors = self.rows_of(self.keys())
        self._index = self._wrap(self._new_base())
        self._tombstones = set()
        self._selector_ok = None
        self._add_rows(labels, vectors)

    # ------------------------------------------------------------------------------------------- reads
    def views_of(self, key: int) -> np.ndarray:
        """The ``(k, d)`` rows of one document (the index's reconstruction when it is the only copy)."""
        for held in (self._kept, self._staging):
            if key in held:
                return held[key]
        return self._reconstruct(labels_of(key, self._counts[key]))

    def views_of_keys(self, keys: np.ndarray) -> list[np.ndarray]:
        """:meth:`views_of` for several documents, the reconstructed ones in one FAISS call."""
        held = self._kept if self.keeps_rows else self._staging if self._index is None else None
        if held is not None or len(keys) < 2:
            return [self.views_of(int(k)) for k in keys]
        counts = [self._counts[k] for k in keys.tolist()]
        vectors = self._reconstruct(_labels_of_keys(keys, counts))
        ends = list(itertools.accumulate(counts))
        return [vectors[end - count : end] for end, count in zip(ends, counts, strict=True)]

    def _reconstruct(self, labels: np.ndarray) -> np.ndarray:
        if len(labels) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = _reconstruct_rotated(self._index, labels)
        return rows if rows is not None else self._index.reconstruct_batch(labels)

    def rows_of(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(labels, vectors)`` of every row of ``keys``, grouped by key in the given order."""
        if len(keys) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros((0, self.dim), dtype=np.float32)
        labels = _labels_of_keys(keys, [self._counts[k] for k in keys.tolist()])
        held = self._kept if self.keeps_rows else self._staging if self._index is None else None
        if held is not None:
            return labels, np.concatenate([held[int(k)] for k in keys])
        return labels, self._reconstruct(labels)

    # ------------------------------------------------------------------------------------------ search
    def search(
        self,
        queries: np.ndarray,
        want: int,
        allowed_keys: np.ndarray | None,
        threads: int,
        enough: int | None = None,
    ) -> list[np.ndarray]:
        """
        The best ``want`` document keys for each query ``(n, d)``, best first, restricted to ``allowed_keys``.

        Exactly ``min(want, documents)`` keys per query: searches widen until enough unique documents are found or
        the whole index was searched, and an approximate index that still falls short is finished exactly. A search
        stopped by ``max_search_depth`` (a GPU's) keeps its keys when they are at least ``enough`` (a re-ranking
        pool's must-have part); a query left with fewer is searched again on the CPU index, without a cap.
        """
        # allowed_keys: keys of documents with rows (the store passes no others)
        available = len(allowed_keys) if allowed_keys is not None else self.document_count
        want = min(want, available)
        if want == 0:
            return [np.zeros(0, dtype=np.int64) for _ in queries]
        with omp_threads(threads):
            if self._index is None:
                keys = allowed_keys if allowed_keys is not None else self.keys()
                return self._exact_search(queries, want, keys)
            if allowed_keys is not None:
                rows = sum(self._counts[int(k)] for k in allowed_keys)
                if rows <= max(self.exact_rows, self._rows // 100):
                    return self._exact_search(queries, want, allowed_keys)
            return self._index_search(queries, want, allowed_keys, min(enough or want, want))

    def best_scores(self, query: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """Each key's max over its held rows (kept, staged or reconstructed) for one query ``(d,)``.

        Held rows are scored where they lie and reconstructed ones a few thousand at a time, so the memory this
        takes does not grow with the views per document (a re-ranking pool of 56 documents of 800 views at d=384
        copied 69 MB per query when it gathered their rows first).
        """
        if len(keys) == 0:
            return np.zeros(0, dtype=np.float32)
        held = self._kept if self.keeps_rows else self._staging if self._index is None else None
        if held is not None:
            return np.fromiter((np.max(held[int(k)] @ query) for k in keys), dtype=np.float32, count=len(keys))
        counts = np.array([self._counts[int(k)] for k in keys], dtype=np.int64)
        out = np.empty(len(keys), dtype=np.float32)
        lo = 0
        while lo < len(keys):
            hi, rows = lo + 1, int(counts[lo])
            while hi < len(keys) and rows + counts[hi] <= _ADD_ROWS:
                rows += int(counts[hi])
                hi += 1
            _, vectors = self.rows_of(keys[lo:hi])
            starts = np.concatenate([[0], np.cumsum(counts[lo:hi])[:-1]]).astype(np.int64)
            out[lo:hi] = np.maximum.reduceat(vectors @ query, starts)
            lo = hi
        return out

    def _exact_search(self, queries: np.ndarray, want: int, keys: np.ndarray) -> list[np.ndarray]:
        """Score every row of ``keys`` (kept, staged or reconstructed): the best ``want`` keys per query."""
        counts = np.array([self._counts[int(k)] for k in keys], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        best = np.empty((len(queries), len(keys)), dtype=np.float32)
        step = max(1, _CHUNK_ROWS // max(1, int(counts.max())))
        for lo in range(0, len(keys), step):
            hi = min(len(keys), lo + step)
            _, vectors = self.rows_of(keys[lo:hi])
            scores = queries @ vectors.T
            best[:, lo:hi] = np.maximum.reduceat(scores, starts[lo:hi] - starts[lo], axis=1)
        out = []
        for row in best:
            top = np.argpartition(-row, want - 1)[:want] if want < len(row) else np.arange(len(row))
            out.append(keys[top[np.argsort(-row[top], kind="stable")]])
        return out

    def _flat_rows(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Zero-copy ``(rows, labels)`` views of an IndexIDMap2 over IndexFlat (valid until the next change)."""
        if not isinstance(self._index, faiss.IndexIDMap):
            return None
        flat = faiss.downcast_index(self._index.index)
        if not isinstance(flat, faiss.IndexFlat) or flat.ntotal == 0:
            return None
        n = int(flat.ntotal)
        rows = faiss.rev_swig_ptr(flat.get_xb(), n * self.dim).reshape(n, self.dim)
        return rows, faiss.rev_swig_ptr(self._index.id_map.data(), n)

    def _params(self, selector: faiss.IDSelector | None, allowed_share: float = 1.0):
        if selector is None:
            return None
        if self._hnsw:
            # HNSW walks the whole graph but keeps allowed rows only: a filter admitting a share s of the rows keeps
            # about s * efSearch candidates, so the walk is widened by 1 / s (at most 16x) to keep the index's recall
            ef = faiss.downcast_index(self._index.index).hnsw.efSearch
            ef = int(min(16 * ef, math.ceil(ef / max(allowed_share, 1e-9))))
            return faiss.SearchParametersHNSW(sel=selector, efSearch=ef)
        if self._ivf:
            ivf = faiss.extract_index_ivf(self._index)
            return faiss.SearchParametersIVF(sel=selector, nprobe=ivf.nprobe, max_codes=ivf.max_codes)
        return faiss.SearchParameters(sel=selector)

    def _selector_supported(self) -> bool:
        if self._selector_ok is None:
            probe = faiss.IDSelectorBatch(np.zeros(1, dtype=np.int64))
            try:
                self._index.search(np.zeros((1, self.dim), dtype=np.float32), 1, params=self._params(probe))
                self._selector_ok = True
            except RuntimeError:
                self._selector_ok = False
        return self._selector_ok

    def _depth_cap(self, on_gpu: bool) -> int | None:
        caps = [c for c in (self.max_search_depth, self._gpu.max_k if on_gpu and self._gpu else None) if c]
        return min(caps) if caps else None

    def _replica(self, want: int, per_doc: float, allowed_labels: np.ndarray | None) -> faiss.Index | None:
        """The GPU copy to search; ``None`` without one, or for a filter too selective to search under its cap."""
        if self._gpu is None:
            return None
        cap = self._depth_cap(on_gpu=True)
        if allowed_labels is not None and 2 * want * per_doc * self._index.ntotal / max(1, len(allowed_labels)) > cap:
            return None  # the CPU index's id selector finds the matching rows without widening past the cap
        return self._gpu.index(self._index, self._generation)

    def _index_search(
        self,
        queries: np.ndarray,
        want: int,
        allowed_keys: np.ndarray | None,
        enough: int | None = None,
        capped: bool = True,
    ) -> list[np.ndarray]:
        index = self._index
        allowed_labels = None
        if allowed_keys is not None:
            allowed_labels = _labels_of_keys(allowed_keys, [self._counts[k] for k in allowed_keys.tolist()])
        tombstones = self.tombstones
        per_doc = max(1.0, self._rows / max(1, self.document_count))
        replica = self._replica(want, per_doc, allowed_labels) if capped else None
        index = replica if replica is not None else index
        cap = self._depth_cap(on_gpu=replica is not None) if capped else None
        selector, inner, post_filter, excluded = None, None, None, None
        if replica is not None or (allowed_labels is None and not len(tombstones)) or not self._selector_supported():
            post_filter, excluded = allowed_labels, tombstones if len(tombstones) else None
        else:
            if allowed_labels is not None:
                selector = faiss.IDSelectorBatch(allowed_labels)  # tombstones are never allowed
            elif len(tombstones):
                inner = faiss.IDSelectorBatch(tombstones)
                selector = faiss.IDSelectorNot(inner)
        share = len(allowed_labels) / max(1, index.ntotal) if allowed_labels is not None else 1.0
        params = self._params(selector, share)
        limit = index.ntotal  # never stop widening before the whole index was searched
        if selector is not None and allowed_labels is not None:
            limit = min(limit, len(allowed_labels))
        # HNSW searches max(efSearch, k) deep, so its first depth is what a raw search would ask (rows for want
        # documents); elsewhere twice that, so fewer queries need a second, wider search
        k = (1 if self._hnsw else 2) * want * per_doc
        if post_filter is not None:  # only this share of the rows found can be kept
            k *= index.ntotal / max(1, len(post_filter))
        k = int(min(limit, cap or limit, max(16, k)))
        results: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(queries)
        todo = np.arange(len(queries))
        flat = self._flat_rows() if selector is None and len(queries) > 1 and replica is None else None
        deeper: list[int] = []  # queries the depth cap left short: searched again on the CPU index, uncapped
        accepted: set[int] = set()  # queries the depth cap left short of want but with enough
        while len(todo) and k > 0:
            if flat is not None:  # a batch over Flat: one sgemm per block of rows beats FAISS's batched path
                labels = _flat_top_k(queries[todo], k, *flat)
            else:
                _, labels = index.search(queries[todo], k, params=params)
            found, counts = _collapse(labels, want, post_filter, excluded)
            for qi, keys in zip(todo.tolist(), found, strict=True):
                results[qi] = keys
            short = todo[counts < want].tolist() if k < limit else []
            wider = int(min(limit, 2 * k, cap or limit))
            if wider == k:  # at the depth cap
                deeper.extend(qi for qi in short if len(results[qi]) < (enough or want))
                accepted.update(qi for qi in short if len(results[qi]) >= (enough or want))
                short = []
            todo = np.asarray(short, dtype=np.int64)
            k = wider
        del inner
        if deeper:
            finished = self._index_search(queries[deeper], want, allowed_keys, capped=False)
            for qi, found in zip(deeper, finished, strict=True):
                results[qi] = found
        for qi, found in enumerate(results):
            if qi in accepted:
                continue
            if len(found) < want:  # an approximate index that did not reach every allowed row: finish exactly
                keys = allowed_keys if allowed_keys is not None else self.keys()
                results[qi] = self._exact_search(queries[qi : qi + 1], want, keys)[0]
            else:
                results[qi] = found[:want]
        return results

    # ---------------------------------------------------------------------------------------- building
    def _new_base(self) -> faiss.Index:
        try:
            base = faiss.index_factory(self.dim, self.index_factory, faiss.METRIC_INNER_PRODUCT)
        except RuntimeError as e:
            msg = f"FAISS cannot build index_factory={self.index_factory!r} for dimension {self.dim}: {e}"
            raise ValueError(msg) from e
        _skip_polysemous_training(base)
        return base

    def _wrap(self, base: faiss.Index) -> faiss.Index:
        """Give ``base`` stable labels: IVF's own ids with a hashtable direct map, else an IndexIDMap2."""
        self._apply_parameters(base)
        # IVF keeps its own ids; anything else gets an id map (whose Python wrapper keeps ``base`` alive)
        index = base if faiss.try_extract_index_ivf(base) is not None else faiss.IndexIDMap2(base)
        self._make_ids(index)
        return index

    def _make_ids(self, index: faiss.Index | None = None) -> None:
        index = index if index is not None else self._index
        ivf = faiss.try_extract_index_ivf(index)
        if ivf is not None and ivf.direct_map.type != faiss.DirectMap.Hashtable:
            ivf.set_direct_map_type(faiss.DirectMap.Hashtable)

    def _apply_parameters(self, index: faiss.Index) -> None:
        space = faiss.ParameterSpace()
        for name, value in self.search_parameters.items():
            try:
                space.set_index_parameter(index, name, value)
            except RuntimeError as e:
                msg = f"FAISS search parameter {name}={value!r} does not apply to index {self.index_factory!r}: {e}"
                raise ValueError(msg) from e

    # ------------------------------------------------------------------------------------- persistence
    @property
    def faiss_index(self) -> faiss.Index | None:
        return self._index

    def index_labels(self) -> np.ndarray:
        """Every label the FAISS index holds (tombstones included), sorted."""
        if self._index is None:
            return np.zeros(0, dtype=np.int64)
        if isinstance(self._index, faiss.IndexIDMap):
            labels = faiss.vector_to_array(self._index.id_map).astype(np.int64, copy=False)
            return labels if len(labels) < 2 or bool((labels[1:] > labels[:-1]).all()) else np.sort(labels)
        invlists = faiss.extract_index_ivf(self._index).invlists
        parts = [
            faiss.rev_swig_ptr(invlists.get_ids(i), invlists.list_size(i)).copy()
            for i in range(invlists.nlist)
            if invlists.list_size(i)
        ]
        return np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)

    def restore(
        self,
        counts: dict[int, int],
        index: faiss.Index | None,
        held: dict[int, np.ndarray],
        tombstones: np.ndarray,
    ) -> None:
        """Set every row at once from a saved copy (``held``: kept or staged rows, by key)."""
        self._counts = counts if isinstance(counts, dict) else dict(counts)
        self._rows = sum(counts.values())
        self._tombstones = set(tombstones.tolist())
        self._selector_ok = None
        self._generation += 1
        if index is not None:
            if not isinstance(index, faiss.IndexIDMap) and faiss.try_extract_index_ivf(index) is None:
                msg = "the saved FAISS index has no stable ids"
                raise ValueError(msg)
            self._apply_parameters(index)
            self._make_ids(index)
        self._index = index
        self._staging, self._staged_rows, self._kept = {}, 0, {}
        if index is None:
            self._staging = held
            self._staged_rows = sum(len(v) for v in held.values())
        if self.keeps_rows:
            self._kept = dict(held)

    def held_rows(self) -> dict[int, np.ndarray]:
        """The float32 rows held beside the index: staged rows before training, kept rows beside a lossy one."""
        return self._staging if self._index is None else self._kept

    @property
    def tombstones(self) -> np.ndarray:
        return np.sort(np.fromiter(self._tombstones, dtype=np.int64, count=len(self._tombstones)))


def _owned_rows(views: list[np.ndarray], counts: np.ndarray) -> list[np.ndarray]:
    """Copies of ``views`` the store owns (one float32 matrix per chunk of rows, each document a slice of it),
    checked as :func:`first_invalid` does; :class:`InvalidViews` otherwise."""
    out: list[np.ndarray] = []
    start = 0
    while start < len(views):
        end, rows = start, 0
        while end < len(views) and (rows == 0 or rows + len(views[end]) <= _CHUNK_ROWS):
            rows += len(views[end])
            end += 1
        block = np.concatenate(views[start:end]).astype(np.float32, copy=False)  # always a new array
        if not _squared_norm(block) <= _MAX_SQUARED_NORM:
            bad = first_invalid(views[start:end])
            if bad is not None:
                raise InvalidViews(start + bad[0], bad[1])
        offsets = np.concatenate([[0], np.cumsum(counts[start:end])]).tolist()
        out.extend(block[offsets[i] : offsets[i + 1]] for i in range(end - start))
        start = end
    return out


def _squared_norm(matrix: np.ndarray) -> float:
    """The sum of squares of every value, in float32 (one BLAS ``sdot`` pass, no array allocated for a contiguous
    matrix): NaN or infinite when a value is, and also when finite values overflow float32."""
    return float(np.vdot(matrix, matrix))


def views_problem(matrix: np.ndarray, row_name: str = "view") -> str | None:
    """What is wrong with ``matrix``'s rows (``NON_FINITE``, or the longest row when its L2 norm passes ``MAX_NORM``,
    called ``row_name``), or ``None``."""
    if _squared_norm(matrix) <= _MAX_SQUARED_NORM:
        return None
    if not np.isfinite(matrix).all():
        return NON_FINITE
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64))
    row = int(np.argmax(norms))
    if norms[row] <= MAX_NORM:
        return None  # only the sum of the rows' squares overflowed float32
    return (
        f"{row_name} {row} has an L2 norm of {norms[row]:.3g}, above the {MAX_NORM:.0e} the store accepts (inner "
        f"products could pass float32's 3.4e38 and give infinite scores); normalise the {row_name}s"
    )


def first_invalid(matrices: list[np.ndarray]) -> tuple[int, str] | None:
    """The position of the first matrix :func:`views_problem` finds wrong, and the problem; ``None`` when all are
    fine. Each matrix costs one sum of squares; only one whose sum is non-finite or large is looked at closer."""
    for i, m in enumerate(matrices):
        if _squared_norm(m) <= _MAX_SQUARED_NORM:
            continue
        problem = views_problem(m)
        if problem is not None:
            return i, problem
    return None


def _reconstruct_rotated(index: faiss.Index, labels: np.ndarray) -> np.ndarray | None:
    """Rows behind an orthonormal linear pre-transform (OPQ), decoded in its space and rotated back in one matrix
    product: FAISS reverses the transform one row at a time (366 ms for 10k rows of ``OPQ48,PQ48`` at d=384, against
    11 ms to decode and 41 ms to rotate). ``None`` where that does not apply (the caller asks FAISS)."""
    ids = labels
    if isinstance(index, faiss.IndexIDMap2):
        if not isinstance(faiss.downcast_index(index.index), faiss.IndexPreTransform):
            return None
        id_map = faiss.rev_swig_ptr(index.id_map.data(), index.id_map.size())
        ids = np.searchsorted(id_map, labels)  # the store appends labels in increasing order and removal keeps it
        if not len(id_map) or ids.max() >= len(id_map) or not np.array_equal(id_map[ids], labels):
            return None
        index = faiss.downcast_index(index.index)
    if not isinstance(index, faiss.IndexPreTransform):
        return None
    chain = [faiss.downcast_VectorTransform(index.chain.at(i)) for i in range(index.chain.size())]
    if not all(isinstance(t, faiss.LinearTransform) and t.is_orthonormal and not t.have_bias for t in chain):
        return None
    rows = faiss.downcast_index(index.index).reconstruct_batch(ids)
    for transform in reversed(chain):  # x -> A x with orthonormal rows of A is reversed by y -> A^T y
        rows = rows @ faiss.vector_to_array(transform.A).reshape(transform.d_out, transform.d_in)
    return np.ascontiguousarray(rows, dtype=np.float32)


def _reserve(index: faiss.Index, rows: int) -> None:
    """Grow an IndexIDMap over a flat-code index (Flat, PQ, SQ) to hold ``rows`` more rows in one allocation.

    FAISS grows its ``std::vector`` storage by doubling: adding a million rows chunk by chunk reallocated and
    copied the whole index about twenty times (and faulted in ~2x its memory). Resizing up then back down keeps
    the capacity, exactly like ``std::vector::reserve``; nothing else changes.
    """
    if not isinstance(index, faiss.IndexIDMap):
        return
    base = faiss.downcast_index(index.index)
    if not isinstance(base, faiss.IndexFlatCodes) or not base.codes.is_owned:
        return
    n = int(base.ntotal)
    codes = base.codes
    used = n * int(base.code_size)
    codes.resize(used + rows * int(base.code_size))
    codes.resize(used)
    index.id_map.resize(n + rows)
    index.id_map.resize(n)


_FIRST_BLOCK_ROWS = 4096  # rows whose best k set the first thresholds of a batched Flat search
_BLOCK_SCORES = 1 << 20  # scores per block of a batched Flat search (4 MiB: 16,384 rows for 64 queries)


def _flat_top_k(queries: np.ndarray, k: int, rows: np.ndarray, labels: np.ndarray) -> np.ndarray:
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


def _collapse(
    labels: np.ndarray, want: int, post_filter: np.ndarray | None = None, excluded: np.ndarray | None = None
) -> tuple[list[np.ndarray], np.ndarray]:
    """Rows to documents for every query at once: each query's first ``want`` distinct document keys in the order
    of its ``(n, k)`` row ``labels`` (best first), and how many distinct keys each query found.

    Labels below 0 (FAISS's "no row"), outside ``post_filter`` or in ``excluded`` are skipped. A document's first
    (best) row is where it ranks; its later rows are duplicates. One stable sort of the whole matrix, no loop over
    queries.
    """
    if len(labels) == 1 and post_filter is None and excluded is None:  # one query: a dict keeps first occurrences
        row = labels[0]
        keys = list(dict.fromkeys(keys_of(row[row >= 0]).tolist()))
        return [np.asarray(keys[:want], dtype=np.int64)], np.array([len(keys)], dtype=np.int64)
    valid = labels >= 0
    if post_filter is not None:
        valid &= np.isin(labels, post_filter)
    elif excluded is not None:
        valid &= ~np.isin(labels, excluded)
    keys = np.where(valid, keys_of(labels), -1)
    order = np.argsort(keys, axis=1, kind="stable")
    ordered = np.take_along_axis(keys, order, 1)
    first = np.ones(ordered.shape, dtype=bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    first &= ordered >= 0
    distinct = np.zeros(keys.shape, dtype=bool)
    np.put_along_axis(distinct, order, first, 1)
    rank = np.cumsum(distinct, axis=1)
    counts = rank[:, -1] if rank.shape[1] else np.zeros(len(keys), dtype=np.int64)
    taken = distinct & (rank <= want)
    flat = keys[taken]  # row-major: each query's keys in their order, queries one after the other
    found = np.split(flat, np.cumsum(np.minimum(counts, want))[:-1]) if len(keys) else []
    return found, counts


def _reconstructs_exactly(base: faiss.Index) -> bool:
    index = faiss.downcast_index(base)
    if isinstance(index, faiss.IndexFlat):
        return True
    if isinstance(index, faiss.IndexHNSW):
        return isinstance(faiss.downcast_index(index.storage), faiss.IndexFlat)
    return isinstance(index, faiss.IndexIVFFlat)


def _centroids(base: faiss.Index) -> int:
    """The largest k-means a trainable index runs: IVF lists, a PQ codebook, OPQ's own PQ (256 centroids)."""
    centroids = 1
    ivf = faiss.try_extract_index_ivf(base)
    if ivf is not None:
        centroids = max(centroids, ivf.nlist)
    index = faiss.downcast_index(base)
    if isinstance(index, faiss.IndexPreTransform):
        for i in range(index.chain.size()):
            transform = faiss.downcast_VectorTransform(index.chain.at(i))
            if isinstance(transform, faiss.OPQMatrix):
                centroids = max(centroids, 1 << transform.pq.nbits if transform.pq is not None else 256)
        index = faiss.downcast_index(index.index)
    pq = getattr(index, "pq", None)
    if pq is not None:
        centroids = max(centroids, pq.ksub)
    return centroids


def _skip_polysemous_training(base: faiss.Index) -> None:
    """
    Turn off the polysemous training ``index_factory`` gives a flat PQ or an IVF-PQ (as if ``PQ48np`` had been asked
    for).

    It only relabels the centroids for Hamming-distance search, which the store never uses (it ranks by asymmetric
    distances, identical either way), and it dominated training: PQ48 on 16,384 rows took 567 s with it, 8 s
    without (benchmarks/results/store_streaming_build.md); ``IVF8,PQ4`` on 2,000 rows at d=16, 9.2 s against 0.2 s.
    """
    index = faiss.downcast_index(base)
    if isinstance(index, faiss.IndexPreTransform):
        index = faiss.downcast_index(index.index)
    if isinstance(index, (faiss.IndexPQ, faiss.IndexIVFPQ)):
        index.do_polysemous_training = False


def _default_train_size(centroids: int) -> int:
    """FAISS's advice: 39 training rows per centroid of the largest k-means, capped at 2^20 rows."""
    return min(max(39 * centroids, 256), 1 << 20)
