"""How a document's view matrix travels from the embedder, through ``DocumentWriter``, into the store.

Haystack's ``Document`` has a single ``embedding``. A multi-view document carries:

- ``meta["mvr_views"]``: its views, a ``list[list[float]]`` of shape ``(k, d)``. The store takes this key
  off on write and keeps every view as one index row; it never stays in the stored ``meta``.
- ``meta["mvr_view_spans"]`` (optional): one ``[start, end]`` character span into ``content`` per view,
  or ``None`` for a view that is not tied to a snippet (MVR viewers, the snippet-pooled global view).
  The store keeps it, so the retriever can say which snippet matched.
- ``embedding``: the first view, so the same document still works in any single-vector store.
- ``meta["mvr_encoder"]`` (optional): a JSON-able dict naming the encoder that produced the views (set by the
  document embedder). A store takes it off on write, records it once as its ``encoder_config`` and refuses
  documents from another encoder; a query embedding from another encoder is caught the same way.

A document with only an ordinary ``embedding`` is a document with one view; a document with neither is
stored but never returned by a vector search.

Every retrieved document, from every store, carries the same keys (set by :func:`annotate_match`):

- ``meta["mvr_matched_view"]``: the view (``int``) whose score is the document's ``score``;
- ``meta["mvr_matched_scope"]``: ``"snippet"`` when that view is a snippet's, ``"document"`` when it covers the
  whole document (the snippet mode's global view, an MVR viewer, a single vector);
- ``meta["mvr_matched_span"]`` / ``meta["mvr_matched_text"]``: the best-scoring snippet's ``[start, end]`` and
  text: the matched view itself for a snippet match, else the best snippet view, so a document matched as a
  whole still shows its most relevant passage; ``None`` when the document has no snippet views.
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
MATCHED_SCOPE_KEY = "mvr_matched_scope"
ENCODER_KEY = "mvr_encoder"
MATCHED_KEYS = (MATCHED_VIEW_KEY, MATCHED_SCOPE_KEY, MATCHED_SPAN_KEY, MATCHED_TEXT_KEY)

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
    spans = None if raw_spans is None else validate_spans(raw_spans, views, document.content, where=where)
    return views, spans, meta


def validate_spans(raw_spans: Any, views: np.ndarray | None, content: str | None, *, where: str) -> list[Span]:
    """Spans as ``[(start, end) or None]``, one per view, inside ``content``; else a ``ValueError`` naming both."""
    if isinstance(raw_spans, (str, bytes)) or not isinstance(raw_spans, Sequence):
        msg = f"{where.capitalize()}: '{SPANS_KEY}' must be a list of [start, end] pairs or None."
        raise ValueError(msg)
    if views is None or len(raw_spans) != views.shape[0]:
        msg = f"{where.capitalize()}: '{SPANS_KEY}' must have one entry per view."
        raise ValueError(msg)
    spans: list[Span] = []
    for i, span in enumerate(raw_spans):
        if span is None:
            spans.append(None)
            continue
        if (
            isinstance(span, (str, bytes))
            or not isinstance(span, Sequence)
            or len(span) != 2
            or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in span)
            or not 0 <= span[0] <= span[1]
            or (content is not None and span[1] > len(content))
        ):
            msg = (
                f"{where.capitalize()}: '{SPANS_KEY}'[{i}] must be None or [start, end] with 0 <= start <= end "
                f"<= len(content), got {str(span)[:40]}."
            )
            raise ValueError(msg)
        spans.append((int(span[0]), int(span[1])))
    return spans


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


def annotate_match(
    document: Document,
    views: np.ndarray,
    query: np.ndarray,
    *,
    return_embedding: bool = False,
) -> Document:
    """
    A copy of a retrieved ``document`` scored by its best view and annotated with the matched-view keys.

    Shared by every store so that all backends score and annotate alike.

    :param document: The stored document (its ``meta`` may hold ``mvr_view_spans``, never ``mvr_views``).
    :param views: ``(k, d)`` views the store holds for it (a lossy index's reconstruction is fine).
    :param query: ``(d,)`` query vector.
    :param return_embedding: Put the views into ``meta["mvr_views"]`` and view 0 into ``embedding`` (when the
        document has no ``embedding`` of its own); otherwise both are left out.
    :returns: The copy with ``score = max_i <query, views_i>`` and the keys described in this module.
    """
    scores = np.asarray(views, dtype=np.float32) @ np.asarray(query, dtype=np.float32)
    best = int(np.argmax(scores))
    meta = {k: v for k, v in document.meta.items() if k != VIEWS_KEY}
    spans = meta.get(SPANS_KEY)
    snippet_views = [i for i, s in enumerate(spans or []) if s is not None and i < len(scores)]
    best_snippet = max(snippet_views, key=lambda i: scores[i]) if snippet_views else None
    if best_snippet is not None and scores[best_snippet] >= scores[best]:
        best = best_snippet  # a tie between a snippet and the whole document is reported as the snippet
    span = None if best_snippet is None else [int(spans[best_snippet][0]), int(spans[best_snippet][1])]
    meta[MATCHED_VIEW_KEY] = best
    meta[MATCHED_SCOPE_KEY] = "snippet" if best == best_snippet else "document"
    meta[MATCHED_SPAN_KEY] = span
    meta[MATCHED_TEXT_KEY] = snippet_text(document.content, None if span is None else (span[0], span[1]))
    embedding = None
    if return_embedding:
        meta[VIEWS_KEY] = np.asarray(views, dtype=np.float32).tolist()
        embedding = document.embedding if document.embedding is not None else meta[VIEWS_KEY][0]
    return dataclasses.replace(document, meta=meta, score=float(scores[best]), embedding=embedding)
