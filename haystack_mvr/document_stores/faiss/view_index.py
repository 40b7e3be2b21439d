"""The view rows of a multi-view store: one FAISS row per view, under a stable label, searched for documents.

:class:`ViewIndex` is what the store uses; it composes the parts the package docstring lists, each readable alone
(and imported from its own module: nothing is re-exported here). A query is always a matrix ``(m, d)``
(``haystack_mvr.maxsim``): :meth:`ViewIndex.top` ranks one query's documents by their best view for ``m = 1`` and by
MaxSim otherwise, :meth:`ViewIndex.top_documents` ranks a batch of one-vector queries; both return the similarities
they scored (``view_search.RankedKeys``), which the results are annotated with.
"""

from __future__ import annotations

import logging

import numpy as np

from haystack_mvr.document_stores.faiss import gpu_index, view_search
from haystack_mvr.document_stores.faiss.chunked_add import add_labelled_rows, add_views
from haystack_mvr.document_stores.faiss.faiss_import import faiss
from haystack_mvr.document_stores.faiss.faiss_threads import omp_threads
from haystack_mvr.document_stores.faiss.flat_scan import DocumentScan
from haystack_mvr.document_stores.faiss.index_family import (
    COMPACT_FRACTION,
    IndexFamily,
    flat_rows,
    has_stable_ids,
    index_labels,
    reconstruct,
    stored_rows,
    use_hashtable_ids,
)
from haystack_mvr.document_stores.faiss.row_book import DocumentRows, owned_rows
from haystack_mvr.document_stores.faiss.view_checks import InvalidViews, all_unit, first_invalid
from haystack_mvr.document_stores.faiss.view_labels import labels_of
from haystack_mvr.document_stores.faiss.view_search import IndexSearch, RankedKeys, SearchOutcome, distinct_documents

