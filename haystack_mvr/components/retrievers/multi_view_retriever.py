"""Haystack retriever over any multi-view document store: documents ranked by their best view."""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

import numpy as np
from haystack import Document, component, default_from_dict, default_to_dict
from haystack.core.serialization import import_class_by_name
from haystack.document_stores.types import FilterPolicy
from haystack.document_stores.types.filter_policy import apply_filter_policy

from haystack_mvr.components.retrievers.snippet_search import top_snippets, top_snippets_async
from haystack_mvr.document_stores.checks import check_filters, check_top_k
from haystack_mvr.document_stores.types import MultiViewDocumentStore
from haystack_mvr.views import unpack_views

GRANULARITIES = ("document", "snippet")
DOT_PRODUCT_SCALING_FACTOR = 100.0  # Haystack's: a raw inner product s is scaled to sigmoid(s / 100)

logger = logging.getLogger(__name__)


def _empty_store_hint(store: Any) -> str:
    """Why a store may be empty, and the fix, for the warning an empty store behind a retriever gets."""
    if hasattr(store, "index_path"):  # FAISS
        if store.index_path is None:
            return (
                "it has no index_path, so it lives in memory: a pipeline dumped with it loads with an empty store. "
                "Save the indexed store (store.save(path)) and open it with index_path=path."
            )
        return f"its index_path {store.index_path!r} holds no saved documents: build and save the index there first."
    if hasattr(store, "index"):  # Qdrant
        where = getattr(store, "url", None) or getattr(store, "path", None) or getattr(store, "location", None)
        return f"its collection {store.index!r} ({where or ':memory:'}) is empty or does not exist yet."
    return "write documents to it first."


def _checked_scale_score(scale_score: Any) -> bool:
    if not isinstance(scale_score, (bool, np.bool_)):
        msg = f"scale_score must be True or False, got {scale_score!r}."
        raise ValueError(msg)
    return bool(scale_score)


def _checked_score_threshold(score_threshold: Any) -> float | None:
    if score_threshold is None:
        return None
    if isinstance(score_threshold, (bool, np.bool_)) or not isinstance(score_threshold, (int, float, np.number)):
        msg = f"score_threshold must be a finite number or None, got {score_threshold!r}."
        raise ValueError(msg)
    if not math.isfinite(float(score_threshold)):
        msg = f"score_threshold must be a finite number or None, got {score_threshold!r}."
        raise ValueError(msg)
    return float(score_threshold)


def scaled_score(score: float) -> float:
    """A raw inner product (or MaxSim) score scaled to (0, 1) as Haystack scales dot-product scores:
    ``sigmoid(score / 100)``; monotone, so the order is kept."""
    return float(1.0 / (1.0 + math.exp(-max(min(score / DOT_PRODUCT_SCALING_FACTOR, 700.0), -700.0))))


def _thresholded(documents: list[Document], score_threshold: float | None, scale_score: bool) -> list[Document]:
    """``documents`` whose raw score is at least ``score_threshold``, each score scaled with ``scale_score``."""
    if score_threshold is not None:
        documents = [d for d in documents if d.score is not None and d.score >= score_threshold]
    if scale_score:
        documents = [d if d.score is None else dataclasses.replace(d, score=scaled_score(d.score)) for d in documents]
    return documents


def _query_vector(query_embedding: Any, packed_query_embedding: Any) -> Any:
    """The query given: ``query_embedding`` as it is, or what a packed one holds (read-only, passed to the store as
    it is): its float32 row ``(d,)``, or, for a late-interaction model's query, its ``(m, d)`` vectors."""
    if (query_embedding is None) == (packed_query_embedding is None):
        given = "both" if query_embedding is not None else "neither"
        msg = (
            f"MultiViewRetriever needs exactly one of query_embedding (a list[float]) and packed_query_embedding "
            f"(MultiViewTextEmbedder's packed_embedding), got {given}."
        )
        raise ValueError(msg)
    if query_embedding is not None:
        return query_embedding
    if not isinstance(packed_query_embedding, str):
        msg = (
            "packed_query_embedding must be the string MultiViewTextEmbedder's packed_embedding output gives, got "
            f"{type(packed_query_embedding).__name__}; pass a list[float] as query_embedding instead."
        )
        raise ValueError(msg)
    matrix = unpack_views(packed_query_embedding, where="packed_query_embedding")
    return matrix[0] if matrix.shape[0] == 1 else matrix  # several rows: a late-interaction query, scored by MaxSim


