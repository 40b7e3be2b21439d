"""The exact one-pass document scan of a Flat index (``DocumentScan``): its float16 first pass with exact re-scoring
returns what scoring every row returns, and a store large enough to take it answers as brute force does."""

from __future__ import annotations

import numpy as np
import pytest
from haystack import Document

from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.document_stores.faiss.flat_scan import _COARSE_AFTER, _COARSE_ROWS, DocumentScan
from haystack_mvr.document_stores.faiss.view_labels import VIEW_BITS
from haystack_mvr.views import VIEWS_KEY


def corpus(documents: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Correlated views (a centre plus noise), 1-11 per document: ``(rows, labels, views by document)``."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 12, documents)
    centres = rng.standard_normal((documents, dim)).astype(np.float32)
    rows = np.repeat(centres, counts, 0) + 0.5 * rng.standard_normal((int(counts.sum()), dim)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    keys = np.repeat(np.arange(documents, dtype=np.int64) * 3 + 5, counts)
    labels = (keys << VIEW_BITS) | (np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts))
    return np.ascontiguousarray(rows), labels, np.split(rows, np.cumsum(counts)[:-1])


def brute_force(views: list[np.ndarray], query: np.ndarray) -> np.ndarray:
    return np.array([np.max(v @ query) for v in views], dtype=np.float32)


@pytest.mark.parametrize("n_best", [1, 10, 40])
def test_two_pass_scores_equal_a_full_scan(n_best):
    rows, labels, views = corpus(1500, 48, seed=n_best)
    assert len(rows) >= _COARSE_ROWS  # large enough for the float16 first pass
    scan = DocumentScan(rows, labels, len(views))
    position = {k: i for i, k in enumerate(scan.keys.tolist())}
    rng = np.random.default_rng(0)
    for query in rows[rng.integers(0, len(rows), 20)] + 0.3 * rng.standard_normal((20, 48)).astype(np.float32):
        found = scan._two_pass(np.ascontiguousarray(query[None], dtype=np.float32), n_best)  # (1, d): m = 1
        assert found is not None  # distinct scores: the bound proves the answer
        best = scan.best(query[None])
        assert np.array_equal(best[[position[k] for k in found.tolist()]], np.sort(best)[::-1][:n_best])
        assert np.allclose(np.sort(best)[::-1][:n_best], np.sort(brute_force(views, query))[::-1][:n_best], atol=1e-5)


def test_two_pass_gives_way_to_a_full_scan_where_its_bound_proves_nothing():
    rows = np.ones((_COARSE_ROWS, 8), dtype=np.float32)  # every row ties
    labels = (np.repeat(np.arange(_COARSE_ROWS // 4), 4) << VIEW_BITS) | np.tile(np.arange(4), _COARSE_ROWS // 4)
    scan = DocumentScan(rows, labels, _COARSE_ROWS // 4)
    query = np.ones((1, 8), dtype=np.float32)
    assert scan._two_pass(query, 10) is None
    assert len(scan.top(query, 10)) == 10


def test_rows_out_of_document_order_are_scanned_in_order():
    rows, labels, views = corpus(300, 16, seed=3)
    shuffled = np.random.default_rng(1).permutation(len(rows))
    scan = DocumentScan(np.ascontiguousarray(rows[shuffled]), labels[shuffled], len(views))
    assert scan.order is not None and scan.rows_of(scan.keys[:2]) is None
    query = rows[7]
    expected = np.sort(brute_force(views, query))[::-1][:5]
    found = scan.top(query[None], 5)
    assert np.allclose(brute_force(views, query)[(found - 5) // 3], expected)


def test_a_store_past_the_first_pass_threshold_answers_as_brute_force():
    _, _, views = corpus(1200, 32, seed=7)
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    store.write_documents([Document(id=f"d{i}", content=f"doc {i}", meta={VIEWS_KEY: v}) for i, v in enumerate(views)])
    assert store._views.ntotal >= _COARSE_ROWS
    rng = np.random.default_rng(2)
    for query in rng.standard_normal((_COARSE_AFTER + 15, 32)).astype(np.float32):  # full scans, then two-pass
        expected = brute_force(views, query)
        top = np.argsort(-expected, kind="stable")[:10]
        found = store.search(query, top_k=10)
        assert [d.id for d in found] == [f"d{i}" for i in top]
        assert np.allclose([d.score for d in found], expected[top], atol=1e-5)
    assert store._views._document_scan()._coarse is not None  # the last queries took the float16 first pass
    store.delete_documents([f"d{i}" for i in range(0, 1200, 2)])  # removal keeps each document's rows together
    for query in rng.standard_normal((5, 32)).astype(np.float32):
        expected = np.full(len(views), -np.inf, dtype=np.float32)
        expected[1::2] = brute_force(views[1::2], query)
        top = np.argsort(-expected, kind="stable")[:10]
        assert [d.id for d in store.search(query, top_k=10)] == [f"d{i}" for i in top]
