import dataclasses

import faiss
import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy

from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.views import (
    MATCHED_TEXT_KEY,
    MATCHED_VIEW_KEY,
    SPANS_KEY,
    VIEWS_KEY,
    PackedViews,
    attach_views,
    document_views,
)


@pytest.fixture(params=[True, False], ids=["vectors-kept", "index-only"])
def keep_vectors(request):
    return request.param


@pytest.fixture
def document_store(keep_vectors):
    return FaissMultiViewDocumentStore(keep_vectors=keep_vectors)


def multi_view_doc(i: int, views, spans=None, **meta) -> Document:
    return attach_views(Document(id=f"d{i}", content="First part. Second part.", meta=meta), np.asarray(views), spans)


def test_views_are_rows_and_leave_meta(document_store):
    document_store.write_documents([multi_view_doc(0, [[1, 0], [0, 1]], [(0, 11), (12, 24)], lang="en")])
    stored = document_store.filter_documents()[0]
    assert VIEWS_KEY not in stored.meta and stored.meta["lang"] == "en"
    hit = document_store.search([0.0, 1.0], top_k=1)[0]
    assert hit.score == pytest.approx(1.0)
    assert hit.meta[MATCHED_VIEW_KEY] == 1 and hit.meta[MATCHED_TEXT_KEY] == "Second part."
    assert hit.embedding is None and VIEWS_KEY not in hit.meta
    full = document_store.search([0.0, 1.0], top_k=1, return_embedding=True)[0]
    assert document_views(full).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert SPANS_KEY in full.meta


def test_embedding_equal_to_view_0_is_not_kept_but_read_back(document_store, tmp_path):
    views = np.array([[0.25, 0.5], [1.0, 0.0]], dtype=np.float32)
    same = attach_views(Document(id="same", content="a", embedding=views[0].tolist()), views)
    absent = attach_views(Document(id="absent", content="b"), views)
    own = dataclasses.replace(attach_views(Document(id="own", content="c"), views), embedding=[0.1, 0.2])
    document_store.write_documents([same, absent, own])
    assert document_store._documents.document("same").embedding is None  # no Python float list per stored document
    assert document_store._documents.document("own").embedding == [0.1, 0.2]
    expected = {"same": [0.25, 0.5], "absent": [0.25, 0.5], "own": [0.1, 0.2]}
    assert {d.id: d.embedding for d in document_store.filter_documents()} == expected
    hits = document_store.search([1.0, 0.0], top_k=3, return_embedding=True)
    assert {d.id: d.embedding for d in hits} == expected
    assert all(d.embedding is None for d in document_store.search([1.0, 0.0], top_k=3))
    document_store.save(tmp_path / "s")
    loaded = FaissMultiViewDocumentStore()
    loaded.load(tmp_path / "s")
    assert {d.id: d.embedding for d in loaded.filter_documents()} == expected


def test_score_is_max_over_views_and_documents_are_unique(document_store):
    document_store.write_documents(
        [
            multi_view_doc(0, [[1, 0], [0.9, 0.1], [0.8, 0.2]]),
            multi_view_doc(1, [[0.5, 0.5]]),
            multi_view_doc(2, [[0, 1]]),
        ]
    )
    hits = document_store.search([1.0, 0.0], top_k=3)
    assert [h.id for h in hits] == ["d0", "d1", "d2"]
    assert [h.score for h in hits] == pytest.approx([1.0, 0.5, 0.0])


def test_exactly_top_k_when_one_document_dominates(document_store):
    # d0 has 50 views all better than any other document's: a narrow search would find only d0.
    document_store.write_documents([multi_view_doc(0, np.tile([[1.0, 0.0]], (50, 1)))])
    document_store.write_documents([multi_view_doc(i, [[0.1 * i / 10, 1.0]]) for i in range(1, 6)])
    assert len(document_store.search([1.0, 0.0], top_k=4)) == 4


def test_documents_without_vectors_are_stored_not_searchable(document_store):
    document_store.write_documents([Document(id="plain", content="no vector"), multi_view_doc(1, [[1, 0]])])
    assert document_store.count_documents() == 2
    assert [h.id for h in document_store.search([1.0, 0.0], top_k=5)] == ["d1"]


