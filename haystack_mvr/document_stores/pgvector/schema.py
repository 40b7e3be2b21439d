"""The store's three tables, their creation, and the record that says what they hold.

For ``table_name="docs"`` in ``schema_name="public"``:

- ``public.docs``: one row per document: ``id`` (primary key), ``seq`` (write order), ``content``, ``meta`` as JSONB
  (the view spans kept in ``meta["mvr_view_spans"]``, as the other stores keep them) and ``rest`` as JSONB (the other
  ``Document`` fields: ``blob``, ``sparse_embedding``, an ``embedding`` of its own that differs from view 0);
- ``public.docs_views``: one row per view: the document's id (a foreign key, deleted with it), the view's number,
  its span (``span_start``, ``span_end``; ``NULL`` for a view tied to no snippet) and ``embedding vector(d)``; an
  HNSW index ``docs_views_hnsw`` (``vector_ip_ops``) when a store with ``search_strategy="hnsw"`` opens it. It is
  created with the first vectors (or with the tables, when ``embedding_dimension`` is given);
- ``public.docs_mvr``: one row, the record: format, view dimension, the encoder config the views come from, and
  whether they are a late-interaction model's token views.

Every name reaches SQL through ``psycopg.sql.Identifier``, never as text. Writers lock the record row for the
length of their transaction (shared when the record is unchanged, exclusive when a write fixes the dimension or the
encoder), so the record and the rows always agree, whoever writes. DDL runs under a transaction-scoped advisory
lock on the table's name, so stores creating the same tables at once do not collide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from haystack.document_stores.errors import DocumentStoreError
from psycopg import sql
from psycopg.types.json import Jsonb

from haystack_mvr.document_stores.pgvector.sql_fragments import Fragment
from haystack_mvr.document_stores.pgvector.steps import Steps, drive
from haystack_mvr.document_stores.writes import same_encoder

FORMAT = "haystack-mvr/pgvector-1"
_DOCUMENT_COLUMNS = {"id", "seq", "content", "meta", "rest"}
_VIEW_COLUMNS = {"doc_id", "view", "span_start", "span_end", "embedding"}


class TableMismatchError(DocumentStoreError, ValueError):
    """A write, a query or a store's options that do not fit the table as it is (its dimension, encoder, views)."""


@dataclass(frozen=True)
class Tables:
    """The quoted names of a store's tables."""

    schema: str
    table: str

    @property
    def documents(self) -> sql.Identifier:
        return sql.Identifier(self.schema, self.table)

    @property
    def views(self) -> sql.Identifier:
        return sql.Identifier(self.schema, self.table + "_views")

    @property
    def record(self) -> sql.Identifier:
        return sql.Identifier(self.schema, self.table + "_mvr")

    @property
    def hnsw_index(self) -> sql.Identifier:
        return sql.Identifier(self.table + "_views_hnsw")

    @property
    def name(self) -> str:
        """The table as a message names it."""
        return f"table {self.schema}.{self.table}"


@dataclass(frozen=True)
class TableState:
    """The record as read at one moment."""

    dim: int | None
    encoder_config: dict[str, Any] | None
    token_views: bool | None  # None while no vectors were written

    def as_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "dimension": self.dim,
            "encoder_config": self.encoder_config,
            "token_views": self.token_views,
        }


def _relation_query(tables: Tables) -> Fragment:
    names = [tables.table, tables.table + "_views", tables.table + "_mvr"]
    return Fragment(
        sql.SQL(
            "SELECT c.relname::text, a.attname::text FROM pg_catalog.pg_attribute a "
            "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = ANY(%s::text[]) AND a.attnum > 0 AND NOT a.attisdropped"
        ),
        (tables.schema, names),
    )


def _columns(rows: list[tuple[Any, ...]]) -> dict[str, set[str]]:
    """The columns of each of the store's tables that exist (a table without columns is absent)."""
    found: dict[str, set[str]] = {}
    for table, column in rows:
        found.setdefault(table, set()).add(column)
    return found


def state_steps(tables: Tables, *, lock: str | None = None) -> Steps[TableState | None]:
    """
    The record as it is now, checked to be this package's; ``None`` while the tables do not exist.

    :param lock: ``"SHARE"`` or ``"UPDATE"`` to lock the record row until the (write) transaction ends.
    """
    found = _columns((yield _relation_query(tables)))
    if tables.table + "_mvr" not in found:
        if tables.table in found:
            msg = (
                f"{tables.name} exists but is not a haystack-mvr multi-view table (no {tables.table}_mvr record): use "
                "another table_name, or recreate_table=True to drop it and start over."
            )
            raise TableMismatchError(msg)
        return None
    query = sql.SQL("SELECT record FROM {}").format(tables.record)
    if lock is not None:
        query = query + sql.SQL(" FOR SHARE" if lock == "SHARE" else " FOR UPDATE")
    rows = yield Fragment(query)
    if not rows:
        msg = f"{tables.name}: its record table {tables.table}_mvr is empty; use another table_name or recreate_table."
        raise TableMismatchError(msg)
    state = _state(rows[0][0], tables)
    if lock is not None or _missing_columns(found, tables, state):
        # the record may be newer than the tables listed before it (a writer created the views table and recorded
        # its dimension in between; a locked read waited for it): list them again, as they are now
        found = _columns((yield _relation_query(tables)))
    _check_columns(found, tables, state)
    return state


def read_state(conn: psycopg.Connection, tables: Tables, *, lock: str | None = None) -> TableState | None:
    """:func:`state_steps` on ``conn``, in the transaction it is in."""
    return drive(state_steps(tables, lock=lock), conn)


