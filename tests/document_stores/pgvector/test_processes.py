"""Several processes on one table, and processes killed mid-write: what was committed is there, whole.

Each child is a fresh Python process (``subprocess``, never ``fork``) running a small script against the session's
server: it reads the connection string from ``PG_CONN_STR`` and reports each committed write on stdout.
"""

from __future__ import annotations

from .conftest import require_server

require_server()

import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402

import numpy as np  # noqa: E402
import psycopg  # noqa: E402
from haystack import Document  # noqa: E402
from psycopg import sql  # noqa: E402

from haystack_mvr.views import attach_views  # noqa: E402

#: What every child imports and defines: a store on the table given as argv[1], and a document with k views whose
#: meta records k (so a reader can tell a whole document from a half-written one).
PRELUDE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from haystack import Document
    from haystack.document_stores.types import DuplicatePolicy
    from haystack_mvr.document_stores.pgvector import PgvectorMultiViewDocumentStore
    from haystack_mvr.views import attach_views

    store = PgvectorMultiViewDocumentStore(table_name=sys.argv[1])
    rng = np.random.default_rng(abs(hash(sys.argv[2])) % 2**32)

    def doc(doc_id, k):
        views = rng.normal(size=(k, 8)).astype(np.float32)
        return attach_views(Document(id=doc_id, content=doc_id, meta={"k": k, "by": sys.argv[2]}), views)
    """
)


def _child(pg_uri: str, table: str, name: str, body: str) -> subprocess.Popen:
    env = {**os.environ, "PG_CONN_STR": pg_uri, "OMP_NUM_THREADS": "1"}
    script = PRELUDE + textwrap.dedent(body)
    return subprocess.Popen(
        [sys.executable, "-c", script, table, name], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(child: subprocess.Popen, timeout: float = 120) -> str:
    out, err = child.communicate(timeout=timeout)
    assert child.returncode == 0, err[-3000:]
    return out


def _whole(pg_uri: str, table: str) -> dict[str, int]:
    """Each stored document's view count, checked against the count its meta records."""
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT d.id, (d.meta ->> 'k')::int, count(v.view) FROM {} d LEFT JOIN {} v ON v.doc_id = d.id "
                "GROUP BY d.id"
            ).format(sql.Identifier(table), sql.Identifier(table + "_views"))
        ).fetchall()
    broken = [(i, k, n) for i, k, n in rows if k != n]
    assert not broken, broken[:5]
    return {i: n for i, _, n in rows}


def test_another_process_reads_what_this_one_wrote_and_the_other_way(make_store, pg_uri):
    store = make_store()
    rng = np.random.default_rng(0)
    docs = [
        attach_views(
            Document(id=f"d{i}", content=f"doc {i}", meta={"i": i}), rng.normal(size=(3, 8)).astype(np.float32)
        )
        for i in range(20)
    ]
    store.write_documents(docs)
    query = rng.normal(size=8).astype(np.float32)
    mine = [
        (d.id, round(d.score, 4))
        for d in store.search(query, top_k=5, filters={"field": "meta.i", "operator": "<", "value": 15})
    ]
    child = _child(
        pg_uri,
        store.table_name,
        "reader",
        f"""
        query = {query.tolist()}
        hits = store.search(query, top_k=5, filters={{"field": "meta.i", "operator": "<", "value": 15}})
        print(json.dumps([(d.id, round(d.score, 4)) for d in hits]))
        store.write_documents([doc("from-child", 2)])
        """,
    )
    assert [tuple(h) for h in json.loads(_finish(child))] == mine
    assert store.count_documents() == 21 and store.filter_documents(
        {"field": "id", "operator": "==", "value": "from-child"}
    )


def test_two_processes_write_overwrite_and_search_one_table(make_store, pg_uri):
    store = make_store()  # the tables do not exist yet: both children create them at once
    body = """
        import dataclasses
        encoder = {"model": "enc-shared"}
        for batch in range(5):
            docs = [doc(f"{sys.argv[2]}-{batch}-{i}", 1 + (batch + i) % 4) for i in range(6)]
            docs += [doc(f"shared-{i}", 1 + (batch * 3 + i) % 5) for i in range(3)]  # both processes overwrite these
            docs = [dataclasses.replace(d, meta={**d.meta, "mvr_encoder": encoder}) for d in docs]
            store.write_documents(docs, policy=DuplicatePolicy.OVERWRITE)
            hits = store.search(rng.normal(size=8).tolist(), top_k=5)
            assert len(hits) == 5 and len({h.id for h in hits}) == 5
        print("done")
        """
    children = [_child(pg_uri, store.table_name, name, body) for name in ("a", "b")]
    for child in children:
        assert _finish(child).strip() == "done"
    views = _whole(pg_uri, store.table_name)
    assert len(views) == 2 * 5 * 6 + 3
    assert store.encoder_config is None and store.count_documents() == len(views)
    assert store.encoder_config == {"model": "enc-shared"}  # recorded once, read back


def test_a_writer_killed_mid_batch_leaves_only_whole_committed_batches(make_store, pg_uri):
    store = make_store()
    child = _child(
        pg_uri,
        store.table_name,
        "killed",
        """
        batch = 0
        while True:
            store.write_documents([doc(f"b{batch}-{i}", 1 + i % 7) for i in range(40)])
            print(batch, flush=True)
            batch += 1
        """,
    )
    acked = -1
    while acked < 3:
        line = child.stdout.readline()
        assert line, child.stderr.read()[-3000:]
        acked = int(line)
    os.kill(child.pid, signal.SIGKILL)  # most likely inside the next batch's transaction
    child.wait(30)
    views = _whole(pg_uri, store.table_name)
    batches = {doc_id.split("-")[0] for doc_id in views}
    assert len(views) == 40 * len(batches) and len(batches) >= acked + 1
    assert {f"b{b}" for b in range(acked + 1)} <= batches
