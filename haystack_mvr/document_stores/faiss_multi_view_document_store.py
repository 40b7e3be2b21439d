"""A FAISS-backed Haystack document store that keeps every view of a document as one index row."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from haystack import Document, default_from_dict, default_to_dict
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy
from haystack.utils.filters import document_matches_filter

from haystack_mvr.document_stores import metadata_queries, persistence
from haystack_mvr.document_stores.view_index import ViewIndex, collapse_to_documents
from haystack_mvr.views import SPANS_KEY, VIEWS_KEY, annotate_match, extract_views


class FaissMultiViewDocumentStore:
    """
    Stores documents and all their views; searches views with FAISS and ranks documents by their best view.

    Views arrive as described in ``haystack_mvr.views`` (``meta["mvr_views"]``, or a plain ``embedding`` as one
    view). Scores are raw inner products for every index type. Documents without vectors are stored and
    filterable, but never returned by :meth:`search`.

    :param embedding_dim: Vector dimension; ``None`` takes it from the first vectors written, then fixes it.
    :param index_factory: A FAISS ``index_factory`` string (``"Flat"``, ``"HNSW32"``, ``"IVF256,PQ32"``,
        ``"OPQ16_64,IVF256,PQ16"`` ...), always with inner-product metric.
    :param search_parameters: FAISS search-time parameters set on the index after every (re)build, by
        ``faiss.ParameterSpace`` name: ``{"nprobe": 32}`` for IVF, ``{"efSearch": 128}`` for HNSW.
    :param index_path: A directory written by :meth:`save`; loaded on first use when it exists.
    :param encoder_config: The encoder config the vectors come from (e.g. ``MultiViewConfig.to_dict()``);
        recorded on save, and a saved copy with another config is refused on load.
    :param keep_vectors: Keep every view's float32 vector beside the index (the default). ``False`` keeps only
        the FAISS index, so a compressed index (``"OPQ48,PQ48"``: 48 bytes per view instead of 4·d) saves
        process memory and disk too. Then: a trainable index is trained once, on the vectors stored at the
        first search, and later writes and deletes re-encode into it; returned embeddings are the index's
        reconstruction (exact for Flat and HNSW, approximate for PQ); a saved copy loads only with the same
        ``index_factory``.
    """

    def __init__(
        self,
        embedding_dim: int | None = None,
        index_factory: str = "Flat",
        index_path: str | None = None,
        encoder_config: dict[str, Any] | None = None,
        search_parameters: dict[str, int | float] | None = None,
        keep_vectors: bool = True,
    ) -> None:
        if embedding_dim is not None and (not isinstance(embedding_dim, int) or embedding_dim < 1):
            msg = f"embedding_dim must be a positive integer or None, got {embedding_dim!r}."
            raise ValueError(msg)
        if not isinstance(index_factory, str) or not index_factory.strip():
            msg = "index_factory must be a FAISS index_factory string such as 'Flat' or 'HNSW32'."
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
        self.embedding_dim = embedding_dim
        self.index_factory = index_factory
        self.search_parameters = dict(search_parameters) if search_parameters else None
        if not isinstance(keep_vectors, bool):
            msg = f"keep_vectors must be True or False, got {keep_vectors!r}."
            raise ValueError(msg)
        self.keep_vectors = keep_vectors
        self.index_path = index_path
        self.encoder_config = encoder_config
        self._documents: dict[str, Document] = {}
        self._slot_of: dict[str, int] = {}
        self._slot_ids: list[str | None] = []
        self._views: ViewIndex | None = None
        self._lock = threading.RLock()
        self._loaded = index_path is None

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
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FaissMultiViewDocumentStore:
        return default_from_dict(cls, data)

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self._loaded = True
            if self.index_path and persistence.exists(self.index_path):
                self.load(self.index_path)

    # ------------------------------------------------------------------------------------------ protocol
    def count_documents(self) -> int:
        self._ensure_loaded()
        return len(self._documents)

    def filter_documents(self, filters: dict[str, Any] | None = None) -> list[Document]:
        """Documents matching Haystack ``filters`` (all when ``None``); views are not included in ``meta``."""
        self._ensure_loaded()
        with self._lock:
            return [self._with_embedding(d) for d in self._matching(filters)]

    def write_documents(self, documents: list[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE) -> int:
        """
        Write documents and their views. ``DuplicatePolicy.NONE`` means ``FAIL``.

        The whole batch is validated first: on any error (wrong type, NaN or mis-sized vectors, duplicate
        under ``FAIL``) nothing of the batch is written and nothing stored is lost.

        :returns: The number of documents written.
        """
        if (
            not isinstance(documents, Iterable)
            or isinstance(documents, (str, bytes, dict))
            or any(not isinstance(d, Document) for d in documents)
        ):
            msg = "Please provide a list of Documents."
            raise ValueError(msg)
        self._ensure_loaded()
        policy = DuplicatePolicy.FAIL if policy == DuplicatePolicy.NONE else policy
        with self._lock:
            prepared = self._prepare(list(documents))
            batch: dict[str, tuple[Document, np.ndarray | None, list | None]] = {}
            for doc, views, spans in prepared:
                exists = doc.id in self._documents or doc.id in batch
                if exists and policy == DuplicatePolicy.FAIL:
                    msg = f"ID '{doc.id}' already exists."
                    raise DuplicateDocumentError(msg)
                if exists and policy == DuplicatePolicy.SKIP:
                    continue
                batch[doc.id] = (doc, views, spans)
            replaced = [i for i in batch if i in self._documents]
            self._remove(replaced)
            slots, matrices = [], []
            for doc_id, (doc, views, _spans) in batch.items():
                slot = len(self._slot_ids)
                self._slot_ids.append(doc_id)
                self._slot_of[doc_id] = slot
                self._documents[doc_id] = doc
                if views is not None:
                    slots.append(slot)
                    matrices.append(views)
            if matrices:
                self._view_index(matrices[0].shape[1]).add_many(slots, matrices)
            return len(batch)

    def delete_documents(self, document_ids: list[str]) -> None:
        """Delete documents and all their views; unknown ids are ignored."""
        self._ensure_loaded()
        with self._lock:
            self._remove([i for i in document_ids if i in self._documents])

    def delete_all_documents(self) -> None:
        with self._lock:
            self._loaded = True
            self._documents.clear()
            self._slot_of.clear()
            self._slot_ids.clear()
            if self._views is not None:
                self._views.reset()

    def delete_by_filter(self, filters: dict[str, Any]) -> int:
        self._ensure_loaded()
        with self._lock:
            ids = [d.id for d in self._matching(filters)]
            self._remove(ids)
            return len(ids)

    def update_by_filter(self, filters: dict[str, Any], meta: dict[str, Any]) -> int:
        """Merge ``meta`` into the meta of every matching document; views are unchanged."""
        if VIEWS_KEY in meta or SPANS_KEY in meta:
            msg = f"update_by_filter cannot change '{VIEWS_KEY}'/'{SPANS_KEY}'; write the documents again instead."
            raise ValueError(msg)
        self._ensure_loaded()
        with self._lock:
            matching = self._matching(filters)
            for doc in matching:
                self._documents[doc.id] = dataclasses.replace(doc, meta={**doc.meta, **meta})
            return len(matching)

    def count_documents_by_filter(self, filters: dict[str, Any]) -> int:
        self._ensure_loaded()
        with self._lock:
            return len(self._matching(filters))

    def count_unique_metadata_by_filter(self, filters: dict[str, Any], metadata_fields: list[str]) -> dict[str, int]:
        self._ensure_loaded()
        with self._lock:
            return metadata_queries.count_unique(self._matching(filters), metadata_fields)

    def get_metadata_fields_info(self) -> dict[str, dict[str, str]]:
        self._ensure_loaded()
        with self._lock:
            return metadata_queries.fields_info(self._documents.values())

    def get_metadata_field_min_max(self, metadata_field: str) -> dict[str, Any]:
        self._ensure_loaded()
        with self._lock:
            return metadata_queries.min_max(self._documents.values(), metadata_field)

    def get_metadata_field_unique_values(
        self,
        metadata_field: str,
        search_term: str | None = None,
        from_: int = 0,
        size: int = 10,
        filters: dict[str, Any] | None = None,
    ) -> tuple[list[Any], int]:
        self._ensure_loaded()
        with self._lock:
            return metadata_queries.paged_unique_values(
                self._matching(filters), metadata_field, search_term, from_, size
            )

    # ---------------------------------------------------------------------------------------- async API
    async def count_documents_async(self) -> int:
        return await asyncio.to_thread(self.count_documents)

    async def filter_documents_async(self, filters: dict[str, Any] | None = None) -> list[Document]:
        return await asyncio.to_thread(self.filter_documents, filters)

    async def write_documents_async(
        self, documents: list[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE
    ) -> int:
        return await asyncio.to_thread(self.write_documents, documents, policy)

    async def delete_documents_async(self, document_ids: list[str]) -> None:
        await asyncio.to_thread(self.delete_documents, document_ids)

    async def delete_all_documents_async(self) -> None:
        await asyncio.to_thread(self.delete_all_documents)

    async def delete_by_filter_async(self, filters: dict[str, Any]) -> int:
        return await asyncio.to_thread(self.delete_by_filter, filters)

    async def update_by_filter_async(self, filters: dict[str, Any], meta: dict[str, Any]) -> int:
        return await asyncio.to_thread(self.update_by_filter, filters, meta)

    async def count_documents_by_filter_async(self, filters: dict[str, Any]) -> int:
        return await asyncio.to_thread(self.count_documents_by_filter, filters)

    async def count_unique_metadata_by_filter_async(
        self, filters: dict[str, Any], metadata_fields: list[str]
    ) -> dict[str, int]:
        return await asyncio.to_thread(self.count_unique_metadata_by_filter, filters, metadata_fields)

    async def get_metadata_fields_info_async(self) -> dict[str, dict[str, str]]:
        return await asyncio.to_thread(self.get_metadata_fields_info)

    async def get_metadata_field_min_max_async(self, metadata_field: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.get_metadata_field_min_max, metadata_field)

    async def get_metadata_field_unique_values_async(
        self,
        metadata_field: str,
        search_term: str | None = None,
        from_: int = 0,
        size: int = 10,
        filters: dict[str, Any] | None = None,
    ) -> tuple[list[Any], int]:
        return await asyncio.to_thread(
            self.get_metadata_field_unique_values, metadata_field, search_term, from_, size, filters
        )

    async def search_async(
        self,
        query_embedding: Any,
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]:
        return await asyncio.to_thread(self.search, query_embedding, top_k, filters, return_embedding)

    async def search_batch_async(
        self,
        query_embeddings: Any,
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[list[Document]]:
        return await asyncio.to_thread(self.search_batch, query_embeddings, top_k, filters, return_embedding)

    # -------------------------------------------------------------------------------------------- search
    def search_batch(
        self,
        query_embeddings: Any,
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[list[Document]]:
        """:meth:`search` for each of ``(n, d)`` query embeddings, sharing ``filters``."""
        return [self.search(q, top_k, filters, return_embedding) for q in query_embeddings]

    def search(
        self,
        query_embedding: Any,
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]:
        """
        The ``top_k`` documents whose best view has the highest inner product with the query.

        Exactly ``top_k`` documents are returned whenever that many searchable documents match ``filters``:
        the FAISS search widens (2k, 4k, ... rows) until enough unique documents are found.

        :param query_embedding: The query vector ``(d,)``.
        :param top_k: How many documents.
        :param filters: Haystack metadata filters.
        :param return_embedding: Also return each document's views (``meta["mvr_views"]``) and ``embedding``.
        :returns: Documents with ``score`` (max over views), ``meta["mvr_matched_view"]`` and, for snippet
            views, ``meta["mvr_matched_span"]`` and ``meta["mvr_matched_text"]``.
        """
        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
            msg = f"top_k must be a positive integer, got {top_k!r}."
            raise ValueError(msg)
        self._ensure_loaded()
        with self._lock:
            views = self._views
            if views is None or views.ntotal == 0:
                return []
            query = self._validate_query(query_embedding, views.dim)
            allowed_rows, available = None, views.document_count
            if filters:
                allowed_slots = np.array([self._slot_of[d.id] for d in self._matching(filters)], dtype=np.int64)
                allowed_rows = np.flatnonzero(np.isin(views.row_doc, allowed_slots))
                available = len(np.unique(views.row_doc[allowed_rows]))
                if available == 0:
                    return []
            want = min(top_k, available)
            searchable = views.ntotal if allowed_rows is None else len(allowed_rows)
            k = min(searchable, max(2 * top_k * max(1, views.ntotal // max(available, 1)), 16))
            while True:
                scores, rows = views.search(query, k, allowed_rows)
                slots, _, _ = collapse_to_documents(scores, rows, views.row_doc)
                if len(slots) >= want or k >= searchable:
                    break
                k = min(searchable, 2 * k)
            return [self._result(int(s), query, return_embedding) for s in slots[:top_k]]

    def _result(self, slot: int, query: np.ndarray, return_embedding: bool) -> Document:
        doc_id = self._slot_ids[slot]
        assert doc_id is not None and self._views is not None
        return annotate_match(
            self._documents[doc_id], self._views.views_of(slot), query, return_embedding=return_embedding
        )

    def _with_embedding(self, doc: Document) -> Document:
        """A copy of a stored document; an ``embedding`` left out because it equals view 0 is put back."""
        if doc.embedding is None and self._views is not None:
            first = self._views.first_view(self._slot_of[doc.id])
            if first is not None:
                return dataclasses.replace(doc, embedding=first.tolist())
        return dataclasses.replace(doc)

    # ------------------------------------------------------------------------------------- persistence
    def save(self, path: str | Path) -> None:
        """Write the store to the directory ``path`` atomically: a crash leaves the previous copy loadable."""
        self._ensure_loaded()
        with self._lock:
            persistence.save(self, Path(path))

    def load(self, path: str | Path) -> None:
        """Replace this store's contents with the copy at ``path`` (refused if dimension or encoder differ)."""
        with self._lock:
            self._loaded = True
            persistence.load_into(self, Path(path))

    # ---------------------------------------------------------------------------------------- internals
    def _matching(self, filters: dict[str, Any] | None) -> list[Document]:
        if not filters:
            return list(self._documents.values())
        if "operator" not in filters and "conditions" not in filters:
            msg = "Invalid filter syntax. See https://docs.haystack.deepset.ai/docs/metadata-filtering for details."
            raise ValueError(msg)
        return [d for d in self._documents.values() if document_matches_filter(filters=filters, document=d)]

    def _prepare(self, documents: list[Document]) -> list[tuple[Document, np.ndarray | None, list | None]]:
        prepared = []
        dim = self._views.dim if self._views is not None else self.embedding_dim
        for doc in documents:
            views, spans, meta = extract_views(doc)
            if views is not None:
                if dim is None:
                    dim = views.shape[1]
                elif views.shape[1] != dim:
                    msg = (
                        f"Document {doc.id!r} has {views.shape[1]}-dimensional vectors but the store holds "
                        f"{dim}-dimensional ones; nothing of this batch was written."
                    )
                    raise ValueError(msg)
            if spans is not None:
                meta[SPANS_KEY] = [None if s is None else [s[0], s[1]] for s in spans]
            embedding = doc.embedding
            if views is not None and (embedding is None or list(embedding) == views[0].tolist()):
                # Not kept: a list of Python floats costs ~32 bytes per dimension per document; reads put back
                # view 0, which the embedders set as ``embedding`` anyway.
                embedding = None
            prepared.append((dataclasses.replace(doc, meta=meta, embedding=embedding, score=None), views, spans))
        return prepared

    def _view_index(self, dim: int) -> ViewIndex:
        if self._views is None:
            self._views = ViewIndex(dim, self.index_factory, self.search_parameters, self.keep_vectors)
            self.embedding_dim = self.embedding_dim or dim
        return self._views

    def _remove(self, ids: list[str]) -> None:
        if not ids:
            return
        slots = np.array([self._slot_of.pop(i) for i in ids], dtype=np.int64)
        for i in ids:
            del self._documents[i]
        for s in slots:
            self._slot_ids[s] = None
        if self._views is not None:
            self._views.remove_slots(slots)

    @staticmethod
    def _validate_query(query_embedding: Any, dim: int) -> np.ndarray:
        try:
            query = np.asarray(query_embedding, dtype=np.float32)
        except (TypeError, ValueError) as e:
            msg = "query_embedding must be a list of floats."
            raise ValueError(msg) from e
        if query.ndim != 1 or query.shape[0] == 0:
            msg = f"query_embedding must be a non-empty 1-D vector, got shape {query.shape}."
            raise ValueError(msg)
        if query.shape[0] != dim:
            msg = f"query_embedding has dimension {query.shape[0]} but the stored views have dimension {dim}."
            raise ValueError(msg)
        if not np.isfinite(query).all():
            msg = "query_embedding contains NaN or infinite values."
            raise ValueError(msg)
        return query


__all__ = ["FaissMultiViewDocumentStore"]
