"""A write's documents as the FAISS store takes them, checked against the store's own limits before anything of the
batch is stored."""

from __future__ import annotations

from typing import Any

from haystack import Document

from haystack_mvr.document_stores.checks import document_dimension_message
from haystack_mvr.document_stores.faiss.document_table import WrittenDocuments, document_line, table_meta
from haystack_mvr.document_stores.faiss.view_labels import too_many_views
from haystack_mvr.document_stores.writes import SharedByBatch, prepare_document, same_encoder


def prepare_batch(
    documents: list[Document], dim: int | None, known_encoder: dict[str, Any] | None
) -> tuple[WrittenDocuments, int | None, dict[str, Any] | None]:
    """Each document as the table and the index take it, prepared by
    :func:`~haystack_mvr.document_stores.writes.prepare_document` as for every store and made its stored line at
    once (the prepared copy, its meta and span lists, dropped before the next: a batch of them alive at once set
    off the garbage collector's full collections), with the batch's view dimension and a copy of its encoder,
    checked against the store's own limits: views per document, its dimension ``dim`` and its encoder
    ``known_encoder`` (``None``: not fixed yet); nothing is changed."""
    written = WrittenDocuments()
    for document in documents:
        p = prepare_document(document)
        written.ids.append(p.document.id)
        written.lines.append(document_line(p.document))
        written.metas.append(table_meta(p.document.meta))
        written.views.append(p.views)
        written.encoders.append(p.encoder)
    shared = SharedByBatch()  # after every document is prepared, as prepare_documents does: its own errors first
    for doc_id, views, doc_encoder in zip(written.ids, written.views, written.encoders, strict=True):
        shared.add(doc_id, views, doc_encoder)
    if shared.dim is not None and dim is not None and shared.dim != dim:
        raise ValueError(document_dimension_message(shared.first_with_views, shared.dim, "the store", dim))
    for doc_id, views in zip(written.ids, written.views, strict=True):
        problem = None if views is None else too_many_views(len(views))
        if problem is not None:
            msg = (
                f"Document {doc_id!r} {problem}. Nothing of this batch was written: split the document, or encode it "
                f"with fewer, longer snippets."
            )
            raise ValueError(msg)
    encoder = shared.encoder_copy()
    known = known_encoder
    if encoder is not None and known is not None and not same_encoder(encoder, known):
        msg = (
            f"Document {shared.first_with_encoder!r} was encoded by another encoder ({encoder}) than the "
            f"store's vectors ({known}); re-encode it with the store's encoder or use another store."
        )
        raise ValueError(msg)
    return written, shared.dim, encoder


def invalid_views_error(doc_id: str, problem: str) -> ValueError:
    """The refusal of a write whose document ``doc_id`` has views with ``problem``."""
    return ValueError(f"Document {doc_id!r}: views {problem}; nothing of this batch was written.")
