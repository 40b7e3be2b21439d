"""The multi-view store contract: what ``MultiViewRetriever`` needs from any backend (FAISS, Qdrant, ...)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from haystack import Document
from haystack.document_stores.types import DocumentStore


@dataclass(frozen=True)
class StoreStats:
    """
    What a store holds, as its ``stats()`` reads it: a snapshot, not a view, and never the store's internals (what
    benchmarks and tools read instead of them).

    :param documents: Stored documents, with vectors or without.
    :param views: Stored views (vectors), over all documents.
    :param dimension: Their dimension, ``None`` before the first vector.
    :param index_factory: The index searched (FAISS's factory string; pgvector's ``"exact"`` or ``"pgvector-hnsw"``).
    :param trained: Whether the index is ready to search its own rows (a FAISS index still collecting training rows
        is not; a store without training always is).
    :param train_size: Rows a trainable index is trained on, else ``None``.
    :param kept_vector_bytes: Bytes of float32 rows kept beside a lossy index (``0`` where none are).
    """

    documents: int
    views: int
    dimension: int | None
    index_factory: str | None
    trained: bool
    train_size: int | None
    kept_vector_bytes: int


@runtime_checkable
class MultiViewDocumentStore(DocumentStore, Protocol):
    """
    Haystack's ``DocumentStore`` protocol (and its ``*_async`` methods) plus multi-view search.

    Documents arrive carrying their views as ``haystack_mvr.views`` describes. A query is a matrix ``(m, d)``: one
    row (``m = 1``) is a one-vector query, scored against a document by its best view, ``score = max_i <q, v_i>``;
    more rows are a multi-vector (late-interaction) query, scored by MaxSim, ``score = sum_j max_i <q_j, v_i>``. The
    two are one formula (MaxSim of a one-row query is the best view's score), written once in ``haystack_mvr.maxsim``,
    over the views the store holds (their reconstruction, for a lossy index). :meth:`search` also takes a vector
    ``(d,)`` (a list of floats, as Haystack's embedders give it), which is the query ``(1, d)``: a store turns it
    into that shape once, where it takes the query, and searches and scores ``(m, d)`` from there on.
    :meth:`search_batch` takes ``(n, d)``, ``n`` one-vector queries.

    Every search method returns unique documents, best first, annotated by ``haystack_mvr.views.annotate_match``
    (or ``annotated_match_copy`` from similarities already computed): matched view, its scope, the best snippet's
    span and text, and for a multi-vector query the spans its vectors matched. Exactly ``min(top_k, matching
    documents with vectors)`` documents are returned. Returned documents are copies: changing them never changes
    the store. ``haystack_mvr.testing`` holds the contract suite every backend runs (``docs/stores.md``, "Writing a
    third store").

    ``encoder_config`` is the identity of the encoder the stored views come from (``meta["mvr_encoder"]`` of the
    documents written, see ``haystack_mvr.views``), or ``None`` while unknown: a plain attribute, read from the
    stored data when the store opens. :meth:`check_query_encoder` checks a query encoder against it.

    A store also offers ``stats() -> StoreStats``, what it holds (documents, views, dimension, index), for tools and
    benchmarks instead of its internals (the FAISS and pgvector stores do). It is not one of the methods an
    ``isinstance`` check of this protocol requires, so a store without it (the Qdrant store, so far) still is one.
    """

    encoder_config: dict[str, Any] | None

    def check_query_encoder(self, encoder: dict[str, Any] | None) -> None:
        """
        Open the store (so its ``encoder_config`` is what its data records) and raise a ``ValueError`` if ``encoder``,
        a query encoder's identity, differs from it (``haystack_mvr.document_stores.checks.check_query_encoder``).
        """
        ...

    async def check_query_encoder_async(self, encoder: dict[str, Any] | None) -> None:
        """Asynchronous :meth:`check_query_encoder`."""
        ...

    def search(
        self,
        query_embedding: Sequence[float],
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]:
        """
        The ``top_k`` documents that score highest against ``query_embedding``: a vector ``(d,)`` (a list of floats,
        or a float32 array as the retriever passes a packed query), taken as the one-row query ``(1, d)`` and scored by
        the best view; or a multi-vector query ``(m, d)``, scored by MaxSim.

        :param filters: Haystack metadata filters; only matching documents are ranked.
        :param return_embedding: Also return each document's views in ``meta["mvr_views"]`` and ``embedding``.
        """
        ...

    def search_batch(
        self,
        query_embeddings: Sequence[Sequence[float]],
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[list[Document]]:
        """:meth:`search` for many queries ``(n, d)`` at once, sharing one ``filters``; one list per query."""
        ...

    def export_documents(
        self, batch_size: int = 256, filters: dict[str, Any] | None = None
    ) -> Iterator[list[Document]]:
        """
        Every stored document matching ``filters`` with all its views, in lists of at most ``batch_size``.

        Each document is made by ``haystack_mvr.views.exported_document``: its views (as held: a lossy index's
        reconstruction) in ``meta["mvr_views"]``, its spans, its own ``embedding`` or view 0, and the store's
        ``encoder_config`` in ``meta["mvr_encoder"]``, so any multi-view store's ``write_documents`` takes it as
        it was first written. Views are read one batch at a time (memory bounded by ``batch_size``); documents
        written or deleted during the export may or may not be included.
        """
        ...

    async def search_async(
        self,
        query_embedding: Sequence[float],
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]:
        """Asynchronous :meth:`search`."""
        ...

    async def search_batch_async(
        self,
        query_embeddings: Sequence[Sequence[float]],
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[list[Document]]:
        """Asynchronous :meth:`search_batch`."""
        ...


__all__ = ["MultiViewDocumentStore"]
