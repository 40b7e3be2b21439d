"""MultiViewRetriever(granularity="snippet"): the best snippet views across documents, exactly."""

import asyncio

import numpy as np
import pytest
from haystack import Document, Pipeline

from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.views import (
    MATCHED_SCOPE_KEY,
    MATCHED_TEXT_KEY,
    MATCHED_VIEW_KEY,
    SOURCE_ID_KEY,
    SOURCE_SPAN_KEY,
    attach_views,
)


def _random_corpus(rng: np.random.Generator, n: int, dim: int = 8) -> list[Document]:
    documents = []
    for i in range(n):
        k = int(rng.integers(1, 6))
        sentences = [f"s{i}x{j}." for j in range(k)]
        content = " ".join(sentences)
        spans, at = [], 0
        for sentence in sentences:
            spans.append((at, at + len(sentence)))
            at += len(sentence) + 1
        views = rng.normal(size=(k + 1, dim)).astype(np.float32)
        views[0] *= 3  # a strong whole-document view: documents rank by views that are not snippets
        documents.append(attach_views(Document(id=f"d{i}", content=content, meta={"n": i % 3}), views, [None, *spans]))
    return documents


def _brute_force(documents: list[Document], query: np.ndarray, top_k: int, keep=lambda d: True) -> list[tuple]:
    found = []
    for d in documents:
        if not keep(d):
            continue
        views = np.asarray(d.meta["mvr_views"].matrix)
        for i, span in enumerate(d.meta["mvr_view_spans"]):
            if span is not None:
                found.append((float(views[i] @ query), d.id, tuple(span)))
    found.sort(key=lambda s: -s[0])
    return found[:top_k]


@pytest.mark.parametrize("seed", range(8))
def test_snippets_are_the_best_views_across_documents(seed):
    rng = np.random.default_rng(seed)
    documents = _random_corpus(rng, 40)
    store = FaissMultiViewDocumentStore()
    store.write_documents(documents)
    retriever = MultiViewRetriever(document_store=store, top_k=7, granularity="snippet")
    for _ in range(5):
        query = rng.normal(size=8).astype(np.float32)
        got = retriever.run(query_embedding=query.tolist())["documents"]
        expected = _brute_force(documents, query, 7)
        assert [(d.meta[SOURCE_ID_KEY], tuple(d.meta[SOURCE_SPAN_KEY])) for d in got] == [
            (doc_id, span) for _, doc_id, span in expected
        ]
        assert [d.score for d in got] == pytest.approx([s for s, _, _ in expected], abs=1e-5)


def test_snippet_documents_carry_text_source_and_match():
    store = FaissMultiViewDocumentStore()
    store.write_documents(
        [
            attach_views(
                Document(id="a", content="Cats purr. Dogs bark.", meta={"title": "pets"}),
                np.array([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]]),
                [None, (0, 10), (11, 21)],
            )
        ]
    )
    got = MultiViewRetriever(document_store=store, top_k=2, granularity="snippet").run(query_embedding=[0.0, 1.0])
    first, second = got["documents"]
    assert (first.id, first.content, first.score) == ("a#11-21", "Dogs bark.", 1.0)
    assert first.meta["title"] == "pets" and first.meta[SOURCE_ID_KEY] == "a"
    assert first.meta[SOURCE_SPAN_KEY] == [11, 21] and first.meta[MATCHED_VIEW_KEY] == 2
    assert first.meta[MATCHED_SCOPE_KEY] == "snippet" and first.meta[MATCHED_TEXT_KEY] == "Dogs bark."
    assert "mvr_views" not in first.meta and "mvr_view_spans" not in first.meta
    assert second.content == "Cats purr." and second.score == 0.0


def test_snippets_respect_filters_and_fewer_snippets_than_top_k():
    rng = np.random.default_rng(3)
    documents = _random_corpus(rng, 12)
    store = FaissMultiViewDocumentStore()
    store.write_documents(documents)
    query = rng.normal(size=8).astype(np.float32)
    only = {"field": "meta.n", "operator": "==", "value": 1}
    got = MultiViewRetriever(document_store=store, top_k=500, granularity="snippet").run(
        query_embedding=query.tolist(), filters=only
    )["documents"]
    expected = _brute_force(documents, query, 500, keep=lambda d: d.meta["n"] == 1)
    assert len(got) == len(expected) > 0
    assert [d.meta[SOURCE_ID_KEY] for d in got] == [doc_id for _, doc_id, _ in expected]


def test_snippet_granularity_async_batch_and_serialization():
    rng = np.random.default_rng(5)
    documents = _random_corpus(rng, 20)
    store = FaissMultiViewDocumentStore()
    store.write_documents(documents)
    retriever = MultiViewRetriever(document_store=store, top_k=4, granularity="snippet")
    queries = rng.normal(size=(3, 8)).astype(np.float32)
    single = [retriever.run(query_embedding=q.tolist())["documents"] for q in queries]
    batch = retriever.run_batch(queries.tolist())["documents"]
    asynchronous = [asyncio.run(retriever.run_async(query_embedding=q.tolist()))["documents"] for q in queries]
    assert [[d.id for d in r] for r in batch] == [[d.id for d in r] for r in single]
    assert [[d.id for d in r] for r in asynchronous] == [[d.id for d in r] for r in single]
    again = MultiViewRetriever.from_dict(retriever.to_dict())
    assert again.granularity == "snippet"
    pipeline = Pipeline()
    pipeline.add_component("retriever", retriever)
    assert Pipeline.loads(pipeline.dumps()).get_component("retriever").granularity == "snippet"
    with pytest.raises(ValueError, match="granularity"):
        MultiViewRetriever(document_store=store, granularity="phrase")


def test_snippets_match_on_qdrant():
    pytest.importorskip("qdrant_client")
    from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

    rng = np.random.default_rng(11)
    documents = _random_corpus(rng, 25)
    faiss_store, qdrant_store = FaissMultiViewDocumentStore(), QdrantMultiViewDocumentStore(location=":memory:")
    faiss_store.write_documents(documents)
    qdrant_store.write_documents(documents)
    query = rng.normal(size=8).astype(np.float32).tolist()
    got = [
        [
            d.id
            for d in MultiViewRetriever(document_store=s, top_k=6, granularity="snippet").run(query_embedding=query)[
                "documents"
            ]
        ]
        for s in (faiss_store, qdrant_store)
    ]
    assert got[0] == got[1]