def _state(record: Any, tables: Tables) -> TableState:
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        fmt = record.get("format") if isinstance(record, dict) else None
        msg = (
            f"{tables.name} holds another schema (record format {fmt!r}, this store reads {FORMAT!r}): use another "
            "table_name, or recreate_table=True to drop it and start over."
        )
        raise TableMismatchError(msg)
    return TableState(record.get("dimension"), record.get("encoder_config"), record.get("token_views"))


def check_state(state: TableState, tables: Tables, dim: int | None, encoder: dict[str, Any] | None) -> None:
    """The record against the store's ``embedding_dimension`` and ``encoder_config``."""
    if dim is not None and state.dim is not None and dim != state.dim:
        msg = (
            f"{tables.name} holds {state.dim}-dimensional views but embedding_dimension={dim}: pass "
            f"embedding_dimension={state.dim}, or use another table for {dim}-dimensional views."
        )
        raise TableMismatchError(msg)
    recorded = state.encoder_config
    if recorded is not None and encoder is not None and not same_encoder(recorded, encoder):
        msg = (
            f"{tables.name} holds views from encoder {recorded}, but this store was given encoder_config={encoder}. "
            "Use another table for another encoder."
        )
        raise TableMismatchError(msg)


def _missing_columns(found: dict[str, set[str]], tables: Tables, state: TableState) -> list[tuple[str, list[str]]]:
    expected = [(tables.table, _DOCUMENT_COLUMNS)]
    if state.dim is not None:
        expected.append((tables.table + "_views", _VIEW_COLUMNS))
    missing = [(table, sorted(columns - found.get(table, set()))) for table, columns in expected]
    return [(table, columns) for table, columns in missing if columns]


def _check_columns(found: dict[str, set[str]], tables: Tables, state: TableState) -> None:
    """The tables have the columns this store reads (a table of another schema under the same name is refused)."""
    for table, missing in _missing_columns(found, tables, state):
        if missing:
            msg = (
                f"{tables.name}: {tables.schema}.{table} lacks the columns {missing} of a haystack-mvr table (another "
                "schema): use another table_name, or recreate_table=True to drop it and start over."
            )
            raise TableMismatchError(msg)


def lock_ddl(conn: psycopg.Connection, tables: Tables) -> None:
    """Serialize DDL on these tables among all clients until the transaction ends."""
    key = f"haystack-mvr:{tables.schema}.{tables.table}"
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [key])


def create_tables(conn: psycopg.Connection, tables: Tables, state: TableState) -> None:
    """Create the schema, the documents table and the record (and the views table when ``state.dim`` is known)."""
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(tables.schema)))
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (id TEXT PRIMARY KEY, seq BIGINT GENERATED ALWAYS AS IDENTITY, "
            "content TEXT, meta JSONB NOT NULL DEFAULT '{{}}'::jsonb, rest JSONB)"
        ).format(tables.documents)
    )
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one), record JSONB NOT NULL)"
        ).format(tables.record)
    )
    conn.execute(
        sql.SQL("INSERT INTO {} (record) VALUES (%s) ON CONFLICT DO NOTHING").format(tables.record),
        [Jsonb(state.as_json())],
    )
    if state.dim is not None:
        create_views_table(conn, tables, state.dim)


def create_views_table(conn: psycopg.Connection, tables: Tables, dim: int) -> None:
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {views} (doc_id TEXT NOT NULL REFERENCES {docs} (id) ON DELETE CASCADE, "
            "view INTEGER NOT NULL, span_start INTEGER, span_end INTEGER, embedding vector({dim}) NOT NULL, "
            "PRIMARY KEY (doc_id, view))"
        ).format(views=tables.views, docs=tables.documents, dim=sql.Literal(int(dim)))
    )


def write_record(conn: psycopg.Connection, tables: Tables, state: TableState) -> None:
    conn.execute(sql.SQL("UPDATE {} SET record = %s").format(tables.record), [Jsonb(state.as_json())])


def create_hnsw_index(conn: psycopg.Connection, tables: Tables, settings: dict[str, int]) -> None:
    """The views' HNSW index for inner product (kept if it exists, whatever its settings)."""
    with_clause = sql.SQL("")
    if settings:
        pairs = [sql.SQL("{} = {}").format(sql.Identifier(k), sql.Literal(int(v))) for k, v in sorted(settings.items())]
        with_clause = sql.SQL(" WITH ({})").format(sql.SQL(", ").join(pairs))
    conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding vector_ip_ops){}").format(
            tables.hnsw_index, tables.views, with_clause
        )
    )


def has_hnsw_index(conn: psycopg.Connection, tables: Tables) -> bool:
    row = conn.execute(
        "SELECT 1 FROM pg_indexes WHERE schemaname = %s AND tablename = %s AND indexname = %s",
        [tables.schema, tables.table + "_views", tables.table + "_views_hnsw"],
    ).fetchone()
    return row is not None


def drop_tables(conn: psycopg.Connection, tables: Tables) -> None:
    for name in (tables.views, tables.record, tables.documents):
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(name))


__all__ = [
    "FORMAT",
    "TableMismatchError",
    "TableState",
    "Tables",
    "check_state",
    "create_hnsw_index",
    "create_tables",
    "create_views_table",
    "drop_tables",
    "has_hnsw_index",
    "lock_ddl",
    "read_state",
    "state_steps",
    "truncate",
    "write_record",
]


def truncate(names: list[sql.Identifier]) -> sql.Composed:
    """``TRUNCATE`` of the given tables (the record stays)."""
    return sql.SQL("TRUNCATE {}").format(sql.SQL(", ").join(names))
