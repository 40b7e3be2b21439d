"""Saving and loading the FAISS multi-view store (format 2, on versioned_folder): round trips, refusals and
files that disagree with each other."""

import json
import threading
import time

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.errors import DocumentStoreError

from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore, index_versions, persistence
from haystack_mvr.document_stores.versioned_folder import saving
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


@pytest.mark.parametrize(("factory", "keep"), [("Flat", True), ("HNSW8", True), ("PQ4x4", True), ("PQ4x4", False)])
def test_round_trip_each_layout(tmp_path, factory, keep):
    store = make_store(n=60, index_factory=factory, keep_vectors=keep, train_size=64, search_threads=1)
    store.delete_documents([f"d{i}" for i in range(0, 60, 5)])  # HNSW: tombstones
    store.save(tmp_path / "s")
    loaded = FaissMultiViewDocumentStore(index_factory=factory, keep_vectors=keep, train_size=64, search_threads=1)
    loaded.load(tmp_path / "s")
    assert results(loaded, np.ones(8)) == results(store, np.ones(8))
    loaded.write_documents([attach_views(Document(id="new", content="x"), np.full((2, 8), 3.0))])
    assert loaded.search(np.ones(8), top_k=1)[0].id == "new"


def test_flat_rows_are_stored_once(tmp_path):
    """The Flat index is the only copy of its rows: no float32 rows beside it, in memory or on disk."""
    store = make_store(n=200, dim=32, keep_vectors=True)
    assert store._views.kept_rows_by_key() == {}
    store.save(tmp_path / "s")
    with index_versions.open_version(tmp_path / "s") as version:
        assert version.read_array("held.npy").shape == (0, 32)
    folder = next((tmp_path / "s").glob("v-*"))
    index_bytes = (folder / "index.faiss").stat().st_size
    rows_bytes = 200 * 2 * 32 * 4
    assert index_bytes < 1.2 * rows_bytes + 20_000  # the rows + their labels, once


def test_index_path_loads_lazily(tmp_path):
    make_store().save(tmp_path / "s")
    store = FaissMultiViewDocumentStore(index_path=str(tmp_path / "s"))
    assert store.count_documents() == 21


def test_index_path_that_does_not_exist_warns_and_opens_empty(tmp_path, caplog):
    store = FaissMultiViewDocumentStore(index_path=str(tmp_path / "nothing"))
    with caplog.at_level("WARNING"):
        assert store.count_documents() == 0
    assert "nothing" in caplog.text and "opens empty" in caplog.text


def test_lazy_load_happens_under_the_lock(tmp_path, monkeypatch):
    """A write racing the first load is never erased by it, and a count waits for the load instead of saying 0."""
    make_store().save(tmp_path / "s")
    store = FaissMultiViewDocumentStore(index_path=str(tmp_path / "s"))
    real_load = persistence.load
    loading = threading.Event()

    def slow_load(*args, **kwargs):
        loading.set()
        time.sleep(0.3)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(persistence, "load", slow_load)
    counted = []
    reader = threading.Thread(target=lambda: counted.append(store.count_documents()))
    reader.start()
    assert loading.wait(5)
    store.write_documents([attach_views(Document(id="new", content="x"), np.ones((1, 8)))])
    reader.join()
    assert counted == [21]
    assert store.count_documents() == 22 and store.filter_documents({"field": "id", "operator": "==", "value": "new"})


def test_crash_mid_save_keeps_previous_copy(tmp_path, monkeypatch):
    first = make_store(seed=0)
    first.save(tmp_path / "s")
    second = make_store(seed=1, n=5)

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(index_versions.FaissVersionWriter, "write_faiss_index", broken)
    with pytest.raises((OSError, DocumentStoreError)):
        second.save(tmp_path / "s")
    monkeypatch.undo()
    loaded = FaissMultiViewDocumentStore()
    loaded.load(tmp_path / "s")
    assert results(loaded, np.ones(8)) == results(first, np.ones(8))
    assert len(list((tmp_path / "s").glob("v-*"))) == 1