@component
class MultiViewRetriever:
    """
    Retrieves unique documents by max-over-views inner product from any ``MultiViewDocumentStore``.

    Works on ``FaissMultiViewDocumentStore`` and ``QdrantMultiViewDocumentStore`` alike. Connect a
    ``MultiViewTextEmbedder``'s ``packed_embedding`` to ``packed_query_embedding`` (the query vector as one
    immutable string, which Haystack's ``Pipeline`` passes on without copying it float by float), or any
    embedder's ``embedding`` to ``query_embedding`` (a ``list[float]``; give one of the two). Each returned
    document carries ``score``
    (its best view's score) and the matched-view keys of ``haystack_mvr.views`` (``mvr_matched_view``,
    ``mvr_matched_scope``, ``mvr_matched_span``, ``mvr_matched_text``). :meth:`run_batch` answers many query
    embeddings in one store call. As qdrant-haystack's retrievers, it takes ``scale_score`` and
    ``score_threshold`` (at init and per call), and :meth:`close` / :meth:`close_async` close its store.

    A text query (``query: str``, for ``MultiRetriever``, agent tools or Hayhooks' MCP): ``MultiViewTextRetriever``
    (embedder and retriever in one component, late-interaction models included), or Haystack's own
    ``TextEmbeddingRetriever(retriever=MultiViewRetriever(...), text_embedder=MultiViewTextEmbedder(...))`` for a
    single-vector model (it passes the ``embedding`` output only, which a late-interaction query cannot travel in).

    With ``granularity="snippet"`` the same index answers at a finer grain (as DensePhrases serves documents and
    phrases from one index): the ``top_k`` best snippet views across all documents, each a snippet ``Document``
    (``haystack_mvr.views.piece_document``: the snippet's text, id ``"{document id}#{start}-{end}"``, its view's
    score, the source's ``meta`` plus ``mvr_source_id`` and ``mvr_source_span``), chunk-like results without
    splitting anything. A document may give several. Exact: the search widens until no document left out can
    hold a better snippet.
    """

    def __init__(
        self,
        document_store: MultiViewDocumentStore,
        filters: dict[str, Any] | None = None,
        top_k: int = 10,
        filter_policy: FilterPolicy | str = FilterPolicy.REPLACE,
        return_embedding: bool = False,
        granularity: str = "document",
        scale_score: bool = False,
        score_threshold: float | None = None,
    ) -> None:
        """
        Create a MultiViewRetriever.

        :param document_store: The store to search.
        :param filters: Default Haystack metadata filters.
        :param top_k: Default number of documents to return.
        :param filter_policy: How runtime ``filters`` combine with the default ones (``replace`` or ``merge``).
        :param return_embedding: Return each document's views in ``meta["mvr_views"]`` (bulky; off by default;
            snippets never carry views).
        :param granularity: ``"document"`` (unique documents by their best view) or ``"snippet"`` (the best snippet
            views across documents, each as its own ``Document``).
        :param scale_score: Scale each score to (0, 1), as Haystack scales dot-product scores and qdrant-haystack's
            retrievers do: ``sigmoid(score / 100)`` (monotone: the order is kept). Off: raw inner products (MaxSim
            for a late-interaction query).
        :param score_threshold: Return only documents whose raw score (before ``scale_score``) is at least this;
            fewer than ``top_k`` may then come back. ``None``: no threshold.
        """
        if not isinstance(document_store, MultiViewDocumentStore):
            msg = (
                "document_store must be a multi-view document store (FaissMultiViewDocumentStore, "
                f"QdrantMultiViewDocumentStore, ...), got {type(document_store).__name__}."
            )
            raise ValueError(msg)
        check_top_k(top_k)
        if granularity not in GRANULARITIES:
            msg = f"granularity must be one of {list(GRANULARITIES)}, got {granularity!r}."
            raise ValueError(msg)
        self.granularity = granularity
        self.document_store = document_store
        self.filters = check_filters(filters)
        self.top_k = top_k
        self.filter_policy = (
            filter_policy if isinstance(filter_policy, FilterPolicy) else FilterPolicy.from_str(filter_policy)
        )
        self.return_embedding = return_embedding
        self.scale_score = _checked_scale_score(scale_score)
        self.score_threshold = _checked_score_threshold(score_threshold)
        self._empty_checked = False

    def warm_up(self) -> None:
        """
        Open the document store now, not at the first query: a FAISS store's ``index_path`` is read (and with it
        the store's encoder, so the first query's encoder is checked too), a Qdrant folder or server is opened and
        its collection read. ``Pipeline.warm_up()`` calls it; after it the pipeline answers at full speed. A store
        that holds no documents is logged as a warning, once (see :meth:`run`). Later calls do nothing more.
        """
        open_store = getattr(self.document_store, "warm_up", None)
        if callable(open_store):
            open_store()
        self._check_not_empty()

    async def warm_up_async(self) -> None:
        """:meth:`warm_up` on an event loop: the store's ``warm_up_async`` when it has one."""
        open_store = getattr(self.document_store, "warm_up_async", None)
        if callable(open_store):
            await open_store()
        else:
            sync_open = getattr(self.document_store, "warm_up", None)
            if callable(sync_open):
                sync_open()
        self._check_not_empty()

    def close(self) -> None:
        """Close the document store (its client, a Qdrant folder's lock), when it has a ``close``."""
        close = getattr(self.document_store, "close", None)
        if callable(close):
            close()

    async def close_async(self) -> None:
        """Close the document store's async resources: its ``close_async``, else its ``close``."""
        close = getattr(self.document_store, "close_async", None)
        if callable(close):
            await close()
            return
        self.close()

    def _check_not_empty(self) -> None:
        """Log a warning, once per retriever, when the store holds no documents (checked once: at :meth:`warm_up`,
        or at the first query that finds nothing)."""
        if self._empty_checked:
            return
        self._empty_checked = True
        try:
            empty = self.document_store.count_documents() == 0
        except Exception:  # a store that cannot be counted now says why at its next use
            return
        if empty:
            logger.warning(
                "MultiViewRetriever: the %s holds no documents, so every query returns none: %s",
                type(self.document_store).__name__,
                _empty_store_hint(self.document_store),
            )

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            document_store=self.document_store.to_dict(),
            filters=self.filters,
            top_k=self.top_k,
            filter_policy=self.filter_policy.value,
            return_embedding=self.return_embedding,
            granularity=self.granularity,
            scale_score=self.scale_score,
            score_threshold=self.score_threshold,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MultiViewRetriever:
        params = dict(data["init_parameters"])  # the caller's dict is left as it is
        data = {**data, "init_parameters": params}
        store = params["document_store"]
        params["document_store"] = import_class_by_name(store["type"]).from_dict(store)  # type: ignore[attr-defined]
        if "filter_policy" in params:
            params["filter_policy"] = FilterPolicy.from_str(params["filter_policy"])
        return default_from_dict(cls, data)

    def _top_k(self, top_k: int | None) -> int:
        """The runtime ``top_k`` (0 is refused, not read as "the default"), or the init one when it is ``None``."""
        return self.top_k if top_k is None else check_top_k(top_k)

    @component.output_types(documents=list[Document])
    def run(
        self,
        query_embedding: list[float] | None = None,
        filters: dict[str, Any] | None = None,
        top_k: int | None = None,
        encoder: dict[str, Any] | None = None,
        packed_query_embedding: str | None = None,
        scale_score: bool | None = None,
        score_threshold: float | None = None,
    ) -> dict[str, list[Document]]:
        """
        Retrieve documents.

        :param query_embedding: The query vector, a ``list[float]`` (any embedder's ``embedding``).
        :param filters: Runtime filters, combined with the defaults by ``filter_policy``.
        :param top_k: How many documents, a positive integer (``None``: the init ``top_k``).
        :param encoder: The query encoder's identity (``MultiViewTextEmbedder``'s ``encoder`` output); the store
            checks it against its ``encoder_config`` (``check_query_encoder``) before searching.
        :param packed_query_embedding: The query vector packed as a one-row ``haystack_mvr.views.PackedViews``
            (``MultiViewTextEmbedder``'s ``packed_embedding``, or that string read back from JSON): the same
            float32 values as ``query_embedding``, but Haystack's ``Pipeline`` hands an immutable string to the
            next component as it is, where it deep-copies a ``list[float]`` one float at a time (a protocol check
            per float; on squad-mv the whole query path takes 1.41x one vector per document through the list socket,
            1.15x through this one: ``benchmarks/results/query_path.squad-mv.md``). Give exactly one of the two.
        :param scale_score: Overrides the init ``scale_score`` for this query (``None``: the init one).
        :param score_threshold: Overrides the init ``score_threshold`` for this query (``None``: the init one).
        :returns: ``{"documents": [...]}``, best first, exactly ``top_k`` whenever that many match. A store that
            holds no documents is logged as a warning once per retriever (at :meth:`warm_up`, or at the first query
            that finds nothing), as Haystack's ``InMemoryEmbeddingRetriever`` warns about a store without
            embeddings; the result is still ``[]``.
        :raises ValueError: if ``encoder`` differs from the encoder the store was built with, ``top_k`` is not
            a positive integer, or not exactly one of ``query_embedding`` and ``packed_query_embedding`` is given.
        """
        query = _query_vector(query_embedding, packed_query_embedding)
        top_k = self._top_k(top_k)
        scale, threshold = self._scoring(scale_score, score_threshold)
        filters = apply_filter_policy(self.filter_policy, self.filters, check_filters(filters))
        self._check_query_form(query, encoder)
        if encoder:
            self.document_store.check_query_encoder(encoder)
        documents = self._search(query, top_k, filters)
        if not documents:
            self._check_not_empty()
        return {"documents": _thresholded(documents, threshold, scale)}

    def _scoring(self, scale_score: bool | None, score_threshold: float | None) -> tuple[bool, float | None]:
        """The ``scale_score`` and ``score_threshold`` of one call: its own, else the init ones."""
        scale = self.scale_score if scale_score is None else _checked_scale_score(scale_score)
        threshold = self.score_threshold if score_threshold is None else _checked_score_threshold(score_threshold)
        return scale, threshold

    def _check_query_form(self, query: Any, encoder: dict[str, Any] | None) -> None:
        """A late-interaction query must come whole (``packed_query_embedding``), and is ranked by document."""
        if self._late_interaction(encoder) and np.ndim(query) == 1:
            msg = (
                "A late-interaction (ColBERT) query is several vectors: connect MultiViewTextEmbedder's "
                "packed_embedding to packed_query_embedding (its embedding output holds only the first vector), "
                "or use MultiViewTextRetriever for a text query."
            )
            raise ValueError(msg)
        if self.granularity == "snippet" and np.ndim(query) == 2:
            msg = 'granularity="snippet" ranks single snippet views: it takes a one-vector query, not a multi-vector.'
            raise ValueError(msg)

    def _late_interaction(self, encoder: dict[str, Any] | None) -> bool:
        """Whether the query encoder, or else the encoder the store's views come from, scores by MaxSim (a store
        that does not know its encoder yet, such as a FAISS store not loaded, says nothing)."""
        stored = getattr(self.document_store, "encoder_config", None)
        known = encoder or (stored if isinstance(stored, dict) else None)
        return bool(known) and known.get("scoring") == "maxsim"

    def _search(self, query: Any, top_k: int, filters: dict[str, Any] | None) -> list[Document]:
        store = self.document_store
        if self.granularity == "snippet":
            return top_snippets(
                lambda depth: store.search(query, top_k=depth, filters=filters, return_embedding=True), query, top_k
            )
        return store.search(query, top_k=top_k, filters=filters, return_embedding=self.return_embedding)

    async def _search_async(self, query: Any, top_k: int, filters: dict[str, Any] | None) -> list[Document]:
        store = self.document_store
        if self.granularity == "snippet":
            return await top_snippets_async(
                lambda depth: store.search_async(query, top_k=depth, filters=filters, return_embedding=True),
                query,
                top_k,
            )
        return await store.search_async(query, top_k=top_k, filters=filters, return_embedding=self.return_embedding)

    @component.output_types(documents=list[Document])
    async def run_async(
        self,
        query_embedding: list[float] | None = None,
        filters: dict[str, Any] | None = None,
        top_k: int | None = None,
        encoder: dict[str, Any] | None = None,
        packed_query_embedding: str | None = None,
        scale_score: bool | None = None,
        score_threshold: float | None = None,
    ) -> dict[str, list[Document]]:
        """Asynchronous :meth:`run`."""
        query = _query_vector(query_embedding, packed_query_embedding)
        top_k = self._top_k(top_k)
        scale, threshold = self._scoring(scale_score, score_threshold)
        filters = apply_filter_policy(self.filter_policy, self.filters, check_filters(filters))
        self._check_query_form(query, encoder)
        if encoder:
            await self.document_store.check_query_encoder_async(encoder)
        documents = await self._search_async(query, top_k, filters)
        if not documents:
            self._check_not_empty()
        return {"documents": _thresholded(documents, threshold, scale)}

    def run_batch(
        self,
        query_embeddings: list[list[float]],
        filters: dict[str, Any] | None = None,
        top_k: int | None = None,
        encoder: dict[str, Any] | None = None,
        scale_score: bool | None = None,
        score_threshold: float | None = None,
    ) -> dict[str, list[list[Document]]]:
        """
        Retrieve documents for many queries in one store call (``search_batch``): much faster than one call each.

        :param query_embeddings: ``(n, d)`` query vectors.
        :param filters: Runtime filters shared by all queries, combined with the defaults by ``filter_policy``.
        :param top_k: How many documents per query, a positive integer (``None``: the init ``top_k``).
        :param encoder: The query encoder's identity, checked as in :meth:`run`.
        :param scale_score: As in :meth:`run`.
        :param score_threshold: As in :meth:`run`.
        :returns: ``{"documents": [[...], ...]}``: one ranked list per query, in query order.
        :raises ValueError: for a late-interaction ``encoder`` (its queries are several vectors each: :meth:`run`
            takes one whole), besides what :meth:`run` refuses.
        """
        top_k = self._top_k(top_k)
        scale, threshold = self._scoring(scale_score, score_threshold)
        filters = apply_filter_policy(self.filter_policy, self.filters, check_filters(filters))
        if self._late_interaction(encoder):
            msg = (
                "run_batch takes one vector per query, but a late-interaction (MaxSim) query is several vectors: "
                "run each query through run() with its packed_query_embedding."
            )
            raise ValueError(msg)
        if encoder:
            self.document_store.check_query_encoder(encoder)
        if self.granularity == "snippet":  # one widening search per query
            documents = [self._search(q, top_k, filters) for q in query_embeddings]
        else:
            documents = self.document_store.search_batch(
                query_embeddings, top_k=top_k, filters=filters, return_embedding=self.return_embedding
            )
        if not any(documents):
            self._check_not_empty()
        return {"documents": [_thresholded(found, threshold, scale) for found in documents]}
