"""The pgvector store's own behaviour: options, serialization, stats, HNSW, and every bad input's one-line error.

Each refusal names the fix and loses nothing stored: a wrong dimension, a table of another schema or encoder, the
``vector`` extension missing without the right to create it, a refused connection (host and port named, never the
password), single-vector documents mixed with a late-interaction model's token views, a connection lost mid-query.
"""

from __future__ import annotations

import pytest

from .conftest import require_server

require_server()

import asyncio  # noqa: E402
import dataclasses  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import psycopg  # noqa: E402
from haystack import Document  # noqa: E402
from haystack.document_stores.errors import DocumentStoreError  # noqa: E402
from haystack.utils import Secret  # noqa: E402
from psycopg import sql  # noqa: E402
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402

from haystack_mvr.document_stores import StoreStats  # noqa: E402
from haystack_mvr.document_stores.pgvector import (  # noqa: E402
    ConnectionLostError,
    PgvectorMultiViewDocumentStore,
    TableMismatchError,
)
from haystack_mvr.views import ENCODER_KEY, attach_views  # noqa: E402


def _doc(doc_id: str, views, **meta) -> Document:
    return attach_views(Document(id=doc_id, content=f"content of {doc_id}", meta=meta), np.asarray(views, np.float32))


def test_to_dict_is_the_constructor_parameters_and_from_dict_rebuilds():
    store = PgvectorMultiViewDocumentStore(
        table_name="docs", search_strategy="hnsw", hnsw_ef_search=80, hnsw_index_creation_kwargs={"m": 8}
    )
    data = store.to_dict()
    assert data == {
        "type": "haystack_mvr.document_stores.pgvector.document_store.PgvectorMultiViewDocumentStore",
        "init_parameters": {
            "connection_string": {"type": "env_var", "env_vars": ["PG_CONN_STR"], "strict": True},
            "schema_name": "public",
            "table_name": "docs",
            "embedding_dimension": None,
            "vector_function": "inner_product",
            "search_strategy": "hnsw",
            "hnsw_ef_search": 80,
            "hnsw_index_creation_kwargs": {"m": 8},
            "recreate_table": False,
            "create_extension": True,
            "encoder_config": None,
        },
    }
    again = PgvectorMultiViewDocumentStore.from_dict(data)
    assert again.to_dict() == data and data["init_parameters"]["connection_string"]["type"] == "env_var"
    with pytest.raises(ValueError, match="token"):
        PgvectorMultiViewDocumentStore(connection_string=Secret.from_token("postgresql://x")).to_dict()


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"search_strategy": "ivf"}, "search_strategy"),
        ({"vector_function": "cosine_similarity"}, "inner_product"),
        ({"hnsw_ef_search": 10}, "hnsw_ef_search applies"),
        ({"search_strategy": "hnsw", "hnsw_index_creation_kwargs": {"lists": 3}}, "takes only"),
        ({"search_strategy": "hnsw", "hnsw_index_creation_kwargs": {"m": "16; DROP"}}, "integer"),
        ({"embedding_dimension": 0}, "embedding_dimension"),
        ({"table_name": "x" * 60}, "at most"),
        ({"table_name": ""}, "table_name"),
        ({"connection_string": "postgresql://u:p@h/db"}, "Secret"),
        ({"recreate_table": "yes"}, "recreate_table"),
    ],
)
def test_bad_options_are_refused_before_connecting(options, match):
    with pytest.raises(ValueError, match=match):
        PgvectorMultiViewDocumentStore(**options)


def test_connection_refused_names_host_and_port_never_the_password():
    store = PgvectorMultiViewDocumentStore(
        connection_string=Secret.from_token("postgresql://mvr:s3cret-pw@127.0.0.1:1/mvr_db")
    )
    with pytest.raises(DocumentStoreError) as error:
        store.count_documents()
    message = str(error.value)
    assert "127.0.0.1:1" in message and "mvr_db" in message and "s3cret-pw" not in message
    assert "\n" not in message


def test_missing_connection_string_says_how_to_set_it(monkeypatch):
    monkeypatch.delenv("PG_CONN_STR", raising=False)
    with pytest.raises(ValueError, match="PG_CONN_STR"):
        PgvectorMultiViewDocumentStore().count_documents()


