"""A Qdrant-backed multi-view document store: one point per document, its views in a MAX_SIM multivector.

Several writers may share one collection (store objects in one process, processes on several machines against a
server), so the store never trusts what it remembers about the collection when that could be stale, and never
deletes or recreates a collection on its own: the schema (dimension, comparator, global view) is fixed when the
collection is created, and every later write is checked against the collection as it is.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
from haystack import Document, default_from_dict, default_to_dict
from haystack.document_stores.errors import DocumentStoreError, DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy
from haystack.errors import FilterError
from haystack.utils import Secret, deserialize_secrets_inplace
from pydantic import TypeAdapter, ValidationError
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.http import models

from haystack_mvr.document_stores import metadata_queries
from haystack_mvr.document_stores.checks import (
    check_batch_size,
    check_encoder_config,
    check_optional_positive_int,
    check_positive_int,
    check_query_dimension,
    check_query_encoder,
    check_top_k,
    document_dimension_message,
)
from haystack_mvr.document_stores.compiled_filters import compile_filter
from haystack_mvr.document_stores.qdrant import converters
from haystack_mvr.document_stores.qdrant.converters import (
    GLOBAL_VECTOR,
    MAX_MULTIVECTOR_FLOATS,
    SEQ_KEY,
    VIEWS_VECTOR,
)
from haystack_mvr.document_stores.qdrant.filters import (
    EMPTY_LIST_KEY,
    QdrantFilter,
    convert_filters,
    empty_list_markers,
)
from haystack_mvr.document_stores.threaded_async import ThreadedAsyncMethods
from haystack_mvr.document_stores.writes import (
    PreparedDocument,
    canonical_encoder,
    document_id_list,
    prepare_documents,
    same_encoder,
)
from haystack_mvr.views import ENCODER_KEY, SPANS_KEY, VIEWS_KEY, annotate_match, exported_document

logger = logging.getLogger(__name__)

#: Key of this package's record in the collection metadata (the encoder config the views come from).
METADATA_KEY = "haystack_mvr"
_SCROLL_PAGE = 256
#: On a server, how long a read may reuse the collection description it last fetched (writes always fetch it).
#: A read that fails on a reused description fetches it again and retries once.
SERVER_DESCRIPTION_TTL_S = 30.0
#: Numbers (views x dimension) per upsert request at most, besides ``write_batch_size`` points: one maximal
#: document, about 20 MB of JSON, under a server's default 32 MB request limit.
MAX_REQUEST_FLOATS = MAX_MULTIVECTOR_FLOATS

_T = TypeVar("_T")


class CollectionMismatchError(DocumentStoreError, ValueError):
    """A write or a query that does not fit the collection as it is (its dimension, encoder or vectors)."""


def _do_nothing(*args: Any, **kwargs: Any) -> None:
    return None


class _LocalClients:
    """
    One ``QdrantClient`` per local storage folder in this process, shared by every store opened on it.

    Local mode locks its folder against a second client, so two stores on the same ``path`` (a pipeline loaded
    back from YAML next to the one that wrote it) share one client, and one call lock serializing calls to it.
    The call lock of a folder exists from the first store constructed on it and is never replaced, so two
    threads are never inside the engine at once. The client is closed when the last store using it is closed or
    garbage-collected.

    After ``fork()`` the child holds copies of the parent's clients and of their folder locks: the child never
    uses them (stores refuse, see ``QdrantMultiViewDocumentStore._check_process``) and never closes them, since
    closing a copy would release the parent's folder lock and let a third process open the folder.
    """

    def __init__(self) -> None:
        # Re-entrant: a store's finalizer (``release``) may run from garbage collection inside ``acquire``.
        self._lock = threading.RLock()
        self._open: dict[str, list[Any]] = {}  # realpath -> [client, users]
        self._call_locks: dict[str, threading.RLock] = {}
        self._inherited: list[QdrantClient] = []  # a fork's copies of the parent's clients: kept, never closed
        self._watching_forks = False

    @staticmethod
    def key(path: str) -> str:
        return os.path.realpath(path)

    def call_lock(self, key: str) -> threading.RLock:
        """The lock serializing every call on the folder ``key`` in this process (one per folder, never replaced)."""
        with self._lock:
            return self._call_locks.setdefault(key, threading.RLock())

    def acquire(self, key: str) -> QdrantClient:
        with self._lock:
            self._watch_forks()
            entry = self._open.get(key)
            if entry is None:
                # Calls come from worker threads too (the async methods); the call lock serializes them.
                entry = self._open[key] = [QdrantClient(path=key, force_disable_check_same_thread=True), 0]
            entry[1] += 1
            return entry[0]

    def release(self, key: str, client: QdrantClient) -> None:
        with self._lock:
            entry = self._open.get(key)
            if entry is None or entry[0] is not client:  # closed already, or a fork's copy of the parent's
                return
            entry[1] -= 1
            if entry[1] <= 0:  # no store uses the client any more, so no call is in flight
                del self._open[key]
                entry[0].close()

    def _watch_forks(self) -> None:
        # Registered on first use, not at import: importing the store has no process-wide effect.
        if not self._watching_forks and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork_in_child)
            self._watching_forks = True

    def _after_fork_in_child(self) -> None:
        self._lock = threading.RLock()  # a parent thread may have held it during the fork
        for client, _users in self._open.values():
            client.close = _do_nothing  # shadows the method for this copy, and for its __del__
            self._inherited.append(client)
        self._open = {}
        self._call_locks = {}


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
            check_optional_positive_int(name, value)
        check_positive_int("write_batch_size", write_batch_size)
        check_encoder_config(encoder_config)
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
        # Connection state: nothing is opened before the first call. A folder's call lock exists from here on,
        # shared with every store on the folder in this process, and is never replaced.
        self._local_key: str | None = _LOCAL_CLIENTS.key(path) if path is not None else None
        self._lock: threading.RLock = (
            _LOCAL_CLIENTS.call_lock(self._local_key) if self._local_key is not None else threading.RLock()
        )
        self._client: QdrantClient | None = None
        self._async_client: AsyncQdrantClient | None = None
        self._pid: int | None = None  # the process that opened the clients
        self._finalizer: weakref.finalize | None = None
        # What the store last read of its collection (never trusted where it could be stale, see ``_describe``).
        self._collection: _Collection | None = None
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
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._open()
                    self._pid = os.getpid()
        return self._client

    def _open(self) -> QdrantClient:
        if self._local_key is not None:
            key = self._local_key
            client = _LOCAL_CLIENTS.acquire(key)
            self._finalizer = weakref.finalize(self, _LOCAL_CLIENTS.release, key, client)
            return client
        if self.is_local:
            return QdrantClient(location=":memory:")
        return QdrantClient(**self._server_options())

    def _check_process(self) -> None:
        """
        Refuse a ``path`` store in a ``fork()`` child of the process that opened it; reconnect a server store.

        The child holds a copy of the folder's engine: its writes would never reach the parent (which would go on
        serving what it holds) and could be overwritten by it. A ``:memory:`` store is a private copy in the child,
        as any Python object. A server store drops the parent's connections (closing them could disturb the
        parent's) and opens its own on the next call.
        """
        pid = self._pid
        if pid is None or pid == os.getpid():
            return
        if self.path is not None:
            msg = (
                f"This store opened the local Qdrant folder {self.path!r} in process {pid}; this process "
                f"({os.getpid()}) is a fork of it, and a folder is held by one process (a fork's writes never reach "
                "the parent, which would serve stale reads). Create the store after forking, in the process that "
                "uses it, or use a Qdrant server for several processes."
            )
            raise DocumentStoreError(msg)
        if not self.is_local:
            if self._client is not None:
                self._client.close = _do_nothing  # the parent's connections: neither used nor closed here
            self._client = None
            self._async_client = None
            self._collection = None
        self._pid = os.getpid()

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
            elif self._client is not None and self._pid == os.getpid():
                self._client.close()
            self._client = None
            self._async_client = None
            self._pid = None
            self._collection = None

    async def close_async(self) -> None:
        """:meth:`close`, awaiting the ``AsyncQdrantClient``'s own close (server mode)."""
        if self._async_client is not None and self._pid == os.getpid():
            await self._async_client.close()
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

    def _describe(self, max_age: float = 0.0) -> _Collection | None:
        """The collection as it is (checked against this store's options); ``None`` while it does not exist."""
        if self._collection is not None and time.monotonic() - self._described_at < max_age:
            return self._collection
        client = self.client
        self._collection = None
        try:
            info = client.get_collection(self.index)
        except Exception:
            if not client.collection_exists(self.index):
                self.encoder_config = self._configured_encoder
                return None
            raise
        return self._adopt(info)

    async def _describe_async(self, max_age: float = 0.0) -> _Collection | None:
        """:meth:`_describe` through the ``AsyncQdrantClient``."""
        if self._collection is not None and time.monotonic() - self._described_at < max_age:
            return self._collection
        client = self._get_async_client()
        self._collection = None
        try:
            info = await client.get_collection(self.index)
        except Exception:
            if not await client.collection_exists(self.index):
                self.encoder_config = self._configured_encoder
                return None
            raise
        return self._adopt(info)

    def _adopt(self, info: models.CollectionInfo) -> _Collection:
        self._collection = _Collection.read(info, self)
        self._described_at = time.monotonic()
        self.encoder_config = self._collection.encoder_config or self._configured_encoder
        return self._collection

    def _read(self, call: Callable[[_Collection | None], _T]) -> _T:
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
                if _same_schema(again, collection):
                    raise
                return call(again)

    def _get_async_client(self) -> AsyncQdrantClient:
        self._check_process()
        if self._async_client is None:
            self._async_client = AsyncQdrantClient(**self._server_options())
            self._pid = os.getpid()
        return self._async_client

    def _create(self, dim: int | None, encoder: dict[str, Any] | None) -> _Collection:
        """
        Create the collection with its schema, or take the one another writer created meanwhile.

        The schema and the encoder record are fixed here, atomically: of several writers creating the collection
        at once, one succeeds and the others read (and check) its collection.
        """
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
        except Exception:  # another writer created it meanwhile: use (and check) that one
            if self._describe(0.0) is None:
                raise
        else:
            if dim is None:
                logger.warning(
                    "Qdrant collection %r was created without vectors (its first documents carry none and no "
                    "embedding_dim was given): it takes documents without vectors only. Pass embedding_dim to "
                    "create a collection that also takes vectors.",
                    self.index,
                )
        described = self._describe(0.0)
        if described is None:
            msg = f"Qdrant collection {self.index!r} was deleted by another client right after it was created."
            raise DocumentStoreError(msg)
        return described

    def _record_encoder(self, encoder: dict[str, Any]) -> _Collection:
        """
        Record ``encoder`` in a collection that has no record yet, then read it back.

        Qdrant has no compare-and-set on collection metadata: of two writers recording different encoders at the
        same moment, the one that reads back the other's record raises here, before writing any point.
        """
        self.client.update_collection(self.index, metadata={METADATA_KEY: {"format": 1, "encoder_config": encoder}})
        collection = self._describe(0.0)
        if collection is None:
            msg = f"Qdrant collection {self.index!r} was deleted by another client during this write."
            raise DocumentStoreError(msg)
        recorded = collection.encoder_config
        if recorded is None or not same_encoder(recorded, encoder):
            msg = (
                f"Qdrant collection {self.index!r}: another writer recorded encoder {recorded} while this store "
                f"recorded {encoder}; nothing of this batch was written. Use another index for another encoder."
            )
            raise CollectionMismatchError(msg)
        return collection

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
        return self._read(lambda c: 0 if c is None else self.client.count(self.index, exact=True).count)

    def filter_documents(self, filters: dict[str, Any] | None = None) -> list[Document]:
        """Documents matching Haystack ``filters`` (all when ``None``), in write order; views are not in ``meta``."""
        qfilter = convert_filters(filters)

        def scroll(collection: _Collection | None) -> list[models.Record]:
            if collection is None:
                return []
            vector = collection.first_view_vector
            return list(self._scroll(self._resolve(qfilter), with_vectors=[vector] if vector else False))

        records = self._read(scroll)
        records.sort(key=lambda r: r.payload.get(SEQ_KEY, 0))
        return [converters.to_document(r.payload, converters.first_view(r.vector)) for r in records]

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

            def page(collection: _Collection | None, start: Any = offset) -> tuple[list[models.Record], Any, Any]:
                if collection is None:
                    return [], None, None
                records, after = self.client.scroll(
                    self.index,
                    scroll_filter=self._resolve(plan),
                    limit=batch_size,
                    offset=start,
                    with_payload=True,
                    with_vectors=[VIEWS_VECTOR] if collection.dim is not None else False,
                )
                return records, after, collection.encoder_config or self._configured_encoder

            records, offset, encoder = self._read(page)
            records.sort(key=lambda r: r.payload.get(SEQ_KEY, 0))
            batch = [
                exported_document(converters.to_document(r.payload), converters.views_of(r.vector), encoder)
                for r in records
            ]
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
                chosen = self._apply_policy(prepared, policy, None)
                if not chosen:
                    return 0
                self._check_new_collection(prepared, dim, encoder)
                collection = self._create(
                    self.embedding_dim if self.embedding_dim is not None else dim, self._configured_encoder or encoder
                )
            self._check_collection(prepared, dim, encoder, collection)
            chosen = self._apply_policy(prepared, policy, collection)
            if not chosen:
                return 0
            unrecorded = self._configured_encoder or encoder
            if collection.encoder_config is None and unrecorded is not None:
                collection = self._record_encoder(unrecorded)
            for batch in _request_batches(chosen, self.write_batch_size):
                points = [converters.to_point(p, self._next_seq(), collection.has_global) for p in batch]
                self.client.upsert(self.index, points=points, wait=True)
            return len(chosen)

    def delete_documents(self, document_ids: list[str]) -> None:
        """Delete documents (and their views); unknown and repeated ids are ignored."""
        ids = document_id_list(document_ids)
        if not ids:
            return
        selector = models.PointIdsList(points=[converters.point_id(i) for i in ids])

        def delete(collection: _Collection | None) -> None:
            if collection is not None:
                self.client.delete(self.index, points_selector=selector, wait=True)

        self._read(delete)

    def delete_all_documents(self, recreate_index: bool = False) -> None:
        """
        Delete every document.

        :param recreate_index: Drop the collection itself (for every store and process using it), to start over,
            e.g. with another encoder or dimension. It is created again at once with this store's options when
            ``embedding_dim`` is set, else by the next write. Other stores on it see the new collection at their
            next call. Otherwise the points are deleted and the collection stays.
        """
        if not recreate_index:

            def delete(collection: _Collection | None) -> None:
                if collection is not None:
                    everything = models.FilterSelector(filter=models.Filter())
                    self.client.delete(self.index, points_selector=everything, wait=True)

            self._read(delete)
            return
        self._check_process()
        with self._lock:
            try:
                self.client.delete_collection(self.index)
            except Exception:  # a server answers 404 for a collection that is gone (another process dropped it)
                if self.client.collection_exists(self.index):
                    raise
            self._collection = None
            self.encoder_config = self._configured_encoder
            if self.embedding_dim is not None:
                self._create(self.embedding_dim, self._configured_encoder)

    def delete_by_filter(self, filters: dict[str, Any]) -> int:
        """Delete the documents matching ``filters``; returns how many."""
        plan = convert_filters(filters)

        def delete(collection: _Collection | None) -> int:
            if collection is None:
                return 0
            qfilter = self._resolve(plan) or models.Filter()
            count = self.client.count(self.index, count_filter=qfilter, exact=True).count
            if count:
                self.client.delete(self.index, points_selector=models.FilterSelector(filter=qfilter), wait=True)
            return count

        return self._read(delete)

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
        plan = convert_filters(filters)
        markers = dict.fromkeys(empty_list_markers(meta), True)

        def update(collection: _Collection | None) -> int:
            if collection is None:
                return 0
            qfilter: Any = self._resolve(plan) or models.Filter()
            if markers:  # a key set to []: mark it on exactly the points updated (ids: the meta update moves them)
                qfilter = models.PointIdsList(points=[r.id for r in self._scroll(qfilter, with_vectors=False)])
                count = len(qfilter.points)
            else:
                count = self.client.count(self.index, count_filter=qfilter, exact=True).count
            if count and meta:
                if markers:  # first: a marker without its [] (a crash between the two) is harmless, re-checked
                    self.client.set_payload(self.index, payload=markers, key=EMPTY_LIST_KEY, points=qfilter, wait=True)
                self.client.set_payload(self.index, payload=meta, key="meta", points=qfilter, wait=True)
            return count

        return self._read(update)

    def count_documents_by_filter(self, filters: dict[str, Any]) -> int:
        plan = convert_filters(filters)
        return self._read(
            lambda c: (
                0 if c is None else self.client.count(self.index, count_filter=self._resolve(plan), exact=True).count
            )
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

        def query(collection: _Collection | None) -> list[Any] | None:
            if collection is None or collection.dim is None or not len(queries):
                return None
            check_query_dimension(queries, collection.dim)
            resolved = self._resolve(qfilter)
            requests = [self._request(q, top_k, resolved) for q in queries]
            if single:
                return [self.client.query_points(self.index, **_as_kwargs(requests[0]))]
            return self.client.query_batch_points(self.index, requests=requests)

        responses = self._read(query)
        if responses is None:
            return [[] for _ in queries]
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

        async def query(collection: _Collection | None) -> list[Any] | None:
            if collection is None or collection.dim is None or not len(queries):
                return None
            check_query_dimension(queries, collection.dim)
            resolved = await asyncio.to_thread(self._locked_resolve, qfilter)
            requests = [self._request(q, top_k, resolved) for q in queries]
            return await self._get_async_client().query_batch_points(self.index, requests=requests)

        responses = await self._read_async(query)
        if responses is None:
            return [[] for _ in queries]
        return [_results(r.points, q, return_embedding) for r, q in zip(responses, queries, strict=True)]

    async def _read_async(self, call: Callable[[_Collection | None], Awaitable[_T]]) -> _T:
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
            if _same_schema(again, collection):
                raise
            return await call(again)

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
    ) -> tuple[np.ndarray, QdrantFilter | None]:
        check_top_k(top_k)
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

        def scroll(collection: _Collection | None) -> list[Document]:
            if collection is None:
                return []
            return [converters.to_document(r.payload) for r in self._scroll(self._resolve(qfilter), with_vectors=False)]

        return self._read(scroll)

    def _resolve(self, plan: QdrantFilter | None) -> models.Filter | None:
        """
        The Qdrant filter selecting exactly what the Haystack filter selects, now (call it under the lock).

        The documents ``plan.verify`` selects (usually none) are read and the Haystack filter is evaluated on each
        in Python: where it raises, this raises ``FilterError``; those it selects are added by id.
        """
        if plan is None:
            return None
        if plan.verify is None:
            return plan.lower
        match = compile_filter(plan.filters)
        selected = []
        for record in self._scroll(models.Filter(must=[plan.verify]), with_vectors=False):
            document = converters.to_document(record.payload)
            try:
                matched = match(document)
            except (FilterError, TypeError, ValueError) as e:
                msg = f"Filter {plan.filters} cannot be evaluated on document {document.id!r}: {e}"
                raise FilterError(msg) from e
            if matched:
                selected.append(record.id)
        if not selected:
            return plan.lower
        return models.Filter(should=[plan.lower, models.HasIdCondition(has_id=selected)])

    def _locked_resolve(self, plan: QdrantFilter | None) -> models.Filter | None:
        with self._lock:
            return self._resolve(plan)

    def _next_seq(self) -> int:
        self._last_seq = max(self._last_seq + 1, time.time_ns())
        return self._last_seq

    def _check_new_collection(
        self, prepared: list[PreparedDocument], dim: int | None, encoder: dict[str, Any] | None
    ) -> None:
        """The batch against the options of the collection it is about to create."""
        if dim is not None and self.embedding_dim is not None and dim != self.embedding_dim:
            first = next(p for p in prepared if p.views is not None)
            msg = (
                f"Document {first.document.id!r} has {dim}-dimensional vectors but this store was given "
                f"embedding_dim={self.embedding_dim}; nothing of this batch was written."
            )
            raise CollectionMismatchError(msg)
        configured = self._configured_encoder
        if encoder is not None and configured is not None and not same_encoder(encoder, configured):
            first = next(p for p in prepared if p.encoder is not None)
            msg = (
                f"Document {first.document.id!r} was encoded by {encoder} but this store was given encoder_config="
                f"{configured}; nothing of this batch was written. Use another index for another encoder."
            )
            raise CollectionMismatchError(msg)

    def _check_collection(
        self,
        prepared: list[PreparedDocument],
        dim: int | None,
        encoder: dict[str, Any] | None,
        collection: _Collection,
    ) -> None:
        """The batch against the collection as it is (``_Collection.read`` checked the store's own options)."""
        where = f"Qdrant collection {self.index!r}"
        if dim is not None and collection.dim is None:
            first = next(p for p in prepared if p.views is not None)
            msg = (
                f"Document {first.document.id!r} carries vectors but {where} was created without vectors (its "
                "first documents carried none and no embedding_dim was given), and Qdrant cannot add vectors to an "
                "existing collection; nothing of this batch was written. Write these documents to another index "
                "created with embedding_dim (and copy the documents without vectors over), or drop this one with "
                "delete_all_documents(recreate_index=True) on a store given embedding_dim."
            )
            raise CollectionMismatchError(msg)
        if dim is not None and dim != collection.dim:
            first = next(p for p in prepared if p.views is not None)
            msg = document_dimension_message(first.document.id, dim, where, collection.dim)
            raise CollectionMismatchError(msg)
        known = collection.encoder_config or self._configured_encoder
        if encoder is not None and known is not None and not same_encoder(encoder, known):
            first = next(p for p in prepared if p.encoder is not None)
            msg = (
                f"Document {first.document.id!r} was encoded by {encoder} but {where} holds views from {known}; "
                "nothing of this batch was written. Use another index for another encoder."
            )
            raise CollectionMismatchError(msg)

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
    """What the store needs to know about its collection, as read at one moment, checked against its options."""

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
                raise CollectionMismatchError(msg)
        has_global = GLOBAL_VECTOR in vectors
        if dim is not None and store.global_view and not has_global:
            msg = f"{where} was created without the global view; global_view=True needs a new index."
            raise DocumentStoreError(msg)
        record = (getattr(info.config, "metadata", None) or {}).get(METADATA_KEY)
        recorded = record.get("encoder_config") if isinstance(record, dict) else None
        configured = store._configured_encoder
        if recorded is not None and configured is not None and not same_encoder(recorded, configured):
            msg = (
                f"{where} holds views from encoder {recorded}, but this store was given encoder_config="
                f"{configured}. Use another index for another encoder."
            )
            raise CollectionMismatchError(msg)
        return cls(dim, has_global, recorded)

    def schema(self) -> tuple[Any, ...]:
        encoder = None if self.encoder_config is None else canonical_encoder(self.encoder_config)
        return (self.dim, self.has_global, encoder)


def _same_schema(a: _Collection | None, b: _Collection | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.schema() == b.schema()


def _request_batches(prepared: list[PreparedDocument], max_points: int) -> Iterator[list[PreparedDocument]]:
    """
    ``prepared`` in upsert requests of at most ``max_points`` points and ``MAX_REQUEST_FLOATS`` numbers.

    A document alone may hold up to ``MAX_MULTIVECTOR_FLOATS`` numbers, so a request of many documents with
    hundreds of views each would pass a server's request size limit: it is cut by numbers as well as points.
    """
    batch: list[PreparedDocument] = []
    floats = 0
    for p in prepared:
        size = 0 if p.views is None else int(p.views.size)
        if batch and (len(batch) >= max_points or floats + size > MAX_REQUEST_FLOATS):
            yield batch
            batch, floats = [], 0
        batch.append(p)
        floats += size
    if batch:
        yield batch


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


__all__ = ["CollectionMismatchError", "QdrantMultiViewDocumentStore"]