def test_delete_removes_every_view(document_store):
    document_store.write_documents([multi_view_doc(0, [[1, 0], [0, 1]]), multi_view_doc(1, [[0.5, 0.5]])])
    document_store.search([1.0, 0.0], top_k=1)  # build the index, then change it
    document_store.delete_documents(["d0"])
    assert [h.id for h in document_store.search([1.0, 0.0], top_k=5)] == ["d1"]


def test_overwrite_replaces_views(document_store):
    document_store.write_documents([multi_view_doc(0, [[1, 0]])])
    document_store.write_documents([multi_view_doc(0, [[0, 1]])], policy=DuplicatePolicy.OVERWRITE)
    assert document_store.search([1.0, 0.0], top_k=1)[0].score == pytest.approx(0.0)


def test_document_count_follows_writes_overwrites_and_deletes(document_store, tmp_path):
    def count():
        return document_store._views.document_count

    document_store.write_documents([multi_view_doc(i, [[1, 0], [0, 1]]) for i in range(3)])
    document_store.write_documents([Document(id="plain", content="no vector"), multi_view_doc(3, [[1, 1]])])
    assert count() == 4
    document_store.write_documents([multi_view_doc(1, [[0, 1]] * 5)], policy=DuplicatePolicy.OVERWRITE)
    document_store.delete_documents(["d0", "plain", "unknown"])
    assert count() == 3 == len(document_store._views.keys())
    assert len(document_store.search([1.0, 0.0], top_k=10)) == 3
    document_store.save(tmp_path / "s")
    loaded = FaissMultiViewDocumentStore()
    loaded.load(tmp_path / "s")
    assert loaded._views.document_count == 3
    assert [d.id for d in loaded.search([0.0, 1.0], top_k=2)] == [
        d.id for d in document_store.search([0.0, 1.0], top_k=2)
    ]


def test_filters_still_return_top_k(document_store):
    document_store.write_documents([multi_view_doc(i, [[1.0 - i / 100, 0.0]], group=i % 2) for i in range(40)])
    hits = document_store.search([1.0, 0.0], top_k=7, filters={"field": "meta.group", "operator": "==", "value": 1})
    assert len(hits) == 7 and all(h.meta["group"] == 1 for h in hits)
    assert [h.id for h in hits] == [f"d{i}" for i in range(1, 15, 2)]


@pytest.mark.parametrize("factory", ["HNSW16", "IVF4,Flat", "PQ8"])
def test_other_index_factories_find_the_easy_top_1(factory):
    store = FaissMultiViewDocumentStore(index_factory=factory)
    rng = np.random.default_rng(0)
    views = rng.normal(size=(300, 2, 8)).astype(np.float32)
    views /= np.linalg.norm(views, axis=-1, keepdims=True)  # unit vectors: a view is its own best match
    store.write_documents([multi_view_doc(i, v) for i, v in enumerate(views)])
    target = views[123, 1] * 5
    assert store.search(target, top_k=3)[0].id == "d123"


def test_search_parameters_reach_the_index_after_builds_and_loads(tmp_path):
    rng = np.random.default_rng(1)
    views = rng.normal(size=(400, 2, 8)).astype(np.float32)
    docs = [multi_view_doc(i, v) for i, v in enumerate(views)]
    queries = rng.normal(size=(20, 8)).astype(np.float32)
    exact = FaissMultiViewDocumentStore()
    exact.write_documents(docs)

    def top5(store):
        return [[d.id for d in store.search(q, top_k=5)] for q in queries]

    one_list = FaissMultiViewDocumentStore(index_factory="IVF16,Flat")
    all_lists = FaissMultiViewDocumentStore(index_factory="IVF16,Flat", search_parameters={"nprobe": 16})
    for store in (one_list, all_lists):
        store.write_documents(docs)
    assert top5(all_lists) == top5(exact)  # probing every list is exhaustive
    assert top5(one_list) != top5(exact)  # FAISS's default nprobe=1 is not
    all_lists.save(tmp_path / "s")
    loaded = FaissMultiViewDocumentStore(index_factory="IVF16,Flat", search_parameters={"nprobe": 16})
    loaded.load(tmp_path / "s")
    assert top5(loaded) == top5(exact)


def test_unknown_search_parameter_is_named():
    store = FaissMultiViewDocumentStore(index_factory="IVF4,Flat", search_parameters={"efSearch": 64})
    with pytest.raises(ValueError, match="efSearch"):
        store.write_documents([multi_view_doc(i, [[float(i), 1.0]]) for i in range(200)])
    assert store.count_documents() == 0  # refused before anything was written
    with pytest.raises(ValueError, match="search_parameters"):
        FaissMultiViewDocumentStore(search_parameters={"nprobe": "8"})


