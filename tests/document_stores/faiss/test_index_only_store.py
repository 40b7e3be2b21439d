"""Where a view's vector lives: the index alone when it reconstructs exactly, float32 rows beside a lossy one only
with keep_vectors, a staging buffer until a trainable index is trained; and writes never rebuild or retrain."""

import faiss
import numpy as np
import pytest
from haystack import Document

from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.document_stores.faiss.index_family import reconstruct_rotated
from haystack_mvr.document_stores.faiss.view_labels import MAX_VIEWS, labels_of
from haystack_mvr.views import attach_views, document_views

DIM = 16


def unit_views(n, seed, views=3):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, views, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def docs(views, start=0):
    return [attach_views(Document(id=f"d{start + i}", content="x"), v) for i, v in enumerate(views)]


def held_bytes(store):
    return sum(v.nbytes for v in store._views.kept_rows_by_key().values())


@pytest.mark.parametrize("factory", ["Flat", "HNSW16", "IVF8,Flat"])
@pytest.mark.parametrize("keep", [True, False])
def test_an_exact_index_is_the_only_copy(factory, keep):
    store = FaissMultiViewDocumentStore(index_factory=factory, keep_vectors=keep, train_size=64, search_threads=1)
    views = unit_views(300, seed=0)
    store.write_documents(docs(views))
    assert held_bytes(store) == 0 and store._views.faiss_index.ntotal == 900
    assert not store._views.unit_rows  # exact rows are never rescaled, so writes skip the unit-length check
    got = store.search(views[10, 1], top_k=1, return_embedding=True)[0]
    np.testing.assert_array_equal(document_views(got), views[10])


@pytest.mark.parametrize("factory", ["PQ4x4", "OPQ4,PQ4x4", "SQ8", "IVF8,PQ4x4"])
def test_lossy_index_keeps_rows_only_with_keep_vectors(factory):
    views = unit_views(300, seed=1)
    kept = FaissMultiViewDocumentStore(index_factory=factory, train_size=256, search_threads=1)
    index_only = FaissMultiViewDocumentStore(
        index_factory=factory, keep_vectors=False, train_size=256, search_threads=1
    )
    for store in (kept, index_only):
        store.write_documents(docs(views))
    assert held_bytes(kept) == views.nbytes and held_bytes(index_only) == 0
    hit = kept.search(views[5, 2], top_k=1, return_embedding=True)[0]
    assert hit.id == "d5" and hit.score == pytest.approx(1.0, abs=1e-5)  # kept rows score exactly
    other = index_only.search(views[5, 2], top_k=1, return_embedding=True)[0]
    np.testing.assert_allclose(document_views(other), views[int(other.id[1:])], atol=0.8)  # its reconstruction


def test_streaming_build_trains_once_and_holds_no_rows_after(monkeypatch):
    """Rows wait in staging (searched exactly) until train_size; then training, and every later write is encoded
    directly: with keep_vectors=False no float32 row stays in the store."""
    store = FaissMultiViewDocumentStore(index_factory="PQ4x4", keep_vectors=False, train_size=600, search_threads=1)
    store.write_documents(docs(unit_views(100, seed=2)))  # 300 rows: staged, exact
    assert not store._views.trained and held_bytes(store) == 300 * DIM * 4
    assert store.search(unit_views(100, seed=2)[7, 1], top_k=1)[0].id == "d7"
    trains = []
    real = faiss.IndexIDMap2.train
    monkeypatch.setattr(faiss.IndexIDMap2, "train", lambda self, x: (trains.append(len(x)), real(self, x))[1])
    store.write_documents(docs(unit_views(100, seed=3), start=100))  # 600 rows: trained now
    index = store._views.faiss_index
    assert trains == [600] and held_bytes(store) == 0 and index.ntotal == 600
    for n in range(3):
        store.write_documents(docs(unit_views(50, seed=4 + n), start=200 + 50 * n))
    store.delete_documents([f"d{i}" for i in range(0, 350, 7)])
    assert trains == [600] and store._views.faiss_index is index and held_bytes(store) == 0
    assert index.ntotal == 3 * (350 - 50)


@pytest.mark.parametrize("factory", ["HNSW16", "IVF8,Flat", "Flat", "PQ4x4"])
def test_writes_and_deletes_never_rebuild_the_index(factory):
    """Defect: one write or delete on HNSW or IVF made the next search rebuild the whole index."""
    store = FaissMultiViewDocumentStore(index_factory=factory, train_size=64, search_threads=1)
    store.write_documents(docs(unit_views(300, seed=5)))
    store.search(np.ones(DIM), top_k=1)
    index = store._views.faiss_index
    store.write_documents(docs(unit_views(3, seed=6), start=300))
    store.search(np.ones(DIM), top_k=1)
    store.delete_documents(["d1", "d2"])
    store.search(np.ones(DIM), top_k=1)
    assert store._views.faiss_index is index
    assert index.ntotal == 303 * 3 - (0 if factory.startswith("HNSW") else 6)  # HNSW: two tombstoned documents


