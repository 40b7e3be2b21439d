"""How a document's view matrix travels from the embedder, through ``DocumentWriter``, into the store.

Haystack's ``Document`` has a single ``embedding``. A multi-view document carries:

- ``meta["mvr_views"]``: its views, a ``list[list[float]]`` of shape ``(k, d)``. The store takes this key
  off on write and keeps every view as one index row; it never stays in the stored ``meta``.
- ``meta["mvr_view_spans"]`` (optional): one ``[start, end]`` character span into ``content`` per view,
  or ``None`` for a view that is not tied to a snippet (MVR viewers, the snippet-pooled global view).
  The store keeps it, so the retriever can say which snippet matched.
- ``embedding``: the first view, so the same document still works in any single-vector store.

A document with only an ordinary ``embedding`` is a document with one view; a document with neither is
stored but never returned by a vector search.

Retrieved documents say which view matched in ``meta["mvr_matched_view"]`` (an ``int``) and, when that
view is a snippet, ``meta["mvr_matched_span"]`` (``[start, end]``) and ``meta["mvr_matched_text"]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
from haystack import Document

VIEWS_KEY = "mvr_views"
SPANS_KEY = "mvr_view_spans"
MATCHED_VIEW_KEY = "mvr_matched_view"
MATCHED_SPAN_KEY = "mvr_matched_span"
MATCHED_TEXT_KEY = "mvr_matched_text"

Span = tuple[int, int] | None


def attach_views(document: Document, views: np.ndarray, spans: Sequence[Span] | None = None) -> Document:
    """
    Return a copy of ``document`` carrying ``views``; the input document is not changed.

    :param document: The document the views were computed from.
    :param views: Array of shape ``(k, d)`` with ``k >= 1``.
    :param spans: Optional ``k`` character spans into ``document.content`` (``None`` for non-snippet views).
    :returns: A new ``Document`` with ``embedding`` set to the first view and the views in ``meta``.
    """
    matrix = validate_views(views, where=f"document {document.id!r}")
    meta = dict(document.meta)
    meta[VIEWS_KEY] = matrix.tolist()
    if spans is not None:
        if len(spans) != matrix.shape[0]:
            msg = f"Document {document.id!r}: got {len(spans)} spans for {matrix.shape[0]} views."
            raise ValueError(msg)
        meta[SPANS_KEY] = [None if s is None else [int(s[0]), int(s[1])] for s in spans]
    else:
        meta.pop(SPANS_KEY, None)
    return dataclasses.replace(document, meta=meta, embedding=matrix[0].tolist())


def extract_views(document: Document) -> tuple[np.ndarray | None, list[Span] | None, dict[str, Any]]:
    """
    Split a document into its view matrix, its view spans and the ``meta`` to store (without the views).

    :returns: ``(views, spans, meta)``: ``views`` is ``float32`` of shape ``(k, d)`` or ``None`` when the
        document has no vector at all; ``spans`` is ``None`` when the document carries none.
    :raises ValueError: if the views are ragged, empty, non-numeric or not finite.
    """
    meta = dict(document.meta)
    raw_views = meta.pop(VIEWS_KEY, None)
    raw_spans = meta.pop(SPANS_KEY, None)
    where = f"document {document.id!r}"
    if raw_views is not None:
        views = validate_views(raw_views, where=where)
    elif document.embedding is not None:
        views = validate_views([document.embedding], where=where)
    else:
        views = None
    spans: list[Span] | None = None
    if raw_spans is not None:
        if views is None or len(raw_spans) != views.shape[0]:
            msg = f"{where.capitalize()}: '{SPANS_KEY}' must have one entry per view."
            raise ValueError(msg)
        spans = [None if s is None else (int(s[0]), int(s[1])) for s in raw_spans]
    return views, spans, meta


def validate_views(views: Any, *, where: str) -> np.ndarray:
    """Return ``views`` as a C-contiguous ``float32`` matrix ``(k, d)``, or raise ``ValueError`` naming ``where``."""
    try:
        matrix = np.asarray(views, dtype=np.float32)
    except (TypeError, ValueError) as e:
        msg = f"{where.capitalize()}: views must be a (k, d) matrix of numbers."
        raise ValueError(msg) from e
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] == 0:
        msg = f"{where.capitalize()}: views must be a non-empty (k, d) matrix, got shape {matrix.shape}."
        raise ValueError(msg)
    if not np.isfinite(matrix).all():
        msg = f"{where.capitalize()}: views contain NaN or infinite values."
        raise ValueError(msg)
    return np.ascontiguousarray(matrix)


def snippet_text(content: str | None, span: Span) -> str | None:
    """The text of ``content`` inside ``span``, or ``None`` when either is missing."""
    if content is None or span is None:
        return None
    return content[span[0] : span[1]]
