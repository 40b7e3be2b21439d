"""A FAISS-backed Haystack document store that keeps every view of a document as one index row."""

from __future__ import annotations

import copy
import itertools
import logging
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from haystack import Document, default_from_dict, default_to_dict
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy

from haystack_mvr.document_stores.checks import (
    check_batch_size,
    check_encoder_config,
    check_optional_positive_int,
    check_query_dimension,
    check_query_encoder,
    check_top_k,
)
from haystack_mvr.document_stores.faiss import gpu_index, persistence
from haystack_mvr.document_stores.faiss.document_table import DocumentTable, document_line, stored_id
from haystack_mvr.document_stores.faiss.faiss_threads import default_threads, omp_threads
from haystack_mvr.document_stores.faiss.filter_queries import FilterQueries
from haystack_mvr.document_stores.faiss.view_checks import (
    NON_FINITE,
    InvalidViews,
    first_invalid,
    maxsim_query_problem,
    views_problem,
)
from haystack_mvr.document_stores.faiss.view_index import ViewIndex
from haystack_mvr.document_stores.faiss.view_search import RankedKeys
from haystack_mvr.document_stores.faiss.write_batch import invalid_views_error, prepare_batch
from haystack_mvr.document_stores.threaded_async import ThreadedAsyncMethods
from haystack_mvr.document_stores.types import StoreStats
from haystack_mvr.document_stores.writes import (
    already_stored_message,
    document_id_list,
    document_list,
    json_meta,
    repeated_in_batch_message,
)
from haystack_mvr.moved_paths import upgraded
from haystack_mvr.views import (
    ENCODER_KEY,
    SPANS_KEY,
    VIEWS_KEY,
    annotated_copy,
    annotated_maxsim_copy,
    copy_with,
    exported_document,
)

logger = logging.getLogger(__name__)


