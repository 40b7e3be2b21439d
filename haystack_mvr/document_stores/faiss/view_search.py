"""Searching view rows for documents: the widening FAISS search, the collapse of rows to documents, and the exact
scoring (``haystack_mvr.maxsim``: max over views, MaxSim for a multi-vector query) that finishes what an approximate
index leaves short and re-ranks candidates, returning the similarities it computed (:class:`RankedKeys`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from haystack_mvr.document_stores.faiss.faiss_import import faiss
from haystack_mvr.document_stores.faiss.flat_scan import flat_top_k
from haystack_mvr.document_stores.faiss.row_book import CHUNK_ROWS
from haystack_mvr.document_stores.faiss.view_labels import keys_of
from haystack_mvr.maxsim import BestDocuments, best_per_vector, similarities

SCORED_ROWS = 2048  # rows scored at once by score_documents: the memory does not grow with views

VectorsOf = Callable[[np.ndarray], np.ndarray]  # keys -> their (rows, d) vectors, grouped by key in the given order


class RankedKeys(NamedTuple):
    """
    One query's documents as a search scored them: their keys, the rows of each, the ``(sum(counts), m)``
    similarities of those rows with the query's ``m`` vectors (``haystack_mvr.maxsim.similarities``), grouped by key,
    and, when asked for, the rows themselves ``(sum(counts), d)`` (else ``None``).
    """

    keys: list[int]
    counts: list[int]
    similarities: np.ndarray
    rows: np.ndarray | None


def ranked(keys: np.ndarray, scores: list[np.ndarray], rows: list[np.ndarray | None], m: int) -> RankedKeys:
    """:class:`RankedKeys` from each document's ``(k, m)`` similarities and its rows (``None``: not kept)."""
    held = None if not rows or rows[0] is None else np.concatenate(rows)
    sims = np.concatenate(scores) if scores else np.zeros((0, m), dtype=np.float32)
    return RankedKeys(keys.tolist(), [len(s) for s in scores], sims, held)


def scored_rows(query: np.ndarray, keys: list[int], counts: list[int], rows: np.ndarray, with_rows: bool) -> RankedKeys:
    """The documents ``keys`` (a search's, in its order) with their ``rows``, scored once against ``query``."""
    return RankedKeys(keys, counts, similarities(rows, query), rows if with_rows else None)


def score_documents(
    query: np.ndarray,
    keys: np.ndarray,
    views: dict[int, int],
    vectors_of: VectorsOf,
    keep: int,
    with_rows: bool = False,
) -> RankedKeys:
    """
    The ``keep`` best of ``keys`` by MaxSim with ``query`` ``(m, d)`` (max over views for ``m = 1``), best first
    (equal scores in the order of ``keys``), scored on their rows (``views`` each: kept, staged or decoded, read by
    ``vectors_of``) ``SCORED_ROWS`` at a time, with the similarities the scoring computed (and their rows with
    ``with_rows``): each row is read, decoded and scored once.

    So the memory this takes does not grow with the views per document, or with the candidates scored.
    """
    counts = np.fromiter((views[k] for k in keys.tolist()), dtype=np.int64, count=len(keys))
    ends = np.cumsum(counts)
    cuts = np.searchsorted(ends, np.arange(SCORED_ROWS, int(ends[-1]) if len(ends) else 0, SCORED_ROWS), side="right")
    bounds = np.unique(np.r_[0, cuts, len(keys)]).tolist()
    best = BestDocuments(keep, with_rows)
    for lo, hi in itertools.pairwise(bounds):
        vectors = vectors_of(keys[lo:hi])
        best.add(lo, similarities(vectors, query), ends[lo:hi] - counts[lo:hi] - (ends[lo] - counts[lo]), vectors)
    positions, scores, rows = best.best()
    return ranked(keys[positions], scores, rows, len(query))


@dataclass
class SearchOutcome:
    """What a widening search found: each query's keys, and the queries a depth cap stopped short of ``n_best``."""

    keys: list[np.ndarray]
    deeper: list[int] = field(default_factory=list)  # fewer than required keys: to search again without a cap
    accepted: set[int] = field(default_factory=set)  # short of n_best but with required keys: kept as they are


@dataclass
class IndexSearch:
    """
    One widening FAISS search: each query is searched ``depth`` rows deep, then twice as deep while its rows hold
    fewer than ``n_best`` documents, until ``limit`` (every row it can return) or ``cap`` (a GPU's).

    :param index: The index searched: the CPU index or its GPU copy.
    :param params: FAISS search parameters carrying an id selector, or ``None``.
    :param selectors: The id selectors ``params`` points at, kept alive as long as the search.
    :param post_filter: Labels to keep from the rows found (a filter FAISS does not apply), or ``None``.
    :param excluded: Labels to drop from the rows found (tombstones FAISS does not skip), or ``None``.
    :param flat: ``(rows, labels)`` of a Flat index, scanned by :func:`flat_top_k` instead of FAISS, or ``None``.
    :param depth: Rows per query of the first search.
    :param limit: The deepest search that can find more (the index's rows, or the allowed ones under a selector).
    :param cap: The deepest search allowed, or ``None``.
    """

    index: faiss.Index
    params: faiss.SearchParameters | None
    selectors: tuple[faiss.IDSelector, ...]
    post_filter: np.ndarray | None
    excluded: np.ndarray | None
    flat: tuple[np.ndarray, np.ndarray] | None
    depth: int
    limit: int
    cap: int | None

    def top_labels(self, queries: np.ndarray, k: int) -> np.ndarray:
        """The ``(n, k)`` labels of each query's best ``k`` rows, best first (``-1``: no row)."""
        if self.flat is not None:  # a batch over Flat: one sgemm per block of rows beats FAISS's batched path
            return flat_top_k(queries, k, *self.flat)
        _, labels = self.index.search(queries, k, params=self.params)
        return labels

    def run(self, queries: np.ndarray, n_best: int, required: int) -> SearchOutcome:
        """Each query's first ``n_best`` documents; a query the cap stops short is ``accepted`` with ``required``.

        The queries still to search are a plain list (a single query's search is slower on numpy index arrays)."""
        outcome = SearchOutcome([np.zeros(0, dtype=np.int64)] * len(queries))
        todo, k = list(range(len(queries))), self.depth
        while todo and k > 0:
            searched = queries if len(todo) == len(queries) else queries[todo]
            found, counts = distinct_documents(self.top_labels(searched, k), n_best, self.post_filter, self.excluded)
            for qi, keys in zip(todo, found, strict=True):
                outcome.keys[qi] = keys
            short = [qi for qi, c in zip(todo, counts.tolist(), strict=True) if c < n_best] if k < self.limit else []
            wider = int(min(self.limit, 2 * k, self.cap or self.limit))
            if wider == k:  # at the depth cap
                outcome.deeper.extend(qi for qi in short if len(outcome.keys[qi]) < required)
                outcome.accepted.update(qi for qi in short if len(outcome.keys[qi]) >= required)
                short = []
            todo = short
            k = wider
        return outcome


