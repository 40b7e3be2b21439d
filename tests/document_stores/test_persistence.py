import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.errors import DocumentStoreError

from haystack_mvr.document_stores import FaissMultiViewDocumentStore, persistence
from haystack_mvr.views import attach_views


def make_store(n=20, dim=8, seed=0, **kwargs):
    rng = np.random.default_rng(seed)
    store = FaissMultiViewDocumentStore(**kwargs)
    docs = [
        attach_views(
            Document(id=f"d{i}", content="One. Two.", meta={"i": i}), rng.normal(size=(2, dim)), [(0, 4), (5, 9)]
        )
        for i in range(n)
    ]
    store.write_documents([*docs, Document(id="plain", content="no vectors")])
    return store


def results(store, query):
    return [(d.id, round(d.score, 5), d.meta["mvr_matched_view"]) for d in store.search(query, top_k=5)]


def test_round_trip_gives_identical_results(tmp_path):
    store = make_store(encoder_config={"mode": "snippet"})
    store.delete_documents(["d3"])
    store.save(tmp_path / "s")
    loaded = FaissMultiViewDocumentStore(encoder_config={"mode": "snippet"})
    loaded.load(tmp_path / "s")
    query = np.ones(8, dtype=np.float32)
    assert results(loaded, query) == results(store, query)
    assert loaded.count_documents() == store.count_documents() == 20
    assert loaded.filter_documents({"field": "meta.i", "operator": "==", "value": 4})[0].id == "d4"


def test_index_path_loads_lazily(tmp_path):
    make_store().save(tmp_path / "s")
    store = FaissMultiViewDocumentStore(index_path=str(tmp_path / "s"))
    assert store.count_documents() == 21


def test_crash_mid_save_keeps_previous_copy(tmp_path, monkeypatch):
    first = make_store(seed=0)
    first.save(tmp_path / "s")
    second = make_store(seed=1, n=5)

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(persistence.faiss, "write_index", broken)
    with pytest.raises(OSError, match="disk full"):
        second.save(tmp_path / "s")
    monkeypatch.undo()
    loaded = FaissMultiViewDocumentStore()
    loaded.load(tmp_path / "s")
    assert results(loaded, np.ones(8)) == results(first, np.ones(8))
    assert len(list((tmp_path / "s").glob("v-*"))) == 1


def test_mismatched_dimension_and_encoder_are_refused(tmp_path):
    make_store(encoder_config={"mode": "mvr", "num_views": 8}).save(tmp_path / "s")
    keep = make_store(dim=4, n=2)
    with pytest.raises(DocumentStoreError, match="8-dimensional"):
        FaissMultiViewDocumentStore(embedding_dim=4).load(tmp_path / "s")
    other = FaissMultiViewDocumentStore(encoder_config={"mode": "camvr"})
    with pytest.raises(DocumentStoreError, match="encoder config"):
        other.load(tmp_path / "s")
    keep.embedding_dim = 4
    with pytest.raises(DocumentStoreError):
        keep.load(tmp_path / "s")
    assert keep.count_documents() == 3  # nothing already stored was lost


def test_corrupt_or_missing_files_are_refused(tmp_path):
    make_store().save(tmp_path / "s")
    version = next((tmp_path / "s").glob("v-*"))
    data = (version / "vectors.npy").read_bytes()
    (version / "vectors.npy").write_bytes(data[:-10])
    with pytest.raises(DocumentStoreError, match=r"vectors\.npy"):
        FaissMultiViewDocumentStore().load(tmp_path / "s")
    with pytest.raises(DocumentStoreError, match="No saved"):
        FaissMultiViewDocumentStore().load(tmp_path / "nothing")