def test_stats_and_the_record_read_back(make_store):
    store = make_store(encoder_config={"model": "enc-a"})
    assert store.stats() == StoreStats(0, 0, None, None, True, None, 0)
    store.write_documents([_doc("a", [[1, 0], [0, 1]]), _doc("b", [[1, 1]]), Document(id="c", content="none")])
    assert store.stats() == StoreStats(3, 3, 2, "exact", True, None, 0)
    other = make_store(table_name=store.table_name)
    assert other.count_documents() == 3 and other.encoder_config == {"model": "enc-a"}


def test_wrong_dimension_is_refused_and_loses_nothing(make_store):
    store = make_store()
    store.write_documents([_doc("a", [[1, 0]])])
    with pytest.raises(TableMismatchError, match=r"3-dimensional.*2-dimensional"):
        store.write_documents([_doc("b", [[1, 0, 0]])])
    with pytest.raises(TableMismatchError, match="embedding_dimension=2"):
        make_store(table_name=store.table_name, embedding_dimension=5).count_documents()
    with pytest.raises(ValueError, match="dimension"):
        store.search([1.0, 0.0, 0.0])
    assert [d.id for d in store.search([1.0, 0.0])] == ["a"]


def test_embedding_dimension_creates_the_tables_and_checks_writes(make_store):
    store = make_store(embedding_dimension=3, search_strategy="hnsw")
    store.warm_up()
    assert store.stats().dimension == 3
    with pytest.raises(TableMismatchError, match="dimension"):
        store.write_documents([_doc("a", [[1, 0]])])
    assert store.count_documents() == 0


def test_a_table_of_another_schema_is_refused(make_store, pg_uri):
    store = make_store()
    with psycopg.connect(pg_uri, autocommit=True) as conn:  # pgvector-haystack's layout under the same name
        conn.execute(
            sql.SQL("CREATE TABLE {} (id VARCHAR(128) PRIMARY KEY, embedding VECTOR(3), content TEXT)").format(
                sql.Identifier(store.table_name)
            )
        )
        conn.execute(
            sql.SQL("INSERT INTO {} (id, content) VALUES ('x', 'theirs')").format(sql.Identifier(store.table_name))
        )
    with pytest.raises(TableMismatchError, match="not a haystack-mvr multi-view table") as error:
        store.write_documents([_doc("a", [[1, 0, 0]])])
    assert "table_name" in str(error.value)
    with psycopg.connect(pg_uri, autocommit=True) as conn:  # nothing of theirs was touched
        assert conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(store.table_name))).fetchone() == (
            1,
        )
    fresh = make_store(table_name=store.table_name, recreate_table=True)
    assert fresh.write_documents([_doc("a", [[1, 0, 0]])]) == 1


def test_a_record_of_another_format_is_refused(make_store, pg_uri):
    store = make_store()
    store.write_documents([_doc("a", [[1, 0]])])
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(
            sql.SQL("UPDATE {} SET record = jsonb_set(record, '{{format}}', '\"other/9\"')").format(
                sql.Identifier(store.table_name + "_mvr")
            )
        )
    with pytest.raises(TableMismatchError, match="another schema"):
        make_store(table_name=store.table_name).search([1.0, 0.0])


def test_another_encoder_is_refused_for_writes_queries_and_stores(make_store):
    store = make_store()
    doc = _doc("a", [[1, 0]])
    store.write_documents([dataclasses.replace(doc, meta={**doc.meta, ENCODER_KEY: {"model": "enc-a", "mode": "x"}})])
    with pytest.raises(TableMismatchError, match="encoder"):
        make_store(table_name=store.table_name, encoder_config={"model": "enc-b"}).count_documents()
    reader = make_store(table_name=store.table_name)
    reader.check_query_encoder({"model": "enc-a", "mode": "x"})
    with pytest.raises(ValueError, match="encoder"):
        reader.check_query_encoder({"model": "enc-a", "mode": "y"})
    asyncio.run(reader.check_query_encoder_async({"model": "enc-a", "mode": "x"}))
    assert reader.count_documents() == 1


def test_single_vector_and_token_level_documents_do_not_mix(make_store):
    late = {"model": "colbert", "mode": "late_interaction"}
    tokens = _doc("tok", [[1, 0], [0, 1], [1, 1]])
    tokens = dataclasses.replace(tokens, meta={**tokens.meta, ENCODER_KEY: late})
    store = make_store()
    store.write_documents([tokens])
    with pytest.raises(TableMismatchError, match="token views"):
        store.write_documents([Document(id="plain", content="x", embedding=[1.0, 0.0])])
    assert store.search([[1.0, 0.0], [0.0, 1.0]])[0].id == "tok"
    single = make_store()
    single.write_documents([Document(id="plain", content="x", embedding=[1.0, 0.0])])
    with pytest.raises(TableMismatchError, match="late-interaction"):
        single.write_documents([tokens])
    assert single.count_documents() == 1 and store.count_documents() == 1


