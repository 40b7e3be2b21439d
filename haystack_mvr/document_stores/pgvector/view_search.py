"""Searching the views: candidate documents from SQL, then exact scores and the matched-view annotations.

One query vector ``q`` (``(1, d)``) ranks a document by its best view, ``max_i <q, v_i>``; a late-interaction query
``(m, d)`` by MaxSim, the sum over its vectors of each one's best view. pgvector's ``<#>`` is the negative inner
product. Every search ends the same way: the candidate documents' views are read and scored again in numpy by
:func:`haystack_mvr.views.annotate_match`, which annotates each document as in every haystack-mvr store, and the
``top_k`` best are returned, so exactly ``min(top_k, matching documents with vectors)`` come back.

Where the candidates come from:

- ``"exact"``: SQL computes every matching document's score (``GROUP BY`` document, ``max`` over its views; for
  MaxSim the ``max`` per query vector, then the sum) and keeps the best, with a few more than ``top_k`` so that
  float rounding between the database and numpy cannot change which documents make the cut. Equal to numpy brute
  force.
- ``"hnsw"``: the HNSW index yields each query vector's nearest view rows, with pgvector's iterative scan
  (``hnsw.iterative_scan = relaxed_order``) so that a filter does not starve the scan; the row limit is widened
  until the rows name ``top_k`` distinct documents. Those documents are re-scored exactly. When the scan ends
  (the index is exhausted, or it reached ``hnsw.max_scan_tuples``) before ``top_k`` documents, the exact query
  answers instead, so a selective filter still returns every match.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
from haystack import Document

from haystack_mvr.document_stores.checks import check_query_dimension, query_matrices
from haystack_mvr.document_stores.pgvector import reads
from haystack_mvr.document_stores.pgvector.filters import SqlFilter, convert_filters
from haystack_mvr.document_stores.pgvector.schema import Tables, TableState
from haystack_mvr.document_stores.pgvector.sql_fragments import TRUE, Fragment, compose
from haystack_mvr.document_stores.pgvector.steps import Steps
from haystack_mvr.views import annotate_match

#: Documents the exact query keeps beyond ``top_k`` (re-scored in numpy before the cut).
EXACT_SLACK = 8
#: View rows per wanted document in the first HNSW candidate scan, and the factor each widening multiplies it by.
FIRST_ROWS_PER_DOCUMENT = 4
WIDEN_FACTOR = 4
#: Widenings before the exact query answers instead.
MAX_WIDENINGS = 4

#: hnsw.ef_search when the store names none: pgvector's own 40 misses too many of a multi-view query's best views
#: (benchmarks/results/pgvector_store.squad-mv.md).
DEFAULT_EF_SEARCH = 100


@dataclass(frozen=True)
class SearchOptions:
    strategy: str  # "exact" or "hnsw"
    ef_search: int | None


def search_inputs(
    query_embeddings: Any, top_k: int, filters: dict[str, Any] | None, *, single: bool
) -> tuple[list[np.ndarray], SqlFilter | None]:
    """Each query as a float32 ``(m, d)`` matrix (one row for a vector, ``m`` for a late-interaction query given to
    ``search`` as a matrix) and the compiled ``filters``, checked before any call."""
    return query_matrices(query_embeddings, top_k, single=single), convert_filters(filters)


def searchable(state: TableState | None, queries: list[np.ndarray]) -> bool:
    """Whether there is anything to search: queries, and a table with views of the queries' dimension."""
    if state is None or state.dim is None or not queries:
        return False
    for query in queries:
        check_query_dimension(query, state.dim)
    return True


