"""Searching the views: a query's checks, the Qdrant query requests, and the returned points as ranked documents.

A query goes to Qdrant as a multivector against the ``MAX_SIM`` multivector of views: a vector as the one row ``[q]``
(optionally after a prefetch on the global view), a late-interaction query as its ``m`` rows, so that Qdrant ranks by
MaxSim natively. Qdrant does not say which view matched, so the returned points' views are scored again by
:func:`haystack_mvr.views.annotate_match`, which annotates each document as in every haystack-mvr store.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from haystack import Document
from qdrant_client.http import models

from haystack_mvr.document_stores.checks import check_query_dimension, query_matrices
from haystack_mvr.document_stores.qdrant import converters
from haystack_mvr.document_stores.qdrant.collection_state import CollectionState
from haystack_mvr.document_stores.qdrant.converters import GLOBAL_VECTOR, VIEWS_VECTOR
from haystack_mvr.document_stores.qdrant.filters import QdrantFilter, convert_filters
from haystack_mvr.views import annotate_match


def search_inputs(
    query_embeddings: Any, top_k: int, filters: dict[str, Any] | None, *, single: bool
) -> tuple[list[np.ndarray], QdrantFilter | None]:
    """Each query as a float32 ``(m, d)`` matrix (one row for a vector, ``m`` for a late-interaction query given to
    ``search`` as a matrix) and the translated ``filters``, checked before any call."""
    return query_matrices(query_embeddings, top_k, single=single), convert_filters(filters)


def searchable(collection: CollectionState | None, queries: list[np.ndarray]) -> bool:
    """Whether there is anything to search: queries, and a collection with vectors of the queries' dimension."""
    if collection is None or collection.dim is None or not queries:
        return False
    for query in queries:
        check_query_dimension(query, collection.dim)
    return True


def query_requests(
    queries: list[np.ndarray],
    top_k: int,
    qfilter: models.Filter | None,
    *,
    local: bool,
    exact: bool,
    hnsw_ef: int | None,
    prefetch_limit: int | None,
) -> list[models.QueryRequest]:
    """One Qdrant query request per query: its rows as a multivector against the views' ``MAX_SIM`` (a vector as a
    one-row multivector; search parameters apply on a server only; the global-view prefetch, for one-row queries)."""
    params = None
    if not local and (exact or hnsw_ef is not None):
        params = models.SearchParams(exact=exact, hnsw_ef=hnsw_ef)
    requests = []
    for query in queries:
        prefetch = None
        if prefetch_limit is not None and len(query) == 1:
            prefetch = models.Prefetch(
                query=query[0].tolist(),
                using=GLOBAL_VECTOR,
                limit=max(prefetch_limit, top_k),
                filter=qfilter,
                params=params,
            )
        request = models.QueryRequest(
            # a multivector even for one row: local mode rejects a 1-D query on a multivector (qdrant-client #1444)
            query=query.tolist(),
            using=VIEWS_VECTOR,
            prefetch=prefetch,
            filter=qfilter,
            params=params,
            limit=top_k,
            with_payload=True,
            with_vector=[VIEWS_VECTOR],
        )
        requests.append(request)
    return requests


def as_kwargs(request: models.QueryRequest) -> dict[str, Any]:
    """A query request as the keyword arguments of ``QdrantClient.query_points``."""
    return {
        "query": request.query,
        "using": request.using,
        "prefetch": request.prefetch,
        "query_filter": request.filter,
        "search_params": request.params,
        "limit": request.limit,
        "with_payload": request.with_payload,
        "with_vectors": request.with_vector,
    }


def ranked_results(
    responses: list[Any] | None, queries: list[np.ndarray], return_embedding: bool
) -> list[list[Document]]:
    """Each query's returned points as annotated documents (``None``: nothing was searched, no documents)."""
    if responses is None:
        return [[] for _ in queries]
    return [_results(r.points, q, return_embedding) for r, q in zip(responses, queries, strict=True)]


def _results(points: list[models.ScoredPoint], query: np.ndarray, return_embedding: bool) -> list[Document]:
    """Returned points as annotated documents, best first (stable: Qdrant's order breaks exact ties): by their best
    view for a one-row query, by MaxSim for a multi-vector one."""
    docs = []
    for point in points:
        views = converters.views_of(point.vector)
        if views is None:  # cannot happen for a MAX_SIM hit; kept out rather than scored wrongly
            continue
        stored = converters.to_document(point.payload)
        asked = query[0] if len(query) == 1 else query  # a vector, or a multi-vector query scored by MaxSim
        docs.append(annotate_match(stored, views, asked, return_embedding=return_embedding))
    docs.sort(key=lambda d: -d.score)
    return docs


__all__ = ["as_kwargs", "query_requests", "ranked_results", "search_inputs", "searchable"]
