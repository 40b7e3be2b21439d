"""run_query_pipeline: an embedder feeding a MultiViewRetriever is run through run_batch, with the same rankings."""

import hashlib

import numpy as np
from haystack import Document, Pipeline, component

from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.datasets import Question
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.evaluation.pipeline_evaluation import run_query_pipeline
from haystack_mvr.views import attach_views


@component
class HashEmbedder:
    """A deterministic stand-in for MultiViewTextEmbedder."""

    @component.output_types(embedding=list[float])
    def run(self, text: str):
        seed = int(hashlib.md5(text.encode()).hexdigest()[:8], 16)
        return {"embedding": np.random.default_rng(seed).normal(size=8).tolist()}


def test_embedder_and_multi_view_retriever_run_in_batches(monkeypatch):
    store = FaissMultiViewDocumentStore()
    rng = np.random.default_rng(0)
    store.write_documents([attach_views(Document(id=f"d{i}", content="x"), rng.normal(size=(3, 8))) for i in range(50)])
    pipeline = Pipeline()
    pipeline.add_component("embedder", HashEmbedder())
    pipeline.add_component("retriever", MultiViewRetriever(document_store=store, top_k=5))
    pipeline.connect("embedder.embedding", "retriever.query_embedding")
    questions = [
        Question(id=f"q{i}", question=f"question {i}", answers=[], positive_id="d0", title="t") for i in range(10)
    ]
    expected = [
        [d.id for d in pipeline.run({"embedder": {"text": q.question}})["retriever"]["documents"]] for q in questions
    ]
    calls = []
    real = store.search_batch
    monkeypatch.setattr(store, "search_batch", lambda q, **kw: (calls.append(len(q)), real(q, **kw))[1])
    ranked = run_query_pipeline(
        pipeline, questions, inputs=lambda q: {"embedder": {"text": q}}, output_component="retriever", batch_size=4
    )
    assert ranked.ids == expected
    assert calls == [4, 4, 2]
