"""The FAISS index types behind an ``index_factory`` string, and their quirks: stable ids (IndexIDMap2 or IVF's
hashtable direct map), training sizes, id selectors per family, reconstruction (OPQ's rotation), HNSW's adds."""

from __future__ import annotations

import math

import numpy as np

from haystack_mvr.document_stores.faiss.faiss_import import faiss

# rows per HNSW add: FAISS inserts one add's rows highest level first, and a graph built 2,048 rows at a time found
# fewer of the true top-10 documents (recall 0.26 against 0.33 for one add of 10^5 rows at efSearch 16)
HNSW_ADD_ROWS = 1 << 18
COMPACT_FRACTION = 0.25  # HNSW cannot remove rows: it is rebuilt once tombstones pass this share of its rows


class IndexFamily:
    """
    How the store builds, labels and searches the index of one ``index_factory`` string.

    - Flat, PQ, SQ, OPQ without IVF, HNSW: wrapped in ``faiss.IndexIDMap2`` (``add_with_ids``, ``remove_ids``,
      ``reconstruct(label)``). HNSW cannot remove rows (``hnsw``: the caller keeps tombstones).
    - IVF (also under OPQ's ``IndexPreTransform``): the IVF's own ids, with a hashtable direct map.
    - ``trainable``: IVF, PQ, OPQ, trained once on :meth:`training_rows` rows (at least ``centroids``).
    - ``exact``: the index reconstructs its rows exactly (Flat, HNSW over flat storage, IVF-Flat).

    :param dim: Vector dimension.
    :param index_factory: A FAISS ``index_factory`` string, built with inner-product metric.
    :param search_parameters: ``faiss.ParameterSpace`` settings (``nprobe``, ``efSearch`` ...), refused here (a
        ``ValueError``) when they do not apply.
    """

    def __init__(self, dim: int, index_factory: str, search_parameters: dict[str, int | float]) -> None:
        self.dim = dim
        self.index_factory = index_factory
        self.search_parameters = search_parameters
        base = self.new_base()
        self.apply_parameters(base)  # a parameter that does not apply is refused before any row is written
        self.trainable = not base.is_trained
        self.ivf = faiss.try_extract_index_ivf(base) is not None
        self.hnsw = isinstance(faiss.downcast_index(base), faiss.IndexHNSW)
        self.exact = _reconstructs_exactly(base)
        self.centroids = _centroids(base)  # k-means needs at least one row per centroid

    def new_base(self) -> faiss.Index:
        """An empty index as ``index_factory`` builds it (without PQ's polysemous training)."""
        try:
            base = faiss.index_factory(self.dim, self.index_factory, faiss.METRIC_INNER_PRODUCT)
        except RuntimeError as e:
            msg = f"FAISS cannot build index_factory={self.index_factory!r} for dimension {self.dim}: {e}"
            raise ValueError(msg) from e
        _skip_polysemous_training(base)
        return base

    def new_index(self) -> faiss.Index:
        """An empty, labelled index: :meth:`wrap` of :meth:`new_base`."""
        return self.wrap(self.new_base())

    def wrap(self, base: faiss.Index) -> faiss.Index:
        """Give ``base`` stable labels: IVF's own ids with a hashtable direct map, else an IndexIDMap2."""
        self.apply_parameters(base)
        # IVF keeps its own ids; anything else gets an id map (whose Python wrapper keeps ``base`` alive)
        index = base if faiss.try_extract_index_ivf(base) is not None else faiss.IndexIDMap2(base)
        use_hashtable_ids(index)
        return index

    def apply_parameters(self, index: faiss.Index) -> None:
        space = faiss.ParameterSpace()
        for name, value in self.search_parameters.items():
            try:
                space.set_index_parameter(index, name, value)
            except RuntimeError as e:
                msg = f"FAISS search parameter {name}={value!r} does not apply to index {self.index_factory!r}: {e}"
                raise ValueError(msg) from e

    def training_rows(self, train_size: int | None) -> int:
        """Rows to train on: ``train_size`` (at least one per centroid), by default FAISS's advice of 39 rows per
        centroid of the largest k-means, capped at 2^20 rows."""
        return max(train_size, self.centroids) if train_size else min(max(39 * self.centroids, 256), 1 << 20)

    def remove(self, index: faiss.Index, labels: np.ndarray) -> None:
        """Remove rows by label (not from an HNSW graph, which cannot)."""
        if self.ivf:
            index.remove_ids(faiss.IDSelectorArray(labels))
        else:
            index.remove_ids(faiss.IDSelectorBatch(labels))

    def search_params(
        self, index: faiss.Index, selector: faiss.IDSelector | None, allowed_share: float = 1.0
    ) -> faiss.SearchParameters | None:
        """FAISS search parameters that apply ``selector``, keeping the index's own ``efSearch`` or ``nprobe``."""
        if selector is None:
            return None
        if self.hnsw:
            # HNSW walks the whole graph but keeps allowed rows only: a filter admitting a share s of the rows keeps
            # about s * efSearch candidates, so the walk is widened by 1 / s (at most 16x) to keep the index's recall
            ef = faiss.downcast_index(index.index).hnsw.efSearch
            ef = int(min(16 * ef, math.ceil(ef / max(allowed_share, 1e-9))))
            return faiss.SearchParametersHNSW(sel=selector, efSearch=ef)
        if self.ivf:
            ivf = faiss.extract_index_ivf(index)
            return faiss.SearchParametersIVF(sel=selector, nprobe=ivf.nprobe, max_codes=ivf.max_codes)
        return faiss.SearchParameters(sel=selector)

    def accepts_selectors(self, index: faiss.Index) -> bool:
        """Whether FAISS searches ``index`` with an id selector (one probe search)."""
        probe = faiss.IDSelectorBatch(np.zeros(1, dtype=np.int64))
        try:
            index.search(np.zeros((1, self.dim), dtype=np.float32), 1, params=self.search_params(index, probe))
        except RuntimeError:
            return False
        return True

    def rows_per_add(self, rows: int) -> int:
        """Rows per FAISS add: ``rows``, or for an HNSW graph ``HNSW_ADD_ROWS`` (its recall wants large adds)."""
        return HNSW_ADD_ROWS if self.hnsw else rows


