"""keep_vectors=False: the FAISS index is the only copy of the views."""

import gc
import json
import weakref

import faiss
import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.errors import DocumentStoreError

from haystack_mvr.document_stores import FaissMultiViewDocumentStore, persistence
from haystack_mvr.views import VIEWS_KEY, attach_views

DIM = 16


def unit_views(n, seed, views=3):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, views, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def docs(views, start=0):
    return [attach_views(Document(id=f"d{start + i}", content="x"), v) for i, v in enumerate(views)]


def top1(store, views, ids):
    """For each id, is the document found at rank 1 by one of its own views (scaled, with a little noise)?"""
    rng = np.random.default_rng(7)
    return [store.search(views[i, i % views.shape[1]] * 5 + rng.normal(0, 0.01, DIM), top_k=1)[0].id for i in ids]


@pytest.mark.parametrize("factory", ["Flat", "HNSW16", "IVF8,Flat", "PQ4x4", "OPQ4,PQ4x4"])
def test_index_only_store_holds_no_float_rows_and_ranks_like_a_kept_one(factory):
    views = unit_views(300, seed=0)
    kept = FaissMultiViewDocumentStore(index_factory=factory)
    index_only = FaissMultiViewDocumentStore(index_factory=factory, keep_vectors=False)
    for store in (kept, index_only):
        store.write_documents(docs(views))
    query = views[10, 1] + views[20, 2]
    lossy = "PQ" in factory  # kept vectors score exactly; an index-only store scores its reconstruction
    compared = 2 if lossy else 10
    assert [(d.id, None if lossy else round(d.score, 4)) for d in index_only.search(query, top_k=10)][:compared] == [
        (d.id, None if lossy else round(d.score, 4)) for d in kept.search(query, top_k=10)
    ][:compared]
    assert index_only._views.stored_vectors.nbytes == 0
    assert kept._views.stored_vectors.nbytes == 300 * 3 * DIM * 4


def test_indexed_rows_are_freed_not_just_hidden():
    store = FaissMultiViewDocumentStore(keep_vectors=False)
    store.write_documents(docs(unit_views(50, seed=10)))
    rows = weakref.ref(store._views.stored_vectors)  # the joined float32 rows, before the index exists
    assert rows() is not None
    store.search(np.ones(DIM), top_k=1)
    gc.collect()
    assert rows() is None


@pytest.mark.parametrize("factory", ["HNSW16", "IVF8,Flat", "PQ4x4"])
def test_writes_and_deletes_after_training_reencode_without_retraining(factory):
    exhaustive = {"nprobe": 8} if factory.startswith("IVF") else None  # test the bookkeeping, not IVF misses
    store = FaissMultiViewDocumentStore(index_factory=factory, keep_vectors=False, search_parameters=exhaustive)
    first, later = unit_views(300, seed=1), unit_views(60, seed=2)
    store.write_documents(docs(first))
    store.search(first[0, 0], top_k=1)
    trained = faiss.serialize_index(store._views.faiss_index())
    store.write_documents(docs(later, start=300))
    store.delete_documents([f"d{i}" for i in range(0, 300, 3)])
    assert store.count_documents() == 260

    survivors = [i for i in range(300) if i % 3]
    found = top1(store, first, survivors[:40])
    assert sum(f == f"d{i}" for f, i in zip(found, survivors[:40], strict=True)) >= 38
    assert top1(store, later, range(20)) == [f"d{300 + i}" for i in range(20)] or factory == "PQ4x4"
    hits = store.search(first[0, 0], top_k=50)
    assert len(hits) == 50 and not {h.id for h in hits} & {f"d{i}" for i in range(0, 300, 3)}
    index = store._views.faiss_index()
    assert index.ntotal == 260 * 3 and store._views.stored_vectors.nbytes == 0
    if factory == "PQ4x4":  # the codebooks are the ones trained at the first search
        before = faiss.downcast_index(faiss.deserialize_index(trained)).pq
        np.testing.assert_array_equal(
            faiss.vector_to_array(index.pq.centroids), faiss.vector_to_array(before.centroids)
        )


