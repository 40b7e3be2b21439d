import numpy as np
import pytest
from haystack import Document, Pipeline
from haystack.components.writers import DocumentWriter
from haystack.document_stores.types import FilterPolicy

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores import FaissMultiViewDocumentStore
from haystack_mvr.views import MATCHED_TEXT_KEY, VIEWS_KEY, attach_views


@pytest.fixture
def store():
    store = FaissMultiViewDocumentStore()
    store.write_documents(
        [
            attach_views(
                Document(id="a", content="Cats. Dogs.", meta={"k": 1}),
                np.array([[1.0, 0.0], [0.0, 1.0]]),
                [(0, 5), (6, 11)],
            ),
            attach_views(Document(id="b", content="Birds.", meta={"k": 2}), np.array([[0.6, 0.6]])),
        ]
    )
    return store


def test_init_and_to_dict(store):
    retriever = MultiViewRetriever(
        document_store=store, top_k=3, filters={"field": "meta.k", "operator": "==", "value": 1}
    )
    data = retriever.to_dict()
    assert data == {
        "type": "haystack_mvr.components.retrievers.multi_view_retriever.MultiViewRetriever",
        "init_parameters": {
            "document_store": store.to_dict(),
            "filters": {"field": "meta.k", "operator": "==", "value": 1},
            "top_k": 3,
            "filter_policy": "replace",
            "return_embedding": False,
        },
    }
    again = MultiViewRetriever.from_dict(data)
    assert again.top_k == 3 and again.filter_policy == FilterPolicy.REPLACE
    assert isinstance(again.document_store, FaissMultiViewDocumentStore)


def test_init_rejects_wrong_store_and_top_k(store):
    with pytest.raises(ValueError, match="FaissMultiViewDocumentStore"):
        MultiViewRetriever(document_store="not a store")
    with pytest.raises(ValueError, match="top_k"):
        MultiViewRetriever(document_store=store, top_k=0)


def test_run_reports_matched_snippet(store):
    docs = MultiViewRetriever(document_store=store).run(query_embedding=[0.0, 1.0])["documents"]
    assert [d.id for d in docs] == ["a", "b"]
    assert docs[0].meta[MATCHED_TEXT_KEY] == "Dogs." and VIEWS_KEY not in docs[0].meta


def test_filter_policy_merge(store):
    retriever = MultiViewRetriever(
        document_store=store, filters={"field": "meta.k", "operator": ">=", "value": 1}, filter_policy="merge"
    )
    docs = retriever.run(query_embedding=[1.0, 0.0], filters={"field": "meta.k", "operator": "==", "value": 2})
    assert [d.id for d in docs["documents"]] == ["b"]


@pytest.mark.asyncio
async def test_run_async(store):
    docs = (await MultiViewRetriever(document_store=store, top_k=1).run_async(query_embedding=[1.0, 0.0]))["documents"]
    assert [d.id for d in docs] == ["a"]


def test_bad_query_embedding(store):
    with pytest.raises(ValueError, match="dimension"):
        MultiViewRetriever(document_store=store).run(query_embedding=[1.0, 0.0, 0.0])


def test_pipeline_with_document_writer_and_yaml_round_trip(tiny_backbone):
    store = FaissMultiViewDocumentStore()
    indexing = Pipeline()
    indexing.add_component("embedder", MultiViewDocumentEmbedder(model=str(tiny_backbone), progress_bar=False))
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    docs = [Document(content="Warsaw is in Poland. It lies on the Vistula."), Document(content="Paris is in France.")]
    indexing.run({"embedder": {"documents": docs}})
    # DocumentWriter carried every view into the store: 1 global + 2 snippet views, 1 global + 1 snippet view.
    assert store._views.ntotal == 5

    querying = Pipeline()
    querying.add_component("query_embedder", MultiViewTextEmbedder(model=str(tiny_backbone)))
    querying.add_component("retriever", MultiViewRetriever(document_store=store, top_k=2))
    querying.connect("query_embedder.embedding", "retriever.query_embedding")
    result = querying.run({"query_embedder": {"text": "Vistula river"}})["retriever"]["documents"]
    assert len(result) == 2

    for pipeline in (indexing, querying):
        loaded = Pipeline.loads(pipeline.dumps())
        assert loaded.to_dict() == pipeline.to_dict()


def test_yaml_loads_in_a_fresh_process(tmp_path, tiny_backbone):
    import subprocess
    import sys

    querying = Pipeline()
    querying.add_component("query_embedder", MultiViewTextEmbedder(model=str(tiny_backbone)))
    querying.add_component("retriever", MultiViewRetriever(document_store=FaissMultiViewDocumentStore()))
    querying.connect("query_embedder.embedding", "retriever.query_embedding")
    (tmp_path / "p.yaml").write_text(querying.dumps())
    code = (
        "import haystack_mvr; from haystack import Pipeline; "
        f"p = Pipeline.loads(open({str(tmp_path / 'p.yaml')!r}).read()); print(sorted(p.to_dict()['components']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "retriever" in out.stdout
