"""``FaissMultiViewDocumentStore.stats()`` and ``faiss_index``: what benchmarks read instead of the store's
internals (issue 48)."""

from __future__ import annotations

import numpy as np
import pytest
from haystack import Document

from haystack_mvr.document_stores import StoreStats
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.views import attach_views


def _documents(n: int, views: int = 3, dim: int = 8) -> list[Document]:
    rng = np.random.default_rng(0)
    return [attach_views(Document(id=str(i), content=str(i)), rng.normal(size=(views, dim))) for i in range(n)]


def test_stats_of_an_empty_and_a_written_flat_store(tmp_path):
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    assert store.stats() == StoreStats(0, 0, None, "Flat", False, None, 0) and store.faiss_index is None
    store.write_documents(_documents(10))
    store.write_documents([Document(id="no-views", content="text only")])
    stats = store.stats()
    assert (stats.documents, stats.views, stats.dimension, stats.trained, stats.kept_vector_bytes) == (
        11,
        30,
        8,
        True,
        0,
    )
    assert store.faiss_index.ntotal == 30
    store.delete_documents(["0"])
    assert store.stats().views == 27
    store.save(tmp_path / "s")
    assert FaissMultiViewDocumentStore(index_path=str(tmp_path / "s")).stats() == store.stats()  # loads first


def test_stats_of_a_trainable_index_before_and_after_training():
    store = FaissMultiViewDocumentStore(index_factory="PQ4", train_size=300)
    store.write_documents(_documents(50))  # 150 rows staged: not trained yet
    before = store.stats()
    assert (before.trained, before.views, before.kept_vector_bytes) == (False, 150, 150 * 8 * 4)
    assert store.faiss_index is None
    store.write_documents(_documents(150)[50:])  # 450 rows: trained, kept float32 rows beside the lossy index
    after = store.stats()
    assert after.trained and after.views == 450 and after.kept_vector_bytes == 450 * 8 * 4
    assert after.index_factory == "PQ4" and after.train_size == 300
    with pytest.raises(AttributeError):
        after.views = 0  # a snapshot