def use_hashtable_ids(index: faiss.Index) -> None:
    """Give an IVF index (or one around it) the hashtable direct map ``remove_ids`` and ``reconstruct`` need."""
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None and ivf.direct_map.type != faiss.DirectMap.Hashtable:
        ivf.set_direct_map_type(faiss.DirectMap.Hashtable)


def has_stable_ids(index: faiss.Index) -> bool:
    """Whether a (saved) index labels rows the store's way: an id map, or an IVF's own ids."""
    return isinstance(index, faiss.IndexIDMap) or faiss.try_extract_index_ivf(index) is not None


def index_labels(index: faiss.Index | None) -> np.ndarray:
    """Every label ``index`` holds (HNSW tombstones included), sorted."""
    if index is None:
        return np.zeros(0, dtype=np.int64)
    if isinstance(index, faiss.IndexIDMap):
        labels = faiss.vector_to_array(index.id_map).astype(np.int64, copy=False)
        return labels if len(labels) < 2 or bool((labels[1:] > labels[:-1]).all()) else np.sort(labels)
    invlists = faiss.extract_index_ivf(index).invlists
    parts = [
        faiss.rev_swig_ptr(invlists.get_ids(i), invlists.list_size(i)).copy()
        for i in range(invlists.nlist)
        if invlists.list_size(i)
    ]
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


def flat_rows(index: faiss.Index | None, dim: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Zero-copy ``(rows, labels)`` views of an IndexIDMap2 over IndexFlat (valid until the next change)."""
    if not isinstance(index, faiss.IndexIDMap):
        return None
    flat = faiss.downcast_index(index.index)
    if not isinstance(flat, faiss.IndexFlat) or flat.ntotal == 0:
        return None
    n = int(flat.ntotal)
    rows = faiss.rev_swig_ptr(flat.get_xb(), n * dim).reshape(n, dim)
    return rows, faiss.rev_swig_ptr(index.id_map.data(), n)


def stored_rows(index: faiss.Index | None, dim: int) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`flat_rows`, and likewise the flat storage of an IndexIDMap2 over IndexHNSWFlat; else ``None``."""
    if isinstance(index, faiss.IndexIDMap):
        inner = faiss.downcast_index(index.index)
        if isinstance(inner, faiss.IndexHNSW):
            storage = faiss.downcast_index(inner.storage)
            if isinstance(storage, faiss.IndexFlat) and storage.ntotal:
                n = int(storage.ntotal)
                rows = faiss.rev_swig_ptr(storage.get_xb(), n * dim).reshape(n, dim)
                return rows, faiss.rev_swig_ptr(index.id_map.data(), n)
    return flat_rows(index, dim)


def reconstruct(index: faiss.Index, labels: np.ndarray, dim: int) -> np.ndarray:
    """The ``(len(labels), dim)`` rows of these labels, as the index decodes them."""
    if len(labels) == 0:
        return np.zeros((0, dim), dtype=np.float32)
    rows = reconstruct_rotated(index, labels)
    return rows if rows is not None else index.reconstruct_batch(labels)


def reconstruct_rotated(index: faiss.Index, labels: np.ndarray) -> np.ndarray | None:
    """Rows behind an orthonormal linear pre-transform (OPQ), decoded in its space and rotated back in one matrix
    product (FAISS reverses the transform one row at a time, many times slower). ``None`` where that does not apply
    (the caller asks FAISS)."""
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


def reserve(index: faiss.Index, rows: int) -> None:
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
    distances, identical either way), and it dominated training time
    (``benchmarks/results/store_streaming_build.md``).
    """
    index = faiss.downcast_index(base)
    if isinstance(index, faiss.IndexPreTransform):
        index = faiss.downcast_index(index.index)
    if isinstance(index, (faiss.IndexPQ, faiss.IndexIVFPQ)):
        index.do_polysemous_training = False
