"""Haystack ``Document`` <-> Qdrant point: one point per document, its views in one multivector.

A write's documents are prepared as for every store (``haystack_mvr.document_stores.writes``); this module adds
Qdrant's own limit (:func:`check_multivector_size`) and makes the points.

A point holds:

- id: ``uuid5(POINT_NAMESPACE, document.id)`` (Qdrant ids are integers or UUIDs; the same document id always
  gives the same point, so a write of an existing document replaces its point);
- vectors: ``VIEWS_VECTOR``, the ``(k, d)`` views (compared with ``MAX_SIM``: ``max_i <q, v_i>`` for a one-row
  query), and, when the collection has it, ``GLOBAL_VECTOR``: view 0 as a plain dense vector (for prefetch);
  a document without vectors has neither;
- payload: the document without its views (``id``, ``content``, ``blob``, ``meta``, ``sparse_embedding``), the
  snippet spans kept in ``meta["mvr_view_spans"]``, ``embedding`` only when the document's own differs from
  view 0, ``SEQ_KEY``, the write order (documents are listed in the order they were written), and
  ``EMPTY_LIST_KEY``, a marker for each meta path holding ``[]`` (Qdrant cannot tell ``[]`` from a missing key;
  the filters need to, see ``filters.py``).
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
from haystack import Document
from qdrant_client.http import models

from haystack_mvr.document_stores.qdrant.filters import EMPTY_LIST_KEY, empty_list_markers
from haystack_mvr.document_stores.writes import PreparedDocument

POINT_NAMESPACE = uuid.UUID("6f0f5b1e-7c1d-5a53-9a8e-3c2f1b9d4e71")
VIEWS_VECTOR = "mvr_views"
GLOBAL_VECTOR = "mvr_global"
SEQ_KEY = "_mvr_seq"
#: Qdrant refuses a multivector with more numbers than this (views x dimension).
MAX_MULTIVECTOR_FLOATS = 1_048_576
_INTERNAL_KEYS = (SEQ_KEY, EMPTY_LIST_KEY)


def point_id(document_id: str) -> str:
    """The point id of a document id: a UUID5, identical on every machine and every run."""
    return str(uuid.uuid5(POINT_NAMESPACE, document_id))


def check_multivector_size(prepared: PreparedDocument) -> None:
    """Qdrant's own limit on a prepared document: at most ``MAX_MULTIVECTOR_FLOATS`` numbers in its views."""
    views = prepared.views
    if views is not None and views.size > MAX_MULTIVECTOR_FLOATS:
        k, d = views.shape
        msg = (
            f"Document {prepared.document.id!r} has {k} views of dimension {d} ({views.size:,} numbers); Qdrant takes "
            f"at most {MAX_MULTIVECTOR_FLOATS:,} numbers per multivector ({MAX_MULTIVECTOR_FLOATS // d:,} views at "
            f"d={d}). Split the document or use fewer views."
        )
        raise ValueError(msg)


def to_point(prepared: PreparedDocument, seq: int, global_view: bool) -> models.PointStruct:
    """The point of a prepared document, written ``seq``-th."""
    payload = prepared.document.to_dict(flatten=False)
    payload.pop("score", None)
    if payload.get("embedding") is None:
        payload.pop("embedding", None)
    payload[SEQ_KEY] = seq
    markers = dict.fromkeys(empty_list_markers(prepared.document.meta), True)
    if markers:
        payload[EMPTY_LIST_KEY] = markers
    vector: dict[str, Any] = {}
    if prepared.views is not None:
        vector[VIEWS_VECTOR] = prepared.views.tolist()
        if global_view:
            vector[GLOBAL_VECTOR] = prepared.views[0].tolist()
    return models.PointStruct(id=point_id(prepared.document.id), vector=vector, payload=payload)


def to_document(payload: dict[str, Any], first_view: list[float] | None = None) -> Document:
    """
    The stored document of a point's payload (a new object).

    :param first_view: View 0, put back as ``embedding`` when the document has none of its own.
    """
    data = {k: v for k, v in payload.items() if k not in _INTERNAL_KEYS}
    if data.get("embedding") is None and first_view is not None:
        data["embedding"] = [float(x) for x in first_view]
    return Document.from_dict(data)


def views_of(vector: Any) -> np.ndarray | None:
    """The ``(k, d)`` views of a returned point's vectors, or ``None`` when it has none."""
    if not isinstance(vector, dict) or vector.get(VIEWS_VECTOR) is None:
        return None
    return np.asarray(vector[VIEWS_VECTOR], dtype=np.float32)


def first_view(vector: Any) -> list[float] | None:
    """View 0 of a returned point (from the global vector or the multivector), or ``None``."""
    if not isinstance(vector, dict):
        return None
    if vector.get(GLOBAL_VECTOR) is not None:
        return list(vector[GLOBAL_VECTOR])
    views = vector.get(VIEWS_VECTOR)
    return list(views[0]) if views else None


__all__ = [
    "GLOBAL_VECTOR",
    "MAX_MULTIVECTOR_FLOATS",
    "POINT_NAMESPACE",
    "SEQ_KEY",
    "VIEWS_VECTOR",
    "check_multivector_size",
    "first_view",
    "point_id",
    "to_document",
    "to_point",
    "views_of",
]
