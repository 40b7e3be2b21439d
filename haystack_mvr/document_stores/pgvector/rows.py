"""Haystack ``Document`` <-> rows: one row in the documents table, one row per view in the views table.

A write's documents are prepared as for every store (``haystack_mvr.document_stores.writes``); this module adds
what JSONB cannot hold (non-finite numbers, NUL characters: refused naming the document) and makes the rows:

- documents table: ``id``, ``content``, ``meta`` (the stored meta, spans included) and ``rest``: the other fields
  of ``Document.to_dict`` (``blob``, ``sparse_embedding``, an ``embedding`` of its own), ``NULL`` when all are empty;
- views table: ``(doc_id, view, span_start, span_end, embedding)`` for each of the ``(k, d)`` views.

JSONB keeps numbers as decimals and prints them without an exponent, so a float of magnitude 1e16 or more (which
JSON writes as ``1e+16``) would read back as an integer: :func:`as_jsonb` writes such a float as its exact integer
value with ``.0`` (``10000000000000000.0``), which reads back as the same float.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np
from haystack import Document
from psycopg.types.json import Jsonb

from haystack_mvr.document_stores.writes import PreparedDocument
from haystack_mvr.views import SPANS_KEY

_REST_KEYS = ("blob", "sparse_embedding", "embedding")


def check_jsonb(prepared: PreparedDocument) -> None:
    """A ``ValueError`` naming the document when its content or meta holds what PostgreSQL cannot store."""
    document = prepared.document
    where = f"Document {document.id!r}"
    if "\x00" in document.id or (document.content is not None and "\x00" in document.content):
        msg = f"{where}: its id or content holds a NUL character, which PostgreSQL cannot store. Nothing was written."
        raise ValueError(msg)
    _check_value(document.meta, where, "meta")


def _check_value(value: Any, where: str, field: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        msg = f"{where}: {field} is {value}, which JSONB cannot store; use None or a string. Nothing was written."
        raise ValueError(msg)
    if isinstance(value, str) and "\x00" in value:
        msg = f"{where}: {field} holds a NUL character, which JSONB cannot store. Nothing was written."
        raise ValueError(msg)
    if isinstance(value, dict):
        for key, item in value.items():
            _check_value(key, where, f"{field} key {key!r}")
            _check_value(item, where, f"{field}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_value(item, where, f"{field}[{i}]")


def as_jsonb(value: Any) -> Jsonb:
    """``value`` (JSON-able) as a JSONB parameter that reads back equal, and of the same types (see the module)."""
    return Jsonb(value, dumps=_exact_dumps) if _has_big_float(value) else Jsonb(value)


def _has_big_float(value: Any) -> bool:
    if isinstance(value, float):
        return abs(value) >= 1e16
    if isinstance(value, dict):
        return any(_has_big_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_big_float(v) for v in value)
    return False


def _exact_dumps(value: Any) -> str:
    if isinstance(value, float) and abs(value) >= 1e16 and math.isfinite(value):
        return f"{int(value)}.0"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_exact_dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_exact_dumps(v) for v in value) + "]"
    return json.dumps(value)


def document_row(prepared: PreparedDocument) -> tuple[Any, ...]:
    """``(id, content, meta, rest)`` of a prepared document."""
    document = prepared.document
    data = document.to_dict(flatten=False)
    rest = {k: data[k] for k in _REST_KEYS if data.get(k) is not None}
    return document.id, document.content, as_jsonb(document.meta), as_jsonb(rest) if rest else None


def view_rows(prepared: PreparedDocument) -> list[tuple[Any, ...]]:
    """``(doc_id, view, span_start, span_end, embedding)`` for each view of a prepared document (none without)."""
    views = prepared.views
    if views is None:
        return []
    spans = prepared.document.meta.get(SPANS_KEY) or [None] * len(views)
    doc_id = prepared.document.id
    return [
        (doc_id, i, None if span is None else span[0], None if span is None else span[1], views[i])
        for i, span in enumerate(spans)
    ]


def stored_document(
    doc_id: str, content: str | None, meta: dict[str, Any] | None, rest: dict[str, Any] | None
) -> Document:
    """The stored document of a row (a new object; ``embedding`` only when it has one of its own)."""
    data: dict[str, Any] = {"id": doc_id, "content": content, "meta": meta or {}}
    if rest:
        data.update(rest)
    return Document.from_dict(data)


def with_first_view(document: Document, first: Any) -> Document:
    """``document`` with view 0 as its ``embedding`` when it has none of its own (``filter_documents``)."""
    if document.embedding is not None or first is None:
        return document
    return dataclasses.replace(document, embedding=as_matrix([first])[0].tolist())


def as_matrix(vectors: list[Any]) -> np.ndarray:
    """Views read back (numpy arrays or pgvector ``Vector``) as one ``(k, d)`` float32 matrix."""
    rows = [v.to_numpy() if hasattr(v, "to_numpy") else v for v in vectors]
    return np.asarray(np.stack(rows), dtype=np.float32)


__all__ = ["as_jsonb", "as_matrix", "check_jsonb", "document_row", "stored_document", "view_rows", "with_first_view"]