@pytest.mark.parametrize(("factory", "tolerance"), [("HNSW16", 1e-6), ("IVF8,Flat", 1e-6), ("PQ4x4", 0.5)])
def test_embeddings_read_back_are_the_index_reconstruction(factory, tolerance):
    views = unit_views(300, seed=3)
    store = FaissMultiViewDocumentStore(index_factory=factory, keep_vectors=False)
    store.write_documents(docs(views))
    returned = store.search(views[7, 2], top_k=1, return_embedding=True)[0]
    np.testing.assert_allclose(returned.meta[VIEWS_KEY], views[7], atol=tolerance)
    store.write_documents(docs(unit_views(5, seed=4), start=300))  # not indexed yet: read back exactly
    doc = store.filter_documents({"field": "id", "operator": "==", "value": "d7"})[0]
    np.testing.assert_allclose(doc.embedding, views[7, 0], atol=tolerance)
    np.testing.assert_allclose(
        store.filter_documents({"field": "id", "operator": "==", "value": "d302"})[0].embedding,
        unit_views(5, seed=4)[2, 0],
        atol=1e-6,
    )


@pytest.mark.parametrize("keep_vectors", [True, False])
def test_trainable_index_is_trained_once_there_are_enough_vectors(keep_vectors, tmp_path):
    store = FaissMultiViewDocumentStore(index_factory="PQ4x6", keep_vectors=keep_vectors)
    store.write_documents(docs(unit_views(10, seed=5)))
    store.search(np.ones(DIM), top_k=1)
    assert isinstance(
        store._views.faiss_index(), faiss.IndexFlat
    )  # 30 rows, too few to train 64 centroids: exact for now
    store.save(tmp_path / "s")
    store.load(tmp_path / "s")  # an exact stand-in read back is still replaced once it can be
    store.write_documents(docs(unit_views(300, seed=6), start=10))
    store.search(np.ones(DIM), top_k=1)
    assert isinstance(faiss.downcast_index(store._views.faiss_index()), faiss.IndexPQ)
    assert store._views.faiss_index().ntotal == 310 * 3


def test_index_only_save_holds_no_vectors_and_loads_only_with_its_factory(tmp_path):
    views = unit_views(300, seed=8)
    store = FaissMultiViewDocumentStore(index_factory="PQ4x4", keep_vectors=False)
    store.write_documents(docs(views))
    store.delete_documents(["d5"])
    store.save(tmp_path / "s")
    version = next((tmp_path / "s").glob("v-*"))
    assert np.load(version / "vectors.npy").shape == (0, DIM)
    query = views[9, 1]
    expected = [(d.id, round(d.score, 4)) for d in store.search(query, top_k=5)]

    for keep in (False, True):  # a store that keeps vectors takes the reconstruction
        loaded = FaissMultiViewDocumentStore(index_factory="PQ4x4", keep_vectors=keep)
        loaded.load(tmp_path / "s")
        assert [(d.id, round(d.score, 4)) for d in loaded.search(query, top_k=5)] == expected
        assert loaded.count_documents() == 299
    with pytest.raises(DocumentStoreError, match=r"keep_vectors=False.*index_factory='PQ4x4'"):
        FaissMultiViewDocumentStore(index_factory="Flat").load(tmp_path / "s")


def test_mismatched_saved_index_is_refused(tmp_path):
    store = FaissMultiViewDocumentStore(keep_vectors=False)
    store.write_documents(docs(unit_views(20, seed=9)))
    store.save(tmp_path / "s")
    version = next((tmp_path / "s").glob("v-*"))
    faiss.write_index(faiss.IndexFlatIP(DIM + 1), str(version / "index.faiss"))
    with pytest.raises(DocumentStoreError, match=r"index\.faiss"):  # caught by its checksum
        FaissMultiViewDocumentStore().load(tmp_path / "s")
    manifest = json.loads((version / "manifest.json").read_text())  # a consistent but wrong index
    manifest["checksums"]["index.faiss"] = persistence._sha256(version / "index.faiss")
    (version / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DocumentStoreError, match=f"dimension {DIM + 1}"):
        FaissMultiViewDocumentStore().load(tmp_path / "s")
    faiss.write_index(faiss.IndexFlatIP(DIM), str(version / "index.faiss"))  # right dimension, no rows
    manifest["checksums"]["index.faiss"] = persistence._sha256(version / "index.faiss")
    (version / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DocumentStoreError, match="corrupt"):
        FaissMultiViewDocumentStore().load(tmp_path / "s")


def test_keep_vectors_must_be_a_bool():
    with pytest.raises(ValueError, match="keep_vectors"):
        FaissMultiViewDocumentStore(keep_vectors="no")
