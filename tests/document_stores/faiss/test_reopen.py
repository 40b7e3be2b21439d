"""Reopening a saved FAISS store (issue 28): a load racing a save, damaged .npy headers, the saved index factory, and
the encoder check on the first query after ``index_path``."""

from __future__ import annotations

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.errors import DocumentStoreError

from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.document_stores.versioned_folder import current_version, pointer
from haystack_mvr.views import ENCODER_KEY, VIEWS_KEY

DIM = 8


def docs(n: int, seed: int = 0, views: int = 2, prefix: str = "d") -> list[Document]:
    rng = np.random.default_rng(seed)
    views_of = [rng.standard_normal((views, DIM), np.float32) for _ in range(n)]
    return [Document(id=f"{prefix}{i}", content="x", meta={"i": i, VIEWS_KEY: v}) for i, v in enumerate(views_of)]


def top(store: FaissMultiViewDocumentStore, query: np.ndarray, k: int = 5) -> list[tuple[str, float]]:
    return [(d.id, round(d.score, 4)) for d in store.search(query, top_k=k)]


def test_load_that_reads_current_just_before_a_save_replaces_it(tmp_path, monkeypatch):
    """A load reads CURRENT, then another saver swaps CURRENT and removes the version it named: the load used to
    fail with "CURRENT names version ... does not exist: restore it from a backup"; it reads CURRENT again."""
    path = tmp_path / "s"
    first = FaissMultiViewDocumentStore()
    first.write_documents(docs(3))
    first.save(path)
    second = FaissMultiViewDocumentStore()
    second.write_documents(docs(5, seed=1, prefix="e"))
    real = pointer.read_pointer
    raced = []

    def read_pointer_then_lose_the_race(folder):
        name = real(folder)
        if not raced:
            raced.append(name)
            second.save(path)  # a real save: swaps CURRENT, removes the version just read (no reader holds it)
        return name

    monkeypatch.setattr(pointer, "read_pointer", read_pointer_then_lose_the_race)
    loaded = FaissMultiViewDocumentStore()
    loaded.load(path)
    assert raced and not (path / raced[0]).exists()
    assert sorted(d.id for d in loaded.filter_documents()) == [f"e{i}" for i in range(5)]
    lazily = FaissMultiViewDocumentStore(index_path=str(path))
    raced.clear()
    assert lazily.count_documents() == 5  # the index_path pre-check retries the same way


def test_a_version_still_missing_on_a_second_read_is_refused(tmp_path):
    path = tmp_path / "s"
    store = FaissMultiViewDocumentStore()
    store.write_documents(docs(2))
    store.save(path)
    name = current_version(path)
    (path / name).rename(tmp_path / "elsewhere")
    with pytest.raises(DocumentStoreError, match="does not exist: restore it from a backup"):
        FaissMultiViewDocumentStore().load(path)


@pytest.mark.parametrize("file", ["held.npy", "keys.npy", "view_counts.npy", "tombstones.npy"])
def test_every_flipped_byte_of_an_npy_header_is_a_document_store_error(tmp_path, file):
    """One flipped byte in held.npy's header raised tokenize.TokenError (numpy tokenizes the header dict)."""
    path = tmp_path / "s"
    store = FaissMultiViewDocumentStore(index_factory="PQ2x4", train_size=10_000)  # untrained: rows held
    store.write_documents(docs(4))
    store.save(path)
    target = path / current_version(path) / file
    original = target.read_bytes()
    header = 12 + int.from_bytes(original[8:12], "little")  # format 2.0: magic, version, 4-byte length
    for position in range(header):
        for flip in (0x01, 0x20, 0x80):
            damaged = bytearray(original)
            damaged[position] ^= flip
            target.write_bytes(bytes(damaged))
            with pytest.raises(DocumentStoreError, match=file.replace(".", r"\.")):
                FaissMultiViewDocumentStore().load(path)
    target.write_bytes(original)
    assert FaissMultiViewDocumentStore(index_path=str(path)).count_documents() == 4


@pytest.mark.parametrize(
    ("factory", "options"),
    [
        ("HNSW8", {}),
        ("IVF4,Flat", {"search_parameters": {"nprobe": 4}, "train_size": 40}),
        ("PQ2x4", {"train_size": 40}),  # trained
        ("PQ2x4", {"train_size": 10_000}),  # small: untrained, its rows staged
        ("OPQ2,PQ2x4", {"train_size": 40, "keep_vectors": False}),
    ],
)
def test_a_saved_store_reopens_with_the_index_it_was_saved_with(tmp_path, factory, options):
    """Reopening without index_factory was refused for HNSW, IVF and trained PQ (naming the saved factory), and an
    untrained PQ reopened as Flat: the saved factory, train_size and search parameters are used."""
    path = tmp_path / "s"
    store = FaissMultiViewDocumentStore(index_factory=factory, search_threads=1, **options)
    store.write_documents(docs(40))
    store.save(path)
    query = np.ones(DIM, dtype=np.float32)
    for reopened in (FaissMultiViewDocumentStore(index_path=str(path)), FaissMultiViewDocumentStore()):
        if reopened.index_path is None:
            reopened.load(path)
        assert top(reopened, query) == top(store, query)
        views = reopened._views
        assert views.index_factory == factory and views.trained == store._views.trained
        assert views.train_size == store._views.train_size and views.keep_vectors == store._views.keep_vectors
        assert views.search_parameters == store._views.search_parameters
        assert reopened.to_dict()["init_parameters"]["index_factory"] is None  # still "what was saved"
        reopened.write_documents(docs(3, seed=5, prefix="new"))
        reopened.save(tmp_path / "again")
        again = FaissMultiViewDocumentStore(index_path=str(tmp_path / "again"))
        assert again.count_documents() == 43 and again._views.index_factory == factory


def test_a_given_index_factory_still_has_to_match_a_trained_save(tmp_path):
    path = tmp_path / "s"
    store = FaissMultiViewDocumentStore(index_factory="HNSW8")
    store.write_documents(docs(10))
    store.save(path)
    with pytest.raises(DocumentStoreError, match="index_factory='HNSW8', not 'Flat'"):
        FaissMultiViewDocumentStore(index_factory="Flat").load(path)
    assert FaissMultiViewDocumentStore(index_factory="HNSW8", index_path=str(path)).count_documents() == 10


def test_a_new_store_without_index_factory_is_flat():
    store = FaissMultiViewDocumentStore()
    store.write_documents(docs(3))
    assert store._views.index_factory == "Flat" and store.index_factory is None


def test_the_first_query_after_index_path_is_checked_against_the_saved_encoder(tmp_path):
    """encoder_config was None until something loaded the store, so the first query with another model was
    answered (with garbage) and only the second raised."""
    path = tmp_path / "s"
    encoder = {"model": "a", "mode": "snippet", "dim": DIM}
    store = FaissMultiViewDocumentStore()
    store.write_documents([Document(id=d.id, meta={**d.meta, ENCODER_KEY: encoder}) for d in docs(4)])
    store.save(path)
    opened = FaissMultiViewDocumentStore(index_path=str(path))
    retriever = MultiViewRetriever(document_store=opened)
    other = {**encoder, "mode": "mvr"}
    with pytest.raises(ValueError, match="differ in \\['mode'\\]"):
        retriever.run(query_embedding=[1.0] * DIM, encoder=other)
    assert opened.encoder_config == encoder
    assert len(retriever.run(query_embedding=[1.0] * DIM, encoder=encoder)["documents"]) == 4
    assert FaissMultiViewDocumentStore(index_path=str(path)).to_dict()["init_parameters"]["encoder_config"] is None