def test_bookkeeping_holds_only_live_documents_under_churn():
    """Defect: the slot table grew by one entry per write forever."""
    store = FaissMultiViewDocumentStore()
    views = unit_views(20, seed=7)
    for _ in range(50):
        store.write_documents(docs(views), policy="overwrite")
    assert len(store._id_of) == len(store._key_of) == 20 == store._views.document_count
    assert store._views.faiss_index.ntotal == 60


def test_hnsw_tombstones_are_never_returned_and_compacted():
    store = FaissMultiViewDocumentStore(index_factory="HNSW16")
    views = unit_views(200, seed=8)
    store.write_documents(docs(views))
    store.delete_documents([f"d{i}" for i in range(0, 200, 10)])  # 10%: tombstones
    assert len(store._views.tombstones) == 60
    hits = store.search(views[0, 0], top_k=200)
    assert len(hits) == 180 and not {h.id for h in hits} & {f"d{i}" for i in range(0, 200, 10)}
    store.delete_documents([f"d{i}" for i in range(1, 200, 5)])  # past a quarter: rebuilt from live rows
    assert len(store._views.tombstones) == 0 and store._views.faiss_index.ntotal == 3 * 140
    assert len(store.search(views[3, 0], top_k=500)) == 140


def test_too_many_views_are_refused():
    store = FaissMultiViewDocumentStore()
    with pytest.raises(ValueError, match=str(MAX_VIEWS)):
        store.write_documents([attach_views(Document(id="big", content="x"), np.ones((MAX_VIEWS + 1, 2)))])
    assert store.count_documents() == 0


def test_search_batch_is_one_faiss_call(monkeypatch):
    """Flat batches skip FAISS for one numpy sgemm per block of rows; other indexes get one FAISS call."""
    store = FaissMultiViewDocumentStore(index_factory="HNSW16")
    store.write_documents(docs(unit_views(300, seed=9)))
    calls = []
    index = store._views.faiss_index
    real = type(index).search
    monkeypatch.setattr(
        type(index), "search", lambda self, x, k, **kw: (calls.append(len(x)), real(self, x, k, **kw))[1]
    )
    queries = np.random.default_rng(0).normal(size=(32, DIM)).astype(np.float32)
    out = store.search_batch(queries, top_k=5)
    assert len(out) == 32 and all(len(o) == 5 for o in out)
    assert calls == [32]


def test_faiss_threads_are_set_for_searches_and_restored(monkeypatch):
    store = FaissMultiViewDocumentStore(index_factory="HNSW32")  # Flat scans one query without index.search
    store.write_documents(docs(unit_views(50, seed=10)))
    seen = []
    index = store._views.faiss_index
    real = type(index).search
    monkeypatch.setattr(
        type(index),
        "search",
        lambda self, x, k, **kw: (seen.append(faiss.omp_get_max_threads()), real(self, x, k, **kw))[1],
    )
    before = faiss.omp_get_max_threads()
    store.search(np.ones(DIM), top_k=1)
    assert seen[-1] == 1 and faiss.omp_get_max_threads() == before
    FaissMultiViewDocumentStore.search_batch(store, np.ones((2, DIM)), top_k=1)
    store.search_threads = 2
    store.search(np.ones(DIM), top_k=1)
    assert seen[-1] == 2 and faiss.omp_get_max_threads() == before


def test_search_on_documents_without_vectors_warns(caplog):
    store = FaissMultiViewDocumentStore()
    store.write_documents([Document(id="plain", content="no vector")])
    with caplog.at_level("WARNING"):
        assert store.search(np.ones(DIM), top_k=3) == []
    assert "no vectors" in caplog.text


@pytest.mark.parametrize("factory", ["OPQ4,PQ4", "OPQ4,IVF4,PQ4", "OPQ4_8,PQ4"])
def test_opq_rows_are_rotated_back_in_one_product_and_equal_faiss(factory):
    # FAISS reverses OPQ one row at a time; the store decodes in the rotated space and rotates back in one product
    store = FaissMultiViewDocumentStore(index_factory=factory, keep_vectors=False, train_size=600)
    store.write_documents(docs(unit_views(400, 0)))
    store.delete_documents([f"d{i}" for i in range(0, 400, 3)])
    store.write_documents(docs(unit_views(50, 1), start=400))
    index = store._views.faiss_index
    keys = np.sort(store._views.keys())
    labels = np.concatenate([labels_of(int(k), store._views.count(int(k))) for k in keys])
    rotated = reconstruct_rotated(index, labels)
    assert rotated is not None
    np.testing.assert_allclose(rotated, index.reconstruct_batch(labels), atol=1e-5)
    hit = store.search(rotated[5], top_k=1, filters={"field": "id", "operator": "in", "value": ["d1", "d2", "d4"]})
    assert len(hit) == 1  # a filtered search scores these few views from the rotated reconstruction


