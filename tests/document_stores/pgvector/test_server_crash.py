"""kill -9 of the PostgreSQL server itself in the middle of writes, then a restart: every acknowledged write is there.

The server is this test's own (the session's is left alone): a writer process writes batches and reports each one
``write_documents`` returned; the postmaster is killed with SIGKILL while the writer is busy, its backends die with
it, and the server is started again on the same data folder (crash recovery replays the write-ahead log). Every
acknowledged batch must be there, every document whole; an unacknowledged batch is there whole or not at all.
"""

from __future__ import annotations

import pytest

from .conftest import require_server

require_server()

import os  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import psutil  # noqa: E402
from haystack.utils import Secret  # noqa: E402

from haystack_mvr.document_stores.pgvector import PgvectorMultiViewDocumentStore  # noqa: E402

from .conftest import start_server  # noqa: E402
from .test_processes import _child, _whole  # noqa: E402


def test_acknowledged_writes_survive_a_server_killed_mid_write():
    root = Path(tempfile.mkdtemp(prefix="mvr-pg-crash-"))
    server = start_server(root)
    try:
        uri = server.get_uri()
        child = _child(
            uri,
            "crash",
            "writer",
            """
            batch = 0
            while True:
                try:
                    store.write_documents([doc(f"b{batch}-{i}", 1 + i % 5) for i in range(30)])
                except Exception as e:
                    print("error", type(e).__name__, flush=True)
                    break
                print(batch, flush=True)
                batch += 1
            """,
        )
        acked = []
        while len(acked) < 4:
            line = child.stdout.readline()
            assert line, child.stderr.read()[-3000:]
            acked.append(int(line))
        postmaster = psutil.Process(server.get_pid())
        backends = postmaster.children(recursive=True)
        os.kill(postmaster.pid, signal.SIGKILL)
        for line in child.stdout:  # batches acknowledged before the writer saw the server go
            if line.startswith("error"):
                break
            acked.append(int(line))
        child.wait(30)
        psutil.wait_procs(backends, timeout=30)
        deadline = time.monotonic() + 30
        while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in backends):
            assert time.monotonic() < deadline, "backends of the killed server did not exit"
            time.sleep(0.1)
        with server._lock:  # the same data folder, started again (crash recovery)
            server.ensure_postgres_running()
        views = _whole(server.get_uri(), "crash")
        batches = {doc_id.split("-")[0] for doc_id in views}
        assert {f"b{b}" for b in acked} <= batches, (acked, sorted(batches))
        assert len(views) == 30 * len(batches)
        store = PgvectorMultiViewDocumentStore(
            connection_string=Secret.from_token(server.get_uri()), table_name="crash"
        )
        assert store.count_documents() == len(views)
        assert len(store.search([1.0] * 8, top_k=5)) == 5
        store.close()
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