def test_bad_input_loses_nothing(document_store):
    document_store.write_documents([multi_view_doc(0, [[1, 0]])])
    with pytest.raises(ValueError, match="list of Documents"):
        document_store.write_documents([multi_view_doc(1, [[1, 0]]), "not a document"])
    with pytest.raises(ValueError, match="NaN"):
        document_store.write_documents([multi_view_doc(2, [[0, 1]]), multi_view_doc(3, [[float("nan"), 1]])])
    with pytest.raises(ValueError, match="3-dimensional"):
        document_store.write_documents([multi_view_doc(4, [[0, 1]]), multi_view_doc(5, [[1, 2, 3]])])
    with pytest.raises(DuplicateDocumentError):
        document_store.write_documents([multi_view_doc(6, [[0, 1]]), multi_view_doc(0, [[0, 1]])])
    assert [d.id for d in document_store.filter_documents()] == ["d0"]
    assert [h.id for h in document_store.search([1.0, 0.0], top_k=5)] == ["d0"]
    document_store.delete_documents(["unknown-id"])
    assert document_store.count_documents() == 1


@pytest.mark.parametrize(
    ("query", "message"), [([1.0, 2.0, 3.0], "dimension"), ([float("nan"), 1.0], "NaN"), ([], "non-empty")]
)
def test_bad_queries(document_store, query, message):
    document_store.write_documents([multi_view_doc(0, [[1, 0]])])
    with pytest.raises(ValueError, match=message):
        document_store.search(query, top_k=1)


def test_fixed_dimension_is_enforced():
    store = FaissMultiViewDocumentStore(embedding_dim=4)
    with pytest.raises(ValueError, match="4-dimensional"):
        store.write_documents([multi_view_doc(0, [[1, 0]])])


def test_to_dict_and_back():
    store = FaissMultiViewDocumentStore(
        embedding_dim=8,
        index_factory="HNSW32",
        encoder_config={"mode": "mvr"},
        search_parameters={"efSearch": 64},
        keep_vectors=False,
    )
    data = store.to_dict()
    assert data == {
        "type": "haystack_mvr.document_stores.faiss.document_store.FaissMultiViewDocumentStore",
        "init_parameters": {
            "embedding_dim": 8,
            "index_factory": "HNSW32",
            "index_path": None,
            "encoder_config": {"mode": "mvr"},
            "search_parameters": {"efSearch": 64},
            "keep_vectors": False,
            "train_size": None,
            "search_threads": None,
            "gpu_device": None,
        },
    }
    assert FaissMultiViewDocumentStore.from_dict(data).to_dict() == data


def test_a_pipeline_saved_with_the_store_s_old_module_path_loads(tmp_path):
    """Pipelines saved before the store moved into ``document_stores/faiss/`` name its old module."""
    from haystack import Pipeline

    from haystack_mvr.components.retrievers import MultiViewRetriever

    writer = FaissMultiViewDocumentStore(embedding_dim=2)
    writer.write_documents([multi_view_doc(0, [[1, 0], [0, 1]])])
    writer.save(tmp_path / "index")
    store = FaissMultiViewDocumentStore(embedding_dim=2, index_path=str(tmp_path / "index"))
    pipeline = Pipeline()
    pipeline.add_component("retriever", MultiViewRetriever(document_store=store))
    new_path = "haystack_mvr.document_stores.faiss.document_store.FaissMultiViewDocumentStore"
    old_path = "haystack_mvr.document_stores.faiss_multi_view_document_store.FaissMultiViewDocumentStore"
    saved = pipeline.dumps()
    assert new_path in saved
    loaded = Pipeline.loads(saved.replace(new_path, old_path))
    retriever = loaded.get_component("retriever")
    assert type(retriever.document_store) is FaissMultiViewDocumentStore
    assert retriever.document_store.to_dict()["type"] == new_path
    hits = retriever.run(query_embedding=[0.0, 1.0])["documents"]
    assert [d.id for d in hits] == ["d0"]


