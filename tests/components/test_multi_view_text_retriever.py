"""``MultiViewTextRetriever``: the retriever's ``query: str`` face (issue 57, Haystack 3.x conventions), and the
documented wiring with Haystack's own ``TextEmbeddingRetriever`` for a single-vector model."""

from __future__ import annotations

import pytest
from haystack import Document, Pipeline
from haystack.components.retrievers import TextEmbeddingRetriever
from haystack.components.writers import DocumentWriter

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.components.retrievers import MultiViewRetriever, MultiViewTextRetriever
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.errors import InvalidRequestError

DOCUMENTS = [
    Document(id="w", content="Warsaw lies on the Vistula. Its old town was rebuilt.", meta={"city": "Warsaw"}),
    Document(id="k", content="Krakow was the capital. The Wawel stands above the river.", meta={"city": "Krakow"}),
    Document(id="g", content="Gdansk is a port on the Baltic sea.", meta={"city": "Gdansk"}),
]
QUERY = "Which river flows through Warsaw?"


def indexed(model, folder=None) -> FaissMultiViewDocumentStore:
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    indexing = Pipeline()
    indexing.add_component("embedder", MultiViewDocumentEmbedder(model=str(model)))
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    indexing.run({"embedder": {"documents": [Document(id=d.id, content=d.content, meta=d.meta) for d in DOCUMENTS]}})
    if folder is None:
        return store
    store.save(folder)
    return FaissMultiViewDocumentStore(index_path=str(folder))


def readme_query(model, store, text: str) -> list[Document]:
    querying = Pipeline()
    querying.add_component("query_embedder", MultiViewTextEmbedder(model=str(model), embedding_output="packed"))
    querying.add_component("retriever", MultiViewRetriever(document_store=store, top_k=3))
    querying.connect("query_embedder.packed_embedding", "retriever.packed_query_embedding")
    querying.connect("query_embedder.encoder", "retriever.encoder")
    return querying.run({"query_embedder": {"text": text}})["retriever"]["documents"]


def text_retriever(model, store, **retriever) -> MultiViewTextRetriever:
    return MultiViewTextRetriever(
        text_embedder=MultiViewTextEmbedder(model=str(model), embedding_output="packed"),
        retriever=MultiViewRetriever(document_store=store, top_k=3, **retriever),
    )


def ranked(documents: list[Document]) -> list[tuple[str, float]]:
    return [(d.id, round(d.score, 5)) for d in documents]


@pytest.mark.parametrize("model", ["tiny_backbone", "tiny_colbert"], ids=["snippet-views", "late-interaction"])
def test_text_in_documents_out_as_the_readme_pipeline_ranks_them(model, request):
    model = request.getfixturevalue(model)
    store = indexed(model)
    retriever = text_retriever(model, store)
    retriever.warm_up()
    retriever.warm_up()  # idempotent
    got = retriever.run(query=QUERY)["documents"]
    assert len(got) == 3 and ranked(got) == ranked(readme_query(model, store, QUERY))
    only = {"field": "meta.city", "operator": "==", "value": "Gdansk"}
    assert [d.id for d in retriever.run(query=QUERY, filters=only, top_k=2)["documents"]] == ["g"]


@pytest.mark.asyncio
async def test_run_async(tiny_backbone):
    store = indexed(tiny_backbone)
    retriever = text_retriever(tiny_backbone, store)
    await retriever.warm_up_async()
    got = (await retriever.run_async(query=QUERY, top_k=2))["documents"]
    await retriever.close_async()
    assert ranked(got) == ranked(readme_query(tiny_backbone, store, QUERY))[:2]


def test_to_dict_is_its_parts_and_round_trips_through_yaml(tiny_backbone, tmp_path):
    store = indexed(tiny_backbone, tmp_path / "index")
    retriever = text_retriever(tiny_backbone, store, score_threshold=-100.0)
    data = retriever.to_dict()
    assert data == {
        "type": "haystack_mvr.components.retrievers.multi_view_text_retriever.MultiViewTextRetriever",
        "init_parameters": {
            "text_embedder": retriever.text_embedder.to_dict(),
            "retriever": retriever.retriever.to_dict(),
        },
    }
    again = MultiViewTextRetriever.from_dict(data)
    assert again.to_dict() == data and again.retriever.score_threshold == -100.0
    pipeline = Pipeline()
    pipeline.add_component("search", retriever)
    loaded = Pipeline.loads(pipeline.dumps())
    got = loaded.run({"search": {"query": QUERY}})["search"]["documents"]
    assert ranked(got) == ranked(retriever.run(query=QUERY)["documents"])


def test_wrong_parts_and_queries_are_refused(tiny_backbone):
    store = indexed(tiny_backbone)
    with pytest.raises(ValueError, match='embedding_output="list"'):
        MultiViewTextRetriever(
            text_embedder=MultiViewTextEmbedder(model=str(tiny_backbone), embedding_output="list"),
            retriever=MultiViewRetriever(document_store=store),
        )
    with pytest.raises(ValueError, match="retriever must be a MultiViewRetriever"):
        MultiViewTextRetriever(text_embedder=MultiViewTextEmbedder(model=str(tiny_backbone)), retriever=store)
    with pytest.raises(ValueError, match="text_embedder must be a MultiViewTextEmbedder"):
        MultiViewTextRetriever(text_embedder="model", retriever=MultiViewRetriever(document_store=store))
    retriever = text_retriever(tiny_backbone, store)
    with pytest.raises(InvalidRequestError, match="empty query"):
        retriever.run(query="  ")
    with pytest.raises(TypeError, match="expects a string"):
        retriever.run(query=["a list"])


def test_haystacks_text_embedding_retriever_wiring_works_for_a_single_vector_model(tiny_backbone):
    """The documented alternative: Haystack's own TextEmbeddingRetriever (it passes the embedding output only)."""
    store = indexed(tiny_backbone)
    haystack_way = TextEmbeddingRetriever(
        retriever=MultiViewRetriever(document_store=store, top_k=3),
        text_embedder=MultiViewTextEmbedder(model=str(tiny_backbone), embedding_output="list"),
    )
    got = haystack_way.run(query=QUERY)["documents"]
    assert ranked(got) == ranked(readme_query(tiny_backbone, store, QUERY))


def test_haystacks_text_embedding_retriever_refuses_a_late_interaction_model_and_names_the_fix(tiny_colbert):
    store = indexed(tiny_colbert)
    haystack_way = TextEmbeddingRetriever(
        retriever=MultiViewRetriever(document_store=store),
        text_embedder=MultiViewTextEmbedder(model=str(tiny_colbert)),
    )
    refused = r"A late-interaction \(ColBERT\) query is several vectors.*MultiViewTextRetriever"
    with pytest.raises(ValueError, match=refused):  # it ranked the ColBERT query by its first token
        haystack_way.run(query=QUERY)
