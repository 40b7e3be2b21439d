"""The documents of a FAISS multi-view store, each held as the JSON line it is saved as.

A store of 10^6 views used to hold 125k ``Document`` objects, each with its meta dict and span lists: about ten
objects a document, every one of them traversed by each of Python's full garbage collections for the life of the
process (two thirds of a load's document time, half of a write's), and each one a small allocation that pins the
memory around it. :class:`DocumentTable` holds one ``bytes`` line a document (its ``documents.jsonl`` line, so a save
writes the lines as they are and a load keeps them as it read them) and, for filters, its ``meta`` without spans:
``bytes`` and dicts of plain values are never tracked by the collector. A ``Document`` is built from the line each
time one is read, so every caller gets a copy of its own.
"""

from __future__ import annotations

import itertools
import json
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import orjson  # faster than json on these lines, the same values (the lines it refuses are read by json)
from haystack import Document
from haystack.document_stores.errors import DocumentStoreError

from haystack_mvr.views import SPANS_KEY

_PLAIN_ORDER = ("id", "content", "meta", "embedding")  # the fields document_line writes for a plain document
_PLAIN_FIELDS = frozenset(_PLAIN_ORDER)
_CONTENT_TYPES = frozenset((str, type(None)))
_EMBEDDING_TYPES = frozenset((list, type(None)))
# Lines parsed at once by a load. A parsed record is a tracked dict: held for the whole file, a large store's records
# outlived the collector's young generations and set off full collections of the process's every object, which took
# most of a load; a chunk's records are dropped before most young collections promote them.
_PARSED_LINES = 256


class MetaRow:
    """A stored document's ``id`` and ``meta`` (without spans): what a filter on ``meta`` fields and the metadata
    queries read, without building the ``Document``."""

    __slots__ = ("id", "meta")

    def __init__(self, doc_id: str, meta: dict[str, Any]) -> None:
        self.id = doc_id
        self.meta = meta


_EMPTY: dict[str, Any] = {}  # the meta of a document without any; never handed out to be changed


@dataclass
class WrittenDocuments:
    """The documents of a write as the store takes them, a column each (lists of strings, bytes, plain dicts and
    arrays: nothing a document for the garbage collector to traverse or promote), in the write's order."""

    ids: list[str] = field(default_factory=list)
    #: Each one's :func:`document_line`.
    lines: list[bytes] = field(default_factory=list)
    #: Each one's meta as the table keeps it (:func:`table_meta`).
    metas: list[dict[str, Any]] = field(default_factory=list)
    #: Each one's ``(k, d)`` float32 views, or ``None``.
    views: list[np.ndarray | None] = field(default_factory=list)
    #: The encoder each one names (the caller's own dict), or ``None``.
    encoders: list[dict[str, Any] | None] = field(default_factory=list)


def table_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """A stored document's meta as the table keeps it for filters: without spans (a new dict, built without them, so
    that it is not tracked by the collector), the shared empty dict for none."""
    if SPANS_KEY in meta:
        meta = {k: v for k, v in meta.items() if k != SPANS_KEY}
    return meta or _EMPTY


