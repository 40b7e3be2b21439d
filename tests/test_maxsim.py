"""The one numpy scorer (``haystack_mvr.maxsim``): MaxSim and max over views against brute force, the block-by-block
keeper of the best documents, the annotation that uses it, and training's torch twin, which must agree with it."""

from __future__ import annotations

import numpy as np
import pytest

from haystack_mvr.maxsim import BestDocuments, best_matches, document_scores, maxsim, similarities


def _documents(rng: np.random.Generator, n: int, dim: int) -> list[np.ndarray]:
    return [rng.standard_normal((int(rng.integers(1, 9)), dim)).astype(np.float32) for _ in range(n)]


def _brute_force(views: np.ndarray, query: np.ndarray) -> float:
    return float(sum(max(float(v @ q) for v in views) for q in query))


@pytest.mark.parametrize("m", [1, 2, 7])
def test_document_scores_are_maxsim_and_max_over_views_for_one_row(m):
    rng = np.random.default_rng(m)
    docs = _documents(rng, 30, 16)
    query = rng.standard_normal((m, 16)).astype(np.float32)
    rows = np.concatenate(docs)
    starts = np.cumsum([0, *[len(d) for d in docs[:-1]]])
    scores = document_scores(similarities(rows, query), starts)
    np.testing.assert_allclose(scores, [_brute_force(d, query) for d in docs], rtol=1e-5, atol=1e-5)
    assert [maxsim(d, query) for d in docs] == pytest.approx(scores.tolist(), rel=1e-6, abs=1e-6)
    if m == 1:  # max over views (BLAS rounds a row's product alike only within the same call's shape)
        assert scores.tolist() == pytest.approx([float(np.max(d @ query[0])) for d in docs], rel=1e-6, abs=1e-6)


def test_best_matches_name_each_query_vectors_best_view():
    scores = np.array([[0.1, 0.9], [0.5, 0.9], [0.4, 0.2]], dtype=np.float32)
    views, best = best_matches(scores)
    assert views.tolist() == [1, 0] and best.tolist() == pytest.approx([0.5, 0.9])  # the first of equal views


@pytest.mark.parametrize(("keep", "block"), [(1, 3), (5, 4), (10, 7), (40, 11)])
def test_best_documents_keeps_what_a_full_sort_keeps_block_by_block(keep, block):
    rng = np.random.default_rng(keep)  # small integers: every product exact, so equal scores are equal
    docs = [rng.integers(-3, 4, (int(rng.integers(1, 9)), 8)).astype(np.float32) for _ in range(40)]
    docs[5] = docs[3].copy()  # equal scores: the earlier document first, as a stable sort orders them
    query = rng.integers(-3, 4, (3, 8)).astype(np.float32)
    allowed = rng.random(40) < 0.7
    best = BestDocuments(keep, with_rows=True)
    for lo in range(0, 40, block):
        part = docs[lo : lo + block]
        rows = np.concatenate(part)
        starts = np.cumsum([0, *[len(d) for d in part[:-1]]])
        best.add(lo, similarities(rows, query), starts, rows, allowed[lo : lo + block])
    positions, scores, rows = best.best()
    full = np.array([maxsim(d, query) if allowed[i] else -np.inf for i, d in enumerate(docs)])
    expected = np.argsort(-full, kind="stable")[: min(keep, int(allowed.sum()))]
    assert positions.tolist() == expected.tolist()
    for p, s, r in zip(positions.tolist(), scores, rows, strict=True):
        np.testing.assert_array_equal(r, docs[p])
        np.testing.assert_array_equal(s, similarities(docs[p], query))


def test_annotate_match_scores_with_the_scorer():
    from haystack import Document

    from haystack_mvr.views import annotate_match

    rng = np.random.default_rng(4)
    views = rng.standard_normal((5, 8)).astype(np.float32)
    query = rng.standard_normal((3, 8)).astype(np.float32)
    doc = Document(id="a", content="x")
    assert annotate_match(doc, views, query).score == maxsim(views, query)
    assert annotate_match(doc, views, query[0]).score == maxsim(views, query[:1]) == float(np.max(views @ query[0]))
    assert annotate_match(doc, views, query[:1]).score == annotate_match(doc, views, query[0]).score  # m = 1


def test_trainings_torch_twin_agrees_with_the_numpy_scorer():
    """``training.negatives.maxsim_scores`` (torch, padded and masked) stays a twin of this scorer: the same
    MaxSim for every query and document, one-vector queries included."""
    torch = pytest.importorskip("torch")
    from haystack_mvr.training.negatives import maxsim_scores, padded_rows

    rng = np.random.default_rng(11)
    docs = _documents(rng, 25, 12)
    queries = [rng.standard_normal((m, 12)).astype(np.float32) for m in (1, 4, 1, 9, 2)]
    views, view_mask = padded_rows(docs, 12)
    padded, query_mask = padded_rows(queries, 12)
    got = maxsim_scores(
        torch.from_numpy(padded), torch.from_numpy(query_mask), torch.from_numpy(views), torch.from_numpy(view_mask)
    ).numpy()
    expected = np.array([[maxsim(d, q) for d in docs] for q in queries], dtype=np.float32)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