logger = logging.getLogger(__name__)


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
    - While every row added to a lossy index has unit length (``unit_rows``: a normalising encoder's), the rows it
      decodes are scaled back to unit length: the decoded direction is the code's information, and a norm error
      would add to every score of the row (at 32 bytes a ColBERT token, recall@10 against exact MaxSim 0.84 ->
      0.87). An exact index decodes rows as they came: ``unit_rows`` stays ``False`` and writes skip the check.

    :param dim: Vector dimension.
    :param index_factory: A FAISS ``index_factory`` string, built with inner-product metric.
    :param search_parameters: ``faiss.ParameterSpace`` settings (``nprobe``, ``efSearch`` ...).
    :param keep_vectors: Keep float32 rows beside a lossy index (exact scores for returned documents).
    :param train_size: Rows to collect before training a trainable index (``None``: ``39 x`` its centroids).
    :param gpu_device: Search a copy of the index on this GPU (``haystack_mvr.document_stores.faiss.gpu_index``).
    """

    exact_rows = 4096  # filtered searches over at most this many rows (or 1% of the index) are scored exactly
    max_search_depth: int | None = None  # deepest FAISS search before the uncapped CPU index finishes (GPU: 2048)
    maxsim_depth = 128  # candidate rows per query vector of a multi-vector query on an approximate index
    maxsim_rerank = 256  # of their documents, those scored by exact MaxSim (ranked by their reciprocal ranks' sum)

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
        self._family = IndexFamily(dim, index_factory, self.search_parameters)
        self.train_size = self._family.training_rows(train_size)
        self._gpu = None
        if gpu_device is not None:
            gpu_index.check_gpu_index(self._family.new_base(), index_factory, self.search_parameters)
            self._gpu = gpu_index.GpuReplica(gpu_device, index_factory, self.search_parameters)
        self._generation = 0  # counts changes to the rows: a GPU copy older than the last one is made again
        self._book = DocumentRows()
        self._index: faiss.Index | None = None
        self._scan: tuple[int, DocumentScan | None] | None = None  # (generation, scan) of the rows
        self._plan: tuple[tuple, IndexSearch] | None = None  # (settings, plan) of the last unfiltered CPU search
        self.reset()

    # ------------------------------------------------------------------------------------------- state
    def reset(self) -> None:
        """Remove every row (a trained index keeps its training: it is emptied, not retrained)."""
        self._book.clear()
        self.unit_rows = not self._family.exact  # a lossy index's rows all had unit length so far (class docstring)
        self._selector_ok: bool | None = None
        self._generation += 1
        if self._index is not None and not self._family.hnsw:
            self._index.reset()
            use_hashtable_ids(self._index)
        else:
            self._index = None if self._family.trainable else self._family.new_index()

    @property
    def keeps_rows(self) -> bool:
        return self.keep_vectors and not self._family.exact

    @property
    def trained(self) -> bool:
        return self._index is not None

    @property
    def ntotal(self) -> int:
        """Live rows."""
        return self._book.rows

    @property
    def document_count(self) -> int:
        """Documents with at least one row."""
        return len(self._book.counts)

    def count(self, key: int) -> int:
        return self._book.counts.get(key, 0)

    def counts_of(self, keys: list[int]) -> list[int]:
        """The rows of each of ``keys``, all of them documents with rows."""
        return list(map(self._book.counts.__getitem__, keys))

    def keys(self) -> np.ndarray:
        return self._book.keys()

    # ------------------------------------------------------------------------------------------ writes
    def add(self, keys: list[int], views: list[np.ndarray]) -> None:
        """Add the rows of new document keys (each key once, never already present; each with at most ``MAX_VIEWS``
        views, which the store's write checks: ``view_labels.too_many_views``).

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
        unit = self.unit_rows and all_unit(views)
        self._generation += 1
        held = self.keeps_rows or self._index is None
        if held:
            views = owned_rows(views, counts)  # raises before anything changes
        elif self._family.hnsw:
            bad = first_invalid(views)
            if bad is not None:
                raise InvalidViews(*bad)
        if self._index is not None:
            add_views(self._index, self._family, keys, views, counts, checked=held or self._family.hnsw)
        staged = self._index is None
        self._book.record(keys, counts, views, keep=self.keeps_rows, stage=staged)
        self.unit_rows = unit
        if staged and self._book.staged_rows >= self.train_size:
            self._train()

    def _train(self) -> None:
        keys, views = list(self._book.staging), list(self._book.staging.values())
        sample = np.concatenate(views)
        index = self._family.new_index()
        index.train(sample)  # with the caller's FAISS threads (the store's write setting)
        del sample
        self._index = index
        self._book.unstage()
        add_views(index, self._family, keys, views)
        logger.info("Trained %s on %d rows.", self.index_factory, sum(len(v) for v in views))

    def remove(self, keys: list[int]) -> None:
        """Remove every row of these keys (unknown keys are ignored)."""
        labels = self._book.forget(keys)
        if labels is None:
            return
        self._generation += 1
        if self._index is None:
            return
        if self._family.hnsw:
            self._book.tombstones.update(labels.tolist())
            if len(self._book.tombstones) > COMPACT_FRACTION * self._index.ntotal:
                self._compact()
        else:
            self._family.remove(self._index, labels)

    def _compact(self) -> None:
        """Rebuild an HNSW graph from its live rows (no training involved)."""
        labels, vectors = self.rows_of(self.keys())
        self._index = self._family.new_index()
        self._book.tombstones = set()
        self._selector_ok = None
        add_labelled_rows(self._index, self._family, labels, vectors)

    # ------------------------------------------------------------------------------------------- reads
    def _read_from(self) -> dict[int, np.ndarray] | None:
        """The rows reads take: kept beside a lossy index, staged before training; ``None``: the index's own."""
        return self._book.kept if self.keeps_rows else self._book.staging if self._index is None else None

    def views_of(self, key: int) -> np.ndarray:
        """The ``(k, d)`` rows of one document (the index's reconstruction when it is the only copy)."""
        for held in (self._book.kept, self._book.staging):
            if key in held:
                return held[key]
        return self._decoded(labels_of(key, self._book.counts[key]))

    def rows_of(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(labels, vectors)`` of every row of ``keys``, grouped by key in the given order."""
        if len(keys) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros((0, self.dim), dtype=np.float32)
        return self._book.labels(keys), self.vectors_of(keys)

    def vectors_of(self, keys: np.ndarray) -> np.ndarray:
        """The ``(rows, d)`` vectors of :meth:`rows_of`, without their labels (a search result's re-scoring)."""
        if len(keys) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        held = self._read_from()
        if held is not None:
            return np.concatenate([held[k] for k in keys.tolist()])
        scan = self._document_scan()
        rows = scan.rows_of(keys) if scan is not None else None
        return rows if rows is not None else self._decoded(self._book.labels(keys))

    def _decoded(self, labels: np.ndarray) -> np.ndarray:
        """The index's rows of ``labels``, scaled back to unit length when every row added had it (a lossy index)."""
        rows = reconstruct(self._index, labels, self.dim)
        if self.unit_rows and len(rows):
            norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
            rows /= np.maximum(norms, np.float32(1e-12))[:, None]
        return rows

    # ------------------------------------------------------------------------------------------ search
    def search(
        self,
        queries: np.ndarray,
        n_best: int,
        allowed_keys: np.ndarray | None,
        threads: int,
        required: int | None = None,
    ) -> list[np.ndarray]:
        """
        The best ``n_best`` document keys for each query ``(n, d)``, best first, restricted to ``allowed_keys``.

        Exactly ``min(n_best, documents)`` keys per query: searches widen until enough unique documents are found or
        the whole index was searched, and an approximate index that still falls short is finished exactly. A search
        stopped by ``max_search_depth`` (a GPU's) keeps its keys when they are at least ``required`` (a re-ranking
        pool's must-have part); a query left with fewer is searched again on the CPU index, without a cap.
        """
        # allowed_keys: keys of documents with rows (the store passes no others)
        available = len(allowed_keys) if allowed_keys is not None else self.document_count
        n_best = min(n_best, available)
        if n_best == 0:
            return [np.zeros(0, dtype=np.int64) for _ in queries]
        with omp_threads(threads):
            if self._index is None:
                keys = allowed_keys if allowed_keys is not None else self.keys()
                return self._exact_search(queries, n_best, keys)
            if allowed_keys is not None:
                counts = self._book.counts
                rows = sum(counts[int(k)] for k in allowed_keys)
                if rows <= max(self.exact_rows, self._book.rows // 100):
                    return self._exact_search(queries, n_best, allowed_keys)
            scan = self._document_scan() if len(queries) == 1 and not self._family.hnsw else None
            if scan is not None:  # Flat on the CPU: every document's best view, exactly, in one pass
                return [scan.top(queries, n_best, allowed_keys)]
            return self._index_search(queries, n_best, allowed_keys, min(required or n_best, n_best))

    def top(
        self, query: np.ndarray, top_k: int, allowed_keys: np.ndarray | None, threads: int, with_rows: bool = False
    ) -> RankedKeys:
        """One query's ``top_k`` documents, scored: a one-vector query ``(1, d)`` by its best view
        (:meth:`top_documents`), a multi-vector one ``(m, d)`` by MaxSim (:meth:`top_maxsim`)."""
        if len(query) == 1:
            return self.top_documents(query, top_k, allowed_keys, threads, with_rows)[0]
        return self.top_maxsim(query, top_k, allowed_keys, threads, with_rows)

    def top_documents(
        self,
        queries: np.ndarray,
        top_k: int,
        allowed_keys: np.ndarray | None,
        threads: int,
        with_rows: bool = False,
    ) -> list[RankedKeys]:
        """
        The ``top_k`` documents of each one-vector query (the rows of ``queries`` ``(n, d)``), scored: the search,
        then (beside a lossy index, whose kept rows re-rank a wider pool of candidates exactly) the re-ranking, whose
        similarities are returned as they were scored; otherwise the rows of the documents found, scored once.

        :param with_rows: Also return the documents' rows (``return_embedding``).
        :returns: One :class:`~haystack_mvr.document_stores.faiss.view_search.RankedKeys` per query, its keys in
            search order (the caller sorts by score).
        """
        pool = top_k * 4 + 16 if self.keeps_rows else top_k
        found = self.search(queries, pool, allowed_keys, threads, required=top_k)
        ranked = []
        for qi, keys in enumerate(found):
            query = queries[qi : qi + 1]
            if len(keys) > top_k:
                ranked.append(self._score(query, keys, top_k, with_rows))
            else:
                key_list = keys.tolist()
                rows = self.vectors_of(keys)
                ranked.append(view_search.scored_rows(query, key_list, self.counts_of(key_list), rows, with_rows))
        return ranked

    def top_maxsim(
        self, query: np.ndarray, top_k: int, allowed_keys: np.ndarray | None, threads: int, with_rows: bool = False
    ) -> RankedKeys:
        """
        A multi-vector query's ``(m, d)`` ``top_k`` documents by MaxSim (the sum over its vectors of each one's best
        view), scored. A Flat index (or rows not yet trained into an index) is scored exhaustively, so the ranking is
        exact. Other indexes find candidates first, the documents of each query vector's ``maxsim_depth`` best rows
        (a per-token ANN search), keep the ``maxsim_rerank`` that rank best across the query vectors (the sum of
        their reciprocal ranks), and score those exactly on their kept or decoded rows, each row decoded and scored
        once: the similarities of the ``top_k`` best are what is returned.
        """
        available = len(allowed_keys) if allowed_keys is not None else self.document_count
        top_k = min(top_k, available)
        if top_k == 0:
            return view_search.ranked(np.zeros(0, dtype=np.int64), [], [], len(query))
        with omp_threads(threads):
            scan = self._document_scan() if self._index is not None and not self._family.hnsw else None
            if scan is not None:
                keys, scores, rows = scan.top_maxsim(query, top_k, allowed_keys, with_rows)
                return view_search.ranked(keys, scores, rows, len(query))
            if self._index is None:
                candidates = allowed_keys if allowed_keys is not None else self.keys()
            else:
                found = self._token_candidates(query, top_k, allowed_keys, available, threads)
                candidates = _shortlist(found, max(self.maxsim_rerank, top_k))
            return self._score(query, candidates, top_k, with_rows)

    def _token_candidates(
        self, query: np.ndarray, top_k: int, allowed_keys: np.ndarray | None, available: int, threads: int
    ) -> list[np.ndarray]:
        """Each query vector's candidate documents in a trained index, best first: the documents of its
        ``maxsim_depth`` best rows (one FAISS search for all the vectors, as ColBERT's per-token retrieval; each
        document once, at its best row's rank, tombstones skipped), or, under a filter or on a GPU copy, its
        ``maxsim_depth`` best documents by the store's widening search (which honours both)."""
        depth = min(max(self.maxsim_depth, top_k), available)
        if allowed_keys is not None or self._gpu is not None:
            return self.search(query, depth, allowed_keys, threads, required=min(top_k, depth))
        rows = min(self.maxsim_depth, self._index.ntotal)
        _, labels = self._index.search(np.ascontiguousarray(query, dtype=np.float32), rows, params=self._params(None))
        tombstones = self.tombstones
        out, _ = distinct_documents(labels, rows, None, tombstones if len(tombstones) else None)
        if len(np.unique(np.concatenate(out))) < min(top_k, available):  # too few: widen until top_k documents
            return self.search(query, depth, None, threads, required=min(top_k, depth))
        return out

    def _score(self, query: np.ndarray, keys: np.ndarray, keep: int, with_rows: bool) -> RankedKeys:
        """The ``keep`` best of ``keys`` by MaxSim with ``query`` ``(m, d)`` (max over views for ``m = 1``), on their
        kept, staged or decoded rows, with the similarities scored (``view_search.score_documents``)."""
        return view_search.score_documents(query, keys, self._book.counts, self.vectors_of, keep, with_rows)

    def _document_scan(self) -> DocumentScan | None:
        """The one-pass scan of a Flat index searched on the CPU (of an HNSW graph's flat storage: only to read rows
        from), made again after each change; else ``None``."""
        if self._gpu is not None:
            return None
        if self._scan is None or self._scan[0] != self._generation:
            flat = stored_rows(self._index, self.dim)
            self._scan = (self._generation, None if flat is None else DocumentScan(*flat, self.document_count))
        return self._scan[1]

    def _exact_search(self, queries: np.ndarray, n_best: int, keys: np.ndarray) -> list[np.ndarray]:
        return view_search.exact_search(queries, n_best, keys, self._book.counts, self.vectors_of)

    def _index_search(
        self,
        queries: np.ndarray,
        n_best: int,
        allowed_keys: np.ndarray | None,
        required: int | None = None,
        capped: bool = True,
    ) -> list[np.ndarray]:
        """:meth:`search` through the FAISS index (``capped``: under ``max_search_depth`` and a GPU's cap)."""
        outcome = self._plan_search(n_best, allowed_keys, batch=len(queries) > 1, capped=capped).run(
            queries, n_best, required or n_best
        )
        if outcome.deeper:  # queries the depth cap left short: searched again on the CPU index, uncapped
            finished = self._index_search(queries[outcome.deeper], n_best, allowed_keys, capped=False)
            for qi, found in zip(outcome.deeper, finished, strict=True):
                outcome.keys[qi] = found
        return self._finish_exactly(queries, n_best, allowed_keys, outcome)

    def _plan_search(self, n_best: int, allowed_keys: np.ndarray | None, batch: bool, capped: bool) -> IndexSearch:
        """:meth:`_new_plan`; without a filter, a GPU or search parameters (an id selector for an HNSW graph's
        tombstones, which copies the index's efSearch) the plan depends only on the rows, so it is made once per change
        of them (a single query's plan was a tenth of the Python around its HNSW search)."""
        if allowed_keys is not None or self._gpu is not None:
            return self._new_plan(n_best, allowed_keys, batch, capped)
        settings = (self._generation, n_best, batch, capped, self.max_search_depth)
        if self._plan is None or self._plan[0] != settings:
            plan = self._new_plan(n_best, None, batch, capped)
            if plan.params is not None:
                return plan
            self._plan = (settings, plan)
        return self._plan[1]

    def _new_plan(self, n_best: int, allowed_keys: np.ndarray | None, batch: bool, capped: bool) -> IndexSearch:
        """Which index to search (the CPU one or its GPU copy), whether FAISS applies the filter and skips the
        tombstones (id selectors) or the rows found are filtered afterwards, and how deep to search first."""
        allowed_labels = self._book.labels(allowed_keys) if allowed_keys is not None else None
        tombstones = self.tombstones
        per_doc = max(1.0, self._book.rows / max(1, self.document_count))
        replica = self._gpu_copy(n_best, per_doc, allowed_labels) if capped else None
        index = replica if replica is not None else self._index
        cap = gpu_index.depth_cap(self.max_search_depth, self._gpu if replica is not None else None) if capped else None
        selectors, post_filter, excluded = (), None, None
        if replica is not None or (allowed_labels is None and not len(tombstones)) or not self._selector_supported():
            post_filter, excluded = allowed_labels, tombstones if len(tombstones) else None
        else:
            selectors = view_search.id_selector(allowed_labels, tombstones)
        selector = selectors[-1] if selectors else None
        share = len(allowed_labels) / max(1, index.ntotal) if allowed_labels is not None else 1.0
        limit = index.ntotal  # never stop widening before the whole index was searched
        if selector is not None and allowed_labels is not None:
            limit = min(limit, len(allowed_labels))
        depth = view_search.first_depth(n_best, per_doc, self._family.hnsw, index.ntotal, post_filter)
        return IndexSearch(
            index=index,
            params=self._params(selector, share),
            selectors=selectors,
            post_filter=post_filter,
            excluded=excluded,
            flat=flat_rows(self._index, self.dim) if selector is None and batch and replica is None else None,
            depth=int(min(limit, cap or limit, max(16, depth))),
            limit=limit,
            cap=cap,
        )

    def _finish_exactly(
        self, queries: np.ndarray, n_best: int, allowed_keys: np.ndarray | None, outcome: SearchOutcome
    ) -> list[np.ndarray]:
        """Each query's first ``n_best`` keys; a query an approximate index left short (it did not reach every allowed
        row) is scored exactly, unless the depth cap ``accepted`` it."""
        results = outcome.keys
        for qi, found in enumerate(results):
            if qi in outcome.accepted:
                continue
            if len(found) < n_best:
                keys = allowed_keys if allowed_keys is not None else self.keys()
                results[qi] = self._exact_search(queries[qi : qi + 1], n_best, keys)[0]
            else:
                results[qi] = found[:n_best]
        return results

    def _gpu_copy(self, n_best: int, per_doc: float, allowed_labels: np.ndarray | None) -> faiss.Index | None:
        """The GPU copy to search; ``None`` without one, or for a filter too selective to search under its cap."""
        if self._gpu is None:
            return None
        allowed_rows = len(allowed_labels) if allowed_labels is not None else None
        return self._gpu.copy_to_search(
            self._index, self._generation, self.max_search_depth, n_best, per_doc, allowed_rows
        )

    def _params(self, selector: faiss.IDSelector | None, allowed_share: float = 1.0) -> faiss.SearchParameters | None:
        return self._family.search_params(self._index, selector, allowed_share)

    def _selector_supported(self) -> bool:
        if self._selector_ok is None:
            self._selector_ok = self._family.accepts_selectors(self._index)
        return self._selector_ok

    # ------------------------------------------------------------------------------------- persistence
    @property
    def faiss_index(self) -> faiss.Index | None:
        return self._index

    def index_labels(self) -> np.ndarray:
        """Every label the FAISS index holds (tombstones included), sorted."""
        return index_labels(self._index)

    def restore(
        self,
        counts: dict[int, int],
        index: faiss.Index | None,
        held: dict[int, np.ndarray],
        tombstones: np.ndarray,
        unit_rows: bool = False,
    ) -> None:
        """Set every row at once from a saved copy (``held``: kept or staged rows, by key; ``unit_rows``: whether
        every row had unit length, as saved; only a lossy index uses it)."""
        if index is not None:
            if not has_stable_ids(index):
                msg = "the saved FAISS index has no stable ids"
                raise ValueError(msg)
            self._family.apply_parameters(index)
            use_hashtable_ids(index)
        self._book.restore(counts, held, tombstones, staged=index is None, kept=self.keeps_rows)
        self.unit_rows = unit_rows and not self._family.exact
        self._selector_ok = None
        self._generation += 1
        self._index = index

    def kept_rows_by_key(self) -> dict[int, np.ndarray]:
        """The float32 rows held beside the index: staged rows before training, kept rows beside a lossy one."""
        return self._book.staging if self._index is None else self._book.kept

    @property
    def tombstones(self) -> np.ndarray:
        return self._book.sorted_tombstones()


__all__ = ["ViewIndex"]


def _shortlist(found: list[np.ndarray], keep: int) -> np.ndarray:
    """The ``keep`` documents that rank best across several searches' results (each a ranked key array), best first:
    by the sum of ``1 / (60 + rank)`` over the lists that hold them, as reciprocal rank fusion ranks; all of them if
    fewer."""
    keys = np.concatenate(found)
    if len(keys) == 0:
        return keys
    ranks = np.concatenate([np.arange(len(f)) for f in found])
    unique, inverse = np.unique(keys, return_inverse=True)
    fused = np.bincount(inverse, weights=1.0 / (60.0 + ranks), minlength=len(unique))
    return unique[np.argsort(-fused, kind="stable")[:keep]]