class DocumentTable:
    """
    The stored documents by id, in write order (the store deletes a document written again before it puts it).

    :meth:`document` builds a new ``Document`` from the stored line each call; :meth:`meta_rows` and
    :meth:`matching_meta` read the filterable meta without building any.
    """

    def __init__(self) -> None:
        self._lines: dict[str, bytes] = {}
        # every document's meta without spans (the one shared empty dict for none), in the same order as _lines
        self._metas: dict[str, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self._lines)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._lines

    def ids(self) -> list[str]:
        return list(self._lines)

    def lines(self) -> Iterable[bytes]:
        """Every document's ``documents.jsonl`` line (without its newline), in write order."""
        return self._lines.values()

    def document(self, doc_id: str) -> Document:
        """A new ``Document`` of the stored ``doc_id`` (``KeyError`` when not stored)."""
        return document_from_line(self._lines[doc_id])

    def documents(self, ids: Iterable[str]) -> list[Document]:
        """:meth:`document` of each of ``ids``, in their order."""
        lines = self._lines
        return [document_from_line(lines[doc_id]) for doc_id in ids]

    def records(self, ids: Iterable[str]) -> list[StoredFields | Document]:
        """Each of ``ids`` as its stored fields (a new, parsed ``meta`` each), for a caller that builds one new
        ``Document`` from them (a search result): a plain document as :class:`StoredFields`, any other as its
        ``Document``."""
        lines = self._lines
        return [record_from_line(lines[doc_id]) for doc_id in ids]

    def meta_rows(self, ids: Iterable[str]) -> list[MetaRow]:
        """The filterable meta of ``ids`` (shared with the table: read it, never change it)."""
        metas = self._metas
        return [MetaRow(i, metas[i]) for i in ids]

    def matching_meta(self, match: Any) -> list[str]:
        """The ids whose meta ``match`` accepts, for a predicate that reads nothing but ``doc.meta`` (one row object
        reused for every document: ``match`` must not keep it)."""
        row = MetaRow("", _EMPTY)
        out = []
        for doc_id, meta in self._metas.items():
            row.meta = meta
            if match(row):
                out.append(doc_id)
        return out

    def put(self, doc_id: str, line: bytes, meta: dict[str, Any]) -> None:
        """Store ``line`` (see :func:`document_line`) for ``doc_id``: a new id goes last, a stored one keeps its
        place. ``meta`` is the document's meta, kept (without spans) for filters: the table takes it over."""
        self._lines[doc_id] = line
        self._keep_meta(doc_id, meta)

    def delete(self, doc_id: str) -> None:
        del self._lines[doc_id]
        del self._metas[doc_id]

    def clear(self) -> None:
        self._lines.clear()
        self._metas.clear()

    def _keep_meta(self, doc_id: str, meta: dict[str, Any]) -> None:
        self._metas[doc_id] = table_meta(meta)

    @classmethod
    def from_jsonl(cls, data: bytes, where: str) -> tuple[DocumentTable, list[str], list[int | None]]:
        """
        The table of a ``documents.jsonl`` file, every line checked to be a Document.

        :returns: The table (a repeated id keeps the last line: the caller compares the ids' count), the id of every
            line and the number of spans each line's meta gives (``None``: no spans; ``-1``: spans that are not a
            list).
        :raises DocumentStoreError: naming the first line that is not a Document.
        """
        lines = data.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
        ids: list[str] = []
        metas: list[dict[str, Any]] = []
        spans: list[int | None] = [None] * len(lines)
        for start in range(0, len(lines), _PARSED_LINES):  # records die a chunk at a time: see _PARSED_LINES
            records = _parse_lines(lines[start : start + _PARSED_LINES], where, start)
            columns = _plain_columns(records)
            if columns is None:  # not only what document_line writes: each record on its own
                columns = _checked_records(records, where, start)
            chunk_metas = columns[1]
            for n in itertools.compress(range(len(chunk_metas)), chunk_metas):  # documents with meta only
                meta = chunk_metas[n]
                if SPANS_KEY in meta:  # the span lists go with the chunk; the table keeps their count
                    given = meta[SPANS_KEY]
                    spans[start + n] = None if given is None else (len(given) if type(given) is list else -1)
            ids += columns[0]
            metas += map(table_meta, chunk_metas)  # a new dict where spans were: the old one stays tracked
            del records, columns, chunk_metas
        table = cls()
        table._lines = dict(zip(ids, lines, strict=True))
        table._metas = dict(zip(ids, metas, strict=True))
        return table, ids, spans


def _plain_columns(records: list[Any]) -> tuple[list[str], list[dict[str, Any]]] | None:
    """The ids and metas of ``records`` when every one is exactly what :func:`document_line` writes for a document of
    plain fields (checked a column at a time, at C speed, rather than a record at a time); ``None`` otherwise."""
    if not records or set(map(type, records)) != {dict} or set(map(len, records)) != {len(_PLAIN_FIELDS)}:
        return None
    try:  # a column at a time: no tuple a record (new tracked objects would set off the garbage collector)
        ids, contents, metas, embeddings = (list(map(operator.itemgetter(f), records)) for f in _PLAIN_ORDER)
    except KeyError:
        return None
    if (
        set(map(type, ids)) != {str}
        or set(map(type, metas)) != {dict}
        or not set(map(type, contents)) <= _CONTENT_TYPES
        or not set(map(type, embeddings)) <= _EMBEDDING_TYPES
    ):
        return None
    return ids, metas


def _checked_records(records: list[Any], where: str, start: int) -> tuple[list[str], list[dict[str, Any]]]:
    """The ids and metas of ``records`` (lines ``start + 1`` on) checked one at a time, naming the first that is not a
    Document."""
    ids, metas = [], []
    for n, fields in enumerate(records, start + 1):
        if _plain(fields):
            ids.append(fields["id"])
            metas.append(fields.get("meta") or {})
            continue
        try:
            doc = Document.from_dict(fields)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            msg = f"{where} is corrupt: documents.jsonl line {n} is not a Document ({type(e).__name__})."
            raise DocumentStoreError(msg) from e
        ids.append(doc.id)
        metas.append(doc.meta)
    return ids, metas


