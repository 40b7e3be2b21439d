"""A Qdrant-backed multi-view document store: one point per document, its views in a MAX_SIM multivector."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
from haystack import Document, default_from_dict, default_to_dict
from haystack.document_stores.errors import DocumentStoreError, DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy
from haystack.utils import Secret, deserialize_secrets_inplace
from pydantic import TypeAdapter, ValidationError
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.http import models

from haystack_mvr.document_stores import metadata_queries
from haystack_mvr.document_stores.inputs import document_id_list, document_list
from haystack_mvr.document_stores.qdrant import converters
from haystack_mvr.document_stores.qdrant.converters import GLOBAL_VECTOR, SEQ_KEY, VIEWS_VECTOR, PreparedDocument
from haystack_mvr.document_stores.qdrant.filters import convert_filters
from haystack_mvr.document_stores.threaded_async import ThreadedAsyncMethods
from haystack_mvr.views import ENCODER_KEY, SPANS_KEY, VIEWS_KEY, annotate_match

#: Key of this package's record in the collection metadata (the encoder config the views come from).
METADATA_KEY = "haystack_mvr"
_SCROLL_PAGE = 256


class _LocalClients:
    """
    One ``QdrantClient`` per local storage folder in this process, shared by every store opened on it.

    Local mode locks its folder against a second client, so two stores on the same ``path`` (a pipeline loaded
    back from YAML next to the one that wrote it) share one client, and one lock serializing calls to it. The
    client is closed when the last store using it is closed or garbage-collected.
    """

    def __init__(self) -> None:
        # Re-entrant: a store's finalizer (``release``) may run from garbage collection inside ``acquire``.
        self._lock = threading.RLock()
        self._open: dict[str, list[Any]] = {}  # realpath -> [client, call lock, users]

    def acquire(self, path: str) -> tuple[str, QdrantClient, threading.RLock]:
        key = os.path.realpath(path)
        with self._lock:
            if key not in self._open:
                # Calls come from worker threads too (the async methods); the call lock serializes them.
                client = QdrantClient(path=path, force_disable_check_same_thread=True)
                self._open[key] = [client, threading.RLock(), 0]
            entry = self._open[key]
            entry[2] += 1
            return key, entry[0], entry[1]

    def release(self, key: str) -> None:
        with self._lock:
            entry = self._open.get(key)
            if entry is None:
                return
            entry[2] -= 1
            if entry[2] <= 0:  # no store uses the client any more, so no call is in flight
                del self._open[key]
                entry[0].close()


_LOCAL_CLIENTS = _LocalClients()


class QdrantMultiViewDocumentStore(ThreadedAsyncMethods):
    """
    Stores each document as one Qdrant point whose views form a multivector compared with ``MAX_SIM``.

    A one-row query ``[q]`` scores a point by ``max_i <q, v_i>``: exactly the multi-view score, computed by
    Qdrant, with Haystack filters translated into Qdrant filters (so a filtered search still returns exactly
    ``top_k`` documents). Qdrant does not say which view matched: the returned points' views are fetched and
    :func:`haystack_mvr.views.annotate_match` scores and annotates each document, as in every haystack-mvr store.
    Views arrive as described in ``haystack_mvr.views``; documents without vectors are stored and filterable but
    never returned by a search.

    Where the data lives (at most one of the three; none means ``location=":memory:"``):

    :param location: ``":memory:"`` for qdrant-client's in-process local mode (a pure-Python engine: tests,
        small collections), or a URL.
    :param url: A Qdrant server or cluster, e.g. ``"http://localhost:6333"``.
    :param path: A folder for persistent local mode; reopening it (another process, or after :meth:`close`)
        finds the documents and the recorded encoder config again. Stores opened on the same ``path`` in one
        process share one client.
    :param api_key: The server's API key, as a ``Secret`` (serialized as the name of its environment variable,
        never in clear; a token secret refuses to serialize). Default: env var ``QDRANT_API_KEY`` if set.
    :param index: The collection name.
    :param embedding_dim: Vector dimension; ``None`` takes it from an existing collection or from the first
        vectors written. On a server, pass it: a collection created before any vector arrived is rebuilt when
        the first one does.
    :param encoder_config: The encoder config the views must come from (``meta["mvr_encoder"]`` of written
        documents). Recorded in the collection metadata on first write; documents from another encoder, or a
        collection recorded with another one, are refused.
    :param global_view: Also store view 0 as a dense named vector (``mvr_global``), for ``prefetch_limit``.
    :param on_disk: Keep the vectors on disk (memory-mapped) on a server.
    :param shard_number: Shards of a new collection (server / cluster).
    :param replication_factor: Replicas of each shard (cluster).
    :param hnsw_config: Qdrant ``HnswConfigDiff`` fields for a new collection, e.g. ``{"m": 16, "ef_construct":
        200}``; HNSW over multivectors is approximate (see ``hnsw_ef``).
    :param quantization_config: A Qdrant quantization config as a dict, e.g.
        ``{"scalar": {"type": "int8", "always_ram": True}}``.
    :param exact: Search exhaustively (no HNSW) on a server. Local mode is always exact.
    :param hnsw_ef: HNSW beam width at search time on a server (higher: better recall, slower).
    :param prefetch_limit: Search in two stages: the ``prefetch_limit`` best documents by their global view
        (needs ``global_view=True``), then ``MAX_SIM`` over all their views. Faster on a large server collection,
        but a document whose global view is weak is never considered.
    :param timeout: Request timeout in seconds (server).
    :param write_batch_size: Points per upsert request.
    """

    def __init__(
        self,
        *,
        location: str | None = None,
        url: str | None = None,
        path: str | None = None,
        api_key: Secret | None = Secret.from_env_var("QDRANT_API_KEY", strict=False),  # noqa: B008
        index: str = "haystack_mvr",
        embedding_dim: int | None = None,
        encoder_config: dict[str, Any] | None = None,
        global_view: bool = False,
        on_disk: bool = False,
        shard_number: int | None = None,
        replication_factor: int | None = None,
        hnsw_config: dict[str, Any] | None = None,
        quantization_config: dict[str, Any] | None = None,
        exact: bool = False,
        hnsw_ef: int | None = None,
        prefetch_limit: int | None = None,
        timeout: int | None = None,
        write_batch_size: int = 64,
    ) -> None:
        if sum(x is not None for x in (location, url, path)) > 1:
            msg = "Pass at most one of location, url and path."
            raise ValueError(msg)
        if api_key is not None and not isinstance(api_key, Secret):
            msg = "api_key must be a haystack.utils.Secret, e.g. Secret.from_env_var('QDRANT_API_KEY')."
            raise ValueError(msg)
        if not isinstance(index, str) or not index:
            msg = f"index must be a non-empty collection name, got {index!r}."
            raise ValueError(msg)
        for name, value in (
            ("embedding_dim", embedding_dim),
            ("shard_number", shard_number),
            ("replication_factor", replication_factor),
            ("hnsw_ef", hnsw_ef),
            ("prefetch_limit", prefetch_limit),
            ("timeout", timeout),
        ):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                msg = f"{name} must be a positive integer or None, got {value!r}."
                raise ValueError(msg)
        if not isinstance(write_batch_size, int) or isinstance(write_batch_size, bool) or write_batch_size < 1:
            msg = f"write_batch_size must be a positive integer, got {write_batch_size!r}."
            raise ValueError(msg)
        if encoder_config is not None and not isinstance(encoder_config, dict):
            msg = f"encoder_config must be a dict or None, got {type(encoder_config).__name__}."
            raise ValueError(msg)
        for name, flag in (("global_view", global_view), ("on_disk", on_disk), ("exact", exact)):
            if not isinstance(flag, bool):
                msg = f"{name} must be True or False, got {flag!r}."
                raise ValueError(msg)
        if prefetch_limit is not None and not global_view:
            msg = "prefetch_limit needs global_view=True (the prefetch searches view 0 stored as a dense vector)."
            raise ValueError(msg)
        self._hnsw = _parse("hnsw_config", hnsw_config, models.HnswConfigDiff)
        self._quantization = _parse("quantization_config", quantization_config, models.QuantizationConfig)
        self.location = location
        self.url = url
        self.path = path
        self.api_key = api_key
        self.index = index
        self.embedding_dim = embedding_dim
        self._encoder_config = encoder_config
        self.global_view = global_view
        self.on_disk = on_disk
        self.shard_number = shard_number
        self.replication_factor = replication_factor
        self.hnsw_config = hnsw_config
        self.quantization_config = quantization_config
        self.exact = exact
        self.hnsw_ef = hnsw_ef
        self.prefetch_limit = prefetch_limit
        self.timeout = timeout
        self.write_batch_size = write_batch_size
        # Connection state: nothing is opened before the first call.
        self._client: QdrantClient | None = None
        self._async_client: AsyncQdrantClient | None = None
        self._lock: threading.RLock = threading.RLock()
        self._local_key: str | None = None
        self._finalizer: weakref.finalize | None = None
        self._collection: _Collection | None = None
        self._last_seq = 0

    # ------------------------------------------------------------------------------------ serialization
    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            location=self.location,
            url=self.url,
            path=self.path,
            api_key=self.api_key.to_dict() if self.api_key is not None else None,
            index=self.index,
            embedding_dim=self.embedding_dim,
            encoder_config=self._encoder_config,
            global_view=self.global_view,
            on_disk=self.on_disk,
            shard_number=self.shard_number,
            replication_factor=self.replication_factor,
            hnsw_config=self.hnsw_config,
            quantization_config=self.quantization_config,
            exact=self.exact,
            hnsw_ef=self.hnsw_ef,
            prefetch_limit=self.prefetch_limit,
            timeout=self.timeout,
            write_batch_size=self.write_batch_size,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QdrantMultiViewDocumentStore:
        data = {**data, "init_parameters": dict(data.get("init_parameters", {}))}  # the caller's dict is unchanged
        deserialize_secrets_inplace(data["init_parameters"], keys=["api_key"])
        return default_from_dict(cls, data)

    @property
    def encoder_config(self) -> dict[str, Any] | None:
        """
        The encoder config the stored views come from: the collection's record once the store has read it (any
        call that touches the collection does), else the one given to the constructor.

        Reading it never connects: ``isinstance(store, MultiViewDocumentStore)`` evaluates it (Python 3.11), and
        building a retriever or loading a pipeline must not open a folder or reach a server.
        """
        return self._encoder_config

    # ---------------------------------------------------------------------------------------- connection
    @property
    def is_local(self) -> bool:
        """Whether this store runs qdrant-client's in-process engine (``:memory:`` or ``path=``)."""
        return self.url is None and (self.location is None or self.location == ":memory:")

    @property
    def client(self) -> QdrantClient:
        """The ``QdrantClient``, opened on first use."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._open()
        return self._client

    def _open(self) -> QdrantClient:
        if self.path is not None:
            key, client, lock = _LOCAL_CLIENTS.acquire(self.path)
            self._local_key, self._lock = key, lock
            self._finalizer = weakref.finalize(self, _LOCAL_CLIENTS.release, key)
            return client
        if self.is_local:
            return QdrantClient(location=":memory:")
        return QdrantClient(**self._server_options())

    def _server_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"timeout": self.timeout}
        if self.url is not None:
            options["url"] = self.url
        elif self.path is not None:
            options["path"] = self.path
        else:
            options["location"] = self.location
        if self.api_key is not None:
            options["api_key"] = self.api_key.resolve_value()
        return options

    def close(self) -> None:
        """Close the connection (a local folder is released when no other store in this process uses it)."""
        with self._lock:
            if self._finalizer is not None:
                self._finalizer()
                self._finalizer = None
            elif self._client is not None:
                self._client.close()
            self._client = None
            self._async_client = None
            self._collection = None
            self._lock = threading.RLock()

    async def close_async(self) -> None:
        """:meth:`close`, awaiting the ``AsyncQdrantClient``'s own close (server mode)."""
        if self._async_client is not None:
            await self._async_client.close()
        self.close()

    # -------------------------------------------------------------------------------------- collection
    def _describe(self) -> _Collection | None:
        """The collection's layout, checked against this store's options; ``None`` while it does not exist."""
        if self._collection is not None:
            return self._collection
        client = self.client
        if not client.collection_exists(self.index):
            return None
        return self._adopt(client.get_collection(self.index))

    async def _describe_async(self) -> _Collection | None:
        """:meth:`_describe` through the ``AsyncQdrantClient``."""
        if self._collection is not None:
            return self._collection
        client = self._get_async_client()
        if not await client.collection_exists(self.index):
            return None
        return self._adopt(await client.get_collection(self.index))

    def _adopt(self, info: models.CollectionInfo) -> _Collection:
        self._collection = _Collection.read(info, self)
        if self._collection.encoder_config is not None:
            self._encoder_config = self._collection.encoder_config
        return self._collection

    def _get_async_client(self) -> AsyncQdrantClient:
        if self._async_client is None:
            self._async_client = AsyncQdrantClient(**self._server_options())
        return self._async_client

    def _create(self, dim: int | None, encoder: dict[str, Any] | None) -> _Collection:
        vectors: dict[str, models.VectorParams] = {}
        if dim is not None:
            vectors[VIEWS_VECTOR] = models.VectorParams(
                size=dim,
                distance=models.Distance.DOT,
                on_disk=self.on_disk or None,
                multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
            )
            if self.global_view:
                vectors[GLOBAL_VECTOR] = models.VectorParams(
                    size=dim, distance=models.Distance.DOT, on_disk=self.on_disk or None
                )
        options: dict[str, Any] = {
            "vectors_config": vectors,
            "metadata": {METADATA_KEY: {"format": 1, "encoder_config": encoder}},
        }
        if not self.is_local:
            options.update(
                shard_number=self.shard_number,
                replication_factor=self.replication_factor,
                hnsw_config=self._hnsw,
                quantization_config=self._quantization,
            )
        try:
            self.client.create_collection(self.index, **options)
        except Exception:  # another store created it meanwhile: use (and check) that one
            if not self.client.collection_exists(self.index):
                raise
        self._collection = None
        described = self._describe()
        assert described is not None
        return described

    def _add_vectors(self, dim: int, encoder: dict[str, Any] | None) -> _Collection:
        """Rebuild a collection created before any vector arrived (it holds only vectorless points)."""
        points = [
            models.PointStruct(id=r.id, vector={}, payload=r.payload) for r in self._scroll(None, with_vectors=False)
        ]
        self.client.delete_collection(self.index)
        self._collection = None
        collection = self._create(dim, encoder)
        for batch in _batched(points, self.write_batch_size):
            self.client.upsert(self.index, points=batch, wait=True)
        return collection

    def _record_encoder(self, encoder: dict[str, Any]) -> None:
        self.client.update_collection(self.index, metadata={METADATA_KEY: {"format": 1, "encoder_config": encoder}})
        self._collection = None
        self._encoder_config = encoder

    # ------------------------------------------------------------------------------------------ protocol
    def count_documents(self) -> int:
        with self._lock:
            if self._describe() is None:
                return 0
            return self.client.count(self.index, exact=True).count

    def filter_documents(self, filters: dict[str, Any] | None = None) -> list[Document]:
        """Documents matching Haystack ``filters`` (all when ``None``), in write order; views are not in ``meta``."""
        qfilter = convert_filters(filters)
        with self._lock:
            collection = self._describe()
            if collection is None:
                return []
            vector = collection.first_view_vector
            records = list(self._scroll(qfilter, with_vectors=[vector] if vector else False))
        records.sort(key=lambda r: r.payload.get(SEQ_KEY, 0))
        return [converters.to_document(r.payload, converters.first_view(r.vector)) for r in records]

    def write_documents(self, documents: Iterable[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE) -> int:
        """
        Write documents and their views (one point each). ``DuplicatePolicy.NONE`` means ``FAIL``.

        The whole batch is checked first (types, views, dimension, encoder, duplicates under ``FAIL``): on any
        error nothing of it is written and nothing stored changes. ``meta["mvr_encoder"]`` is taken off and
        recorded as the collection's encoder config.

        :param documents: Documents (any iterable, a generator too).
        :returns: The number of documents written.
        """
        documents = document_list(documents)
        policy = DuplicatePolicy.FAIL if policy == DuplicatePolicy.NONE else policy
        prepared = [converters.prepare(d) for d in documents]
        with self._lock:
            collection = self._describe()
            encoder = self._batch_encoder(prepared, collection)
            dim = self._batch_dim(prepared, collection)
            chosen = self._apply_policy(prepared, policy, collection)
            if not chosen:
                return 0
            if collection is None:
                collection = self._create(dim, encoder)
            elif dim is not None and collection.dim is None:
                collection = self._add_vectors(dim, collection.encoder_config or encoder)
            if encoder is not None and collection.encoder_config is None:
                self._record_encoder(encoder)
            points = [converters.to_point(p, self._next_seq(), collection.has_global) for p in chosen]
            for batch in _batched(points, self.write_batch_size):
                self.client.upsert(self.index, points=batch, wait=True)
            return len(chosen)

    def delete_documents(self, document_ids: list[str]) -> None:
        """Delete documents (and their views); unknown and repeated ids are ignored."""
        ids = document_id_list(document_ids)
        if not ids:
            return
        with self._lock:
            if self._describe() is None:
                return
            selector = models.PointIdsList(points=[converters.point_id(i) for i in ids])
            self.client.delete(self.index, points_selector=selector, wait=True)

    def delete_all_documents(self, recreate_index: bool = False) -> None:
        """
        Delete every document.

        :param recreate_index: Drop the collection itself; the next write creates it again with this store's
            options (and its encoder config). Otherwise the points are deleted and the collection stays.
        """
        with self._lock:
            if self._describe() is None:
                return
            if recreate_index:
                self.client.delete_collection(self.index)
                self._collection = None
            else:
                self.client.delete(self.index, points_selector=models.FilterSelector(filter=models.Filter()), wait=True)

    def delete_by_filter(self, filters: dict[str, Any]) -> int:
        """Delete the documents matching ``filters``; returns how many."""
        qfilter = convert_filters(filters) or models.Filter()
        with self._lock:
            if self._describe() is None:
                return 0
            count = self.client.count(self.index, count_filter=qfilter, exact=True).count
            if count:
                self.client.delete(self.index, points_selector=models.FilterSelector(filter=qfilter), wait=True)
            return count

    def update_by_filter(self, filters: dict[str, Any], meta: dict[str, Any]) -> int:
        """Merge ``meta`` into the meta of every matching document (views unchanged); returns how many."""
        if not isinstance(meta, dict):
            msg = f"meta must be a dict, got {type(meta).__name__}."
            raise ValueError(msg)
        if {VIEWS_KEY, SPANS_KEY, ENCODER_KEY} & set(meta):
            msg = (
                f"update_by_filter cannot change '{VIEWS_KEY}', '{SPANS_KEY}' or '{ENCODER_KEY}'; "
                "write the documents again instead."
            )
            raise ValueError(msg)
        qfilter = convert_filters(filters) or models.Filter()
        with self._lock:
            if self._describe() is None:
                return 0
            count = self.client.count(self.index, count_filter=qfilter, exact=True).count
            if count and meta:
                self.client.set_payload(self.index, payload=meta, key="meta", points=qfilter, wait=True)
            return count

    def count_documents_by_filter(self, filters: dict[str, Any]) -> int:
        qfilter = convert_filters(filters)
        with self._lock:
            if self._describe() is None:
                return 0
            return self.client.count(self.index, count_filter=qfilter, exact=True).count

    def count_unique_metadata_by_filter(self, filters: dict[str, Any], metadata_fields: list[str]) -> dict[str, int]:
        return metadata_queries.count_unique(self._payload_documents(filters), metadata_fields)

    def get_metadata_fields_info(self) -> dict[str, dict[str, str]]:
        return metadata_queries.fields_info(self._payload_documents(None))

    def get_metadata_field_min_max(self, metadata_field: str) -> dict[str, Any]:
        return metadata_queries.min_max(self._payload_documents(None), metadata_field)

    def get_metadata_field_unique_values(
        self,
        metadata_field: str,
        search_term: str | None = None,
        from_: int = 0,
        size: int = 10,
        filters: dict[str, Any] | None = None,
    ) -> tuple[list[Any], int]:
        return metadata_queries.paged_unique_values(
            self._payload_documents(filters), metadata_field, search_term, from_, size
        )

    # -------------------------------------------------------------------------------------------- search
    def search(
        self,
        query_embedding: Sequence[float],
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]:
        """
        The ``top_k`` documents whose best view has the highest inner product with the query.

        The query goes to Qdrant as a one-row multivector ``[q]`` against the ``MAX_SIM`` multivector (exact in
        local mode and with ``exact=True``; HNSW on a server otherwise). Exactly ``min(top_k, matching documents
        with vectors)`` documents come back.

        :param query_embedding: The query vector ``(d,)``.
        :param top_k: How many documents.
        :param filters: Haystack metadata filters, applied inside Qdrant.
        :param return_embedding: Also return each document's views (``meta["mvr_views"]``) and ``embedding``.
        :returns: Documents best first, with ``score`` (max over views) and the matched-view keys.
        """
        return self._search([query_embedding], top_k, filters, return_embedding, single=True)[0]

    def search_batch(
        self,
        query_embeddings: Sequence[Sequence[float]],
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[list[Document]]:
        """:meth:`search` for ``(n, d)`` query embeddings sharing ``filters``, in one Qdrant batch query."""
        return self._search(query_embeddings, top_k, filters, return_embedding, single=False)

    def _search(
        self, query_embeddings: Any, top_k: int, filters: dict[str, Any] | None, return_embedding: bool, single: bool
    ) -> list[list[Document]]:
        queries, qfilter = self._search_inputs(query_embeddings, top_k, filters, single=single)
        with self._lock:
            collection = self._describe()
            if collection is None or collection.dim is None or not len(queries):
                return [[] for _ in queries]
            _check_query_dim(queries, collection.dim)
            requests = [self._request(q, top_k, qfilter) for q in queries]
            if single:
                responses = [self.client.query_points(self.index, **_as_kwargs(requests[0]))]
            else:
                responses = self.client.query_batch_points(self.index, requests=requests)
        return [_results(r.points, q, return_embedding) for r, q in zip(responses, queries, strict=True)]

    async def search_async(
        self,
        query_embedding: Sequence[float],
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]:
        """Asynchronous :meth:`search` (``AsyncQdrantClient`` on a server)."""
        return (await self._search_batch_async([query_embedding], top_k, filters, return_embedding, single=True))[0]

    async def search_batch_async(
        self,
        query_embeddings: Sequence[Sequence[float]],
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[list[Document]]:
        """Asynchronous :meth:`search_batch` (``AsyncQdrantClient`` on a server)."""
        return await self._search_batch_async(query_embeddings, top_k, filters, return_embedding, single=False)

    async def _search_batch_async(
        self, query_embeddings: Any, top_k: int, filters: dict[str, Any] | None, return_embedding: bool, single: bool
    ) -> list[list[Document]]:
        if self.is_local:
            # One in-process engine holds the data: its calls run in a worker thread, serialized by the lock
            # (a second, asynchronous local client would be another, empty engine).
            return await asyncio.to_thread(self._search, query_embeddings, top_k, filters, return_embedding, single)
        queries, qfilter = self._search_inputs(query_embeddings, top_k, filters, single=single)
        collection = await self._describe_async()
        if collection is None or collection.dim is None or not len(queries):
            return [[] for _ in queries]
        _check_query_dim(queries, collection.dim)
        requests = [self._request(q, top_k, qfilter) for q in queries]
        responses = await self._get_async_client().query_batch_points(self.index, requests=requests)
        return [_results(r.points, q, return_embedding) for r, q in zip(responses, queries, strict=True)]

    def _request(self, query: np.ndarray, top_k: int, qfilter: models.Filter | None) -> models.QueryRequest:
        params = None
        if not self.is_local and (self.exact or self.hnsw_ef is not None):
            params = models.SearchParams(exact=self.exact, hnsw_ef=self.hnsw_ef)
        prefetch = None
        if self.prefetch_limit is not None:
            prefetch = models.Prefetch(
                query=query.tolist(),
                using=GLOBAL_VECTOR,
                limit=max(self.prefetch_limit, top_k),
                filter=qfilter,
                params=params,
            )
        return models.QueryRequest(
            # Always a one-row multivector: local mode rejects a 1-D query against a multivector (qdrant-client #1444).
            query=[query.tolist()],
            using=VIEWS_VECTOR,
            prefetch=prefetch,
            filter=qfilter,
            params=params,
            limit=top_k,
            with_payload=True,
            with_vector=[VIEWS_VECTOR],
        )

    @staticmethod
    def _search_inputs(
        query_embeddings: Any, top_k: int, filters: dict[str, Any] | None, *, single: bool
    ) -> tuple[np.ndarray, models.Filter | None]:
        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
            msg = f"top_k must be a positive integer, got {top_k!r}."
            raise ValueError(msg)
        name = "query_embedding" if single else "query_embeddings"
        try:
            queries = np.asarray(query_embeddings, dtype=np.float32)
        except (TypeError, ValueError) as e:
            msg = f"{name} must be {'a list of floats' if single else 'a (n, d) list of lists of floats'}."
            raise ValueError(msg) from e
        if single and (queries.ndim != 2 or queries.shape[1] == 0):
            msg = f"query_embedding must be a non-empty 1-D vector, got shape {queries.shape[1:]}."
            raise ValueError(msg)
        if not single and queries.size == 0 and queries.ndim <= 2:
            return np.zeros((0, 0), dtype=np.float32), convert_filters(filters)
        if queries.ndim != 2 or queries.shape[1] == 0:
            msg = f"query_embeddings must be a non-empty (n, d) matrix, got shape {queries.shape}."
            raise ValueError(msg)
        if not np.isfinite(queries).all():
            msg = f"{name} contains NaN or infinite values."
            raise ValueError(msg)
        return queries, convert_filters(filters)

    # ---------------------------------------------------------------------------------------- async API
    async def write_documents_async(
        self, documents: Iterable[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE
    ) -> int:
        return await asyncio.to_thread(self.write_documents, documents, policy)

    async def delete_all_documents_async(self, recreate_index: bool = False) -> None:
        await asyncio.to_thread(self.delete_all_documents, recreate_index)

    # ---------------------------------------------------------------------------------------- internals
    def _scroll(self, qfilter: models.Filter | None, with_vectors: Any) -> Iterator[models.Record]:
        offset = None
        while True:
            records, offset = self.client.scroll(
                self.index,
                scroll_filter=qfilter,
                limit=_SCROLL_PAGE,
                offset=offset,
                with_payload=True,
                with_vectors=with_vectors,
            )
            yield from records
            if offset is None:
                return

    def _payload_documents(self, filters: dict[str, Any] | None) -> list[Document]:
        qfilter = convert_filters(filters)
        with self._lock:
            if self._describe() is None:
                return []
            return [converters.to_document(r.payload) for r in self._scroll(qfilter, with_vectors=False)]

    def _next_seq(self) -> int:
        self._last_seq = max(self._last_seq + 1, time.time_ns())
        return self._last_seq

    def _batch_encoder(self, prepared: list[PreparedDocument], collection: _Collection | None) -> dict | None:
        """The one encoder config of the batch, checked against the store's; ``None`` when nothing names one."""
        known = collection.encoder_config if collection is not None else None
        known = known if known is not None else self._encoder_config
        for p in prepared:
            if p.encoder is None:
                continue
            if known is None:
                known = p.encoder
            elif _canonical(p.encoder) != _canonical(known):
                msg = (
                    f"Document {p.document.id!r} was encoded by {p.encoder} but this store holds views from "
                    f"{known}; nothing of this batch was written. Use another index for another encoder."
                )
                raise ValueError(msg)
        return known

    def _batch_dim(self, prepared: list[PreparedDocument], collection: _Collection | None) -> int | None:
        dim = collection.dim if collection is not None and collection.dim is not None else self.embedding_dim
        for p in prepared:
            if p.views is None:
                continue
            if dim is None:
                dim = p.views.shape[1]
            elif p.views.shape[1] != dim:
                msg = (
                    f"Document {p.document.id!r} has {p.views.shape[1]}-dimensional vectors but the store holds "
                    f"{dim}-dimensional ones; nothing of this batch was written."
                )
                raise ValueError(msg)
        return dim

    def _apply_policy(
        self, prepared: list[PreparedDocument], policy: DuplicatePolicy, collection: _Collection | None
    ) -> list[PreparedDocument]:
        ids = [p.document.id for p in prepared]
        existing: set[str] = set()
        if collection is not None and policy in (DuplicatePolicy.FAIL, DuplicatePolicy.SKIP) and ids:
            by_point = {converters.point_id(i): i for i in ids}
            found = self.client.retrieve(self.index, ids=list(by_point), with_payload=False, with_vectors=False)
            existing = {by_point[str(r.id)] for r in found}
        if policy == DuplicatePolicy.FAIL:
            repeated = {i for i in ids if ids.count(i) > 1} if len(set(ids)) < len(ids) else set()
            clash = sorted(existing | repeated)
            if clash:
                msg = f"ID '{clash[0]}' already exists."
                raise DuplicateDocumentError(msg)
            return prepared
        if policy == DuplicatePolicy.SKIP:
            chosen: dict[str, PreparedDocument] = {}
            for p in prepared:
                if p.document.id not in existing:
                    chosen.setdefault(p.document.id, p)
            return list(chosen.values())
        if policy == DuplicatePolicy.OVERWRITE:
            return list({p.document.id: p for p in prepared}.values())
        msg = f"Unknown duplicate policy {policy!r}."
        raise ValueError(msg)


class _Collection:
    """What this store needs to know about its collection (read once, checked against the store's options)."""

    def __init__(self, dim: int | None, has_global: bool, encoder_config: dict[str, Any] | None) -> None:
        self.dim = dim
        self.has_global = has_global
        self.encoder_config = encoder_config

    @property
    def first_view_vector(self) -> str | None:
        if self.dim is None:
            return None
        return GLOBAL_VECTOR if self.has_global else VIEWS_VECTOR

    @classmethod
    def read(cls, info: models.CollectionInfo, store: QdrantMultiViewDocumentStore) -> _Collection:
        where = f"Qdrant collection {store.index!r}"
        vectors = info.config.params.vectors
        if vectors is None or isinstance(vectors, models.VectorParams):
            vectors = {} if vectors is None else {"": vectors}
        unknown = set(vectors) - {VIEWS_VECTOR, GLOBAL_VECTOR}
        if unknown or (vectors and VIEWS_VECTOR not in vectors):
            msg = (
                f"{where} has vectors {sorted(vectors)}, not a haystack-mvr multi-view layout "
                f"('{VIEWS_VECTOR}' with MAX_SIM); use another index."
            )
            raise DocumentStoreError(msg)
        dim = None
        if VIEWS_VECTOR in vectors:
            params = vectors[VIEWS_VECTOR]
            comparator = params.multivector_config.comparator if params.multivector_config else None
            if params.distance != models.Distance.DOT or comparator != models.MultiVectorComparator.MAX_SIM:
                msg = (
                    f"{where}: '{VIEWS_VECTOR}' compares with distance {params.distance} and multivector "
                    f"comparator {comparator}; haystack-mvr needs Dot and MAX_SIM. Use another index."
                )
                raise DocumentStoreError(msg)
            dim = params.size
            if store.embedding_dim is not None and store.embedding_dim != dim:
                msg = f"{where} holds {dim}-dimensional views but embedding_dim={store.embedding_dim}."
                raise DocumentStoreError(msg)
        has_global = GLOBAL_VECTOR in vectors
        if dim is not None and store.global_view and not has_global:
            msg = f"{where} was created without the global view; global_view=True needs a new index."
            raise DocumentStoreError(msg)
        record = ((getattr(info.config, "metadata", None) or {}).get(METADATA_KEY)) or {}
        recorded = record.get("encoder_config")
        configured = store._encoder_config
        if recorded is not None and configured is not None and _canonical(recorded) != _canonical(configured):
            msg = (
                f"{where} holds views from encoder {recorded}, but this store was given encoder_config="
                f"{configured}. Use another index for another encoder."
            )
            raise DocumentStoreError(msg)
        return cls(dim, has_global or (dim is None and store.global_view), recorded)


def _parse(name: str, value: dict[str, Any] | None, model: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, dict):
        msg = f"{name} must be a dict of Qdrant settings or None, got {type(value).__name__}."
        raise ValueError(msg)
    try:
        return TypeAdapter(model).validate_python(value)
    except ValidationError as e:
        msg = f"{name} is not a valid Qdrant {getattr(model, '__name__', 'config')}: {e}"
        raise ValueError(msg) from e


def _canonical(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, default=str)


def _check_query_dim(queries: np.ndarray, dim: int) -> None:
    if queries.shape[1] != dim:
        msg = f"query_embedding has dimension {queries.shape[1]} but the stored views have dimension {dim}."
        raise ValueError(msg)


def _as_kwargs(request: models.QueryRequest) -> dict[str, Any]:
    return {
        "query": request.query,
        "using": request.using,
        "prefetch": request.prefetch,
        "query_filter": request.filter,
        "search_params": request.params,
        "limit": request.limit,
        "with_payload": request.with_payload,
        "with_vectors": request.with_vector,
    }


def _results(points: list[models.ScoredPoint], query: np.ndarray, return_embedding: bool) -> list[Document]:
    """Returned points as annotated documents, best first (stable: Qdrant's order breaks exact ties)."""
    docs = []
    for point in points:
        views = converters.views_of(point.vector)
        if views is None:  # cannot happen for a MAX_SIM hit; kept out rather than scored wrongly
            continue
        stored = converters.to_document(point.payload)
        docs.append(annotate_match(stored, views, query, return_embedding=return_embedding))
    docs.sort(key=lambda d: -d.score)
    return docs


def _batched(items: list[Any], n: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), n):
        yield items[start : start + n]


__all__ = ["QdrantMultiViewDocumentStore"]