def test_missing_extension_without_rights_names_the_fix(pg_uri):
    parts = conninfo_to_dict(pg_uri)
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS mvr_noext")
        conn.execute("CREATE DATABASE mvr_noext")
        conn.execute("DROP ROLE IF EXISTS mvr_plain")
        conn.execute("CREATE ROLE mvr_plain LOGIN")
    uri = make_conninfo(**{**parts, "dbname": "mvr_noext", "user": "mvr_plain"})
    try:
        store = PgvectorMultiViewDocumentStore(connection_string=Secret.from_token(uri))
        with pytest.raises(DocumentStoreError, match="CREATE EXTENSION vector") as error:
            store.write_documents([_doc("a", [[1, 0]])])
        assert "\n" not in str(error.value)
        without = PgvectorMultiViewDocumentStore(connection_string=Secret.from_token(uri), create_extension=False)
        with pytest.raises(DocumentStoreError, match="create_extension=True"):
            without.count_documents()
    finally:
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS mvr_noext")
            conn.execute("DROP ROLE IF EXISTS mvr_plain")


def _terminate(pg_uri: str, pid: int) -> None:
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_connection_lost_mid_query_is_a_clear_error_and_the_next_call_reconnects(make_store, pg_uri):
    store = make_store()
    store.write_documents([_doc(f"d{i}", [[1, i]]) for i in range(5)])
    pid = store._connection.conn.info.backend_pid
    with psycopg.connect(pg_uri) as admin:  # holds the table: the store's query waits on it, mid-query
        admin.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(store.table_name)))
        outcome: dict[str, BaseException] = {}

        def search() -> None:
            try:
                store.search([1.0, 0.0], top_k=3)
            except BaseException as e:
                outcome["error"] = e

        thread = threading.Thread(target=search)
        thread.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            waiting = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'", [pid]
            ).fetchone()[0]
            if waiting:
                break
            time.sleep(0.02)
        _terminate(pg_uri, pid)
        thread.join(10)
    error = outcome.get("error")
    assert isinstance(error, ConnectionLostError) and "next call connects again" in str(error), error
    assert "\n" not in str(error)
    assert [d.id for d in store.search([1.0, 0.0], top_k=2)] == ["d0", "d1"]  # reconnected
    _terminate(pg_uri, store._connection.conn.info.backend_pid)  # lost between calls: the write is refused whole
    with pytest.raises(ConnectionLostError, match="rolled back"):
        store.write_documents([_doc("new", [[1, 0]])])
    assert store.count_documents() == 5


def test_async_search_and_close(make_store):
    store = make_store()
    store.write_documents([_doc(f"d{i}", [[1, i / 10]], g=i % 2) for i in range(6)])

    async def run() -> tuple[list[Document], list[list[Document]]]:
        one = await store.search_async([1.0, 1.0], top_k=3, filters={"field": "meta.g", "operator": "==", "value": 1})
        many = await store.search_batch_async([[1.0, 0.0], [0.0, 1.0]], top_k=2)
        counted = await store.count_documents_async()
        assert counted == 6
        await store.close_async()
        return one, many

    one, many = asyncio.run(run())
    assert [d.id for d in one] == ["d5", "d3", "d1"] and [len(m) for m in many] == [2, 2]
    assert asyncio.run(store.search_async([1.0, 1.0], top_k=1))[0].id == "d5"  # another loop: a new connection
    assert store.count_documents() == 6


def test_recreate_index_drops_the_tables_and_starts_over(make_store):
    store = make_store()
    store.write_documents([_doc("a", [[1, 0]])])
    store.delete_all_documents(recreate_index=True)
    assert store.count_documents() == 0 and store.stats().dimension is None
    store.write_documents([_doc("b", [[1, 0, 0]])])
    assert store.stats().dimension == 3


