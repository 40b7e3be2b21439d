"""Writing rows: duplicate policies, a batch's documents and views, deletes and meta updates.

Call these inside the write's transaction, once the batch has been checked against the record (``schema.py``):
a document and its views are inserted together, an overwrite replaces both in the same transaction, and on any
error the transaction rolls back, so no reader ever sees half a document and a failed write changes nothing.

- ``FAIL``: ids stored already (or repeated in the batch) raise ``DuplicateDocumentError``; a writer inserting the
  same id at the same moment is caught by the primary key, with the same error.
- ``SKIP``: ``INSERT ... ON CONFLICT DO NOTHING``: only the documents inserted get views.
- ``OVERWRITE``: ``INSERT ... ON CONFLICT DO UPDATE`` (row-locked, so concurrent overwriters of one id take turns)
  moves the document to the end of the write order, and its old views are deleted before the new ones are copied.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy
from psycopg import sql

from haystack_mvr.document_stores.pgvector import rows as row_codec
from haystack_mvr.document_stores.pgvector.schema import Tables
from haystack_mvr.document_stores.pgvector.sql_fragments import Fragment, compose
from haystack_mvr.document_stores.writes import PreparedDocument, already_stored_message, repeated_in_batch_message
from haystack_mvr.views import ENCODER_KEY, SPANS_KEY, VIEWS_KEY

_INSERT = (
    "INSERT INTO {} (id, content, meta, rest) SELECT * FROM unnest({}::text[], {}::text[], {}::jsonb[], {}::jsonb[])"
)


def apply_policy(prepared: list[PreparedDocument], policy: DuplicatePolicy) -> list[PreparedDocument]:
    """The documents of ``prepared`` to write under ``policy``; ``FAIL`` refuses an id repeated in the batch."""
    ids = [p.document.id for p in prepared]
    if policy == DuplicatePolicy.FAIL:
        if len(set(ids)) < len(ids):
            repeated = sorted({i for i in ids if ids.count(i) > 1})
            raise DuplicateDocumentError(repeated_in_batch_message(repeated[0]))
        return prepared
    if policy == DuplicatePolicy.SKIP:
        chosen: dict[str, PreparedDocument] = {}
        for p in prepared:
            chosen.setdefault(p.document.id, p)
        return list(chosen.values())
    if policy == DuplicatePolicy.OVERWRITE:
        return list({p.document.id: p for p in prepared}.values())
    msg = f"Unknown duplicate policy {policy!r}."
    raise ValueError(msg)


def write_rows(
    conn: psycopg.Connection, tables: Tables, chosen: list[PreparedDocument], policy: DuplicatePolicy, has_views: bool
) -> int:
    """Insert ``chosen`` and their views under ``policy`` (in the caller's transaction); how many were written."""
    if not chosen:
        return 0
    ids = [p.document.id for p in chosen]
    columns = list(zip(*(row_codec.document_row(p) for p in chosen), strict=True))
    insert = compose(_INSERT, tables.documents, *(list(c) for c in columns))
    if policy == DuplicatePolicy.FAIL:
        existing = _run(conn, compose("SELECT id FROM {} WHERE id = ANY({}::text[])", tables.documents, ids))
        if existing:
            raise DuplicateDocumentError(already_stored_message(sorted(r[0] for r in existing)[0]))
        try:
            _run(conn, insert)
        except psycopg.errors.UniqueViolation as e:  # another writer inserted one of these ids meanwhile
            found = re.match(r"Key \(id\)=\((.*)\) already exists", e.diag.message_detail or "")
            raise DuplicateDocumentError(already_stored_message(found.group(1) if found else ids[0])) from None
        written = chosen
    elif policy == DuplicatePolicy.SKIP:
        inserted = {r[0] for r in _run(conn, _append(insert, " ON CONFLICT (id) DO NOTHING RETURNING id"))}
        written = [p for p in chosen if p.document.id in inserted]
    else:
        update = (
            " ON CONFLICT (id) DO UPDATE SET content = EXCLUDED.content, meta = EXCLUDED.meta, rest = EXCLUDED.rest, "
            "seq = DEFAULT"
        )
        _run(conn, _append(insert, update))
        if has_views:
            _run(conn, compose("DELETE FROM {} WHERE doc_id = ANY({}::text[])", tables.views, ids))
        written = chosen
    view_rows = [row for p in written for row in row_codec.view_rows(p)]
    if view_rows:
        copy_views(conn, tables, view_rows)
    return len(written)


def copy_views(conn: psycopg.Connection, tables: Tables, view_rows: list[tuple[Any, ...]]) -> None:
    """``COPY`` the view rows in pgvector's binary format."""
    query = sql.SQL("COPY {} (doc_id, view, span_start, span_end, embedding) FROM STDIN WITH (FORMAT BINARY)").format(
        tables.views
    )
    with conn.cursor() as cursor, cursor.copy(query) as copy:
        copy.set_types(["text", "int4", "int4", "int4", "vector"])
        for row in view_rows:
            copy.write_row(row)


def delete_ids(conn: psycopg.Connection, tables: Tables, ids: list[str]) -> None:
    """Delete documents (their views go with them: the foreign key cascades)."""
    _run(conn, compose("DELETE FROM {} WHERE id = ANY({}::text[])", tables.documents, ids))


def delete_matching(conn: psycopg.Connection, tables: Tables, where: Fragment) -> int:
    rows = _run(conn, compose("DELETE FROM {} d WHERE {} RETURNING d.id", tables.documents, where))
    return len(rows)


def check_meta_update(meta: Any) -> None:
    """``update_by_filter``'s ``meta``: a dict that leaves the views, their spans and their encoder alone."""
    if not isinstance(meta, dict):
        msg = f"meta must be a dict, got {type(meta).__name__}."
        raise ValueError(msg)
    if {VIEWS_KEY, SPANS_KEY, ENCODER_KEY} & set(meta):
        msg = (
            f"update_by_filter cannot change '{VIEWS_KEY}', '{SPANS_KEY}' or '{ENCODER_KEY}'; "
            "write the documents again instead."
        )
        raise ValueError(msg)


def update_matching(conn: psycopg.Connection, tables: Tables, where: Fragment, meta: dict[str, Any]) -> int:
    """Merge ``meta`` into the meta of every matching document (top-level keys, as ``dict.update``)."""
    rows = _run(
        conn,
        compose(
            "UPDATE {} d SET meta = d.meta || {}::jsonb WHERE {} RETURNING d.id",
            tables.documents,
            row_codec.as_jsonb(meta),
            where,
        ),
    )
    return len(rows)


def _append(fragment: Fragment, text: str) -> Fragment:
    return Fragment(sql.Composed([fragment.text, sql.SQL(text)]), fragment.params)


def _run(conn: psycopg.Connection, fragment: Fragment) -> list[tuple[Any, ...]]:
    cursor = conn.execute(fragment.text, fragment.params)
    return cursor.fetchall() if cursor.description is not None else []


__all__ = [
    "apply_policy",
    "check_meta_update",
    "copy_views",
    "delete_ids",
    "delete_matching",
    "update_matching",
    "write_rows",
]