class FaissMultiViewDocumentStore(FilterQueries, ThreadedAsyncMethods):
    """
    Stores documents and all their views; searches views with FAISS and ranks documents by their best view.

    Views arrive as described in ``haystack_mvr.views`` (``meta["mvr_views"]``, or a plain ``embedding`` as one
    view). Every view is one FAISS row labelled ``(document key << 12) | view``; writes and deletes change only their
    own rows, never rebuild or retrain the index. Scores are raw inner products, ``score = max_i <q, v_i>`` over the
    views the store holds (the index's reconstruction for a lossy index without kept vectors); every search returns
    exactly ``min(top_k, matching documents with vectors)`` unique documents. Documents without vectors are stored
    and filterable, never returned by a search.

    What a write refuses, naming the document, before anything of the batch is written (nothing stored is lost):

    - **More than 4,096 views** (``MAX_VIEWS``; the label keeps 12 bits for the view): split the document, or encode
      it with fewer, longer snippets.
    - **A view with a NaN, an infinity or an L2 norm above 1e18** (``MAX_NORM``; queries too): two such vectors'
      inner product passes float32's 3.4e38 and scores would be infinite. Embeddings have norms near 1. Likewise a
      multi-vector query whose vectors' norms sum above 1e20 (``MAX_MAXSIM_NORM_SUM``) is refused: MaxSim adds one
      inner product per vector.
    - **Meta that JSON cannot hold** (``date``, ``set``, ``bytes``, objects, non-string keys), naming the field, since
      :meth:`save` writes meta as JSON; numpy numbers (``np.float32``, ``np.int64``, ``np.bool_``) are stored as
      the Python numbers they hold.

    Many views per document: memory is per view (a Flat or HNSW row is ``4·d`` bytes plus its 8-byte label, a PQ
    row its code; the Python side holds one count per document, and each document as its saved JSON line, built into
    a new ``Document`` whenever one is returned: ``DocumentTable``), and a search's working memory does not grow with
    the views of the documents it finds. When one document owns most of the best rows, the FAISS search widens
    (doubling its depth, up to the whole index) until ``top_k`` distinct documents are found, on every index type.

    :param embedding_dim: Vector dimension; ``None`` takes it from the first vectors written, then fixes it.
    :param index_factory: A FAISS ``index_factory`` string (``"Flat"``, ``"HNSW32"``, ``"IVF1024,Flat"``,
        ``"PQ48"``, ``"OPQ48,PQ48"``, ``"OPQ48,IVF256,PQ48"`` ...), always with inner-product metric. ``None`` (the
        default): ``"Flat"`` for a new store; a store opened from ``index_path`` or :meth:`load` uses the factory
        its save recorded (a factory given here must match a trained saved index). Likewise ``search_parameters``,
        ``keep_vectors`` and ``train_size`` left at ``None`` take the saved copy's values.
    :param index_path: A directory written by :meth:`save`, loaded on first use (under the store's lock, so no
        write is lost to it); a path that does not exist yet logs a warning and the store opens empty.
    :param encoder_config: The encoder config the vectors come from. Documents carrying ``meta["mvr_encoder"]``
        set it when it is ``None``; a document from another encoder is refused; a saved copy with another config is
        refused on load.
    :param search_parameters: FAISS search-time parameters by ``faiss.ParameterSpace`` name: ``{"nprobe": 32}``
        for IVF, ``{"efSearch": 128}`` for HNSW. Filtered searches use the same values.
    :param keep_vectors: Beside a lossy index (PQ, SQ, OPQ), keep every view's float32 row, so returned documents
        are scored exactly (the default). ``False`` keeps only the index (``"OPQ48,PQ48"``: 48 bytes per view
        instead of 4·d). An index that reconstructs exactly (Flat, HNSW, IVF-Flat) is always the only copy.
        ``None``: ``True``, or what the saved copy kept.
    :param train_size: Rows collected before a trainable index (IVF, PQ, OPQ) is trained, once; until then the
        rows are searched exactly. ``None``: 39 rows per centroid of its largest k-means (FAISS's advice).
    :param search_threads: FAISS (OpenMP) threads for searches. ``None``: 1 for :meth:`search` (one query gains
        nothing from more), every core for :meth:`search_batch` and for training. The process-wide FAISS
        setting is restored after each call.
    :param gpu_device: Search on this GPU (``0``: the first), with FAISS from ``pip install "haystack-mvr[gpu]"``.
        The CPU index stays the one written, reconstructed from and saved; the GPU searches a copy of it, made
        again at the first search after a change. Flat, IVF-Flat, IVF-SQ and IVF-PQ (8-bit codes) indexes, also
        under OPQ; other index types, and a FAISS or machine without that GPU, are refused when the store is built.
        Searches deeper than FAISS's GPU limit (2048 rows per query) and selective filters run on the CPU index.
        ``None`` (the default): search on the CPU.
    """

    def __init__(
        self,
        embedding_dim: int | None = None,
        index_factory: str | None = None,
        index_path: str | None = None,
        encoder_config: dict[str, Any] | None = None,
        search_parameters: dict[str, int | float] | None = None,
        keep_vectors: bool | None = None,
        train_size: int | None = None,
        search_threads: int | None = None,
        gpu_device: int | None = None,
    ) -> None:
        check_optional_positive_int("embedding_dim", embedding_dim)
        if index_factory is not None and (not isinstance(index_factory, str) or not index_factory.strip()):
            msg = "index_factory must be a FAISS index_factory string such as 'Flat' or 'HNSW32', or None."
            raise ValueError(msg)
        if search_parameters is not None and (
            not isinstance(search_parameters, dict)
            or any(
                not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, (int, float))
                for k, v in search_parameters.items()
            )
        ):
            msg = f"search_parameters must map FAISS parameter names to numbers, got {search_parameters!r}."
            raise ValueError(msg)
        if keep_vectors is not None and not isinstance(keep_vectors, bool):
            msg = f"keep_vectors must be True, False or None, got {keep_vectors!r}."
            raise ValueError(msg)
        check_optional_positive_int("train_size", train_size)
        check_optional_positive_int("search_threads", search_threads)
        if gpu_device is not None:
            if not isinstance(gpu_device, int) or isinstance(gpu_device, bool) or gpu_device < 0:
                msg = f"gpu_device must be a CUDA device number (0, 1, ...) or None, got {gpu_device!r}."
                raise ValueError(msg)
            gpu_index.check_gpu_device(gpu_device)
        check_encoder_config(encoder_config)
        self.embedding_dim = embedding_dim
        self.index_factory = index_factory
        self.search_parameters = dict(search_parameters) if search_parameters else None
        self.keep_vectors = keep_vectors
        self.train_size = train_size
        self.search_threads = search_threads
        self.gpu_device = gpu_device
        self.index_path = index_path
        self.encoder_config = encoder_config
        self._documents = DocumentTable()
        self._key_of: dict[str, int] = {}  # live documents only
        self._id_of: dict[int, str] = {}
        self._next_key = itertools.count()
        self._views: ViewIndex | None = None
        self._lock = threading.RLock()
        self._loaded = index_path is None
        # index settings a load found in its saved copy, used where the matching argument above is None
        self._saved_settings: dict[str, Any] = {}

    # ------------------------------------------------------------------------------------ serialization
    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            embedding_dim=self.embedding_dim,
            index_factory=self.index_factory,
            index_path=self.index_path,
            encoder_config=self.encoder_config,
            search_parameters=self.search_parameters,
            keep_vectors=self.keep_vectors,
            train_size=self.train_size,
            search_threads=self.search_threads,
            gpu_device=self.gpu_device,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FaissMultiViewDocumentStore:
        return default_from_dict(cls, upgraded(data))

    def _ensure_loaded(self) -> None:
        """Load ``index_path`` on first use, under the lock: readers wait for it, writers never race it."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            if self.index_path and persistence.exists(self.index_path):
                self._load_from(Path(self.index_path))
            else:
                logger.warning(
                    "index_path %s holds no saved multi-view store yet; the store opens empty.", self.index_path
                )
            self._loaded = True

    def warm_up(self) -> None:
        """
        Load ``index_path`` now instead of at the first use (an index of 10^6 views takes seconds to read and
        verify), so the first query after a pipeline's warm-up is as fast as the next. ``MultiViewRetriever.warm_up``
        (and so ``Pipeline.warm_up``) calls it; later calls, and a store without ``index_path``, do nothing.
        """
        self._ensure_loaded()

    # ------------------------------------------------------------------------------------------ protocol
    def count_documents(self) -> int:
        with self._lock:
            self._ensure_loaded()
            return len(self._documents)

    def filter_documents(self, filters: dict[str, Any] | None = None) -> list[Document]:
        """Copies of the documents matching Haystack ``filters`` (all when ``None``); views are not in ``meta``."""
        with self._lock:
            self._ensure_loaded()
            return [self._with_embedding(i) for i in self._matching(filters)]

    def export_documents(
        self, batch_size: int = 256, filters: dict[str, Any] | None = None
    ) -> Iterator[list[Document]]:
        """
        The documents matching ``filters`` with all their views, ``batch_size`` at a time, ready for any multi-view
        store (see :func:`haystack_mvr.document_stores.copy_documents`); a lossy index gives its reconstruction.
        """
        check_batch_size(batch_size)
        with self._lock:
            self._ensure_loaded()
            ids = self._matching(filters)
        for start in range(0, len(ids), batch_size):
            with self._lock:  # one batch of views at a time; a document deleted meanwhile is left out
                encoder = self.encoder_config
                batch = [self._exported(i, encoder) for i in ids[start : start + batch_size] if i in self._documents]
            if batch:
                yield batch

    def _exported(self, doc_id: str, encoder: dict[str, Any] | None) -> Document:
        key, views = self._key_of[doc_id], self._views
        rows = views.views_of(key) if views is not None and views.count(key) else None
        return exported_document(self._documents.document(doc_id), rows, encoder)

    def write_documents(self, documents: Iterable[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE) -> int:
        """
        Write documents and their views. ``DuplicatePolicy.NONE`` means ``FAIL``. Any iterable is accepted.

        The whole batch is validated first: on any error (wrong type, NaN, mis-sized or over-long vectors, more
        than ``MAX_VIEWS`` views, an ``embedding`` whose size differs from the views, malformed ``mvr_view_spans``,
        another encoder's ``mvr_encoder``, meta JSON cannot hold, a duplicate under ``FAIL``) nothing of the batch
        is written and nothing stored is lost. A document written
        again (``OVERWRITE``) gets new rows; its old ones are removed.

        :returns: The number of documents written.
        """
        documents = document_list(documents)
        policy = DuplicatePolicy.FAIL if policy == DuplicatePolicy.NONE else policy
        with self._lock:
            self._ensure_loaded()
            dim = self._views.dim if self._views is not None else self.embedding_dim
            written, dims, encoder = prepare_batch(documents, dim, self.encoder_config)
            views_of = written.views
            batch: dict[str, int] = {}  # id -> its position in written: the last copy of each id
            dropped = []  # skipped, or replaced by a later copy in the batch: validated, never added
            for at, doc_id in enumerate(written.ids):
                stored = doc_id in self._documents
                exists = stored or doc_id in batch
                if exists and policy == DuplicatePolicy.FAIL:
                    msg = already_stored_message(doc_id) if stored else repeated_in_batch_message(doc_id)
                    raise DuplicateDocumentError(msg)
                if exists and policy == DuplicatePolicy.SKIP:
                    dropped.append(at)
                    continue
                if doc_id in batch:
                    dropped.append(batch[doc_id])
                batch[doc_id] = at
            dropped = [at for at in dropped if views_of[at] is not None]
            bad = first_invalid([views_of[at] for at in dropped])
            if bad is not None:
                raise invalid_views_error(written.ids[dropped[bad[0]]], bad[1])
            if dims is not None:
                self._view_index(dims)  # built (and its search_parameters checked) before anything changes
            ids = [stored_id(i) for i in batch]
            kept = list(batch.values())
            new_keys = list(itertools.islice(self._next_key, len(ids)))
            with_views = [(k, at) for k, at in zip(new_keys, kept, strict=True) if views_of[at] is not None]
            if with_views:
                # new keys: their rows are added (and checked finite) before anything stored changes
                try:
                    with omp_threads(default_threads(True, self.search_threads)):
                        self._view_index(dims).add([k for k, _ in with_views], [views_of[at] for _, at in with_views])
                except InvalidViews as e:
                    raise invalid_views_error(written.ids[with_views[e.position][1]], e.problem) from None
            if encoder is not None and self.encoder_config is None:
                self.encoder_config = encoder
            self._remove([i for i in ids if i in self._documents])
            self._key_of.update(zip(ids, new_keys, strict=True))
            self._id_of.update(zip(new_keys, ids, strict=True))
            table = self._documents
            for doc_id, at in zip(ids, kept, strict=True):
                table.put(doc_id, written.lines[at], written.metas[at])
            return len(batch)

    def delete_documents(self, document_ids: list[str]) -> None:
        """Delete documents and all their views; unknown and repeated ids are ignored."""
        ids = document_id_list(document_ids)
        with self._lock:
            self._ensure_loaded()
            self._remove([i for i in ids if i in self._documents])

    def delete_all_documents(self) -> None:
        with self._lock:
            self._loaded = True
            self._documents.clear()
            self._key_of.clear()
            self._id_of.clear()
            if self._views is not None:
                self._views.reset()

    def delete_by_filter(self, filters: dict[str, Any]) -> int:
        with self._lock:
            self._ensure_loaded()
            ids = self._matching(filters)
            self._remove(ids)
            return len(ids)

    def update_by_filter(self, filters: dict[str, Any], meta: dict[str, Any]) -> int:
        """Merge ``meta`` into the meta of every matching document; views are unchanged."""
        if VIEWS_KEY in meta or SPANS_KEY in meta or ENCODER_KEY in meta:
            msg = (
                f"update_by_filter cannot change '{VIEWS_KEY}', '{SPANS_KEY}' or '{ENCODER_KEY}'; "
                "write the documents again instead."
            )
            raise ValueError(msg)
        if not isinstance(meta, dict):
            msg = f"meta must be a dict, got {type(meta).__name__}."
            raise ValueError(msg)
        meta = json_meta(meta, "update_by_filter")
        with self._lock:
            self._ensure_loaded()
            table = self._documents
            updated = []
            for doc_id in self._matching(filters):
                doc = table.document(doc_id)
                merged = {**doc.meta, **copy.deepcopy(meta)}
                updated.append((doc_id, document_line(copy_with(doc, merged, doc.embedding, None)), merged))
            for doc_id, line, merged in updated:  # every line made before any is stored
                table.put(doc_id, line, merged)
            return len(updated)

    # -------------------------------------------------------------------------------------------- search
    def stats(self) -> StoreStats:
        """What the store holds, read-only (loads ``index_path`` first): documents, views, their dimension, the
        index, whether it is trained, and the float32 bytes of rows kept beside it."""
        with self._lock:
            self._ensure_loaded()
            views = self._views
            kept = 0 if views is None else sum(v.nbytes for v in views.kept_rows_by_key().values())
            return StoreStats(
                documents=len(self._documents),
                views=0 if views is None else views.ntotal,
                dimension=None if views is None else views.dim,
                index_factory=self._index_settings()["index_factory"],
                trained=views is not None and views.trained,
                train_size=None if views is None else views.train_size,
                kept_vector_bytes=kept,
            )

    @property
    def faiss_index(self) -> Any:
        """The FAISS index the store searches (``None`` before any vector is written or while rows are staged for
        training), for inspection and benchmarks: changing it changes what the store returns."""
        with self._lock:
            self._ensure_loaded()
            return None if self._views is None else self._views.faiss_index

    def check_query_encoder(self, encoder: dict[str, Any] | None) -> None:
        """Refuse a query ``encoder`` that differs from the store's ``encoder_config`` (see
        :func:`~haystack_mvr.document_stores.checks.check_query_encoder`), after loading ``index_path``, which
        records it, so the first query of a store opened on a saved copy is checked too."""
        if encoder:
            self._ensure_loaded()
            check_query_encoder(self.encoder_config, encoder)

    def search(
        self,
        query_embedding: Any,
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]:
        """
        The ``top_k`` documents whose best view has the highest inner product with the query.

        Exactly ``min(top_k, matching documents with vectors)`` unique documents: the FAISS search widens until
        enough are found or the whole index was searched; a filter matching few rows is scored exactly, others
        search FAISS restricted to the matching rows (an id selector, or filtering afterwards where the index has
        none). Every returned document is scored over its held views (``haystack_mvr.maxsim``; a re-ranking's
        scores are those it ranked by, not computed again) and annotated as :func:`haystack_mvr.views.annotate_match`
        annotates (one copy of each document, annotated once), the list sorted by that score.

        The query is a matrix ``(m, d)``; a vector ``(d,)`` is taken as ``(1, d)``. One row ranks by the best view. A
        multi-vector query (a late-interaction model's, such as a ColBERT's) ranks by MaxSim, the sum over its
        vectors of each one's best view: exactly over every document on a Flat index, else over the documents a
        per-vector search finds (``ViewIndex.maxsim_depth`` each), scored exactly on their rows.

        :param query_embedding: The query: a vector ``(d,)`` or ``(1, d)``, or a multi-vector query ``(m, d)``.
        :param top_k: How many documents.
        :param filters: Haystack metadata filters.
        :param return_embedding: Also return each document's views (``meta["mvr_views"]``) and ``embedding``.
        :returns: Copies of the documents with ``score`` (max over views, or MaxSim), ``meta["mvr_matched_view"]``,
            ``meta["mvr_matched_scope"]`` and, with snippet views, ``meta["mvr_matched_span"]`` and
            ``meta["mvr_matched_text"]``.
        """
        query = self._validate_queries(query_embedding, batch=False)
        return self._search(query, top_k, filters, return_embedding, batch=False)[0]

    def search_batch(
        self,
        query_embeddings: Any,
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[list[Document]]:
        """
        :meth:`search` for every row of ``query_embeddings`` ``(n, d)``: one FAISS search for the whole matrix
        (widened again only for the queries that came up short) and one evaluation of ``filters`` shared by all.

        :returns: One ranked list per query, in query order.
        """
        queries = self._validate_queries(query_embeddings, batch=True)
        return self._search(queries, top_k, filters, return_embedding, batch=True)

    def _search(
        self,
        queries: np.ndarray,
        top_k: int,
        filters: dict[str, Any] | None,
        return_embedding: bool,
        batch: bool,
    ) -> list[list[Document]]:
        """Each query's documents: with ``batch``, the rows of ``queries`` ``(n, d)`` are one-vector queries; without,
        ``queries`` is one query ``(m, d)`` (``m = 1``: a vector), answered as one list."""
        check_top_k(top_k)
        with self._lock:
            self._ensure_loaded()
            views = self._views
            if views is not None:
                check_query_dimension(queries, views.dim)
            allowed = None
            if filters:
                matching = self._matching(filters)
                if views is not None:
                    keys = (self._key_of[i] for i in matching)
                    allowed = np.fromiter((k for k in keys if views.count(k)), dtype=np.int64)
            if views is None or views.ntotal == 0:
                if self._documents:
                    logger.warning(
                        "The store holds %d documents but no vectors: nothing to search.", len(self._documents)
                    )
                return [[] for _ in (queries if batch else (queries,))]
            if len(queries) == 0:
                return []
            threads = default_threads(batch, self.search_threads)
            if batch:
                ranked = views.top_documents(queries, top_k, allowed, threads, with_rows=return_embedding)
            else:
                ranked = [views.top(queries, top_k, allowed, threads, with_rows=return_embedding)]
            return [self._results(found, return_embedding) for found in ranked]

    def _results(self, found: RankedKeys, return_embedding: bool) -> list[Document]:
        """The documents of ``found`` annotated with the similarities the search scored them by, as
        :func:`haystack_mvr.views.annotated_match_copy` annotates them (a one-row query's scores are made Python
        floats once for all the documents), each built once from its stored fields (a new meta: callers cannot
        change the store), best first (stable: search order among equal scores)."""
        docs = self._documents.records(map(self._id_of.__getitem__, found.keys))
        scores, rows = found.similarities, found.rows
        if scores.shape[1] == 1:
            scores, annotate = scores[:, 0].tolist(), annotated_copy
        else:
            annotate = annotated_maxsim_copy
        out = []
        end = 0
        for doc, count in zip(docs, found.counts, strict=True):
            start, end = end, end + count
            held = rows[start:end] if rows is not None else None
            out.append(annotate(doc, doc.meta, scores[start:end], held, return_embedding=return_embedding))
        out.sort(key=lambda d: -d.score)
        return out

    def _with_embedding(self, doc_id: str) -> Document:
        """A new copy of a stored document; an ``embedding`` left out because it equals view 0 is put back."""
        doc = self._documents.document(doc_id)
        key = self._key_of[doc_id]
        if doc.embedding is None and self._views is not None and self._views.count(key):
            return copy_with(doc, doc.meta, self._views.views_of(key)[0].tolist(), None)
        return doc

    # ------------------------------------------------------------------------------------- persistence
    def save(self, path: str | Path) -> None:
        """Write the store to the directory ``path`` atomically: a crash leaves the previous copy loadable."""
        with self._lock:
            self._ensure_loaded()
            persistence.save(self._state(), Path(path))

    def load(self, path: str | Path) -> None:
        """Replace this store's contents with the copy at ``path`` (refused if dimension or encoder differ)."""
        with self._lock:
            self._load_from(Path(path))
            self._loaded = True

    def _state(self) -> persistence.StoreState:
        """What :meth:`save` writes: the store's own objects (read under the lock), not copies."""
        return persistence.StoreState(
            documents=self._documents,
            keys=self._key_of,
            views=self._views,
            embedding_dim=self.embedding_dim,
            encoder_config=self.encoder_config,
            index_settings=self._index_settings(),
        )

    def _load_from(self, path: Path) -> None:
        """Replace the contents with the copy at ``path``, checked against this store's arguments first (the caller
        holds the lock); on any error nothing changes."""
        loading = persistence.LoadingStore(
            embedding_dim=self.embedding_dim,
            encoder_config=self.encoder_config,
            index_factory=self.index_factory,
            new_view_index=self._new_view_index,
        )
        state = persistence.load(path, loading)
        self._documents = state.documents
        self._key_of = state.keys
        self._id_of = dict(zip(state.keys.values(), state.keys.keys(), strict=True))
        self._next_key = iter(range(max(state.keys.values(), default=-1) + 1, 1 << 50))
        self._views = state.views
        self._saved_settings = state.index_settings
        self.embedding_dim = self.embedding_dim or state.embedding_dim
        if self.encoder_config is None:
            self.encoder_config = state.encoder_config

    # ---------------------------------------------------------------------------------------- internals
    def _view_index(self, dim: int) -> ViewIndex:
        if self._views is None:
            self._views = self._new_view_index(dim)
            self.embedding_dim = self.embedding_dim or dim
        return self._views

    def _new_view_index(self, dim: int, saved: dict[str, Any] | None = None) -> ViewIndex:
        """An empty view index with this store's settings (also what a load fills): each argument given to the
        store, else the one ``saved`` (by default: the last load's) recorded, else the default."""
        return ViewIndex(dim, gpu_device=self.gpu_device, **self._index_settings(saved))

    def _index_settings(self, saved: dict[str, Any] | None = None) -> dict[str, Any]:
        """The index settings a new view index gets (see :meth:`_new_view_index`); what :meth:`save` records."""
        saved = self._saved_settings if saved is None else saved
        given = {
            "index_factory": self.index_factory,
            "search_parameters": self.search_parameters,
            "keep_vectors": self.keep_vectors,
            "train_size": self.train_size,
        }
        settings = {k: v if v is not None else saved.get(k) for k, v in given.items()}
        settings["index_factory"] = settings["index_factory"] or "Flat"
        settings["keep_vectors"] = True if settings["keep_vectors"] is None else settings["keep_vectors"]
        return settings

    def _remove(self, ids: list[str]) -> None:
        if not ids:
            return
        keys = [self._key_of.pop(i) for i in ids]
        for i, key in zip(ids, keys, strict=True):
            self._documents.delete(i)
            del self._id_of[key]
        if self._views is not None:
            self._views.remove(keys)

    @staticmethod
    def _validate_queries(queries: Any, batch: bool) -> np.ndarray:
        """The public edge of a search, where a query takes the one shape every search after it uses: ``search``'s
        query as an ``(m, d)`` float32 matrix (a vector ``(d,)`` becomes ``(1, d)`` here, once; more rows are a
        multi-vector query), ``search_batch``'s as ``(n, d)``, one one-vector query a row; checked finite, within
        ``MAX_NORM`` and (a multi-vector query) within ``MAX_MAXSIM_NORM_SUM``."""
        name = "query_embeddings" if batch else "query_embedding"
        try:
            matrix = np.asarray(queries, dtype=np.float32)
        except (TypeError, ValueError) as e:
            msg = f"{name} must be {'a (n, d) matrix' if batch else 'a list'} of floats."
            raise ValueError(msg) from e
        if matrix.ndim == 2 and matrix.shape[0] == 0:
            if batch:
                return matrix.reshape(0, max(1, matrix.shape[1]))
            msg = f"{name} must hold at least one vector, got shape {matrix.shape}."
            raise ValueError(msg)
        if matrix.ndim not in ((2,) if batch else (1, 2)) or matrix.shape[-1] == 0:
            shape = "(n, d) matrix" if batch else "non-empty 1-D vector (or an (m, d) matrix of query vectors)"
            msg = f"{name} must be a {shape}, got shape {matrix.shape}."
            raise ValueError(msg)
        matrix = np.ascontiguousarray(matrix.reshape(-1, matrix.shape[-1]))
        problem = views_problem(matrix, "query")
        if problem == NON_FINITE:
            msg = f"{name} contains NaN or infinite values."
            raise ValueError(msg)
        if problem is None and not batch and len(matrix) > 1:
            problem = maxsim_query_problem(matrix)
        if problem is not None:
            msg = f"{name}: {problem}."
            raise ValueError(msg)
        return matrix


__all__ = ["FaissMultiViewDocumentStore"]
