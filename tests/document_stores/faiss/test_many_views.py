"""Documents with hundreds of views in the FAISS store (issue 31, item 6): enough distinct documents when one document
owns most of the best rows, on every index family; the search's memory; the MAX_VIEWS policy."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.types import DuplicatePolicy

from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.document_stores.faiss.view_index import ViewIndex
from haystack_mvr.document_stores.faiss.view_labels import MAX_VIEWS
from haystack_mvr.views import VIEWS_KEY

DIM = 16
OTHERS = 400


@pytest.fixture(scope="module")
def corpus():
    """One document of 800 views all near the query (every one better than any other document's), and 400
    documents of 3 views each."""
    rng = np.random.default_rng(0)
    query = rng.standard_normal(DIM).astype(np.float32)
    query /= np.linalg.norm(query)
    big = (query + 0.01 * rng.standard_normal((800, DIM))).astype(np.float32)
    others = rng.standard_normal((OTHERS, 3, DIM)).astype(np.float32)
    others *= 0.5 / np.linalg.norm(others, axis=-1, keepdims=True)  # every score below 0.5, the big one's near 1
    docs = [Document(id="big", meta={VIEWS_KEY: big, "part": 0})]
    docs += [Document(id=f"o{i}", meta={VIEWS_KEY: v, "part": i % 2}) for i, v in enumerate(others)]
    best = np.max(others @ query, axis=1)
    return query, docs, [f"o{i}" for i in np.argsort(-best, kind="stable")], {f"o{i}": i % 2 for i in range(OTHERS)}


@pytest.mark.parametrize(
    ("factory", "options", "exact"),
    [
        ("Flat", {}, True),
        ("HNSW16", {"search_parameters": {"efSearch": 16}}, False),  # FAISS's default walk
        ("IVF8,Flat", {}, False),  # nprobe 1
        ("IVF8,Flat", {"search_parameters": {"nprobe": 8}}, True),
        ("PQ4", {"keep_vectors": True}, False),
        ("PQ4", {"keep_vectors": False}, False),
        ("IVF8,PQ4", {"keep_vectors": False, "search_parameters": {"nprobe": 2}}, False),
    ],
)
def test_top_k_distinct_documents_when_one_document_owns_the_best_rows(corpus, factory, options, exact, monkeypatch):
    query, docs, ranked, part = corpus
    store = FaissMultiViewDocumentStore(index_factory=factory, train_size=1500, search_threads=1, **options)
    store.write_documents(docs)
    assert store._views.trained and store._views.ntotal == 800 + 3 * OTHERS
    for top_k in (1, 5, 20):
        for hits in (store.search(query, top_k=top_k), store.search_batch(np.stack([query, -query]), top_k=top_k)[0]):
            ids = [h.id for h in hits]
            assert len(ids) == len(set(ids)) == top_k and ids[0] == "big"
            if exact:
                assert ids[1:] == ranked[: top_k - 1]
    monkeypatch.setattr(ViewIndex, "exact_rows", 0)  # filtered searches through FAISS too
    filters = {"field": "meta.part", "operator": "==", "value": 0}
    hits = store.search(query, top_k=5, filters=filters)
    assert hits[0].id == "big" and len({h.id for h in hits}) == 5
    assert all(h.id == "big" or part[h.id] == 0 for h in hits)
    if exact:
        assert [h.id for h in hits][1:] == [i for i in ranked if part[i] == 0][:4]


def test_re_ranking_does_not_gather_the_views_of_its_candidates():
    """Beside a lossy index the kept rows re-rank 4·top_k+16 candidates: their views used to be concatenated first
    (56 candidates of 800 views at d=384: 69 MB per query); each is now scored where it lies."""
    rng = np.random.default_rng(1)
    dim, views = 64, 800
    docs = [Document(id=f"d{i}", meta={VIEWS_KEY: rng.standard_normal((views, dim), np.float32)}) for i in range(60)]
    store = FaissMultiViewDocumentStore(index_factory="PQ8", keep_vectors=True, train_size=2000, search_threads=1)
    store.write_documents(docs[:3])  # 2,400 rows: trains on them
    store.write_documents(docs[3:])
    query = rng.standard_normal(dim).astype(np.float32)
    store.search(query, top_k=10)
    pool_bytes = (4 * 10 + 16) * views * dim * 4  # 11.5 MB of float32 rows
    tracemalloc.start()
    try:
        hits = store.search(query, top_k=10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(hits) == 10
    assert peak < pool_bytes / 2  # the FAISS search's own arrays (~2.6 MB here), not a copy of the candidates' views
    exact = {d.id: float(np.max(d.meta[VIEWS_KEY] @ query)) for d in docs}  # the candidates are re-ranked exactly
    assert [h.score for h in hits] == pytest.approx([exact[h.id] for h in hits], rel=1e-5)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_max_views_policy_names_the_document_and_loses_nothing(tmp_path):
    """At most MAX_VIEWS (4,096) views per document, the 12 bits a row's label keeps for the view: a document with
    more is refused before anything of its batch is written, naming it and both counts."""
    rng = np.random.default_rng(2)
    full = rng.standard_normal((MAX_VIEWS, 4)).astype(np.float32)
    store = FaissMultiViewDocumentStore()
    store.write_documents([Document(id="full", content="x", meta={VIEWS_KEY: full})])
    one_more = np.concatenate([full, full[:1]])
    for views in (one_more, one_more.tolist()):
        batch = [
            Document(id="new", meta={VIEWS_KEY: full[:2]}),
            Document(id="full", content="y", meta={VIEWS_KEY: views}),
        ]
        with pytest.raises(ValueError, match=r"Document 'full' has 4097 views; the store keeps at most 4096") as e:
            store.write_documents(batch, policy=DuplicatePolicy.OVERWRITE)
        assert "Nothing of this batch was written" in str(e.value) and "split the document" in str(e.value)
        assert [d.id for d in store.filter_documents()] == ["full"] and store._views.ntotal == MAX_VIEWS
    hit = store.search(full[MAX_VIEWS - 1], top_k=1)[0]
    assert hit.id == "full" and hit.meta["mvr_matched_view"] == int(np.argmax(full @ full[MAX_VIEWS - 1]))
    store.save(tmp_path / "s")
    loaded = FaissMultiViewDocumentStore(index_path=str(tmp_path / "s"))
    assert loaded.count_documents() == 1
    np.testing.assert_array_equal(loaded._views.views_of(loaded._key_of["full"]), full)