@pytest.mark.parametrize("through_faiss", [False, True], ids=["small-filter-exact", "selector-or-widening"])
@pytest.mark.parametrize(
    ("factory", "params"),
    [
        ("PQ8", None),
        ("OPQ8,PQ8", None),
        ("IVF16,PQ8", {"nprobe": 4}),
        ("IVF16,Flat", {"nprobe": 16}),
        ("HNSW32", None),
    ],
)
def test_filtered_search_returns_top_k_on_every_index(factory, params, through_faiss, monkeypatch):
    """Issue 13: with 6 matching documents and top_k=5, PQ/OPQ/IVF-PQ returned 0, IVF16,Flat 0-1 and HNSW32 1."""
    from haystack_mvr.document_stores.faiss.view_index import ViewIndex

    if through_faiss:
        monkeypatch.setattr(ViewIndex, "exact_rows", 0)
    rng = np.random.default_rng(0)
    views = rng.normal(size=(2000, 4, 32)).astype(np.float32)
    store = FaissMultiViewDocumentStore(
        index_factory=factory, search_parameters=params, train_size=1000, search_threads=1
    )
    store.write_documents(
        [attach_views(Document(id=f"d{i}", content="x", meta={"tag": i % 333 == 7}), v) for i, v in enumerate(views)]
    )
    matching = [i for i in range(2000) if i % 333 == 7]
    assert len(matching) == 6
    for q in rng.normal(size=(5, 32)).astype(np.float32):
        hits = store.search(q, top_k=5, filters={"field": "meta.tag", "operator": "==", "value": True})
        assert len(hits) == 5 and {h.id for h in hits} <= {f"d{i}" for i in matching}
        exact = sorted(matching, key=lambda i: -float(np.max(views[i] @ q)))[:5]
        if not through_faiss or factory in {"IVF16,Flat"}:
            assert [h.id for h in hits] == [f"d{i}" for i in exact]


@pytest.mark.parametrize("factory", ["Flat", "HNSW16", "IVF4,Flat", "PQ4"])
def test_non_finite_numpy_views_late_in_a_large_batch_leave_nothing_behind(factory):
    # float32 numpy views are checked in the pass that adds them: a NaN after several added chunks is rolled back
    rng = np.random.default_rng(0)
    store = FaissMultiViewDocumentStore(index_factory=factory, train_size=1024)
    first = [Document(id=f"a{i}", meta={VIEWS_KEY: rng.random((4, 8), dtype=np.float32)}) for i in range(300)]
    store.write_documents(first)
    rows_before = store._views.faiss_index.ntotal if store._views.faiss_index is not None else 0
    batch = [Document(id=f"b{i}", meta={VIEWS_KEY: rng.random((4, 8), dtype=np.float32)}) for i in range(3000)]
    batch[2900].meta[VIEWS_KEY][1, 3] = np.inf
    with pytest.raises(ValueError, match=r"'b2900'.*NaN or infinite"):
        store.write_documents(batch)
    assert store.count_documents() == 300 and store._views.ntotal == 1200
    index = store._views.faiss_index  # rows added before the NaN were removed again (HNSW: checked before adding)
    assert (index.ntotal if index is not None else 0) == rows_before
    hits = store.search(first[7].meta[VIEWS_KEY][0], top_k=300)
    assert {h.id for h in hits} == {d.id for d in first}
    batch[2900].meta[VIEWS_KEY][1, 3] = 0.5
    assert store.write_documents(batch) == 3000 and store._views.ntotal == 13200


def test_packed_views_are_written_as_their_matrix_and_checked():
    # what the embedders attach: the store takes the packed matrix as it is, and still refuses a NaN in it
    rng = np.random.default_rng(1)
    views = [rng.standard_normal((3, 8)).astype(np.float32) for _ in range(50)]
    views = [v / np.linalg.norm(v, axis=1, keepdims=True) for v in views]  # a view is its own best match
    store = FaissMultiViewDocumentStore()
    store.write_documents([attach_views(Document(id=f"p{i}", content="x"), v) for i, v in enumerate(views)])
    hit = store.search(views[17][2], top_k=1, return_embedding=True)[0]
    assert hit.id == "p17" and hit.meta[MATCHED_VIEW_KEY] == 2
    np.testing.assert_array_equal(document_views(hit), views[17])
    bad = views[0].copy()
    bad[1, 4] = np.nan
    with pytest.raises(ValueError, match=r"'q'.*NaN or infinite"):
        store.write_documents([Document(id="q", meta={VIEWS_KEY: PackedViews(bad)})])
    assert store.count_documents() == 50 and store._views.ntotal == 150