def test_mismatched_dimension_encoder_and_factory_are_refused(tmp_path):
    make_store(encoder_config={"mode": "mvr", "num_views": 8}).save(tmp_path / "s")
    keep = make_store(dim=4, n=2)
    with pytest.raises(DocumentStoreError, match="8-dimensional"):
        FaissMultiViewDocumentStore(embedding_dim=4).load(tmp_path / "s")
    with pytest.raises(DocumentStoreError, match="encoder config"):
        FaissMultiViewDocumentStore(encoder_config={"mode": "camvr"}).load(tmp_path / "s")
    with pytest.raises(DocumentStoreError, match="index_factory='Flat'"):
        FaissMultiViewDocumentStore(index_factory="HNSW8").load(tmp_path / "s")
    keep.embedding_dim = 4
    with pytest.raises(DocumentStoreError):
        keep.load(tmp_path / "s")
    assert keep.count_documents() == 3  # nothing already stored was lost


def test_encoder_config_is_persisted(tmp_path):
    store = make_store(encoder_config={"mode": "snippet"})
    store.save(tmp_path / "s")
    loaded = FaissMultiViewDocumentStore()
    loaded.load(tmp_path / "s")
    assert loaded.encoder_config == {"mode": "snippet"}


def test_missing_store_and_damaged_file_are_refused(tmp_path):
    with pytest.raises(DocumentStoreError, match="No saved"):
        FaissMultiViewDocumentStore().load(tmp_path / "nothing")
    make_store().save(tmp_path / "s")
    folder = next((tmp_path / "s").glob("v-*"))
    data = (folder / "keys.npy").read_bytes()
    (folder / "keys.npy").write_bytes(data[:-3] + b"xyz")
    with pytest.raises(DocumentStoreError, match=r"keys\.npy"):
        FaissMultiViewDocumentStore().load(tmp_path / "s")


def test_format_1_is_refused_clearly(tmp_path):
    folder = tmp_path / "s" / ("v-" + "0" * 32)
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"format_version": 1, "checksums": {}}))
    (tmp_path / "s" / "CURRENT").write_text(folder.name)
    with pytest.raises(DocumentStoreError, match="format 1"):
        FaissMultiViewDocumentStore().load(tmp_path / "s")


def _resave(path, change):
    """Read every file of the saved store at ``path``, let ``change(files, meta)`` alter them, save them again
    (with valid checksums: the files disagree with each other, not with their checksums)."""
    with index_versions.open_version(path) as version:
        meta = dict(version.meta)
        files = {
            "documents.jsonl": version.read_bytes("documents.jsonl"),
            **{n: version.read_array(n) for n in ("keys.npy", "view_counts.npy", "held.npy", "tombstones.npy")},
        }
        index = version.read_faiss_index("index.faiss") if meta["trained"] else None
    change(files, meta)

    def write(w):
        for name, value in files.items():
            if name.endswith(".npy"):
                w.write_array(name, value)
            else:
                w.write_bytes(name, value)
        if index is not None:
            w.write_faiss_index("index.faiss", files.get("index", index))

    index_versions.save_version(path, write, meta)


def _duplicate_line(files, meta):
    lines = files["documents.jsonl"].splitlines(keepends=True)
    files["documents.jsonl"] = b"".join([lines[0], *lines[:-1]])  # a repeated line, the last one lost


def _spans_for_other_views(files, meta):
    lines = files["documents.jsonl"].decode().splitlines()
    doc = json.loads(lines[1])
    doc["meta"]["mvr_view_spans"] = [[0, 3]]
    lines[1] = json.dumps(doc)
    files["documents.jsonl"] = ("\n".join(lines) + "\n").encode()


def _swap_keys(files, meta):
    keys = files["keys.npy"].copy()
    keys[[0, 1]] = keys[[1, 0]] + 1000  # keys the index has no labels for
    files["keys.npy"] = keys