def search_steps(
    tables: Tables,
    state: TableState | None,
    queries: list[np.ndarray],
    top_k: int,
    plan: SqlFilter | None,
    options: SearchOptions,
    return_embedding: bool,
) -> Steps[list[list[Document]]]:
    """Each query's ``top_k`` documents, best first, annotated (see the module docs)."""
    if not searchable(state, queries):
        return [[] for _ in queries]
    assert state is not None
    where = yield from reads.resolve(tables, plan)
    if options.strategy == "hnsw":
        yield compose(
            "SELECT set_config('hnsw.iterative_scan', {}, true), set_config('hnsw.ef_search', {}, true)",
            "relaxed_order",
            str(options.ef_search or DEFAULT_EF_SEARCH),
        )
    candidates = []
    for query in queries:
        if options.strategy == "hnsw":
            ids = yield from _hnsw_candidates(tables, query, top_k, where)
        else:
            ids = yield from _exact_candidates(tables, query, top_k + EXACT_SLACK, where)
        candidates.append(ids)
    wanted = sorted({i for ids in candidates for i in ids})
    documents, views = yield from reads.documents_with_views(tables, wanted)
    results = []
    used: set[str] = set()
    for query, ids in zip(queries, candidates, strict=True):
        asked = query[0] if len(query) == 1 else query  # a vector, or a multi-vector query scored by MaxSim
        scored = []
        for i in ids:
            if i not in documents or i not in views:
                continue  # deleted between the candidate scan and the read (cannot happen in one transaction)
            stored = copy.deepcopy(documents[i]) if i in used else documents[i]  # results never share a dict
            used.add(i)
            scored.append(annotate_match(stored, views[i], asked, return_embedding=return_embedding))
        scored.sort(key=lambda d: (-d.score, d.id))
        results.append(scored[:top_k])
    return results


def _filtered_views(tables: Tables, where: Fragment) -> Fragment:
    """The views of the matching documents, as ``FROM`` items (``v``: views, ``d``: documents)."""
    if where is TRUE:
        return compose("{} v", tables.views)
    return compose("{} v JOIN {} d ON d.id = v.doc_id AND {}", tables.views, tables.documents, where)


def _exact_candidates(tables: Tables, query: np.ndarray, limit: int, where: Fragment) -> Steps[list[str]]:
    """The ``limit`` best matching documents by their exact score, computed in SQL."""
    source = _filtered_views(tables, where)
    if len(query) == 1:
        rows = yield compose(
            "SELECT v.doc_id, max(-(v.embedding <#> {})) AS score FROM {} GROUP BY v.doc_id "
            "ORDER BY score DESC, v.doc_id LIMIT {}",
            query[0],
            source,
            limit,
        )
    else:
        rows = yield compose(
            "SELECT s.doc_id, sum(s.best) AS score FROM (SELECT v.doc_id, q.i, max(-(v.embedding <#> q.vec)) AS best "
            "FROM {} CROSS JOIN unnest({}::vector[]) WITH ORDINALITY AS q(vec, i) GROUP BY v.doc_id, q.i) s "
            "GROUP BY s.doc_id ORDER BY score DESC, s.doc_id LIMIT {}",
            source,
            list(query),
            limit,
        )
    return [r[0] for r in rows]


def _hnsw_candidates(tables: Tables, query: np.ndarray, top_k: int, where: Fragment) -> Steps[list[str]]:
    """Distinct documents from each query vector's nearest view rows, widened until ``top_k`` (see the module)."""
    source = _filtered_views(tables, where)
    limit = max(top_k * FIRST_ROWS_PER_DOCUMENT, 40)
    for _ in range(MAX_WIDENINGS + 1):
        found: dict[str, None] = {}
        exhausted = False
        for vector in query:
            rows = yield compose("SELECT v.doc_id FROM {} ORDER BY v.embedding <#> {} LIMIT {}", source, vector, limit)
            found.update(dict.fromkeys(r[0] for r in rows))
            exhausted = exhausted or len(rows) < limit
        if len(found) >= top_k:
            return list(found)
        if exhausted:  # the scan ended before top_k documents: the exact query finds every match
            break
        limit *= WIDEN_FACTOR
    return (yield from _exact_candidates(tables, query, top_k + EXACT_SLACK, where))


__all__ = ["SearchOptions", "search_inputs", "search_steps", "searchable"]