def test_non_finite_views_of_a_skipped_duplicate_are_refused():
    store = FaissMultiViewDocumentStore()
    store.write_documents([Document(id="x", meta={VIEWS_KEY: np.ones((2, 3), dtype=np.float32)})])
    bad = np.array([[np.nan, 1, 1]], dtype=np.float32)
    with pytest.raises(ValueError, match=r"'x'.*NaN"):
        store.write_documents([Document(id="x", meta={VIEWS_KEY: bad})], policy=DuplicatePolicy.SKIP)
    with pytest.raises(ValueError, match=r"'y'.*NaN"):  # replaced by a later copy in the same batch
        store.write_documents(
            [
                Document(id="y", meta={VIEWS_KEY: bad}),
                Document(id="y", meta={VIEWS_KEY: np.ones((1, 3), dtype=np.float32)}),
            ],
            policy=DuplicatePolicy.OVERWRITE,
        )
    assert store.count_documents() == 1


@pytest.mark.parametrize("factory", ["PQ4", "IVF4,Flat"])
def test_rows_held_beside_the_index_are_the_stores_own_copies(factory):
    views = np.random.default_rng(1).random((8, 8), dtype=np.float32)
    store = FaissMultiViewDocumentStore(index_factory=factory, keep_vectors=True, train_size=100_000)
    store.write_documents([Document(id="d", meta={VIEWS_KEY: views})])  # staged (untrained) and, for PQ, kept
    expected = views.copy()
    views[:] = 0.0  # the caller reuses its array
    np.testing.assert_array_equal(store._views.views_of(store._key_of["d"]), expected)


def test_large_batches_leave_the_garbage_collector_as_they_found_it():
    import gc

    docs = [Document(id=str(i), meta={VIEWS_KEY: np.ones((1, 2), dtype=np.float32)}) for i in range(10_001)]
    store = FaissMultiViewDocumentStore()
    store.write_documents(docs)
    assert gc.isenabled()
    gc.disable()
    try:
        store.write_documents([Document(id=f"n{d.id}", meta=d.meta) for d in docs])
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("factory", ["PQ4", "OPQ4,PQ4"])
def test_pq_skips_polysemous_training_and_ranks_the_same(factory):
    """index_factory's polysemous training only relabels PQ centroids for Hamming search, which the store never
    uses; the store turns it off, and the ranking by asymmetric distances is the same as with it."""
    import faiss

    rng = np.random.default_rng(0)
    views = rng.standard_normal((300, 2, 8)).astype(np.float32)
    store = FaissMultiViewDocumentStore(embedding_dim=8, index_factory=factory, keep_vectors=False, train_size=600)
    store.write_documents([Document(id=str(i), meta={VIEWS_KEY: v}) for i, v in enumerate(views)])
    query = rng.standard_normal(8).astype(np.float32)
    ours = [d.id for d in store.search(query.tolist(), top_k=10)]

    index = faiss.downcast_index(store._views._index)  # the id map around the PQ (or OPQ + PQ)
    inner = faiss.downcast_index(index.index)
    pq = faiss.downcast_index(inner.index) if isinstance(inner, faiss.IndexPreTransform) else inner
    assert isinstance(pq, faiss.IndexPQ) and not pq.do_polysemous_training

    reference = faiss.index_factory(8, factory, faiss.METRIC_INNER_PRODUCT)  # polysemous training on
    rows = views.reshape(-1, 8)
    reference.train(rows)
    scores = reference.sa_decode(reference.sa_encode(rows)) @ query  # the same codes ranked by reconstruction
    best = scores.reshape(300, 2).max(axis=1)
    assert ours == [str(i) for i in np.argsort(-best)[:10]]


def test_filtered_hnsw_widens_its_walk_by_the_inverse_of_the_allowed_share():
    # HNSW keeps only allowed rows of the efSearch candidates it walks: a 10% filter walks 10x as far (at most 16x)
    rng = np.random.default_rng(3)
    store = FaissMultiViewDocumentStore(index_factory="HNSW16", search_parameters={"efSearch": 32})
    views = rng.standard_normal((400, 2, 8)).astype(np.float32)
    store.write_documents([Document(id=f"h{i}", meta={VIEWS_KEY: v, "b": i % 10}) for i, v in enumerate(views)])
    index = store._views
    selector = faiss.IDSelectorBatch(np.arange(3, dtype=np.int64))
    assert index._params(selector, 0.1).efSearch == 320
    assert index._params(selector, 0.001).efSearch == 512 and index._params(selector, 1.0).efSearch == 32
    hits = store.search(views[7][0], top_k=5, filters={"field": "meta.b", "operator": "==", "value": 7})
    assert len(hits) == 5 and hits[0].id == "h7"