def _repeat_key(files, meta):
    keys = files["keys.npy"].copy()
    keys[1] = keys[0]
    files["keys.npy"] = keys


def _wrong_counts(files, meta):
    counts = files["view_counts.npy"].copy()
    counts[0] += 1
    files["view_counts.npy"] = counts
    meta["rows"] += 1


def _fewer_documents(files, meta):
    meta["documents"] -= 1


@pytest.mark.parametrize(
    ("change", "file"),
    [
        (_duplicate_line, "documents.jsonl"),
        (_spans_for_other_views, "documents.jsonl"),
        (_swap_keys, "index.faiss"),
        (_repeat_key, "keys.npy"),
        (_wrong_counts, "documents.jsonl"),  # its spans cover the saved count of views
        (_fewer_documents, "documents.jsonl"),
    ],
)
def test_files_that_disagree_are_refused_naming_the_file(tmp_path, change, file):
    """Today's defect: a duplicated line in documents.jsonl silently shifted views onto other documents."""
    make_store().save(tmp_path / "s")
    _resave(tmp_path / "s", change)
    with pytest.raises(DocumentStoreError, match=file.replace(".", r"\.")):
        FaissMultiViewDocumentStore().load(tmp_path / "s")


def test_a_flipped_byte_anywhere_in_a_large_index_is_refused(tmp_path, monkeypatch):
    """index.faiss is verified whole before FAISS reads it: a flipped byte in any block (the first, one in the
    middle, the last) is refused, and no load, good or refused, leaves a file open."""
    import os

    monkeypatch.setattr(saving, "BLOCK", 4096)  # the index spans many blocks
    store = make_store(n=200, dim=32)
    store.save(tmp_path / "s")
    monkeypatch.setattr(saving, "BLOCK", 4 << 20)  # readers follow the manifest's block size
    folder = next((tmp_path / "s").glob("v-*"))
    fds = len(os.listdir("/proc/self/fd"))
    loaded = FaissMultiViewDocumentStore()
    loaded.load(tmp_path / "s")
    assert results(loaded, np.ones(32)) == results(store, np.ones(32))
    index_file = folder / "index.faiss"
    data = index_file.read_bytes()
    assert len(data) > 10 * 4096
    for position in (30, len(data) // 2, len(data) // 2 + 4096, len(data) - 2):
        damaged = bytearray(data)
        damaged[position] ^= 0x40
        index_file.write_bytes(damaged)
        with pytest.raises(DocumentStoreError, match=r"index\.faiss is damaged: it does not match its checksum"):
            FaissMultiViewDocumentStore().load(tmp_path / "s")
    assert len(os.listdir("/proc/self/fd")) == fds


@pytest.mark.parametrize(
    ("values", "file"),
    [
        (lambda k: k[::-1], "index.faiss"),  # distinct keys out of order pass the keys check (not the labels')
        (lambda k: np.concatenate([k[:1], k[:-1]]), "keys.npy"),  # ascending, the first key twice
        (lambda k: np.concatenate([k[1:], k[-1:]]), "keys.npy"),  # ascending, the last key twice
        (lambda k: np.concatenate([k[::-1][:-1], k[-1:]]), "keys.npy"),  # out of order, the last key twice
        (lambda k: k - k[0] - 1, "keys.npy"),  # a negative key
        (lambda k: k + (1 << 50), "keys.npy"),  # a key too large
    ],
)
def test_repeated_or_invalid_keys_are_refused_in_any_order(tmp_path, values, file):
    """keys.npy is checked without np.unique: ascending keys in one comparison pass, other orders sorted first."""
    make_store().save(tmp_path / "s")

    def change(files, meta):
        files["keys.npy"] = np.asarray(values(files["keys.npy"]), dtype=np.int64)

    _resave(tmp_path / "s", change)
    with pytest.raises(DocumentStoreError, match=file.replace(".", r"\.")):
        FaissMultiViewDocumentStore().load(tmp_path / "s")
