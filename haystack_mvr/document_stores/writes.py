"""What every multi-view store does with the documents of a write (and the ids of a delete) before its backend sees
them: one converter for all backends, so their refusals and messages agree.

:func:`prepare_documents` splits each document into what is stored, its views and the encoder it names
(``haystack_mvr.views`` says how they travel), and refuses, naming the document, what no store can take: views that
are ragged, empty or not finite, spans that do not fit, an ``embedding`` of another size than the views, an
``mvr_encoder`` that is not a dict, two encoders or two view dimensions in one batch, meta JSON cannot hold. Each
backend then adds only its own limits (the FAISS store's views per document, Qdrant's numbers per multivector) and
checks the batch against what it holds.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np
from haystack import Document

from haystack_mvr.views import (
    ENCODER_KEY,
    SPANS_KEY,
    VIEWS_KEY,
    PackedViews,
    copy_with,
    embedding_repeats_first_view,
    extract_views,
    validate_spans,
)

_SCALARS = (str, int, float, bool, type(None))
_PLAIN = frozenset(_SCALARS)  # exactly these types: stored as they are
_FLOAT32 = np.dtype(np.float32)
_TAKEN_KEYS = frozenset((VIEWS_KEY, SPANS_KEY, ENCODER_KEY))  # never stay in a stored meta


class PreparedDocument(NamedTuple):
    """A document split for storage."""

    #: What is stored: the document without its views and encoder (``meta`` a JSON-able copy holding the spans as
    #: ``[start, end]`` lists, ``embedding`` ``None`` when it repeats view 0, no ``score``).
    document: Document
    #: Its ``(k, d)`` float32 views (read-only when they came packed), or ``None`` when it has no vector.
    views: np.ndarray | None
    #: The encoder its ``meta["mvr_encoder"]`` names, or ``None``.
    encoder: dict[str, Any] | None


class PreparedBatch(NamedTuple):
    """A write's documents, prepared, with what the whole batch shares."""

    documents: list[PreparedDocument]
    #: The one view dimension of the batch, ``None`` when no document carries vectors.
    dim: int | None
    #: A copy of the one encoder the batch names, ``None`` when none does.
    encoder: dict[str, Any] | None


def document_list(documents: Any) -> list[Document]:
    """``documents`` (any iterable of ``Document``, a generator too) as a list; anything else is a ``ValueError``."""
    if isinstance(documents, (str, bytes, dict, Document)) or not isinstance(documents, Iterable):
        msg = "Please provide a list of Documents."
        raise ValueError(msg)
    documents = list(documents)
    if any(not isinstance(d, Document) for d in documents):
        msg = "Please provide a list of Documents."
        raise ValueError(msg)
    return documents


def document_id_list(document_ids: Any) -> list[str]:
    """The unique ids of ``document_ids`` in order; a bare string or non-string ids are a ``ValueError``."""
    if isinstance(document_ids, (str, bytes)) or not isinstance(document_ids, Iterable):
        msg = f"document_ids must be a list of document ids, got {type(document_ids).__name__}."
        raise ValueError(msg)
    ids = list(dict.fromkeys(document_ids))
    if any(not isinstance(i, str) for i in ids):
        msg = "document_ids must be a list of strings."
        raise ValueError(msg)
    return ids


def already_stored_message(doc_id: str) -> str:
    """The ``DuplicateDocumentError`` message of a ``FAIL`` write whose document ``doc_id`` is stored already."""
    return (
        f"ID '{doc_id}' already exists. Nothing of this batch was written; pass policy=DuplicatePolicy.OVERWRITE "
        "to replace it, or DuplicatePolicy.SKIP to keep the stored one."
    )


def repeated_in_batch_message(doc_id: str) -> str:
    """The ``DuplicateDocumentError`` message of a ``FAIL`` write that holds document ``doc_id`` twice or more (none
    stored yet)."""
    return (
        f"ID '{doc_id}' is duplicated within this batch: it appears more than once (nothing of the batch was "
        "written). Write each id once, or pass policy=DuplicatePolicy.OVERWRITE (the last copy is kept) or "
        "DuplicatePolicy.SKIP (the first is kept)."
    )


def prepare_documents(documents: Any) -> PreparedBatch:
    """
    Every document of a write (any iterable of ``Document``) prepared by :func:`prepare_document`, and the batch's
    one view dimension and encoder; nothing given is changed.

    :raises ValueError: naming the document, for anything :func:`prepare_document` refuses, a second view dimension
        or a second encoder in the batch; "Please provide a list of Documents." for anything but documents.
    """
    prepared = [prepare_document(d) for d in document_list(documents)]
    shared = SharedByBatch()
    for p in prepared:
        shared.add(p.document.id, p.views, p.encoder)
    return PreparedBatch(prepared, shared.dim, shared.encoder_copy())


class SharedByBatch:
    """What the documents of one write must share, fed a document at a time: one view dimension and one encoder
    (:func:`prepare_documents` checks a batch with it; a store that keeps less than every prepared document can too).
    """

    def __init__(self) -> None:
        self.dim: int | None = None
        self.encoder: dict[str, Any] | None = None
        self.first_with_views: str | None = None
        self.first_with_encoder: str | None = None

    def add(self, doc_id: str, views: np.ndarray | None, encoder: dict[str, Any] | None) -> None:
        """Check one prepared document against those before it; a ``ValueError`` naming it otherwise."""
        if views is not None:
            d = views.shape[1]
            if self.dim is None:
                self.dim, self.first_with_views = d, doc_id
            elif d != self.dim:
                msg = (
                    f"Document {doc_id!r} has {d}-dimensional vectors but other documents of the batch have "
                    f"{self.dim}-dimensional ones; nothing of this batch was written."
                )
                raise ValueError(msg)
        if encoder is not None:
            if self.encoder is None:
                self.encoder, self.first_with_encoder = encoder, doc_id
            elif encoder is not self.encoder and encoder != self.encoder and not same_encoder(encoder, self.encoder):
                msg = (
                    f"Document {doc_id!r} was encoded by {encoder} but other documents of the batch by "
                    f"{self.encoder}; nothing of this batch was written. Use another index for another encoder."
                )
                raise ValueError(msg)

    def encoder_copy(self) -> dict[str, Any] | None:
        """A copy of the batch's encoder (the documents' own dict is the caller's), ``None`` when none names one."""
        return None if self.encoder is None else copy.deepcopy(self.encoder)


