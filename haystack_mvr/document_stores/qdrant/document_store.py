"""A Qdrant-backed multi-view document store: one point per document, its views in a MAX_SIM multivector.

Several writers may share one collection (store objects in one process, processes on several machines against a
server), so the store never trusts what it remembers about the collection when that could be stale, and never
deletes or recreates a collection on its own: the schema (dimension, comparator, global view) is fixed when the
collection is created, and every later write is checked against the collection as it is.

The store holds its options, its connection and what it last read of the collection; the helpers beside it take
what they need: ``connection`` (clients, one per local folder, and the fork rules), ``store_options`` (the
constructor's checks), ``collection_state`` (schema, encoder record, a batch's checks), ``point_writes`` (duplicate
policies, upserts, deletes, meta updates), ``point_reads`` (scrolls, filters resolved to exactly Haystack's
matches) and ``view_search`` (query requests, ranked results).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from haystack import Document, default_from_dict, default_to_dict
from haystack.document_stores.types import DuplicatePolicy
from haystack.utils import Secret, deserialize_secrets_inplace
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.http import models

from haystack_mvr.document_stores import metadata_queries
from haystack_mvr.document_stores.checks import check_batch_size, check_query_encoder
from haystack_mvr.document_stores.qdrant import (
    collection_state,
    connection,
    converters,
    point_reads,
    point_writes,
    store_options,
    view_search,
)
from haystack_mvr.document_stores.qdrant.collection_state import CollectionState
from haystack_mvr.document_stores.qdrant.filters import QdrantFilter, convert_filters, empty_list_markers
from haystack_mvr.document_stores.threaded_async import ThreadedAsyncMethods
from haystack_mvr.document_stores.writes import document_id_list, prepare_documents

logger = logging.getLogger(__name__)

#: On a server, how long a read may reuse the collection description it last fetched (writes always fetch it).
#: A read that fails on a reused description fetches it again and retries once.
SERVER_DESCRIPTION_TTL_S = 30.0

_T = TypeVar("_T")


class QdrantMultiViewDocumentStore(ThreadedAsyncMethods):
    """
    Stores each document as one Qdrant point whose views form a multivector compared with ``MAX_SIM``.

    A one-row query ``[q]`` scores a point by ``max_i <q, v_i>``: exactly the multi-view score, computed by
    Qdrant, with Haystack filters translated into Qdrant filters (so a filtered search still returns exactly
    ``top_k`` documents). Qdrant does not say which view matched: the returned points' views are fetched and
    :func:`haystack_mvr.views.annotate_match` scores and annotates each document, as in every haystack-mvr store.
    Views arrive as described in ``haystack_mvr.views``; documents without vectors are stored and filterable but
    never returned by a search.

    Several store objects and processes may share one collection. Its schema (view dimension, ``MAX_SIM``
    comparator, global view) is fixed when it is created, by the first write: from ``embedding_dim`` when given,
    else from the first vectors written; documents without vectors are points without vectors in the same
    collection. The store never deletes or recreates a collection on its own (only
    ``delete_all_documents(recreate_index=True)`` does, when asked). Every write checks the collection as it is
    now (dimension, encoder record): a mismatch is a :class:`CollectionMismatchError` (a ``DocumentStoreError``
    and a ``ValueError``) and writes nothing.

    Where the data lives (at most one of the three; none means ``location=":memory:"``):

    :param location: ``":memory:"`` for qdrant-client's in-process local mode (a pure-Python engine: tests,
        small collections), or a URL.
    :param url: A Qdrant server or cluster, e.g. ``"http://localhost:6333"``.
    :param path: A folder for persistent local mode; reopening it (another process, or after :meth:`close`)
        finds the documents and the recorded encoder config again. Stores opened on the same ``path`` in one
        process share one client and one call lock. One process holds a folder: a store used in a ``fork()``
        child of the process that opened it raises ``DocumentStoreError`` (open stores after forking). Open
        only folders you wrote: qdrant-client unpickles their contents.
    :param api_key: The server's API key, as a ``Secret`` (serialized as the name of its environment variable,
        never in clear; a token secret refuses to serialize). Default: env var ``QDRANT_API_KEY`` if set.
    :param index: The collection name.
    :param embedding_dim: Vector dimension of a collection this store creates, and the one it expects of an
        existing collection; ``None`` takes it from an existing collection or from the first vectors written.
        Pass it when documents without vectors may be written first: a collection created by such a write
        without ``embedding_dim`` has no vectors, and Qdrant cannot add them later (vectors written to it are
        refused with a clear error).
    :param encoder_config: The encoder config the views must come from (``meta["mvr_encoder"]`` of written
        documents). Recorded in the collection metadata when the collection is created or at the first write
        naming an encoder; documents from another encoder, or a collection recorded with another one, are
        refused. Checked against the collection itself at every write, whoever recorded it.
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
        connection.check_connection_options(location, url, path, api_key)
        store_options.check_options(
            index=index,
            embedding_dim=embedding_dim,
            encoder_config=encoder_config,
            global_view=global_view,
            on_disk=on_disk,
            shard_number=shard_number,
            replication_factor=replication_factor,
            exact=exact,
            hnsw_ef=hnsw_ef,
            prefetch_limit=prefetch_limit,
            timeout=timeout,
            write_batch_size=write_batch_size,
        )
        self._hnsw = store_options.parse_config("hnsw_config", hnsw_config, models.HnswConfigDiff)
        self._quantization = store_options.parse_config(
            "quantization_config", quantization_config, models.QuantizationConfig
        )
        self.location = location
        self.url = url
        self.path = path
        self.api_key = api_key
        self.index = index
        self.embedding_dim = embedding_dim
        self._configured_encoder = encoder_config
        #: The encoder the stored views come from: the collection's record as last read (when the store opens,
        #: and at every write and query), else ``encoder_config`` (``None`` while neither is known).
        self.encoder_config = encoder_config
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
        # Nothing is opened before the first call; a folder's call lock is shared with every store on the folder.
        self._connection = connection.Connection(path)
        self._lock: threading.RLock = self._connection.lock
        # What the store last read of its collection (never trusted where it could be stale, see ``_describe``).
        self._collection: CollectionState | None = None
        self._warm_pid: int | None = None  # the process whose warm_up opened the store (Pipeline.run warms up)
        self._described_at = float("-inf")
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
            encoder_config=self._configured_encoder,
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

    def check_query_encoder(self, encoder: dict[str, Any] | None) -> None:
        """
        Refuse a query ``encoder`` that differs from the collection's encoder record (see
        :func:`~haystack_mvr.document_stores.checks.check_query_encoder`): the record is read from the collection
        first (local mode: as it is now; a server: at most ``SERVER_DESCRIPTION_TTL_S`` old), so the first query of
        a store opened on existing data is checked too.
        """
        if encoder:
            self._read(lambda collection: collection)
            check_query_encoder(self.encoder_config, encoder)

    # ---------------------------------------------------------------------------------------- connection
    @property
    def is_local(self) -> bool:
        """Whether this store runs qdrant-client's in-process engine (``:memory:`` or ``path=``)."""
        return self.url is None and (self.location is None or self.location == ":memory:")

    @property
    def client(self) -> QdrantClient:
        """The ``QdrantClient``, opened on first use."""
        self._check_process()
        return self._connection.open(self, local=self.is_local, options=self._server_options)

    @property
    def _client(self) -> QdrantClient | None:
        """The ``QdrantClient`` if it is open (``None`` before the first call and after :meth:`close`)."""
        return self._connection.client

    def _get_async_client(self) -> AsyncQdrantClient:
        self._check_process()
        return self._connection.open_async(self._server_options)

    def _check_process(self) -> None:
        """Refuse a ``path`` store in a ``fork()`` child; reconnect a server store (``Connection.check_process``)."""
        if self._connection.check_process(local=self.is_local):
            self._collection = None

    def _server_options(self) -> dict[str, Any]:
        return connection.server_options(
            url=self.url, path=self.path, location=self.location, timeout=self.timeout, api_key=self.api_key
        )

    def close(self) -> None:
        """Close the connection (a local folder is released when no other store in this process uses it)."""
        with self._lock:
            self._connection.close()
            self._collection = None

    async def close_async(self) -> None:
        """:meth:`close`, awaiting the ``AsyncQdrantClient``'s own close (server mode)."""
        await self._connection.close_async_client()
        self.close()

    # -------------------------------------------------------------------------------------- collection
    @property
    def _read_max_age(self) -> float:
        """
        How old a description of the collection a read may use.

        Local mode reads it at every call (cheap, and another store in this process may have changed the
        collection). On a server another process may drop or recreate the collection at any time: a read reuses
        a description for ``SERVER_DESCRIPTION_TTL_S`` and, if it fails, fetches it again (:meth:`_read`).
        """
        return 0.0 if self.is_local else SERVER_DESCRIPTION_TTL_S

    def _describe(self, max_age: float = 0.0) -> CollectionState | None:
        """The collection as it is (checked against this store's options); ``None`` while it does not exist."""
        if self._collection is not None and time.monotonic() - self._described_at < max_age:
            return self._collection
        client = self.client
        self._collection = None
        return self._adopt(collection_state.describe(client, self._schema()))

    async def _describe_async(self, max_age: float = 0.0) -> CollectionState | None:
        """:meth:`_describe` through the ``AsyncQdrantClient``."""
        if self._collection is not None and time.monotonic() - self._described_at < max_age:
            return self._collection
        client = self._get_async_client()
        self._collection = None
        return self._adopt(await collection_state.describe_async(client, self._schema()))

    def _schema(self) -> collection_state.SchemaOptions:
        return collection_state.SchemaOptions(
            self.index, self.embedding_dim, self.global_view, self._configured_encoder
        )

    def _adopt(self, collection: CollectionState | None) -> CollectionState | None:
        if collection is None:  # no collection (yet): the configured encoder, if any
            self.encoder_config = self._configured_encoder
            return None
        self._collection = collection
        self._described_at = time.monotonic()
        self.encoder_config = collection.encoder_config or self._configured_encoder
        return collection

    def _read(self, call: Callable[[CollectionState | None], _T]) -> _T:
        """
        ``call(description)`` under the lock, with a description of the collection recent enough for a read.

        When the description was reused (a server) and the call fails, the collection is read again: if another
        process dropped or recreated it meanwhile, the call runs once more on what is there now (an empty result
        for a dropped collection); if nothing changed, the error is the call's own and is raised.
        """
        self._check_process()
        with self._lock:
            started = time.monotonic()
            collection = self._describe(self._read_max_age)
            try:
                return call(collection)
            except Exception:
                if self._described_at >= started and collection is self._collection:
                    raise  # read just now: nothing stale to blame
                again = self._describe(0.0)
                if collection_state.same_schema(again, collection):
                    raise
                return call(again)

    def _on_collection(self, empty: _T, call: Callable[[CollectionState], _T]) -> _T:
        """:meth:`_read` of ``call(collection)``, or ``empty`` while the collection does not exist."""
        return self._read(lambda collection: empty if collection is None else call(collection))

    async def _read_async(self, call: Callable[[CollectionState | None], Awaitable[_T]]) -> _T:
        """:meth:`_read` through the ``AsyncQdrantClient`` (server mode)."""
        self._check_process()
        started = time.monotonic()
        collection = await self._describe_async(self._read_max_age)
        try:
            return await call(collection)
        except Exception:
            if self._described_at >= started and collection is self._collection:
                raise
            again = await self._describe_async(0.0)
            if collection_state.same_schema(again, collection):
                raise
            return await call(again)

    def _create(self, dim: int | None, encoder: dict[str, Any] | None) -> CollectionState:
        """
        Create the collection with its schema, or take the one another writer created meanwhile.

        The schema and the encoder record are fixed here, atomically: of several writers creating the collection
        at once, one succeeds and the others read (and check) its collection.
        """
        options = collection_state.creation_options(dim, encoder, global_view=self.global_view, on_disk=self.on_disk)
        if not self.is_local:
            options.update(
                shard_number=self.shard_number,
                replication_factor=self.replication_factor,
                hnsw_config=self._hnsw,
                quantization_config=self._quantization,
            )
        created = collection_state.create_or_take(self.client, self.index, options, lambda: self._describe(0.0))
        if created and dim is None:
            logger.warning(
                "Qdrant collection %r was created without vectors (its first documents carry none and no "
                "embedding_dim was given): it takes documents without vectors only. Pass embedding_dim to "
                "create a collection that also takes vectors.",
                self.index,
            )
        return collection_state.created(self.index, self._describe(0.0))

    def _record_encoder(self, encoder: dict[str, Any]) -> CollectionState:
        """
        Record ``encoder`` in a collection that has no record yet, then read it back.

        Qdrant has no compare-and-set on collection metadata: of two writers recording different encoders at the
        same moment, the one that reads back the other's record raises here, before writing any point.
        """
        self.client.update_collection(self.index, metadata=collection_state.encoder_record(encoder))
        return collection_state.check_recorded_encoder(self.index, self._describe(0.0), encoder)

    def warm_up(self) -> None:
        """
        Open the store now instead of at its first use: the client (a ``path`` folder's points are read into memory
        then, a server is reached) and the collection's description (its schema and encoder record), so the first
        query pays for neither. ``MultiViewRetriever.warm_up`` (and so ``Pipeline.warm_up``) calls it. A
        collection that does not exist yet is not created. In a process that forks, warm up after forking: a
        ``path`` folder is held by the process that opened it. Later calls (``Pipeline.run`` warms up at every run)
        do nothing until :meth:`close`.
        """
        if self._warm_pid == os.getpid() and self._client is not None:
            return
        self._read(lambda collection: collection)
        self._warm_pid = os.getpid()

    # ------------------------------------------------------------------------------------------ protocol
    def count_documents(self) -> int:
        return self._on_collection(0, lambda _: self.client.count(self.index, exact=True).count)

    def filter_documents(self, filters: dict[str, Any] | None = None) -> list[Document]:
        """Documents matching Haystack ``filters`` (all when ``None``), in write order; views are not in ``meta``."""
        qfilter = convert_filters(filters)

        def scroll(collection: CollectionState) -> list[models.Record]:
            vector = collection.first_view_vector
            with_vectors = [vector] if vector else False
            return list(point_reads.scroll_points(self.client, self.index, self._resolve(qfilter), with_vectors))

        return point_reads.stored_documents(self._on_collection([], scroll))

    def export_documents(
        self, batch_size: int = 256, filters: dict[str, Any] | None = None
    ) -> Iterator[list[Document]]:
        """
        The documents matching ``filters`` with all their views, one scroll page of ``batch_size`` points at a time,
        ready for any multi-view store (see :func:`haystack_mvr.document_stores.copy_documents`).

        Pages follow Qdrant's point order (write order within a page); a document written or deleted during the
        export may or may not be included.
        """
        check_batch_size(batch_size)
        plan = convert_filters(filters)
        offset: Any = None
        while True:

            def page(collection: CollectionState, start: Any = offset) -> tuple[list[models.Record], Any, Any]:
                qfilter = self._resolve(plan)
                with_views = collection.dim is not None
                records, after = point_reads.export_page(
                    self.client, self.index, qfilter, batch_size, start, with_views=with_views
                )
                return records, after, collection.encoder_config or self._configured_encoder

            records, offset, encoder = self._on_collection(([], None, None), page)
            batch = point_reads.exported_documents(records, encoder)
            if batch:
                yield batch
            if offset is None:
                return

    def write_documents(self, documents: Iterable[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE) -> int:
        """
        Write documents and their views (one point each). ``DuplicatePolicy.NONE`` means ``FAIL``.

        The whole batch is checked first (types, views, the multivector limit, dimension, encoder, duplicates
        under ``FAIL``), against the collection as it is now: on any error nothing of it is written and nothing
        stored changes. The first write creates the collection (see the class docs); no write ever deletes or
        recreates it. ``meta["mvr_encoder"]`` is taken off and recorded as the collection's encoder config.

        :param documents: Documents (any iterable, a generator too).
        :returns: The number of documents written.
        :raises CollectionMismatchError: vectors of another dimension than the collection's, vectors for a
            collection created without vectors, or another encoder than the collection's.
        """
        policy = DuplicatePolicy.FAIL if policy == DuplicatePolicy.NONE else policy
        batch = prepare_documents(documents)
        for p in batch.documents:
            converters.check_multivector_size(p)
        prepared, encoder, dim = batch.documents, batch.encoder, batch.dim
        self._check_process()
        with self._lock:
            collection = self._describe(0.0)  # as it is now, whoever changed it since this store last looked
            if collection is None:
                chosen = point_writes.apply_policy(prepared, policy, None, self.index)
                if not chosen:
                    return 0
                collection_state.check_new_collection(prepared, dim, encoder, self._schema())
                collection = self._create(
                    self.embedding_dim if self.embedding_dim is not None else dim, self._configured_encoder or encoder
                )
            collection_state.check_collection(prepared, dim, encoder, collection, self._schema())
            chosen = point_writes.apply_policy(prepared, policy, self.client, self.index)
            if not chosen:
                return 0
            unrecorded = self._configured_encoder or encoder
            if collection.encoder_config is None and unrecorded is not None:
                collection = self._record_encoder(unrecorded)
            point_writes.upsert_documents(
                self.client,
                self.index,
                chosen,
                max_points=self.write_batch_size,
                has_global=collection.has_global,
                next_seq=self._next_seq,
            )
            return len(chosen)

    def delete_documents(self, document_ids: list[str]) -> None:
        """Delete documents (and their views); unknown and repeated ids are ignored."""
        ids = document_id_list(document_ids)
        if not ids:
            return
        selector = models.PointIdsList(points=[converters.point_id(i) for i in ids])
        self._on_collection(None, lambda _: self.client.delete(self.index, points_selector=selector, wait=True))

    def delete_all_documents(self, recreate_index: bool = False) -> None:
        """
        Delete every document.

        :param recreate_index: Drop the collection itself (for every store and process using it), to start over,
            e.g. with another encoder or dimension. It is created again at once with this store's options when
            ``embedding_dim`` is set, else by the next write. Other stores on it see the new collection at their
            next call. Otherwise the points are deleted and the collection stays.
        """
        if not recreate_index:
            everything = models.FilterSelector(filter=models.Filter())
            self._on_collection(None, lambda _: self.client.delete(self.index, points_selector=everything, wait=True))
            return
        self._check_process()
        with self._lock:
            collection_state.drop_collection(self.client, self.index)
            self._collection = None
            self.encoder_config = self._configured_encoder
            if self.embedding_dim is not None:
                self._create(self.embedding_dim, self._configured_encoder)

    def delete_by_filter(self, filters: dict[str, Any]) -> int:
        """Delete the documents matching ``filters``; returns how many."""
        plan = convert_filters(filters)
        return self._on_collection(
            0, lambda _: point_writes.delete_matching(self.client, self.index, self._resolve(plan) or models.Filter())
        )

    def update_by_filter(self, filters: dict[str, Any], meta: dict[str, Any]) -> int:
        """Merge ``meta`` into the meta of every matching document (views unchanged); returns how many."""
        point_writes.check_meta_update(meta)
        plan = convert_filters(filters)
        markers = dict.fromkeys(empty_list_markers(meta), True)
        return self._on_collection(
            0,
            lambda _: point_writes.update_meta(
                self.client, self.index, self._resolve(plan) or models.Filter(), meta, markers
            ),
        )

    def count_documents_by_filter(self, filters: dict[str, Any]) -> int:
        plan = convert_filters(filters)
        return self._on_collection(
            0, lambda _: self.client.count(self.index, count_filter=self._resolve(plan), exact=True).count
        )

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
        with vectors)`` documents come back. A multi-vector query ``(m, d)`` (a late-interaction model's) goes as its
        ``m`` rows: Qdrant ranks by MaxSim, the sum over the query's vectors of each one's best view.

        :param query_embedding: The query vector ``(d,)``, or a multi-vector query ``(m, d)``.
        :param top_k: How many documents.
        :param filters: Haystack metadata filters, applied inside Qdrant.
        :param return_embedding: Also return each document's views (``meta["mvr_views"]``) and ``embedding``.
        :returns: Documents best first, with ``score`` (max over views) and the matched-view keys.
        """
        return self._search(query_embedding, top_k, filters, return_embedding, single=True)[0]

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
        queries, qfilter = view_search.search_inputs(query_embeddings, top_k, filters, single=single)

        def query(collection: CollectionState | None) -> list[Any] | None:
            if not view_search.searchable(collection, queries):
                return None
            requests = self._requests(queries, top_k, self._resolve(qfilter))
            if single:
                return [self.client.query_points(self.index, **view_search.as_kwargs(requests[0]))]
            return self.client.query_batch_points(self.index, requests=requests)

        return view_search.ranked_results(self._read(query), queries, return_embedding)

    async def search_async(
        self,
        query_embedding: Sequence[float],
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]:
        """Asynchronous :meth:`search` (``AsyncQdrantClient`` on a server)."""
        return (await self._search_batch_async(query_embedding, top_k, filters, return_embedding, single=True))[0]

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
        queries, qfilter = view_search.search_inputs(query_embeddings, top_k, filters, single=single)

        async def query(collection: CollectionState | None) -> list[Any] | None:
            if not view_search.searchable(collection, queries):
                return None
            resolved = await asyncio.to_thread(self._locked_resolve, qfilter)
            requests = self._requests(queries, top_k, resolved)
            return await self._get_async_client().query_batch_points(self.index, requests=requests)

        return view_search.ranked_results(await self._read_async(query), queries, return_embedding)

    def _requests(self, queries: Any, top_k: int, qfilter: models.Filter | None) -> list[models.QueryRequest]:
        return view_search.query_requests(
            queries,
            top_k,
            qfilter,
            local=self.is_local,
            exact=self.exact,
            hnsw_ef=self.hnsw_ef,
            prefetch_limit=self.prefetch_limit,
        )

    # ---------------------------------------------------------------------------------------- async API
    async def delete_all_documents_async(self, recreate_index: bool = False) -> None:
        await asyncio.to_thread(self.delete_all_documents, recreate_index)

    # ---------------------------------------------------------------------------------------- internals
    def _payload_documents(self, filters: dict[str, Any] | None) -> list[Document]:
        plan = convert_filters(filters)
        return self._on_collection(
            [], lambda _: point_reads.payload_documents(self.client, self.index, self._resolve(plan))
        )

    def _resolve(self, plan: QdrantFilter | None) -> models.Filter | None:
        """The Qdrant filter selecting exactly what the Haystack filter selects, now (call it under the lock)."""
        return point_reads.resolve_filter(
            plan, lambda qfilter: point_reads.scroll_points(self.client, self.index, qfilter, with_vectors=False)
        )

    def _locked_resolve(self, plan: QdrantFilter | None) -> models.Filter | None:
        with self._lock:
            return self._resolve(plan)

    def _next_seq(self) -> int:
        self._last_seq = max(self._last_seq + 1, time.time_ns())
        return self._last_seq


__all__ = ["QdrantMultiViewDocumentStore"]