def _plain(fields: Any) -> bool:
    """Exactly what :func:`document_line` writes for a document of plain fields."""
    return (
        type(fields) is dict
        and fields.keys() <= _PLAIN_FIELDS
        and type(fields.get("id")) is str
        and type(fields.get("meta", _EMPTY)) is dict
        and (fields.get("content") is None or type(fields["content"]) is str)
        and (fields.get("embedding") is None or type(fields["embedding"]) is list)
    )


def _parse_lines(lines: list[bytes], where: str, start: int) -> list[Any]:
    """Every line (lines ``start + 1`` on) parsed, by one JSON call over them all (as one array) where that works,
    else line by line (naming the first bad line)."""
    if not lines:
        return []
    try:
        records = orjson.loads(b"[" + b",".join(lines) + b"]")
        if type(records) is list and len(records) == len(lines):
            return records
    except ValueError:
        pass
    records = []
    for n, line in enumerate(lines, start + 1):
        try:
            records.append(_loads(line))
        except ValueError as e:
            msg = f"{where} is corrupt: documents.jsonl line {n} is not a Document ({type(e).__name__})."
            raise DocumentStoreError(msg) from e
    return records


def _loads(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except ValueError:  # NaN or an infinity in meta: written by json, which orjson does not read
        return json.loads(line)


class StoredFields(NamedTuple):
    """A plain stored document's fields, parsed from its line: what a new ``Document`` is built from."""

    id: str
    content: str | None
    meta: dict[str, Any]
    embedding: list[float] | None
    blob: None = None
    sparse_embedding: None = None


def record_from_line(line: bytes) -> StoredFields | Document:
    """:func:`document_from_line` without building a plain document: its :class:`StoredFields`."""
    fields = _loads(line)
    if type(fields) is dict and fields.keys() == _PLAIN_FIELDS:
        return StoredFields(fields["id"], fields["content"], fields["meta"], fields["embedding"])
    return Document.from_dict(fields)


def document_from_line(line: bytes) -> Document:
    """A new ``Document`` from its stored line: one :func:`document_line` wrote, or a load checked."""
    fields = _loads(line)
    if type(fields) is dict and fields.keys() == _PLAIN_FIELDS:  # as document_line writes a plain document
        return Document(**fields)
    return Document.from_dict(fields)


def _document_dict(doc: Document) -> dict[str, Any]:
    """``Document.to_dict(flatten=False)`` without ``dataclasses.asdict``'s deep recursion; fields that
    are ``None`` (blob, sparse embedding, score) are left out."""
    data: dict[str, Any] = {"id": doc.id, "content": doc.content, "meta": doc.meta, "embedding": doc.embedding}
    if doc.blob is not None:
        data["blob"] = doc.blob.to_dict()
    if doc.sparse_embedding is not None:
        data["sparse_embedding"] = doc.sparse_embedding.to_dict()
    return data


def _json_default(value: Any) -> Any:
    """numpy numbers as Python ones (an ``embedding`` given as a numpy array, a sparse embedding's values)."""
    if isinstance(value, np.generic) and not isinstance(value, (np.datetime64, np.timedelta64, np.void)):
        return value.item()
    msg = f"Object of type {type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


_DOCUMENT_ENCODER = json.JSONEncoder(default=_json_default)  # json.dumps(..., default=) builds one per call


def document_line(doc: Document) -> bytes:
    """The stored (and saved) line of ``doc``, without its newline: its fields as JSON, the ``score`` left out.

    :raises ValueError: naming the document, when a field cannot be written as JSON.
    """
    try:
        return _DOCUMENT_ENCODER.encode(_document_dict(doc)).encode()
    except (TypeError, ValueError, RecursionError) as e:
        msg = f"Document {doc.id!r} cannot be stored: {e}."
        raise ValueError(msg) from e


def stored_id(doc_id: str) -> str:
    """A new string equal to ``doc_id``, for the store to keep. The caller's id was made beside the document's other
    small objects (an embedder makes view 0's 384 floats right after it); kept, it would keep their memory resident
    after they are freed (PQ48, documents as the embedders make them: 439 B/view after ``malloc_trim`` with the
    caller's ids, 211 with copies; ``benchmarks/store_speed.py --parts memory``)."""
    return doc_id.encode().decode() if type(doc_id) is str else doc_id


__all__ = ["DocumentTable", "MetaRow", "document_from_line", "document_line", "stored_id"]
