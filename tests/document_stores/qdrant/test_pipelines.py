"""The same retriever, hybrid helper and FiD pipeline run unchanged on the Qdrant store; YAML round trip."""

import pytest
from haystack import Document, Pipeline
from haystack.components.retrievers import InMemoryBM25Retriever
from haystack.components.writers import DocumentWriter
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.utils import Secret

pytest.importorskip("qdrant_client")

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.components.joiners import add_fusion_joiner
from haystack_mvr.components.readers import FusionInDecoderReader
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore
from haystack_mvr.views import MATCHED_KEYS

DOCS = [
    Document(id="warsaw", content="Warsaw is in Poland. It lies on the Vistula.", meta={"country": "pl"}),
    Document(id="paris", content="Paris is in France. The Seine flows through it.", meta={"country": "fr"}),
    Document(id="krakow", content="Krakow was the capital. Wawel castle stands there.", meta={"country": "pl"}),
]


def index(store, backbone):
    indexing = Pipeline()
    indexing.add_component("embedder", MultiViewDocumentEmbedder(model=str(backbone), progress_bar=False))
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    indexing.run({"embedder": {"documents": DOCS}})
    return indexing


def rag(store, backbone, reader):
    bm25_store = InMemoryDocumentStore()
    bm25_store.write_documents(DOCS)
    pipeline = Pipeline()
    pipeline.add_component("query_embedder", MultiViewTextEmbedder(model=str(backbone)))
    pipeline.add_component("retriever", MultiViewRetriever(document_store=store, top_k=3))
    pipeline.add_component("bm25", InMemoryBM25Retriever(document_store=bm25_store, top_k=3))
    pipeline.connect("query_embedder.embedding", "retriever.query_embedding")
    add_fusion_joiner(pipeline, ["bm25", "retriever"], fusion="convex", weights=[0.4, 0.6], top_k=3)
    pipeline.add_component("reader", FusionInDecoderReader(model=str(reader), context="matched_view"))
    pipeline.connect("joiner.documents", "reader.documents")
    return pipeline


def run(pipeline, question):
    return pipeline.run(
        {"query_embedder": {"text": question}, "bm25": {"query": question}, "reader": {"query": question}},
        include_outputs_from={"retriever"},
    )


def test_same_pipeline_on_both_stores(tiny_backbone, tiny_t5):
    qdrant, faiss = QdrantMultiViewDocumentStore(), FaissMultiViewDocumentStore()
    outputs = {}
    for name, store in (("qdrant", qdrant), ("faiss", faiss)):
        index(store, tiny_backbone)
        outputs[name] = run(rag(store, tiny_backbone, tiny_t5), "Which river flows through Warsaw?")
    ours, theirs = outputs["qdrant"]["retriever"]["documents"], outputs["faiss"]["retriever"]["documents"]
    assert [d.id for d in ours] == [d.id for d in theirs] and len(ours) == 3
    assert [d.score for d in ours] == pytest.approx([d.score for d in theirs], abs=1e-5)
    assert [{k: d.meta[k] for k in MATCHED_KEYS} for d in ours] == [
        {k: d.meta[k] for k in MATCHED_KEYS} for d in theirs
    ]
    answer, other = outputs["qdrant"]["reader"]["answers"][0], outputs["faiss"]["reader"]["answers"][0]
    assert answer.data == other.data and [d.id for d in answer.documents] == [d.id for d in other.documents]
    retriever = MultiViewRetriever(
        document_store=qdrant, filters={"field": "meta.country", "operator": "==", "value": "pl"}
    )
    embedding = MultiViewTextEmbedder(model=str(tiny_backbone)).run("castle")["embedding"]
    assert {d.id for d in retriever.run(query_embedding=embedding)["documents"]} == {"warsaw", "krakow"}
    batch = retriever.run_batch([embedding, embedding], top_k=1)["documents"]
    assert len(batch) == 2 and batch[0][0].id == batch[1][0].id
    # The document embedder's encoder identity is the collection's record; another query encoder is refused.
    assert qdrant.encoder_config is not None and qdrant.encoder_config["mode"] == "snippet"
    with pytest.raises(ValueError, match="encoder"):
        retriever.run(query_embedding=embedding, encoder={**qdrant.encoder_config, "mode": "another"})


def test_yaml_round_trip_keeps_the_api_key_a_secret_env_var(tiny_backbone, tiny_t5, tmp_path, monkeypatch):
    monkeypatch.setenv("QDRANT_API_KEY", "do-not-leak-me")
    store = QdrantMultiViewDocumentStore(
        path=str(tmp_path / "qdrant"), index="wiki", api_key=Secret.from_env_var("QDRANT_API_KEY")
    )
    indexing = index(store, tiny_backbone)
    pipeline = rag(store, tiny_backbone, tiny_t5)
    question = "Which river flows through Warsaw?"
    expected = run(pipeline, question)
    for original in (indexing, pipeline):
        yaml = original.dumps()
        assert "do-not-leak-me" not in yaml and "QDRANT_API_KEY" in yaml
        loaded = Pipeline.loads(yaml)
        assert loaded.to_dict()["components"] == original.to_dict()["components"]
        assert sorted(map(str, loaded.to_dict()["connections"])) == sorted(map(str, original.to_dict()["connections"]))
    loaded_store = loaded.get_component("retriever").document_store
    assert isinstance(loaded_store, QdrantMultiViewDocumentStore) and isinstance(loaded_store.api_key, Secret)
    got = run(loaded, question)  # the same folder, opened by the loaded store
    assert [d.id for d in got["retriever"]["documents"]] == [d.id for d in expected["retriever"]["documents"]]
    assert got["reader"]["answers"][0].data == expected["reader"]["answers"][0].data
