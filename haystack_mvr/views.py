"""How a document's view matrix travels from the embedder, through ``DocumentWriter``, into the store.

Haystack's ``Document`` has a single ``embedding``. A multi-view document carries:

- ``meta["mvr_views"]``: its views, a ``(k, d)`` matrix. The embedders attach a :class:`PackedViews`: the float32
  matrix as one JSON string ``"float32:{k}x{d}:{base64}"`` with the decoded read-only matrix kept beside it. A
  string keeps ``Document`` what Haystack requires (JSON-serialisable meta, ``==``, ``to_dict``/``from_dict``),
  and it is immutable, so Haystack's deep copy of every component's inputs and the store's write take the matrix
  as it is instead of copying and converting ``k * d`` Python floats (``benchmarks/results/store_transport.md``).
  A store also takes a ``list[list[float]]``, a numpy matrix, or the packed string read back from JSON. The
  store takes this key off on write and keeps every view as one index row; it never stays in the stored ``meta``.
  Read it with :func:`document_views`, never ``len()`` (a packed value is a string).
- ``meta["mvr_view_spans"]`` (optional): one ``[start, end]`` character span into ``content`` per view,
  or ``None`` for a view that is not tied to a snippet (MVR viewers, the snippet-pooled global view).
  The store keeps it, so the retriever can say which snippet matched.
- ``embedding``: the first view, so the same document still works in any single-vector store.
- ``meta["mvr_encoder"]`` (optional): a JSON-able dict naming the encoder that produced the views (set by the
  document embedder). A store takes it off on write, records it once as its ``encoder_config`` and refuses
  documents from another encoder; a query embedding from another encoder is caught the same way.

A document with only an ordinary ``embedding`` is a document with one view; a document with neither is
stored but never returned by a vector search.

``filter_documents`` returns stored documents without their views (``embedding`` is view 0, and the spans stay):
to move an index to another store, read it with a store's ``export_documents`` (documents carrying all their
views and encoder as above, made by :func:`exported_document`) or copy it with
``haystack_mvr.document_stores.copy_documents``.

A piece of a document (a snippet ``MultiViewRetriever(granularity="snippet")`` returns, a part of a context
``MultiViewContextBuilder`` builds) is a ``Document`` of its own made by :func:`piece_document`: its text, and in
``meta`` the source's ``meta`` plus ``mvr_source_id``, ``mvr_source_span`` (``[start, end]`` in the source's
content) and the matched-view keys below for the best view inside it (``mvr_piece_tokens``: its token count, when
counted).

Every retrieved document, from every store, carries the same keys (set by :func:`annotate_match`, or by
:func:`annotated_copy` for a store that has scored the views and copied the ``meta`` itself):

- ``meta["mvr_matched_view"]``: the view (``int``) whose score is the document's ``score``;
- ``meta["mvr_matched_scope"]``: ``"snippet"`` when that view is a snippet's, ``"document"`` when it covers the
  whole document (the snippet mode's global view, an MVR viewer, a single vector);
- ``meta["mvr_matched_span"]`` / ``meta["mvr_matched_text"]``: the best-scoring snippet's ``[start, end]`` and
  text: the matched view itself for a snippet match, else the best snippet view, so a document matched as a
  whole still shows its most relevant passage; ``None`` when the document has no snippet views.

A multi-vector (late-interaction, ColBERT) query scores a document by MaxSim, the sum over the query's vectors of
each one's best view, and its results say what matched as :func:`annotated_maxsim_copy` describes (the matched-view
keys above, plus ``meta["mvr_matched_spans"]``: the spans of the views, the tokens of a ColBERT document, that the
query's vectors matched best).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from haystack import Document

from haystack_mvr.maxsim import best_matches, similarities

VIEWS_KEY = "mvr_views"
SPANS_KEY = "mvr_view_spans"
MATCHED_VIEW_KEY = "mvr_matched_view"
MATCHED_SPAN_KEY = "mvr_matched_span"
MATCHED_TEXT_KEY = "mvr_matched_text"
MATCHED_SCOPE_KEY = "mvr_matched_scope"
ENCODER_KEY = "mvr_encoder"
MATCHED_SPANS_KEY = "mvr_matched_spans"
MATCHED_KEYS = (MATCHED_VIEW_KEY, MATCHED_SCOPE_KEY, MATCHED_SPAN_KEY, MATCHED_TEXT_KEY)  # on every retrieved document
SOURCE_ID_KEY = "mvr_source_id"
SOURCE_SPAN_KEY = "mvr_source_span"
PIECE_TOKENS_KEY = "mvr_piece_tokens"

Span = tuple[int, int] | None

_PACKED_HEADER = re.compile(r"float32:(\d{1,9})x(\d{1,9}):")
_LITTLE_ENDIAN_F4 = np.dtype("<f4")


class PackedViews(str):
    """
    A ``(k, d)`` float32 view matrix as an immutable JSON string ``"float32:{k}x{d}:{base64}"`` (little-endian).

    The string is what serialises and compares; :attr:`matrix` is the read-only matrix it encodes, kept so that
    neither a copy nor a write decodes it again. Copying returns the same object (both parts are immutable).
    """

    matrix: np.ndarray

    def __new__(cls, matrix: np.ndarray) -> PackedViews:
        """Pack ``matrix`` (converted to float32); use :func:`attach_views` to put views on a document."""
        values = np.asarray(matrix, dtype=_LITTLE_ENDIAN_F4)
        if values.ndim != 2 or not values.shape[0] or not values.shape[1]:
            msg = f"PackedViews needs a non-empty (k, d) matrix, got shape {values.shape}."
            raise ValueError(msg)
        raw = values.tobytes()
        text = f"float32:{values.shape[0]}x{values.shape[1]}:{base64.b64encode(raw).decode('ascii')}"
        return cls._made(text, np.frombuffer(raw, dtype=_LITTLE_ENDIAN_F4).reshape(values.shape))

    @classmethod
    def _made(cls, text: str, matrix: np.ndarray) -> PackedViews:
        packed = super().__new__(cls, text)
        packed.matrix = matrix  # backed by immutable bytes: it cannot be made writeable
        return packed

    def __copy__(self) -> PackedViews:
        return self

    def __deepcopy__(self, memo: dict) -> PackedViews:
        return self

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return _unpickle_packed, (str(self),)


def embedding_repeats_first_view(embedding: Sequence[float], views: np.ndarray) -> bool:
    """Whether a document's ``embedding`` equals view 0 of its ``(k, d)`` views exactly, so a store need not keep it
    (it reads view 0 back as the ``embedding``)."""
    first = views[0].tolist()
    return (embedding if type(embedding) is list else list(embedding)) == first


def _unpickle_packed(text: str) -> PackedViews:
    return PackedViews._made(text, unpack_views(text, where="a pickled PackedViews"))


def unpack_views(text: str, *, where: str) -> np.ndarray:
    """The read-only ``(k, d)`` float32 matrix a packed views string encodes, or a ``ValueError`` naming ``where``."""
    if isinstance(text, PackedViews):
        return text.matrix
    header = _PACKED_HEADER.match(text)
    if header is None:
        msg = f"{where.capitalize()}: views given as a string must be 'float32:{{k}}x{{d}}:{{base64}}' (PackedViews)."
        raise ValueError(msg)
    k, d = int(header.group(1)), int(header.group(2))
    try:
        raw = base64.b64decode(text[header.end() :], validate=True)
    except (binascii.Error, ValueError) as e:
        msg = f"{where.capitalize()}: packed views are not valid base64."
        raise ValueError(msg) from e
    if len(raw) != k * d * 4:
        msg = f"{where.capitalize()}: packed views hold {len(raw)} bytes, not the {k}x{d} float32 their header names."
        raise ValueError(msg)
    return np.frombuffer(raw, dtype=_LITTLE_ENDIAN_F4).reshape(k, d)


def attach_views(document: Document, views: np.ndarray, spans: Sequence[Span] | None = None) -> Document:
    """
    Return a copy of ``document`` carrying ``views``; the input document is not changed.

    :param document: The document the views were computed from.
    :param views: Array of shape ``(k, d)`` with ``k >= 1``.
    :param spans: Optional ``k`` character spans into ``document.content`` (``None`` for non-snippet views).
    :returns: A new ``Document`` with ``embedding`` set to the first view and the views in ``meta`` as
        :class:`PackedViews`.
    """
    matrix = validate_views(views, where=f"document {document.id!r}")
    meta = dict(document.meta)
    packed = views if isinstance(views, PackedViews) else PackedViews(matrix)
    meta[VIEWS_KEY] = packed
    if spans is not None:
        if len(spans) != matrix.shape[0]:
            msg = f"Document {document.id!r}: got {len(spans)} spans for {matrix.shape[0]} views."
            raise ValueError(msg)
        meta[SPANS_KEY] = [None if s is None else [int(s[0]), int(s[1])] for s in spans]
    else:
        meta.pop(SPANS_KEY, None)
    return dataclasses.replace(document, meta=meta, embedding=packed.matrix[0].tolist())


def exported_document(stored: Document, views: np.ndarray | None, encoder: dict[str, Any] | None = None) -> Document:
    """
    A stored document as a store exports it: carrying all its views, so any multi-view store takes it as written.

    :param stored: The document as the store keeps it (``meta`` may hold ``mvr_view_spans``; ``embedding`` is its
        own embedding when it differs from view 0, else ``None``).
    :param views: Its ``(k, d)`` views as the store holds them (a lossy index's reconstruction), or ``None``.
    :param encoder: The store's encoder config, put into ``meta["mvr_encoder"]`` so the target records it too.
    :returns: A new ``Document`` as :func:`attach_views` makes it (views packed in ``meta``, ``embedding`` view 0
        unless the document has its own), without ``score``.
    """
    meta = dict(stored.meta)
    spans = meta.pop(SPANS_KEY, None)
    meta.pop(VIEWS_KEY, None)
    if encoder is not None:
        meta[ENCODER_KEY] = encoder
    document = dataclasses.replace(stored, meta=meta, score=None)
    if views is None:
        return dataclasses.replace(document, embedding=None)
    exported = attach_views(document, views, spans)
    if stored.embedding is not None:
        exported = dataclasses.replace(exported, embedding=list(stored.embedding))
    return exported


def document_views(document: Document) -> np.ndarray | None:
    """A document's views as a float32 ``(k, d)`` matrix (its ``embedding`` as one view), or ``None``."""
    return extract_views(document)[0]


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
        msg = (
            f"{where.capitalize()}: '{SPANS_KEY}' must have one entry per view ({len(raw_spans)} spans, "
            f"{0 if views is None else views.shape[0]} views). A document read back with filter_documents carries "
            "only its first view: move documents between stores with export_documents or "
            "haystack_mvr.document_stores.copy_documents."
        )
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
    if isinstance(views, str):
        views = unpack_views(views, where=where)
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

    Shared by every store so that all backends score and annotate alike (a store that has already copied the
    document's ``meta``, or scored its views, calls :func:`annotated_copy` instead and so copies once).

    :param document: The stored document (its ``meta`` may hold ``mvr_view_spans``, never ``mvr_views``).
    :param views: ``(k, d)`` views the store holds for it (a lossy index's reconstruction is fine).
    :param query: ``(d,)`` query vector, or a multi-vector query ``(m, d)`` (scored by MaxSim and annotated as
        :func:`annotated_maxsim_copy` says).
    :param return_embedding: Put the views into ``meta["mvr_views"]`` and view 0 into ``embedding`` (when the
        document has no ``embedding`` of its own); otherwise both are left out.
    :returns: The copy with ``score = max_i <query, views_i>`` (or MaxSim) and the keys described in this module.
    """
    matrix = np.asarray(views, dtype=np.float32)
    query = np.asarray(query, dtype=np.float32)
    meta = {k: v for k, v in document.meta.items() if k != VIEWS_KEY}
    queries = query if query.ndim == 2 else query.reshape(1, -1)  # the (m, d) shape every scorer takes
    return annotated_match_copy(document, meta, similarities(matrix, queries), views, return_embedding=return_embedding)


def annotated_match_copy(
    document: Any,
    meta: dict[str, Any],
    scores: np.ndarray,
    views: np.ndarray | None = None,
    *,
    return_embedding: bool = False,
) -> Document:
    """
    :func:`annotate_match` from the views' ``(k, m)`` similarities with an ``(m, d)`` query
    (:func:`haystack_mvr.maxsim.similarities`, as a search computed them): :func:`annotated_copy` for a one-vector
    query (``m = 1``), :func:`annotated_maxsim_copy` for a multi-vector one.
    """
    if scores.shape[1] == 1:
        return annotated_copy(document, meta, scores[:, 0].tolist(), views, return_embedding=return_embedding)
    return annotated_maxsim_copy(document, meta, scores, views, return_embedding=return_embedding)


def annotated_copy(
    document: Any,
    meta: dict[str, Any],
    scores: list[float],
    views: np.ndarray | None = None,
    *,
    return_embedding: bool = False,
) -> Document:
    """
    :func:`annotate_match` for a caller that has scored the views already and made the copy's ``meta`` itself.

    :param document: The stored document, or a store's record of its fields (see :func:`copy_with`); only read
        (its ``id``, ``content`` and other fields are shared by the copy, as ``dataclasses.replace`` shares them).
    :param meta: The copy's ``meta``, a new dict the caller owns (without ``mvr_views``): the matched-view keys are
        set in it and it becomes the returned document's ``meta``.
    :param scores: ``<query, views_i>`` of each view, as Python floats (the float32 products).
    :param views: The ``(k, d)`` views, needed only with ``return_embedding``.
    :param return_embedding: As in :func:`annotate_match` (``embedding``: a copy of the document's own, else view 0).
    :returns: The annotated copy: ``score`` is the best view's, exactly as :func:`annotate_match` gives it.
    """
    count = len(scores)
    best = scores.index(max(scores))  # the first best, as np.argmax
    spans = meta.get(SPANS_KEY)
    best_snippet = None
    if spans:
        for i, s in enumerate(spans[:count]):
            if s is not None and (best_snippet is None or scores[i] > scores[best_snippet]):
                best_snippet = i
    span = None
    if best_snippet is not None:
        if scores[best_snippet] >= scores[best]:
            best = best_snippet  # a tie between a snippet and the whole document is reported as the snippet
        span = [int(spans[best_snippet][0]), int(spans[best_snippet][1])]
    meta[MATCHED_VIEW_KEY] = best
    meta[MATCHED_SCOPE_KEY] = "snippet" if best == best_snippet else "document"
    meta[MATCHED_SPAN_KEY] = span
    meta[MATCHED_TEXT_KEY] = None if span is None else snippet_text(document.content, (span[0], span[1]))
    return _scored_copy(document, meta, float(scores[best]), views if return_embedding else None)


def annotated_maxsim_copy(
    document: Any,
    meta: dict[str, Any],
    similarities: np.ndarray,
    views: np.ndarray | None = None,
    *,
    return_embedding: bool = False,
) -> Document:
    """
    :func:`annotated_copy` for a multi-vector (late-interaction) query: ``score`` is MaxSim, the sum over the
    query's vectors of each one's best view.

    What matched: ``mvr_matched_spans`` lists the ``[start, end]`` spans of the views the query's vectors matched
    best (for a ColBERT document, the tokens; sorted, each once); ``mvr_matched_view`` is the view that contributes
    most to the score (the sum of the best scores it holds; scope ``"snippet"``, or ``"document"`` for a view without
    a span, such as ``[CLS]``). ``mvr_matched_text`` is what matched in words, and ``mvr_matched_span`` its span:
    the words around the matched tokens where most query vectors found their match (:func:`matched_words_span`: the
    whole sentence when it is short, else a window of words), never a lone token such as ``the``. The
    views' own spans (``mvr_view_spans``, one a token for a ColBERT document) stay only with ``return_embedding``, as
    the views do: a pipeline copies every result's meta between components.

    :param similarities: ``(k, m)``: each view's inner product with each query vector
        (:func:`haystack_mvr.maxsim.similarities`); the score is their MaxSim, the sum of the best matches
        (:func:`haystack_mvr.maxsim.best_matches`).
    """
    best_views, best = best_matches(similarities)
    contribution = np.bincount(best_views, weights=best.astype(np.float64), minlength=similarities.shape[0])
    hits = np.bincount(best_views, minlength=similarities.shape[0])
    matched = int(contribution.argmax())
    spans = meta.get(SPANS_KEY) or []
    token_hits = [
        (int(spans[v][0]), int(spans[v][1]), int(hits[v]), float(contribution[v]))
        for v in set(best_views.tolist())
        if v < len(spans) and spans[v] is not None
    ]
    span = matched_words_span(document.content, token_hits)
    meta[MATCHED_VIEW_KEY] = matched
    own = spans[matched] if matched < len(spans) else None
    meta[MATCHED_SCOPE_KEY] = "document" if own is None else "snippet"
    meta[MATCHED_SPAN_KEY] = None if span is None else list(span)
    meta[MATCHED_TEXT_KEY] = snippet_text(document.content, span)
    meta[MATCHED_SPANS_KEY] = [[start, end] for start, end in sorted({(t[0], t[1]) for t in token_hits})]
    if not return_embedding:  # a span a token: they travel with the views only, what matched is said above
        meta.pop(SPANS_KEY, None)
    return _scored_copy(document, meta, float(best.sum()), views if return_embedding else None)


MATCH_WINDOW_CHARS = 120  # the widest stretch of matched tokens a late-interaction result's text is built around
MATCH_SENTENCE_CHARS = 300  # a sentence up to this long holding that stretch is shown whole
_SENTENCE_END = re.compile("[.!?](?=\\s|$)|[\u3002\uff01\uff1f]|\n")  # ASCII and CJK sentence ends, or a line end


def matched_words_span(content: str | None, token_hits: list[tuple[int, int, int, float]]) -> tuple[int, int] | None:
    """
    The span of a document's ``content`` that shows, in words, what a multi-vector query matched.

    :param token_hits: ``(start, end, hits, score)`` of each matched token: its span, how many query vectors it is
        the best match of, and the sum of their scores.
    :returns: Around the stretch of at most :data:`MATCH_WINDOW_CHARS` characters that holds the most hits (then the
        most score), the sentence (or sentences) holding it when at most :data:`MATCH_SENTENCE_CHARS` long, else the
        stretch widened to whole words; ``None`` without content or matched tokens with spans.
    """
    if not content or not token_hits:
        return None
    tokens = sorted(token_hits)
    best, first, total_hits, total_score = None, 0, 0, 0.0
    for last, (_, end, hits, score) in enumerate(tokens):
        total_hits, total_score = total_hits + hits, total_score + score
        while end - tokens[first][0] > MATCH_WINDOW_CHARS and first < last:
            total_hits, total_score = total_hits - tokens[first][2], total_score - tokens[first][3]
            first += 1
        if best is None or (total_hits, total_score) > best[0]:
            best = ((total_hits, total_score), tokens[first][0], end)
    assert best is not None
    start, end = max(0, best[1]), min(len(content), best[2])
    ends_before = [m.end() for m in _SENTENCE_END.finditer(content, 0, start)]
    sentence_start = ends_before[-1] if ends_before else 0
    after = _SENTENCE_END.search(content, max(end - 1, start))
    sentence_end = after.end() if after else len(content)
    if sentence_end - sentence_start <= MATCH_SENTENCE_CHARS:
        start, end = sentence_start, sentence_end
    else:  # a long sentence (or text without sentence ends): the stretch, to whole words
        while start > sentence_start and not content[start - 1].isspace():
            start -= 1
        while end < sentence_end and not content[end].isspace():
            end += 1
    while start < end and content[start].isspace():
        start += 1
    while end > start and content[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _scored_copy(document: Any, meta: dict[str, Any], score: float, views: np.ndarray | None) -> Document:
    """The annotated copy: with ``views`` (``return_embedding``), they go into ``meta["mvr_views"]`` and the
    ``embedding`` is a copy of the document's own, else view 0; without, neither is set."""
    embedding = None
    if views is not None:
        matrix = np.asarray(views, dtype=np.float32)
        meta[VIEWS_KEY] = PackedViews(matrix)
        embedding = list(document.embedding) if document.embedding is not None else matrix[0].tolist()
    return copy_with(document, meta, embedding, score)


def copy_with(document: Any, meta: dict[str, Any], embedding: list[float] | None, score: float | None) -> Document:
    """
    A new document like ``document`` with ``meta``, ``embedding`` and ``score`` set, made by Haystack's own
    constructor (``dataclasses.replace`` for a ``Document`` subclass, whose own fields it keeps). ``document`` may
    also be a store's record of a plain document's fields (``id``, ``content``, ``blob``, ``sparse_embedding``).
    """
    if type(document) is Document or not isinstance(document, Document):
        return Document(
            id=document.id,
            content=document.content,
            blob=document.blob,
            meta=meta,
            score=score,
            embedding=embedding,
            sparse_embedding=document.sparse_embedding,
        )
    return dataclasses.replace(document, meta=meta, embedding=embedding, score=score)


def piece_document(
    source: Document, start: int, end: int, view: int, score: float, tokens: int | None = None
) -> Document:
    """
    ``source[start:end]`` as a ``Document`` of its own (a snippet or a context piece), as this module describes.

    :param source: The stored document, as a store returns it (``meta`` may hold its views and spans).
    :param start: / :param end: The piece's character span in ``source.content``.
    :param view: The best view inside the piece (a snippet view: ``meta["mvr_view_spans"][view]`` is its span).
    :param score: That view's score, the piece's ``score``.
    :param tokens: The piece's token count, kept as ``mvr_piece_tokens`` when given.
    """
    content = source.content or ""
    dropped = (VIEWS_KEY, SPANS_KEY, MATCHED_SPANS_KEY, *MATCHED_KEYS)
    meta = {k: v for k, v in source.meta.items() if k not in dropped}
    span = source.meta[SPANS_KEY][view]
    meta[SOURCE_ID_KEY] = source.id
    meta[SOURCE_SPAN_KEY] = [int(start), int(end)]
    meta[MATCHED_VIEW_KEY] = view
    meta[MATCHED_SCOPE_KEY] = "snippet"
    meta[MATCHED_SPAN_KEY] = [int(span[0]), int(span[1])]
    meta[MATCHED_TEXT_KEY] = content[span[0] : span[1]]
    if tokens is not None:
        meta[PIECE_TOKENS_KEY] = tokens
    return Document(id=f"{source.id}#{start}-{end}", content=content[start:end], meta=meta, score=score)