def test_hnsw_keeps_the_exact_top_10_and_returns_every_match_of_a_selective_filter(make_store):
    rng = np.random.default_rng(0)
    docs = [
        attach_views(Document(id=f"d{i}", content="x", meta={"g": i % 50}), rng.normal(size=(3, 16)).astype(np.float32))
        for i in range(1500)
    ]
    exact = make_store()
    exact.write_documents(docs)
    hnsw = make_store(table_name=exact.table_name + "_h", search_strategy="hnsw")
    hnsw.write_documents(docs)
    queries = rng.normal(size=(20, 16)).astype(np.float32)
    kept = []
    for want, got in zip(exact.search_batch(queries, top_k=10), hnsw.search_batch(queries, top_k=10), strict=True):
        assert len(got) == 10
        kept.append(len({d.id for d in want} & {d.id for d in got}) / 10)
    assert np.mean(kept) >= 0.95, kept
    selective = {"field": "meta.g", "operator": "==", "value": 7}
    hits = hnsw.search(queries[0], top_k=50, filters=selective)
    assert sorted(d.id for d in hits) == sorted(d.id for d in exact.search(queries[0], top_k=50, filters=selective))
    assert len(hits) == 30
    late = hnsw.search(queries[:4], top_k=10)  # MaxSim: candidates from each query vector's nearest views
    truth = exact.search(queries[:4], top_k=10)
    assert len({d.id for d in late} & {d.id for d in truth}) >= 9


def _has_index(pg_uri: str, table: str) -> bool:
    with psycopg.connect(pg_uri) as conn:
        return (
            conn.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", [table + "_views_hnsw"]).fetchone()
            is not None
        )


def test_an_hnsw_store_indexes_views_another_store_wrote(make_store, pg_uri):
    hnsw = make_store(search_strategy="hnsw", hnsw_index_creation_kwargs={"m": 8, "ef_construction": 32})
    assert hnsw.search([1.0, 0.0]) == []  # no views table yet: nothing to index
    exact = make_store(table_name=hnsw.table_name)
    exact.write_documents([_doc(f"d{i}", [[1, i]]) for i in range(3)])
    assert not _has_index(pg_uri, hnsw.table_name)
    assert [d.id for d in asyncio.run(hnsw.search_async([1.0, 0.0], top_k=2))] == ["d0", "d1"]
    assert _has_index(pg_uri, hnsw.table_name)


def test_readers_never_see_half_an_overwrite(make_store):
    """A writer overwrites documents with another number of views while a second store searches: every result's
    views are one write's (their count is the one its meta records)."""
    writer = make_store()
    reader = make_store(table_name=writer.table_name)
    rng = np.random.default_rng(3)

    def batch(round_: int) -> list[Document]:
        return [_doc(f"d{i}", rng.normal(size=(1 + (round_ + i) % 4, 8)), k=1 + (round_ + i) % 4) for i in range(20)]

    writer.write_documents(batch(0))
    stop = threading.Event()

    def overwrite() -> None:
        from haystack.document_stores.types import DuplicatePolicy

        round_ = 1
        while not stop.is_set():
            writer.write_documents(batch(round_), policy=DuplicatePolicy.OVERWRITE)
            round_ += 1

    thread = threading.Thread(target=overwrite)
    thread.start()
    try:
        for _ in range(40):
            for hit in reader.search(rng.normal(size=8), top_k=20, return_embedding=True):
                assert len(hit.meta["mvr_views"].matrix) == hit.meta["k"], hit.id
    finally:
        stop.set()
        thread.join(30)
    assert reader.count_documents() == 20


def test_a_duplicate_inserted_by_another_writer_meanwhile_is_a_duplicate_error(make_store, monkeypatch):
    """FAIL checks the ids, then inserts: an id another writer inserted in between is caught by the primary key."""
    from haystack.document_stores.errors import DuplicateDocumentError

    from haystack_mvr.document_stores.pgvector import row_writes

    store = make_store()
    store.write_documents([_doc("a", [[1, 0]])])
    other = make_store(table_name=store.table_name)
    real_run = row_writes._run
    raced = []

    def racing_run(conn, fragment):
        rows = real_run(conn, fragment)
        if not raced and "SELECT id FROM" in fragment.text.as_string(conn) and not rows:  # checked: race it once
            raced.append(True)
            other.write_documents([_doc("b", [[0, 1]])])
        return rows

    monkeypatch.setattr(row_writes, "_run", racing_run)
    with pytest.raises(DuplicateDocumentError, match="ID 'b' already exists"):
        store.write_documents([_doc("c", [[1, 1]]), _doc("b", [[1, 1]])])
    monkeypatch.undo()
    assert sorted(d.id for d in store.filter_documents()) == ["a", "b"]
