"""Warming up a pipeline leaves it ready to answer: ``MultiViewRetriever.warm_up()`` opens its store (a FAISS
``index_path`` is read then, not by the first query; a Qdrant folder or server is opened and its collection read),
and an empty store behind a retriever is said once, as a logged warning (Haystack's ``InMemoryEmbeddingRetriever``
logs a warning when its store holds no documents with embeddings)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from haystack import Document, Pipeline

from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.views import ENCODER_KEY, VIEWS_KEY

LOGGER = "haystack_mvr.components.retrievers.multi_view_retriever"
ENCODER = {"model": "m", "mode": "snippet", "dim": 4}


def documents() -> list[Document]:
    views = [np.eye(2, 4, k=i, dtype=np.float32) for i in (0, 1)]
    return [
        Document(id=f"d{i}", content=f"doc {i}", meta={VIEWS_KEY: v, ENCODER_KEY: ENCODER}) for i, v in enumerate(views)
    ]


def saved(path) -> str:
    store = FaissMultiViewDocumentStore()
    store.write_documents(documents())
    store.save(path)
    return str(path)


def retrieval_pipeline(store) -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component("retriever", MultiViewRetriever(document_store=store, top_k=2))
    return pipeline


def test_pipeline_warm_up_loads_a_saved_faiss_store(tmp_path, monkeypatch):
    path = saved(tmp_path / "index")
    pipeline = Pipeline.loads(retrieval_pipeline(FaissMultiViewDocumentStore(index_path=path)).dumps())
    store = pipeline.get_component("retriever").document_store
    loads = []
    original = FaissMultiViewDocumentStore._load_from
    monkeypatch.setattr(
        FaissMultiViewDocumentStore, "_load_from", lambda self, p: (loads.append(p), original(self, p))[1]
    )
    pipeline.warm_up()
    assert len(loads) == 1  # opened by warm_up
    assert store.encoder_config == ENCODER  # known before the first query, so that query is checked too
    result = pipeline.run({"retriever": {"query_embedding": [1.0, 0.0, 0.0, 0.0]}})
    assert [d.id for d in result["retriever"]["documents"]] == ["d0", "d1"]
    assert len(loads) == 1  # the first run loaded nothing
    pipeline.warm_up()  # again: nothing more
    assert len(loads) == 1


def test_store_warm_up_is_public_and_idempotent(tmp_path):
    store = FaissMultiViewDocumentStore(index_path=saved(tmp_path / "index"))
    store.warm_up()
    store.warm_up()
    assert store.count_documents() == 2
    FaissMultiViewDocumentStore().warm_up()  # an in-memory store: nothing to open


def test_qdrant_warm_up_opens_the_folder_and_reads_the_collection(tmp_path):
    pytest.importorskip("qdrant_client")
    from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

    folder = str(tmp_path / "qdrant")
    writer = QdrantMultiViewDocumentStore(path=folder)
    writer.write_documents(documents())
    writer.close()
    store = QdrantMultiViewDocumentStore(path=folder)
    assert store._client is None  # building it opens nothing
    retriever = MultiViewRetriever(document_store=store)
    retriever.warm_up()
    assert store._client is not None and store._collection is not None
    assert next(d.id for d in retriever.run(query_embedding=[0.0, 0.0, 1.0, 0.0])["documents"]) == "d1"
    store.close()


def empty_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and "holds no documents" in r.getMessage()]


def test_an_empty_store_is_said_once_at_warm_up(caplog):
    """A pipeline dumped with an in-memory store loads with an empty one: say so, naming the fix."""
    pipeline = Pipeline.loads(retrieval_pipeline(FaissMultiViewDocumentStore()).dumps())
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        pipeline.warm_up()
        assert pipeline.run({"retriever": {"query_embedding": [1.0, 0.0]}})["retriever"]["documents"] == []
        pipeline.run({"retriever": {"query_embedding": [1.0, 0.0]}})
    messages = empty_warnings(caplog)
    assert len(messages) == 1, messages
    assert "in memory" in messages[0] and "index_path" in messages[0]


def test_an_empty_store_is_said_once_at_the_first_run_without_warm_up(caplog, tmp_path):
    retriever = MultiViewRetriever(document_store=FaissMultiViewDocumentStore(index_path=str(tmp_path / "none")))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert retriever.run(query_embedding=[1.0, 0.0])["documents"] == []
        assert retriever.run(query_embedding=[1.0, 0.0])["documents"] == []
    messages = empty_warnings(caplog)
    assert len(messages) == 1 and str(tmp_path / "none") in messages[0], messages


def test_a_filter_that_matches_nothing_is_not_an_empty_store(caplog, tmp_path):
    store = FaissMultiViewDocumentStore()
    store.write_documents(documents())
    retriever = MultiViewRetriever(document_store=store)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        retriever.warm_up()
        found = retriever.run(
            query_embedding=[1.0, 0.0, 0.0, 0.0], filters={"field": "content", "operator": "==", "value": "x"}
        )
    assert found["documents"] == [] and empty_warnings(caplog) == []


def test_qdrant_warm_up_reads_the_collection_once(tmp_path, monkeypatch):
    """Pipeline.run warms up at every run: the second warm_up must not read the collection again."""
    pytest.importorskip("qdrant_client")
    from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

    store = QdrantMultiViewDocumentStore(path=str(tmp_path / "qdrant"))
    store.write_documents(documents())
    reads = []
    original = QdrantMultiViewDocumentStore._describe
    monkeypatch.setattr(
        QdrantMultiViewDocumentStore, "_describe", lambda self, *a: (reads.append(1), original(self, *a))[1]
    )
    store.warm_up()
    store.warm_up()
    assert len(reads) == 1
    store.close()
    store.warm_up()  # reopened after close
    assert len(reads) == 2
    store.close()