def test_rotated_reconstruction_falls_back_where_it_does_not_apply():
    pq = faiss.IndexIDMap2(faiss.index_factory(DIM, "PQ4", faiss.METRIC_INNER_PRODUCT))
    data = unit_views(300, 2, views=1)[:, 0]
    pq.train(data)
    pq.add_with_ids(data, np.arange(300, dtype=np.int64))
    assert reconstruct_rotated(pq, np.arange(5, dtype=np.int64)) is None  # no pre-transform: FAISS's own
    opq = faiss.IndexIDMap2(faiss.index_factory(DIM, "OPQ4,PQ4", faiss.METRIC_INNER_PRODUCT))
    opq.train(data)
    opq.add_with_ids(data, np.arange(300, dtype=np.int64)[::-1].copy())  # labels not in increasing order
    assert reconstruct_rotated(opq, np.array([3, 7], dtype=np.int64)) is None


def faiss_rows(store, doc_id, views):
    """What FAISS itself decodes for a document's rows (no scaling)."""
    key = store._key_of[doc_id]
    return store._views.faiss_index.reconstruct_batch(labels_of(key, views))


@pytest.mark.parametrize("factory", ["PQ4x4", "IVF8,PQ4x4", "OPQ4,PQ4x4", "HNSW8,SQ4"])
def test_unit_rows_decode_at_unit_length_until_a_longer_row_arrives(factory, tmp_path):
    """A normalising encoder's rows: a lossy index's decodings are scaled back to unit length, and searches score
    those rows; one row of another length turns that off for the index, saved and loaded with it."""
    store = FaissMultiViewDocumentStore(index_factory=factory, keep_vectors=False, train_size=256, search_threads=1)
    views = unit_views(300, seed=3)
    store.write_documents(docs(views))
    assert store._views.unit_rows
    hit = store.search(views[7, 0], top_k=3, return_embedding=True)
    for doc in hit:
        rows = document_views(doc)
        np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-5)
        raw = faiss_rows(store, doc.id, len(rows))
        np.testing.assert_allclose(rows, raw / np.linalg.norm(raw, axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
        assert doc.score == pytest.approx(float((rows @ views[7, 0]).max()), rel=1e-5)
    assert not np.allclose(np.linalg.norm(faiss_rows(store, "d7", 3), axis=1), 1.0, atol=1e-3)  # scaling did work

    store.save(tmp_path / "unit")
    loaded = FaissMultiViewDocumentStore(index_path=str(tmp_path / "unit"))
    again = loaded.search(views[7, 0], top_k=1, return_embedding=True)[0]
    assert loaded._views.unit_rows
    np.testing.assert_allclose(document_views(again), document_views(hit[0]), rtol=1e-5, atol=1e-6)

    longer = views[:1] * 1.01
    store.write_documents(docs(longer, start=1000))
    assert not store._views.unit_rows
    got = store.search(views[7, 0], top_k=1, return_embedding=True)[0]
    # as FAISS decodes them, not rescaled (their norms are >= 1e-3 off unit); OPQ's rotation back may differ in the
    # last bit with the number of rows decoded at once (BLAS summation order)
    np.testing.assert_allclose(document_views(got), faiss_rows(store, got.id, 3), rtol=1e-5, atol=1e-6)
    store.save(tmp_path / "mixed")
    mixed = FaissMultiViewDocumentStore(index_path=str(tmp_path / "mixed"))
    assert mixed.search(views[7, 0], top_k=1)[0].id == got.id and not mixed._views.unit_rows


def test_a_refused_write_leaves_unit_rows_as_they_were():
    store = FaissMultiViewDocumentStore(index_factory="PQ4x4", keep_vectors=False, train_size=256, search_threads=1)
    store.write_documents(docs(unit_views(100, seed=4)))
    bad = unit_views(2, seed=5) * 3.0
    bad[1, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        store.write_documents(docs(bad, start=500))
    assert store._views.unit_rows and store.count_documents() == 100


def test_unit_rows_tolerate_float32_normalisation_only():
    from haystack_mvr.document_stores.faiss.view_checks import all_unit

    rng = np.random.default_rng(6)
    rows = rng.normal(size=(1000, 128)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    assert all_unit([rows, rows[:0]])
    assert not all_unit([rows, rows[:1] * np.float32(1.001)])
    assert not all_unit([rows * np.float32(0.999)])