def test_ivf_pq_skips_polysemous_training_and_ranks_the_same():
    """IVF-PQ's polysemous training (the same relabelling as PQ's) made training IVF4,PQ4 on 600 rows at d=8 take
    8.6 s instead of 0.17 s; the store turns it off, and the ranking is that of the same codes with it (4-bit codes
    here: their polysemous training is fast enough for the reference)."""
    rng = np.random.default_rng(0)
    views = rng.standard_normal((300, 2, 8)).astype(np.float32)
    store = FaissMultiViewDocumentStore(
        embedding_dim=8, index_factory="IVF4,PQ4x4", keep_vectors=False, train_size=600, search_parameters={"nprobe": 4}
    )
    store.write_documents([Document(id=str(i), meta={VIEWS_KEY: v}) for i, v in enumerate(views)])
    assert not faiss.downcast_index(store._views.faiss_index).do_polysemous_training
    query = rng.standard_normal(8).astype(np.float32)
    reference = faiss.index_factory(8, "IVF4,PQ4x4", faiss.METRIC_INNER_PRODUCT)  # polysemous training on
    rows = views.reshape(-1, 8)
    reference.train(rows)
    best = (reference.sa_decode(reference.sa_encode(rows)) @ query).reshape(300, 2).max(axis=1)
    assert [d.id for d in store.search(query.tolist(), top_k=10)] == [str(i) for i in np.argsort(-best)[:10]]


def test_results_are_copies_that_cannot_change_the_store(document_store):
    meta = {"tags": ["a", "b"], "nested": {"k": [1, {"x": 2}]}, "lang": "en"}
    document_store.write_documents([multi_view_doc(0, [[1, 0], [0, 1]], [(0, 11), (12, 24)], **meta)])
    for hit in (
        document_store.search([0.0, 1.0], top_k=1)[0],
        document_store.search_batch([[0.0, 1.0]], top_k=1)[0][0],
        document_store.search([0.0, 1.0], top_k=1, return_embedding=True)[0],
        document_store.filter_documents()[0],
    ):
        hit.meta["tags"].append("c")
        hit.meta["nested"]["k"][1]["x"] = 3
        hit.meta[SPANS_KEY][0][1] = 99
        hit.meta[SPANS_KEY].append(None)
        hit.meta["lang"] = "de"
    again = document_store.search([0.0, 1.0], top_k=1)[0]
    assert again.meta["tags"] == ["a", "b"] and again.meta["nested"] == {"k": [1, {"x": 2}]}
    assert again.meta[SPANS_KEY] == [[0, 11], [12, 24]] and again.meta["lang"] == "en"
    assert again.meta[MATCHED_VIEW_KEY] == 1 and again.meta[MATCHED_TEXT_KEY] == "Second part."
    assert again.score == pytest.approx(1.0)


def test_a_duplicate_id_within_one_batch_says_so_and_names_the_policies():
    """On an empty store it was reported as "already exists", with no DuplicatePolicy hint (issue 57)."""
    store = FaissMultiViewDocumentStore(embedding_dim=2)
    with pytest.raises(DuplicateDocumentError, match=r"ID 'd1' is duplicated within this batch") as error:
        store.write_documents([multi_view_doc(0, [[1, 0]]), multi_view_doc(1, [[0, 1]]), multi_view_doc(1, [[1, 1]])])
    assert "already exists" not in str(error.value) and "DuplicatePolicy.OVERWRITE" in str(error.value)
    assert store.count_documents() == 0
    store.write_documents([multi_view_doc(0, [[1, 0]])])
    with pytest.raises(DuplicateDocumentError, match=r"ID 'd0' already exists\. .*DuplicatePolicy\.OVERWRITE"):
        store.write_documents([multi_view_doc(0, [[0, 1]]), multi_view_doc(0, [[1, 1]])])  # stored: that comes first
