"""Retrieval equals brute-force max over views, with filters and deletes (hypothesis)."""

import numpy as np
from haystack import Document
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haystack_mvr.document_stores import FaissMultiViewDocumentStore
from haystack_mvr.views import attach_views

DIM = 4


@st.composite
def corpora(draw):
    n = draw(st.integers(1, 25))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    views = [rng.normal(size=(draw(st.integers(1, 5)), DIM)).astype(np.float32) for _ in range(n)]
    groups = [draw(st.integers(0, 2)) for _ in range(n)]
    deleted = draw(st.sets(st.integers(0, n - 1), max_size=n))
    batch = draw(st.integers(1, n))  # documents per write_documents call, with a search after each
    return views, groups, deleted, batch, rng.normal(size=DIM).astype(np.float32)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora(), st.integers(1, 30), st.sampled_from([None, 0, 1, 2]), st.booleans())
def test_search_equals_brute_force(corpus, top_k, group, keep_vectors):
    views, groups, deleted, batch, query = corpus
    store = FaissMultiViewDocumentStore(keep_vectors=keep_vectors)
    docs = [
        attach_views(Document(id=f"d{i}", content="x", meta={"g": g}), v)
        for i, (v, g) in enumerate(zip(views, groups, strict=True))
    ]
    for start in range(0, len(docs), batch):
        store.write_documents(docs[start : start + batch])
        store.search(query, top_k=1)  # build (then extend) the index between writes and before deleting
    store.delete_documents([f"d{i}" for i in deleted])
    filters = None if group is None else {"field": "meta.g", "operator": "==", "value": group}
    got = store.search(query, top_k=top_k, filters=filters)

    expected = sorted(
        (
            (float(np.max(v @ query)), f"d{i}")
            for i, (v, g) in enumerate(zip(views, groups, strict=True))
            if i not in deleted and (group is None or g == group)
        ),
        key=lambda t: -t[0],
    )[:top_k]
    assert len(got) == len(expected)
    np.testing.assert_allclose([d.score for d in got], [s for s, _ in expected], rtol=1e-4, atol=1e-4)
    # ids agree wherever scores are not tied
    for d, (score, doc_id) in zip(got, expected, strict=True):
        if sum(abs(s - score) < 1e-4 for s, _ in expected) == 1:
            assert d.id == doc_id