def id_selector(allowed_labels: np.ndarray | None, tombstones: np.ndarray) -> tuple[faiss.IDSelector, ...]:
    """FAISS id selectors, the one to search with last: the allowed labels (tombstones are never allowed), else every
    label but the tombstones."""
    if allowed_labels is not None:
        return (faiss.IDSelectorBatch(allowed_labels),)
    inner = faiss.IDSelectorBatch(tombstones)
    return inner, faiss.IDSelectorNot(inner)


def first_depth(n_best: int, rows_per_document: float, hnsw: bool, rows: int, post_filter: np.ndarray | None) -> float:
    """Rows per query to search first for ``n_best`` documents of ``rows_per_document`` rows in an index of ``rows``.

    HNSW searches max(efSearch, k) deep, so its first depth is what a raw search would ask (rows for ``n_best``
    documents); elsewhere twice that, so fewer queries need a second, wider search. Under a ``post_filter`` only
    its share of the rows found can be kept.
    """
    k = (1 if hnsw else 2) * n_best * rows_per_document
    if post_filter is not None:
        k *= rows / max(1, len(post_filter))
    return k


def distinct_documents(
    labels: np.ndarray, n_best: int, post_filter: np.ndarray | None = None, excluded: np.ndarray | None = None
) -> tuple[list[np.ndarray], np.ndarray]:
    """Rows to documents for every query at once: each query's first ``n_best`` distinct document keys in the order
    of its ``(n, k)`` row ``labels`` (best first), and how many distinct keys each query found.

    Labels below 0 (FAISS's "no row"), outside ``post_filter`` or in ``excluded`` are skipped. A document's first
    (best) row is where it ranks; its later rows are duplicates. One stable sort of the whole matrix, no loop over
    queries.
    """
    if len(labels) == 1 and post_filter is None and excluded is None:  # one query: a dict keeps first occurrences
        row = labels[0]
        keys = list(dict.fromkeys(keys_of(row[row >= 0]).tolist()))
        return [np.asarray(keys[:n_best], dtype=np.int64)], np.array([len(keys)], dtype=np.int64)
    valid = labels >= 0
    if post_filter is not None:
        valid &= np.isin(labels, post_filter)
    elif excluded is not None:
        valid &= ~np.isin(labels, excluded)
    keys = np.where(valid, keys_of(labels), -1)
    order = np.argsort(keys, axis=1, kind="stable")
    ordered = np.take_along_axis(keys, order, 1)
    first = np.ones(ordered.shape, dtype=bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    first &= ordered >= 0
    distinct = np.zeros(keys.shape, dtype=bool)
    np.put_along_axis(distinct, order, first, 1)
    rank = np.cumsum(distinct, axis=1)
    counts = rank[:, -1] if rank.shape[1] else np.zeros(len(keys), dtype=np.int64)
    taken = distinct & (rank <= n_best)
    flat = keys[taken]  # row-major: each query's keys in their order, queries one after the other
    found = np.split(flat, np.cumsum(np.minimum(counts, n_best))[:-1]) if len(keys) else []
    return found, counts


def exact_search(
    queries: np.ndarray, n_best: int, keys: np.ndarray, views: dict[int, int], vectors_of: VectorsOf
) -> list[np.ndarray]:
    """The best ``n_best`` of ``keys`` for each of the one-vector ``queries`` ``(n, d)``, every row of ``keys``
    (``views`` rows each, read by ``vectors_of``) scored exactly: each document's best view for each query at once
    (``haystack_mvr.maxsim.best_per_vector``)."""
    counts = np.array([views[int(k)] for k in keys], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    best = np.empty((len(queries), len(keys)), dtype=np.float32)
    step = max(1, CHUNK_ROWS // max(1, int(counts.max())))
    for lo in range(0, len(keys), step):
        hi = min(len(keys), lo + step)
        scores = similarities(vectors_of(keys[lo:hi]), queries)
        best[:, lo:hi] = best_per_vector(scores, starts[lo:hi] - starts[lo]).T
    out = []
    for row in best:
        top = np.argpartition(-row, n_best - 1)[:n_best] if n_best < len(row) else np.arange(len(row))
        out.append(keys[top[np.argsort(-row[top], kind="stable")]])
    return out
