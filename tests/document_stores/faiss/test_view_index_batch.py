"""The batched Flat top-k and the rows-to-documents collapse of ``ViewIndex``, against brute force.

Integer-valued vectors make every inner product exact in float32, so scores compare exactly and ties are common.
"""

from __future__ import annotations

import numpy as np
import pytest
from haystack import Document

from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore, flat_scan
from haystack_mvr.document_stores.faiss.flat_scan import flat_top_k
from haystack_mvr.document_stores.faiss.view_labels import VIEW_BITS
from haystack_mvr.document_stores.faiss.view_search import distinct_documents
from haystack_mvr.views import VIEWS_KEY


def _integers(rng: np.random.Generator, shape: tuple[int, ...], high: int = 3) -> np.ndarray:
    return rng.integers(-high, high + 1, shape).astype(np.float32)


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few rows, so that thresholds, merges and the last partial block are all exercised."""
    monkeypatch.setattr(flat_scan, "_FIRST_BLOCK_ROWS", 8)
    monkeypatch.setattr(flat_scan, "_BLOCK_SCORES", 64)


@pytest.mark.parametrize(("n", "nq", "k", "high"), [(1, 1, 1, 3), (7, 3, 7, 1), (300, 5, 10, 1), (1000, 17, 40, 2)])
@pytest.mark.usefixtures("small_blocks")
def test_flat_top_k_returns_the_exact_best_scores(n, nq, k, high):
    rng = np.random.default_rng(n + nq + k)
    rows, queries = _integers(rng, (n, 16), high), _integers(rng, (nq, 16), high)
    labels = rng.permutation(n * 3)[:n].astype(np.int64)
    got = flat_top_k(queries, k, rows, labels)
    truth = queries @ rows.T
    position = {int(label): i for i, label in enumerate(labels)}
    assert got.shape == (nq, min(k, n))
    for q in range(nq):
        assert len(set(got[q].tolist())) == len(got[q])  # no row twice
        scores = truth[q, [position[int(label)] for label in got[q]]]
        assert (np.diff(scores) <= 0).all()  # best first
        np.testing.assert_array_equal(scores, np.sort(truth[q])[::-1][: min(k, n)])


def test_flat_top_k_with_default_blocks_matches_faiss_scores():
    """Real-valued data, the module's own block sizes (several blocks), against IndexFlatIP's scores."""
    from haystack_mvr.document_stores.faiss.faiss_import import faiss

    rng = np.random.default_rng(0)
    rows = rng.standard_normal((40_000, 32)).astype(np.float32)
    queries = rng.standard_normal((70, 32)).astype(np.float32)
    flat = faiss.IndexFlatIP(32)
    flat.add(rows)
    scores, _ = flat.search(queries, 25)
    got = flat_top_k(queries, 25, rows, np.arange(len(rows), dtype=np.int64))
    ours = np.take_along_axis(queries @ rows.T, got, 1)
    np.testing.assert_allclose(ours, scores, rtol=0, atol=1e-4)


def _collapse_reference(labels, n_best, post_filter=None, excluded=None):
    found, counts = [], []
    for row in labels:
        seen: list[int] = []
        for label in row.tolist():
            if label < 0 or (post_filter is not None and label not in post_filter):
                continue
            if post_filter is None and excluded is not None and label in excluded:
                continue
            key = label >> VIEW_BITS
            if key not in seen:
                seen.append(key)
        found.append(seen[:n_best])
        counts.append(len(seen))
    return found, counts


@pytest.mark.parametrize("seed", range(6))
def test_collapse_matches_a_loop_over_queries(seed):
    """Documents owning many of a query's rows, FAISS's -1 for missing rows, filters and tombstones."""
    rng = np.random.default_rng(seed)
    nq, k = int(rng.integers(1, 12)), int(rng.integers(1, 60))
    keys = rng.integers(0, int(rng.integers(1, 20)), (nq, k))  # few documents: many rows each
    labels = (keys << VIEW_BITS) | rng.integers(0, 50, (nq, k))
    labels[rng.random((nq, k)) < 0.15] = -1
    pool = np.unique(labels[labels >= 0])
    chosen = pool[rng.random(len(pool)) < 0.5]
    for n_best in (1, 3, 10, 100):
        for post_filter, excluded in ((None, None), (chosen, None), (None, chosen)):
            found, counts = distinct_documents(labels, n_best, post_filter, excluded)
            expected, expected_counts = _collapse_reference(
                labels,
                n_best,
                None if post_filter is None else set(post_filter.tolist()),
                None if excluded is None else set(excluded.tolist()),
            )
            assert [f.tolist() for f in found] == expected
            assert counts.tolist() == expected_counts


@pytest.mark.parametrize("seed", range(4))
def test_collapse_of_one_query(seed):
    rng = np.random.default_rng(seed)
    labels = (rng.integers(0, 6, (1, 40)) << VIEW_BITS) | rng.integers(0, 9, (1, 40))
    labels[0, rng.random(40) < 0.2] = -1
    for n_best in (1, 4, 50):
        found, counts = distinct_documents(labels, n_best)
        expected, expected_counts = _collapse_reference(labels, n_best)
        assert [f.tolist() for f in found] == expected and counts.tolist() == expected_counts


def test_collapse_of_nothing():
    found, counts = distinct_documents(np.full((3, 4), -1, dtype=np.int64), 2)
    assert [f.tolist() for f in found] == [[], [], []] and counts.tolist() == [0, 0, 0]


def _brute_force(views: dict[str, np.ndarray], query: np.ndarray) -> dict[str, float]:
    return {doc_id: float(np.max(m @ query)) for doc_id, m in views.items()}


@pytest.mark.usefixtures("small_blocks")
def test_search_batch_ranks_documents_by_their_best_view_like_brute_force():
    """One document owns most of the best rows, documents share identical views (ties); every query's documents
    are a best top_k set by max over views, in order, and the single-query search agrees on the scores."""
    rng = np.random.default_rng(7)
    dim = 12
    views = {f"d{i}": _integers(rng, (int(rng.integers(1, 6)), dim), 1) for i in range(120)}
    views["many"] = _integers(rng, (300, dim), 2)  # 300 views: owns many of every query's best rows
    views["twin-a"] = views["twin-b"] = _integers(rng, (3, dim), 2)  # equal scores for every query
    store = FaissMultiViewDocumentStore(embedding_dim=dim, index_factory="Flat", search_threads=1)
    store.write_documents([Document(id=i, meta={VIEWS_KEY: m}) for i, m in views.items()])
    queries = _integers(rng, (9, dim), 2)
    for top_k in (1, 5, 40):
        batch = store.search_batch(queries, top_k=top_k)
        for query, hits in zip(queries, batch, strict=True):
            truth = _brute_force(views, query)
            best = sorted(truth.values(), reverse=True)[:top_k]
            assert [h.score for h in hits] == best
            assert all(truth[h.id] == h.score for h in hits)
            assert len({h.id for h in hits}) == len(hits)
            single = store.search(query, top_k=top_k)
            assert [h.score for h in single] == [h.score for h in hits]


def test_hnsw_rows_of_one_write_make_the_graph_one_faiss_add_makes():
    """The rows of one write go into HNSW in one add (2,048-row adds built another graph, of lower recall: this test
    fails with them): the store's documents are raw IndexHNSWFlat's (one add of the same rows, same efSearch, asked
    for the rows of top_k documents) collapsed to documents."""
    from haystack_mvr.document_stores.faiss.faiss_import import faiss
    from haystack_mvr.document_stores.faiss.faiss_threads import omp_threads

    rng = np.random.default_rng(3)
    dim, views, docs, top_k = 16, 2, 3000, 10
    rows = rng.standard_normal((docs * views, dim)).astype(np.float32)
    store = FaissMultiViewDocumentStore(
        embedding_dim=dim, index_factory="HNSW32", search_parameters={"efSearch": 16}, search_threads=1
    )
    store.write_documents(
        [Document(id=str(i), meta={VIEWS_KEY: rows[i * views : (i + 1) * views]}) for i in range(docs)]
    )
    raw = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
    raw.hnsw.efSearch = 16
    with omp_threads(1):
        raw.add(rows)
        for query in rng.standard_normal((20, dim)).astype(np.float32):
            _, labels = raw.search(query[None], top_k * views)
            expected = list(dict.fromkeys((labels[0][labels[0] >= 0] // views).tolist()))[:top_k]
            assert [int(d.id) for d in store.search(query, top_k=top_k)] == expected
