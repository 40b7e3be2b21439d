"""A PostgreSQL + pgvector multi-view document store: a documents table, one row per view, ranked by the best view.

Several store objects and processes may share one table: every write runs in one transaction that locks the
table's record (``schema.py``) and checks the batch against it as it is now (dimension, encoder, token views), so
what one writer fixed the next one sees; every read reads the record in the same transaction as its rows. The
store never drops a table on its own (only ``recreate_table=True`` and ``delete_all_documents(recreate_index=True)``
do, when asked).

The store holds its options, its connections and what it last read of the record; the modules beside it take what
they need: ``options`` (the constructor's checks), ``connection`` (connections, lost ones, clear errors),
``schema`` (tables, record, DDL), ``rows`` (Document <-> rows), ``row_writes`` (policies, writes, deletes),
``filters`` (Haystack filters -> SQL), ``reads`` (filters resolved exactly, listings, export pages),
``view_search`` (candidates and exact re-scoring) and ``steps`` (one implementation of each read for the sync and
the async connection).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import psycopg
from haystack import Document, default_from_dict, default_to_dict
from haystack.document_stores.errors import DocumentStoreError
from haystack.document_stores.types import DuplicatePolicy
from haystack.utils import Secret, deserialize_secrets_inplace

from haystack_mvr.document_stores import metadata_queries
from haystack_mvr.document_stores.checks import check_batch_size, check_query_encoder, document_dimension_message
from haystack_mvr.document_stores.pgvector import options, reads, row_writes, schema
from haystack_mvr.document_stores.pgvector import rows as row_codec
from haystack_mvr.document_stores.pgvector.connection import Connection
from haystack_mvr.document_stores.pgvector.filters import convert_filters
from haystack_mvr.document_stores.pgvector.schema import TableMismatchError, Tables, TableState
from haystack_mvr.document_stores.pgvector.sql_fragments import compose
from haystack_mvr.document_stores.pgvector.steps import Steps, drive, run, run_async
from haystack_mvr.document_stores.pgvector.view_search import SearchOptions, search_inputs, search_steps
from haystack_mvr.document_stores.threaded_async import ThreadedAsyncMethods
from haystack_mvr.document_stores.types import StoreStats
from haystack_mvr.document_stores.writes import (
    PreparedBatch,
    document_id_list,
    document_list,
    json_meta,
    prepare_documents,
    same_encoder,
)
from haystack_mvr.views import VIEWS_KEY

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
#: The encoder ``mode`` of a late-interaction (ColBERT) model, whose views are token vectors.
LATE_INTERACTION_MODE = "late_interaction"


class PgvectorMultiViewDocumentStore(ThreadedAsyncMethods):
    """
    Stores documents in PostgreSQL, one row per view in a ``vector(d)`` column, searched by pgvector.

    A query ``q`` scores a document by its best view, ``max_i <q, v_i>``; a late-interaction query ``(m, d)`` by
    MaxSim. Haystack filters are compiled to SQL over the JSONB meta with exactly Haystack's semantics, so a
    filtered search still returns exactly ``min(top_k, matching documents with vectors)`` documents. Views arrive
    as described in ``haystack_mvr.views``; documents without vectors are stored and filterable but never returned
    by a search. Results carry the ``mvr_matched_*`` keys of every haystack-mvr store.

    :param connection_string: The database, as a ``Secret`` (serialized as the name of its environment variable,
        never in clear; a token secret refuses to serialize). Default: env var ``PG_CONN_STR``, e.g.
        ``postgresql://user:password@host:5432/db``.
    :param schema_name: The PostgreSQL schema of the tables (created if missing).
    :param table_name: The documents table; ``<table_name>_views`` and ``<table_name>_mvr`` are created beside it.
    :param embedding_dimension: The views' dimension: the tables are created with it at first use, and an existing
        table of another dimension is refused. ``None`` takes it from the first vectors written.
    :param vector_function: ``"inner_product"``, the only one: haystack-mvr scores by inner product.
    :param search_strategy: ``"exact"`` (SQL computes every matching document's score: equal to numpy brute force)
        or ``"hnsw"`` (an HNSW index on the views, iterative scan, exact re-scoring of the candidates).
    :param hnsw_ef_search: HNSW beam width at query time (pgvector's ``hnsw.ef_search``; ``None``: 100, above
        pgvector's own 40, see ``benchmarks/results/pgvector_store.squad-mv.md``): higher finds the true nearest
        views more often, and costs more per query.
    :param hnsw_index_creation_kwargs: ``{"m": ..., "ef_construction": ...}`` of the index this store creates
        (pgvector's defaults 16 and 64); an existing index is kept as it is.
    :param recreate_table: Drop the tables at first use (once per store object) and start over.
    :param create_extension: Run ``CREATE EXTENSION IF NOT EXISTS vector`` when the extension is missing (needs the
        right to create it; otherwise the error says whom to ask).
    :param encoder_config: The encoder config the views must come from (``meta["mvr_encoder"]`` of written
        documents), recorded with the table; documents from another encoder, or a table recorded with another one,
        are refused.
    """

    def __init__(
        self,
        *,
        connection_string: Secret = Secret.from_env_var("PG_CONN_STR"),  # noqa: B008
        schema_name: str = "public",
        table_name: str = "haystack_mvr_documents",
        embedding_dimension: int | None = None,
        vector_function: str = "inner_product",
        search_strategy: str = "exact",
        hnsw_ef_search: int | None = None,
        hnsw_index_creation_kwargs: dict[str, int] | None = None,
        recreate_table: bool = False,
        create_extension: bool = True,
        encoder_config: dict[str, Any] | None = None,
    ) -> None:
        options.check_options(
            connection_string=connection_string,
            schema_name=schema_name,
            table_name=table_name,
            embedding_dimension=embedding_dimension,
            vector_function=vector_function,
            search_strategy=search_strategy,
            hnsw_ef_search=hnsw_ef_search,
            hnsw_index_creation_kwargs=hnsw_index_creation_kwargs,
            recreate_table=recreate_table,
            create_extension=create_extension,
            encoder_config=encoder_config,
        )
        self.connection_string = connection_string
        self.schema_name = schema_name
        self.table_name = table_name
        self.embedding_dimension = embedding_dimension
        self.vector_function = vector_function
        self.search_strategy = search_strategy
        self.hnsw_ef_search = hnsw_ef_search
        self.hnsw_index_creation_kwargs = hnsw_index_creation_kwargs
        self.recreate_table = recreate_table
        self.create_extension = create_extension
        self._configured_encoder = encoder_config
        #: The encoder the stored views come from: the table's record as last read, else ``encoder_config``.
        self.encoder_config = encoder_config
        self._tables = Tables(schema_name, table_name)
        self._search = SearchOptions(search_strategy, hnsw_ef_search)
        # Nothing is connected before the first call.
        self._connection = Connection(connection_string, create_extension)
        self._lock = self._connection.lock
        self._opened = False
        self._recreated = False
        self._index_ready = False

    # ------------------------------------------------------------------------------------ serialization
    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            connection_string=self.connection_string.to_dict(),
            schema_name=self.schema_name,
            table_name=self.table_name,
            embedding_dimension=self.embedding_dimension,
            vector_function=self.vector_function,
            search_strategy=self.search_strategy,
            hnsw_ef_search=self.hnsw_ef_search,
            hnsw_index_creation_kwargs=self.hnsw_index_creation_kwargs,
            recreate_table=self.recreate_table,
            create_extension=self.create_extension,
            encoder_config=self._configured_encoder,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PgvectorMultiViewDocumentStore:
        data = {**data, "init_parameters": dict(data.get("init_parameters", {}))}  # the caller's dict is unchanged
        deserialize_secrets_inplace(data["init_parameters"], keys=["connection_string"])
        return default_from_dict(cls, data)

    # ---------------------------------------------------------------------------------------- connection
    def _open(self) -> psycopg.Connection:
        """The connection (call under the lock); at the store's first use, the tables prepared as asked."""
        conn = self._connection.get()
        if self._opened:
            return conn
        if self.recreate_table and not self._recreated:
            with conn.transaction():
                schema.lock_ddl(conn, self._tables)
                schema.drop_tables(conn, self._tables)
            self._recreated = True
        state = self._adopt(schema.read_state(conn, self._tables))
        if state is None and self.embedding_dimension is not None:
            state = self._create_tables(conn)
        self._opened = True
        if state is not None:
            self._ensure_index(conn, state)
        return conn

    def _create_tables(self, conn: psycopg.Connection) -> TableState | None:
        """Create the tables (with this store's dimension and encoder, if given), or take those created meanwhile."""
        with conn.transaction():
            schema.lock_ddl(conn, self._tables)
            if schema.read_state(conn, self._tables) is None:
                state = TableState(self.embedding_dimension, self._configured_encoder, None)
                schema.create_tables(conn, self._tables, state)
                if state.dim is not None and self.search_strategy == "hnsw":
                    schema.create_hnsw_index(conn, self._tables, self.hnsw_index_creation_kwargs or {})
        return self._adopt(schema.read_state(conn, self._tables))

    def _ensure_index(self, conn: psycopg.Connection, state: TableState | None) -> None:
        """An HNSW store's index on the views, once they exist (another store may create the views table later)."""
        if self.search_strategy != "hnsw" or self._index_ready or state is None or state.dim is None:
            return
        if not schema.has_hnsw_index(conn, self._tables):
            with conn.transaction():
                schema.lock_ddl(conn, self._tables)
                schema.create_hnsw_index(conn, self._tables, self.hnsw_index_creation_kwargs or {})
        self._index_ready = True

    def _adopt(self, state: TableState | None) -> TableState | None:
        """Check the record as read against the store's options, and take its encoder."""
        if state is None:
            self.encoder_config = self._configured_encoder
            return None
        schema.check_state(state, self._tables, self.embedding_dimension, self._configured_encoder)
        self.encoder_config = state.encoder_config or self._configured_encoder
        return state

    def _with_state(self, make: Callable[[TableState | None], Steps[_T]]) -> Steps[_T]:
        state = self._adopt((yield from schema.state_steps(self._tables)))
        return (yield from make(state))

    def _read(self, what: str, make: Callable[[TableState | None], Steps[_T]]) -> _T:
        """``make(record)``'s steps in one read-only transaction that reads the record first."""
        with self._lock, self._connection.lost_as_error(what):
            conn = self._open()
            if self.search_strategy == "hnsw" and not self._index_ready:
                self._ensure_index(conn, schema.read_state(conn, self._tables))
            return run(self._with_state(make), conn)

    async def _read_async(self, what: str, make: Callable[[TableState | None], Steps[_T]]) -> _T:
        """:meth:`_read` on the ``AsyncConnection``."""
        if not self._opened or (self.search_strategy == "hnsw" and not self._index_ready):
            await _to_thread(self._locked_open)
        async with self._connection.async_lock():
            with self._connection.lost_as_error(what):
                return await run_async(self._with_state(make), await self._connection.get_async())

    def _locked_open(self) -> None:
        with self._lock, self._connection.lost_as_error("connecting"):
            conn = self._open()
            if self.search_strategy == "hnsw" and not self._index_ready:
                self._ensure_index(conn, schema.read_state(conn, self._tables))

    def warm_up(self) -> None:
        """Connect now and read the table's record (its dimension and encoder), instead of at the first call."""
        self._read("warm_up", _nothing)

    def close(self) -> None:
        """Close the connections; the next call connects again."""
        with self._lock:
            self._connection.close()
            self._opened = False

    async def close_async(self) -> None:
        """Close the connections (the asynchronous one from its event loop)."""
        await self._connection.close_async()
        self._opened = False

    def check_query_encoder(self, encoder: dict[str, Any] | None) -> None:
        """Refuse a query ``encoder`` that differs from the table's encoder record (read from the table first), as
        :func:`~haystack_mvr.document_stores.checks.check_query_encoder` says."""
        if encoder:
            self._read("reading the table record", _nothing)
            check_query_encoder(self.encoder_config, encoder)

    def stats(self) -> StoreStats:
        """What the table holds now: documents, views, their dimension and the index searched."""

        def steps(state: TableState | None) -> Steps[StoreStats]:
            if state is None:
                return StoreStats(0, 0, None, None, True, None, 0)
            documents = yield compose("SELECT count(*) FROM {}", self._tables.documents)
            views = [(0,)]
            if state.dim is not None:
                views = yield compose("SELECT count(*) FROM {}", self._tables.views)
            index = "pgvector-hnsw" if self.search_strategy == "hnsw" else "exact"
            return StoreStats(int(documents[0][0]), int(views[0][0]), state.dim, index, True, None, 0)

        return self._read("stats", steps)

    # ------------------------------------------------------------------------------------------ protocol
    def count_documents(self) -> int:
        return self._read("count_documents", lambda state: reads.count(self._tables, state, None))

    def filter_documents(self, filters: dict[str, Any] | None = None) -> list[Document]:
        """Documents matching Haystack ``filters`` (all when ``None``), in write order; views are not in ``meta``."""
        plan = convert_filters(filters)
        return self._read("filter_documents", lambda state: reads.listed_documents(self._tables, state, plan))

    def export_documents(
        self, batch_size: int = 256, filters: dict[str, Any] | None = None
    ) -> Iterator[list[Document]]:
        """
        The documents matching ``filters`` with all their views, ``batch_size`` at a time in write order, ready for
        any multi-view store (see :func:`haystack_mvr.document_stores.copy_documents`). Each page is one read: a
        document written or deleted during the export may or may not be included.
        """
        check_batch_size(batch_size)
        plan = convert_filters(filters)
        after = 0
        while True:

            def page(state: TableState | None, start: int = after) -> Steps[tuple[list[Document], int | None]]:
                where = yield from reads.resolve(self._tables, plan)
                encoder = self.encoder_config
                return (yield from reads.export_page(self._tables, state, where, start, batch_size, encoder))

            batch, last = self._read("export_documents", page)
            if batch:
                yield batch
            if last is None:
                return
            after = last

    def write_documents(self, documents: Iterable[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE) -> int:
        """
        Write documents and their views in one transaction. ``DuplicatePolicy.NONE`` means ``FAIL``.

        The whole batch is checked first (types, views, dimension, encoder, token views, duplicates under ``FAIL``)
        against the table's record as it is now: on any error nothing of it is written and nothing stored changes.
        The first write creates the tables; ``meta["mvr_encoder"]`` is taken off and recorded as the table's
        encoder config.

        :returns: The number of documents written.
        :raises TableMismatchError: vectors of another dimension than the table's, another encoder than the
            table's, or single-vector documents mixed with a late-interaction model's token views.
        """
        policy = DuplicatePolicy.FAIL if policy == DuplicatePolicy.NONE else policy
        given = document_list(documents)
        batch = prepare_documents(given)
        for p in batch.documents:
            row_codec.check_jsonb(p)
        plain = [d.id for d in given if VIEWS_KEY not in d.meta and d.embedding is not None]
        chosen = row_writes.apply_policy(batch.documents, policy)
        if not chosen:
            return 0
        with self._lock, self._connection.lost_as_error("a write"):
            conn = self._open()
            before = schema.read_state(conn, self._tables)
            if before is None:
                before = self._create_tables(conn)
            lock = "SHARE" if before is not None and self._merged(before, batch, plain) == before else "UPDATE"
            for mode in (lock, "UPDATE"):
                with conn.transaction():
                    state = schema.read_state(conn, self._tables, lock=mode)
                    if state is None:
                        msg = f"{self._tables.name} was dropped by another client during this write; nothing written."
                        raise DocumentStoreError(msg)
                    after = self._merged(self._adopt(state), batch, plain)
                    if after != state and mode == "SHARE":
                        continue  # another writer changed the record meanwhile: lock it exclusively and check again
                    if after != state:
                        self._change_record(conn, state, after)
                    written = row_writes.write_rows(conn, self._tables, chosen, policy, after.dim is not None)
                self._adopt(after)
                return written
        raise AssertionError  # pragma: no cover - the exclusive attempt always returns

    def _change_record(self, conn: psycopg.Connection, state: TableState, after: TableState) -> None:
        if state.dim is None and after.dim is not None:
            schema.create_views_table(conn, self._tables, after.dim)
            if self.search_strategy == "hnsw":
                schema.create_hnsw_index(conn, self._tables, self.hnsw_index_creation_kwargs or {})
        schema.write_record(conn, self._tables, after)

    def _merged(self, state: TableState | None, batch: PreparedBatch, plain: list[str]) -> TableState:
        """The record once ``batch`` is written, or a :class:`TableMismatchError` saying why it cannot be."""
        where = self._tables.name
        state = state or TableState(None, None, None)
        dim = state.dim
        if batch.dim is not None and dim is not None and batch.dim != dim:
            first = next(p for p in batch.documents if p.views is not None)
            raise TableMismatchError(document_dimension_message(first.document.id, batch.dim, where, dim))
        known = state.encoder_config or self._configured_encoder
        if batch.encoder is not None and known is not None and not same_encoder(batch.encoder, known):
            first = next(p for p in batch.documents if p.encoder is not None)
            msg = (
                f"Document {first.document.id!r} was encoded by {batch.encoder} but {where} holds views from {known}; "
                "nothing of this batch was written. Use another table for another encoder."
            )
            raise TableMismatchError(msg)
        encoder = known or batch.encoder
        token = state.token_views
        if batch.dim is not None:
            late = bool(encoder) and encoder.get("mode") == LATE_INTERACTION_MODE
            if token is None:
                token = late
            if token and plain:
                msg = (
                    f"Document {plain[0]!r} carries one plain embedding, but {where} holds a late-interaction model's "
                    "token views: write single-vector documents to another table. Nothing of this batch was written."
                )
                raise TableMismatchError(msg)
            if not token and late:
                msg = (
                    f"{where} holds single-vector or multi-view documents, and this batch a late-interaction model's "
                    "token views: write them to another table. Nothing of this batch was written."
                )
                raise TableMismatchError(msg)
        return TableState(dim if dim is not None else batch.dim, encoder, token)

    def delete_documents(self, document_ids: list[str]) -> None:
        """Delete documents (and their views); unknown and repeated ids are ignored."""
        ids = document_id_list(document_ids)
        if ids:
            self._write("delete_documents", lambda conn: row_writes.delete_ids(conn, self._tables, ids))

    def delete_all_documents(self, recreate_index: bool = False) -> None:
        """
        Delete every document.

        :param recreate_index: Drop the tables themselves (for every store and process using them), to start over,
            e.g. with another encoder or dimension; they are created again by the next write (at once when
            ``embedding_dimension`` is set). Otherwise the rows are deleted and the record (dimension, encoder) stays.
        """
        with self._lock, self._connection.lost_as_error("delete_all_documents"):
            conn = self._open()
            with conn.transaction():
                schema.lock_ddl(conn, self._tables)
                if recreate_index:
                    schema.drop_tables(conn, self._tables)
                else:
                    state = schema.read_state(conn, self._tables)
                    if state is not None:
                        names = [self._tables.documents] + ([self._tables.views] if state.dim is not None else [])
                        conn.execute(schema.truncate(names))
            if recreate_index:
                self._opened = False
                self._index_ready = False
                self._recreated = True
                self._adopt(None)
                self._open()

    def delete_by_filter(self, filters: dict[str, Any]) -> int:
        """Delete the documents matching ``filters``; returns how many."""
        plan = convert_filters(filters)
        return self._write(
            "delete_by_filter",
            lambda conn: row_writes.delete_matching(conn, self._tables, drive(reads.resolve(self._tables, plan), conn)),
        )

    def update_by_filter(self, filters: dict[str, Any], meta: dict[str, Any]) -> int:
        """Merge ``meta`` into the meta of every matching document (views unchanged); returns how many."""
        row_writes.check_meta_update(meta)
        values = json_meta(meta, "update_by_filter")
        plan = convert_filters(filters)
        return self._write(
            "update_by_filter",
            lambda conn: row_writes.update_matching(
                conn, self._tables, drive(reads.resolve(self._tables, plan), conn), values
            ),
        )

    def _write(self, what: str, call: Callable[[psycopg.Connection], Any]) -> Any:
        """``call(conn)`` in one transaction, sharing the record's lock (nothing when the tables do not exist)."""
        with self._lock, self._connection.lost_as_error(what):
            conn = self._open()
            with conn.transaction():
                if self._adopt(schema.read_state(conn, self._tables, lock="SHARE")) is None:
                    return 0
                return call(conn)

    def count_documents_by_filter(self, filters: dict[str, Any]) -> int:
        plan = convert_filters(filters)
        return self._read("count_documents_by_filter", lambda state: reads.count(self._tables, state, plan))

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

    def _payload_documents(self, filters: dict[str, Any] | None) -> list[Document]:
        plan = convert_filters(filters)
        return self._read("reading metadata", lambda state: reads.payload_documents(self._tables, state, plan))

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

        Exactly ``min(top_k, matching documents with vectors)`` documents come back, each scored exactly over its
        views (see ``view_search``). A multi-vector query ``(m, d)`` (a late-interaction model's) ranks by MaxSim.

        :param query_embedding: The query vector ``(d,)``, or a multi-vector query ``(m, d)``.
        :param top_k: How many documents.
        :param filters: Haystack metadata filters, applied in the database.
        :param return_embedding: Also return each document's views (``meta["mvr_views"]``) and ``embedding``.
        :returns: Documents best first, with ``score`` (max over views, or MaxSim) and the matched-view keys.
        """
        queries, plan = search_inputs(query_embedding, top_k, filters, single=True)
        return self._read("search", self._searcher(queries, top_k, plan, return_embedding))[0]

    def search_batch(
        self,
        query_embeddings: Sequence[Sequence[float]],
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[list[Document]]:
        """:meth:`search` for ``(n, d)`` query embeddings sharing ``filters``, in one transaction."""
        queries, plan = search_inputs(query_embeddings, top_k, filters, single=False)
        if not queries:
            return []
        return self._read("search_batch", self._searcher(queries, top_k, plan, return_embedding))

    async def search_async(
        self,
        query_embedding: Sequence[float],
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]:
        """Asynchronous :meth:`search`, on psycopg's ``AsyncConnection``."""
        queries, plan = search_inputs(query_embedding, top_k, filters, single=True)
        return (await self._read_async("search", self._searcher(queries, top_k, plan, return_embedding)))[0]

    async def search_batch_async(
        self,
        query_embeddings: Sequence[Sequence[float]],
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[list[Document]]:
        """Asynchronous :meth:`search_batch`, on psycopg's ``AsyncConnection``."""
        queries, plan = search_inputs(query_embeddings, top_k, filters, single=False)
        if not queries:
            return []
        return await self._read_async("search_batch", self._searcher(queries, top_k, plan, return_embedding))

    def _searcher(self, queries: Any, top_k: int, plan: Any, return_embedding: bool) -> Callable[..., Any]:
        return lambda state: search_steps(self._tables, state, queries, top_k, plan, self._search, return_embedding)

    async def count_documents_async(self) -> int:
        return await self._read_async("count_documents", lambda state: reads.count(self._tables, state, None))

    async def filter_documents_async(self, filters: dict[str, Any] | None = None) -> list[Document]:
        plan = convert_filters(filters)
        return await self._read_async(
            "filter_documents", lambda state: reads.listed_documents(self._tables, state, plan)
        )

    async def delete_all_documents_async(self, recreate_index: bool = False) -> None:
        await _to_thread(self.delete_all_documents, recreate_index)


def _nothing(state: TableState | None) -> Steps[None]:
    return None
    yield  # a generator that runs no step


async def _to_thread(call: Callable[..., _T], *args: Any) -> _T:
    return await asyncio.to_thread(call, *args)


__all__ = ["PgvectorMultiViewDocumentStore"]
