"""What a query pipeline returns: Haystack's ``Pipeline.run`` returns every output nothing is connected to, so the
text embedder's unused vector output would travel in every response (384 floats with MiniLM).
``MultiViewTextEmbedder(embedding_output="packed")`` gives only the packed vector the retriever reads."""

from __future__ import annotations

import pytest
from haystack import Document, Pipeline
from haystack.components.writers import DocumentWriter
from haystack.core.errors import PipelineConnectError

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DOCUMENTS = [
    Document(content="Warsaw is the capital of Poland. It lies on the Vistula. Its old town was rebuilt after 1945."),
    Document(content="Kraków was the capital of Poland until 1596. The Wawel castle stands above the river."),
]


@pytest.fixture(scope="module")
def store(tiny_backbone):
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    indexing = Pipeline()
    indexing.add_component("embedder", MultiViewDocumentEmbedder(model=str(tiny_backbone)))
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    indexing.run({"embedder": {"documents": [Document(content=d.content) for d in DOCUMENTS]}})
    return store


def readme_query_pipeline(model: str, store, **embedder_options) -> Pipeline:
    """The README's "Use it in a pipeline" query pipeline."""
    querying = Pipeline()
    querying.add_component("query_embedder", MultiViewTextEmbedder(model=model, **embedder_options))
    querying.add_component("retriever", MultiViewRetriever(document_store=store, top_k=5))
    querying.connect("query_embedder.packed_embedding", "retriever.packed_query_embedding")
    querying.connect("query_embedder.encoder", "retriever.encoder")
    return querying


def test_the_readme_query_pipeline_returns_only_the_retrievers_documents(tiny_backbone, store):
    querying = readme_query_pipeline(str(tiny_backbone), store, embedding_output="packed")
    result = querying.run({"query_embedder": {"text": "Which river flows through Warsaw?"}})
    assert set(result) == {"retriever"}
    assert set(result["retriever"]) == {"documents"} and len(result["retriever"]["documents"]) == 2
    # and the same from a dumped pipeline
    loaded = Pipeline.loads(querying.dumps())
    assert set(loaded.run({"query_embedder": {"text": "Which river?"}})) == {"retriever"}


def test_the_default_keeps_both_vector_outputs(tiny_backbone, store):
    """Backward compatible: pipelines that wire ``embedding`` or ``packed_embedding`` keep working unchanged (the
    unconnected one is returned, as Haystack returns every unconnected output)."""
    result = readme_query_pipeline(str(tiny_backbone), store).run({"query_embedder": {"text": "Warsaw?"}})
    assert set(result) == {"query_embedder", "retriever"}
    assert set(result["query_embedder"]) == {"embedding"}
    embedder = MultiViewTextEmbedder(model=str(tiny_backbone))
    assert embedder.embedding_output == "both"
    assert set(embedder.run("Warsaw?")) == {"embedding", "packed_embedding", "encoder"}


def test_list_output_is_haystacks_plain_embedding(tiny_backbone, store):
    embedder = MultiViewTextEmbedder(model=str(tiny_backbone), embedding_output="list")
    out = embedder.run("Warsaw?")
    assert set(out) == {"embedding", "encoder"} and isinstance(out["embedding"], list)
    pipeline = Pipeline()
    pipeline.add_component("query_embedder", embedder)
    pipeline.add_component("retriever", MultiViewRetriever(document_store=store, top_k=5))
    pipeline.connect("query_embedder.embedding", "retriever.query_embedding")
    pipeline.connect("query_embedder.encoder", "retriever.encoder")
    assert set(pipeline.run({"query_embedder": {"text": "Warsaw?"}})) == {"retriever"}
    with pytest.raises(PipelineConnectError):  # no packed output to connect
        pipeline.connect("query_embedder.packed_embedding", "retriever.packed_query_embedding")


def test_packed_output_refuses_a_connection_to_the_list_socket(tiny_backbone, store):
    pipeline = Pipeline()
    pipeline.add_component("query_embedder", MultiViewTextEmbedder(model=str(tiny_backbone), embedding_output="packed"))
    pipeline.add_component("retriever", MultiViewRetriever(document_store=store))
    with pytest.raises(PipelineConnectError):
        pipeline.connect("query_embedder.embedding", "retriever.query_embedding")


def test_embedding_output_serializes_and_old_dicts_load_with_both(tiny_backbone):
    embedder = MultiViewTextEmbedder(model=str(tiny_backbone), embedding_output="packed")
    data = embedder.to_dict()
    assert data["init_parameters"]["embedding_output"] == "packed"
    assert MultiViewTextEmbedder.from_dict(data).embedding_output == "packed"
    del data["init_parameters"]["embedding_output"]  # a pipeline dumped before the option existed
    assert MultiViewTextEmbedder.from_dict(data).embedding_output == "both"
    with pytest.raises(ValueError, match="embedding_output must be one of"):
        MultiViewTextEmbedder(model=str(tiny_backbone), embedding_output="numpy")