def prepare_document(document: Document) -> PreparedDocument:
    """
    Split ``document`` into its stored form, its views and the encoder it names, as :class:`PreparedDocument` says.

    Views given as :class:`~haystack_mvr.views.PackedViews` or as a C-contiguous float32 numpy matrix are taken as
    they are (not copied); every other form goes through :func:`~haystack_mvr.views.extract_views`.

    :raises ValueError: naming the document, for views that are ragged, empty or not finite, spans that do not fit
        them or the content, an ``embedding`` of another size than the views, an ``mvr_encoder`` that is not a dict,
        or meta JSON cannot hold.
    """
    doc_meta = document.meta
    raw = doc_meta.get(VIEWS_KEY)
    views: np.ndarray | None
    if type(raw) is PackedViews or (
        type(raw) is np.ndarray
        and raw.dtype is _FLOAT32
        and raw.ndim == 2
        and raw.shape[0]
        and raw.shape[1]
        and raw.flags.c_contiguous
    ):
        views = raw.matrix if type(raw) is PackedViews else raw
        if not np.isfinite(views).all():
            msg = f"Document {document.id!r}: views contain NaN or infinite values."
            raise ValueError(msg)
        raw_spans = doc_meta.get(SPANS_KEY)
        spans = None
        if raw_spans is not None:
            spans = validate_spans(raw_spans, views, document.content, where=f"document {document.id!r}")
    else:
        views, spans, _ = extract_views(document)
    encoder = doc_meta.get(ENCODER_KEY)
    if encoder is not None and not isinstance(encoder, dict):
        name = type(encoder).__name__
        msg = f"Document {document.id!r}: meta['{ENCODER_KEY}'] must be a dict naming the encoder, got {name}."
        raise ValueError(msg)
    embedding = document.embedding
    if views is not None and embedding is not None:
        d = views.shape[1]
        if len(embedding) != d:
            msg = (
                f"Document {document.id!r}: its embedding has {len(embedding)} dimensions but its views have {d}; "
                "nothing of this batch was written."
            )
            raise ValueError(msg)
        if embedding_repeats_first_view(embedding, views):
            embedding = None  # read back from view 0, which the embedders set as embedding anyway
    meta = json_meta(doc_meta, f"Document {document.id!r}")  # a copy: nested values are the store's own
    if spans is not None:
        meta[SPANS_KEY] = [None if s is None else [s[0], s[1]] for s in spans]
    stored = copy_with(document, meta, None if embedding is None else list(embedding), None)
    return PreparedDocument(stored, views, encoder)


def same_encoder(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two encoder configs are the same once written as JSON (a record read back holds lists, not tuples);
    two that both carry the weights' ``fingerprint`` are compared without ``model``, the name the weights were
    loaded by (the packaged MiniLM's folder in one environment, its hub id in a dumped pipeline)."""
    if "fingerprint" in a and "fingerprint" in b:
        a, b = ({k: v for k, v in c.items() if k != "model"} for c in (a, b))
    return canonical_encoder(a) == canonical_encoder(b)


def canonical_encoder(config: dict[str, Any]) -> str:
    """An encoder config as sorted JSON, to compare records across JSON round trips."""
    return json.dumps(config, sort_keys=True, default=str)


def json_meta(meta: dict[str, Any], where: str) -> dict[str, Any]:
    """``meta`` without the keys the store takes off (views, spans, encoder), each value as :func:`json_value` makes
    it (a plain scalar as it is, without a call)."""
    out = {}
    for key, value in meta.items():
        if key in _TAKEN_KEYS:
            continue
        if type(key) is not str:
            raise _not_json(where, f"its meta has the key {key!r} ({type(key).__name__})")
        out[key] = value if type(value) in _PLAIN else json_value(value, where, key)
    return out


def json_value(value: Any, where: str, field: str) -> Any:
    """A copy of the meta ``value`` as JSON keeps it: numpy numbers become Python ones, tuples lists; anything JSON
    cannot hold (dates, sets, bytes, objects, non-string keys) is a ``ValueError`` naming ``where`` and the field."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, np.generic):
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            return float(value)
    elif isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _not_json(where, f"meta field {field!r} has the key {key!r} ({type(key).__name__})")
            out[key] = json_value(item, where, f"{field}.{key}")
        return out
    elif isinstance(value, (list, tuple)):
        return [json_value(item, where, f"{field}[{i}]") for i, item in enumerate(value)]
    raise _not_json(where, f"meta field {field!r} holds a {type(value).__name__}")


def _not_json(where: str, what: str) -> ValueError:
    return ValueError(
        f"{where}: {what}, which the store cannot save (it saves meta as JSON): use str, int, float, bool, None and "
        "lists or dicts of them with string keys (numpy numbers are converted), e.g. an ISO string for a date. "
        "Nothing was written."
    )


__all__ = [
    "PreparedBatch",
    "PreparedDocument",
    "canonical_encoder",
    "document_id_list",
    "document_list",
    "json_meta",
    "json_value",
    "prepare_document",
    "prepare_documents",
    "same_encoder",
]
