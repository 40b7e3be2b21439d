"""Reading documents: a filter resolved to exactly Haystack's matches, listings, counts, views and export pages.

Each read is a generator of SQL steps (``steps.py``), so the synchronous and the asynchronous store run the same
code. :func:`resolve` turns a compiled filter (``filters.py``) into one SQL predicate over the documents table
aliased ``d``: the documents its ``verify`` part selects (usually none) are read and the Haystack filter is
evaluated on each in Python; where it raises, this raises ``FilterError``; those it selects are added by id.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from haystack import Document
from haystack.errors import FilterError

from haystack_mvr.document_stores.compiled_filters import compile_filter
from haystack_mvr.document_stores.pgvector import rows as row_codec
from haystack_mvr.document_stores.pgvector.filters import SqlFilter
from haystack_mvr.document_stores.pgvector.schema import Tables, TableState
from haystack_mvr.document_stores.pgvector.sql_fragments import TRUE, Fragment, any_of, compose
from haystack_mvr.document_stores.pgvector.steps import Steps
from haystack_mvr.views import exported_document


def resolve(tables: Tables, plan: SqlFilter | None) -> Steps[Fragment]:
    """The predicate selecting exactly what the Haystack filter selects, now (``TRUE`` without a filter)."""
    if plan is None:
        return TRUE
    if plan.verify is None:
        return plan.lower
    rows = yield compose("SELECT d.id, d.content, d.meta FROM {} d WHERE {}", tables.documents, plan.verify)
    match = compile_filter(plan.filters)
    selected = []
    for doc_id, content, meta in rows:
        document = Document(id=doc_id, content=content, meta=meta or {})
        try:
            matched = match(document)
        except (FilterError, TypeError, ValueError) as e:
            msg = f"Filter {plan.filters} cannot be evaluated on document {doc_id!r}: {e}"
            raise FilterError(msg) from e
        if matched:
            selected.append(doc_id)
    if not selected:
        return plan.lower
    return any_of(plan.lower, compose("d.id = ANY({}::text[])", selected))


def listed_documents(tables: Tables, state: TableState | None, plan: SqlFilter | None) -> Steps[list[Document]]:
    """The matching documents in write order, each with view 0 as ``embedding`` when it has none of its own."""
    if state is None:
        return []
    where = yield from resolve(tables, plan)
    if state.dim is None:
        query = compose(
            "SELECT d.id, d.content, d.meta, d.rest, NULL FROM {} d WHERE {} ORDER BY d.seq", tables.documents, where
        )
    else:
        query = compose(
            "SELECT d.id, d.content, d.meta, d.rest, v.embedding FROM {} d LEFT JOIN {} v ON v.doc_id = d.id "
            "AND v.view = 0 WHERE {} ORDER BY d.seq",
            tables.documents,
            tables.views,
            where,
        )
    rows = yield query
    return [row_codec.with_first_view(row_codec.stored_document(*r[:4]), r[4]) for r in rows]


def payload_documents(tables: Tables, state: TableState | None, plan: SqlFilter | None) -> Steps[list[Document]]:
    """The matching documents without vectors (for the metadata statistics)."""
    if state is None:
        return []
    where = yield from resolve(tables, plan)
    rows = yield compose("SELECT d.id, d.content, d.meta FROM {} d WHERE {} ORDER BY d.seq", tables.documents, where)
    return [row_codec.stored_document(i, c, m, None) for i, c, m in rows]


def count(tables: Tables, state: TableState | None, plan: SqlFilter | None) -> Steps[int]:
    if state is None:
        return 0
    where = yield from resolve(tables, plan)
    rows = yield compose("SELECT count(*) FROM {} d WHERE {}", tables.documents, where)
    return int(rows[0][0])


def matching_ids(tables: Tables, state: TableState | None, plan: SqlFilter | None) -> Steps[list[str]]:
    if state is None:
        return []
    where = yield from resolve(tables, plan)
    rows = yield compose("SELECT d.id FROM {} d WHERE {}", tables.documents, where)
    return [r[0] for r in rows]


def views_of(tables: Tables, state: TableState, ids: list[str]) -> Steps[dict[str, np.ndarray]]:
    """The ``(k, d)`` views of each of ``ids`` that has any."""
    if state.dim is None or not ids:
        return {}
    rows = yield compose(
        "SELECT doc_id, embedding FROM {} WHERE doc_id = ANY({}::text[]) ORDER BY doc_id, view", tables.views, ids
    )
    grouped: dict[str, list[Any]] = {}
    for doc_id, vector in rows:
        grouped.setdefault(doc_id, []).append(vector)
    return {doc_id: row_codec.as_matrix(vectors) for doc_id, vectors in grouped.items()}


def documents_with_views(tables: Tables, ids: list[str]) -> Steps[tuple[dict[str, Document], dict[str, np.ndarray]]]:
    """The stored documents of ``ids`` that exist, and the ``(k, d)`` views of those that have any, in one query."""
    if not ids:
        return {}, {}
    rows = yield compose(
        "SELECT d.id, d.content, d.meta, d.rest, (SELECT array_agg(v.embedding ORDER BY v.view) FROM {} v "
        "WHERE v.doc_id = d.id) FROM {} d WHERE d.id = ANY({}::text[])",
        tables.views,
        tables.documents,
        ids,
    )
    documents = {r[0]: row_codec.stored_document(*r[:4]) for r in rows}
    views = {r[0]: row_codec.as_matrix(r[4]) for r in rows if r[4]}
    return documents, views


def export_page(
    tables: Tables, state: TableState | None, where: Fragment, after: int, batch_size: int, encoder: Any
) -> Steps[tuple[list[Document], int | None]]:
    """Up to ``batch_size`` matching documents written after ``seq`` ``after``, with all their views; the last
    ``seq`` read (``None``: nothing left)."""
    if state is None:
        return [], None
    rows = yield compose(
        "SELECT d.seq, d.id, d.content, d.meta, d.rest FROM {} d WHERE d.seq > {} AND {} ORDER BY d.seq LIMIT {}",
        tables.documents,
        after,
        where,
        batch_size,
    )
    if not rows:
        return [], None
    views = yield from views_of(tables, state, [r[1] for r in rows])
    batch = [exported_document(row_codec.stored_document(*r[1:]), views.get(r[1]), encoder) for r in rows]
    return batch, int(rows[-1][0])


__all__ = [
    "count",
    "documents_with_views",
    "export_page",
    "listed_documents",
    "matching_ids",
    "payload_documents",
    "resolve",
    "views_of",
]
