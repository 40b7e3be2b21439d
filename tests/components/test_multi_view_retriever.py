import numpy as np
import pytest
from haystack import Document, Pipeline
from haystack.components.writers import DocumentWriter
from haystack.document_stores.types import FilterPolicy

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.views import ENCODER_KEY, MATCHED_TEXT_KEY, VIEWS_KEY, attach_views


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
            "granularity": "document",
            "scale_score": False,
            "score_threshold": None,
        },
    }
    again = MultiViewRetriever.from_dict(data)
    assert again.top_k == 3 and again.filter_policy == FilterPolicy.REPLACE
    assert isinstance(again.document_store, FaissMultiViewDocumentStore)
    older = {**data, "init_parameters": {k: v for k, v in data["init_parameters"].items() if "score" not in k}}
    assert MultiViewRetriever.from_dict(older).to_dict() == data  # a pipeline saved before these


# ---------------------------------------------------- Haystack 3.x conventions (issue 57): as qdrant-haystack has them
def test_scale_score_and_score_threshold_round_trip_and_apply(store):
    retriever = MultiViewRetriever(document_store=store, scale_score=True, score_threshold=0.7)
    data = retriever.to_dict()
    assert data["init_parameters"]["scale_score"] is True and data["init_parameters"]["score_threshold"] == 0.7
    again = MultiViewRetriever.from_dict(data)
    assert (again.scale_score, again.score_threshold) == (True, 0.7)
    again = retriever  # from_dict's in-memory store is a new, empty one
    raw = MultiViewRetriever(document_store=store).run(query_embedding=[1.0, 0.0])["documents"]
    assert [(d.id, round(d.score, 3)) for d in raw] == [("a", 1.0), ("b", 0.6)]
    docs = again.run(query_embedding=[1.0, 0.0])["documents"]
    assert [d.id for d in docs] == ["a"]  # b's raw 0.6 is under the threshold, applied before scaling
    assert docs[0].score == pytest.approx(1 / (1 + np.exp(-1.0 / 100)))
    per_call = again.run(query_embedding=[1.0, 0.0], scale_score=False, score_threshold=0.5)["documents"]
    assert [(d.id, round(d.score, 3)) for d in per_call] == [("a", 1.0), ("b", 0.6)]
    batch = again.run_batch([[1.0, 0.0], [0.6, 0.6]])["documents"]
    assert [[d.id for d in found] for found in batch] == [["a"], ["b"]]  # a: 0.6, b: 0.72 against [0.6, 0.6]
    assert all(0 < d.score < 1 for found in batch for d in found)


@pytest.mark.asyncio
async def test_score_threshold_applies_to_run_async(store):
    retriever = MultiViewRetriever(document_store=store, score_threshold=0.7)
    docs = (await retriever.run_async(query_embedding=[1.0, 0.0]))["documents"]
    assert [d.id for d in docs] == ["a"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"scale_score": "yes"}, "scale_score must be True or False"),
        ({"score_threshold": float("nan")}, "score_threshold must be a finite number"),
        ({"score_threshold": "0.5"}, "score_threshold must be a finite number"),
        ({"score_threshold": True}, "score_threshold must be a finite number"),
    ],
)
def test_bad_scale_score_and_score_threshold_are_refused(store, options, message):
    with pytest.raises(ValueError, match=message):
        MultiViewRetriever(document_store=store, **options)
    with pytest.raises(ValueError, match=message):
        MultiViewRetriever(document_store=store).run(query_embedding=[1.0, 0.0], **options)


class _ClosingStore(FaissMultiViewDocumentStore):
    closed: list[str]

    def close(self) -> None:
        self.closed.append("close")

    async def close_async(self) -> None:
        self.closed.append("close_async")


@pytest.mark.asyncio
async def test_close_and_close_async_are_forwarded_to_the_store(store):
    closing = _ClosingStore()
    closing.closed = []
    retriever = MultiViewRetriever(document_store=closing)
    retriever.close()
    await retriever.close_async()
    assert closing.closed == ["close", "close_async"]
    plain = MultiViewRetriever(document_store=store)  # a store without close: nothing to do
    plain.close()
    await plain.close_async()
    await plain.warm_up_async()


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


@pytest.mark.parametrize("top_k", [0, -1, True, False, 2.0, "3"])
def test_top_k_must_be_a_positive_integer_at_init_and_at_run(store, top_k):
    """run(top_k=0) returned the default top_k (``top_k or self.top_k``); MultiViewRetriever(top_k=True) was
    accepted."""
    with pytest.raises(ValueError, match="top_k must be a positive integer"):
        MultiViewRetriever(document_store=store, top_k=top_k)
    retriever = MultiViewRetriever(document_store=store, top_k=2)
    with pytest.raises(ValueError, match="top_k must be a positive integer"):
        retriever.run(query_embedding=[1.0, 0.0], top_k=top_k)
    with pytest.raises(ValueError, match="top_k must be a positive integer"):
        retriever.run_batch(query_embeddings=[[1.0, 0.0]], top_k=top_k)
    assert len(retriever.run(query_embedding=[1.0, 0.0], top_k=None)["documents"]) == 2
    assert len(retriever.run(query_embedding=[1.0, 0.0], top_k=1)["documents"]) == 1


@pytest.mark.asyncio
async def test_run_async_refuses_top_k_0(store):
    with pytest.raises(ValueError, match="top_k must be a positive integer, got 0"):
        await MultiViewRetriever(document_store=store).run_async(query_embedding=[1.0, 0.0], top_k=0)


def _saved_store_of_encoder(path, encoder):
    store = FaissMultiViewDocumentStore()
    views = [np.eye(2, 4, k=i, dtype=np.float32) for i in (0, 1)]
    docs = [Document(id=f"d{i}", meta={VIEWS_KEY: v, ENCODER_KEY: encoder}) for i, v in enumerate(views)]
    store.write_documents(docs)
    store.save(path)
    return FaissMultiViewDocumentStore(index_path=str(path))


@pytest.mark.asyncio
async def test_the_first_query_after_opening_a_saved_store_is_checked(tmp_path):
    """encoder_config is None until the store loads its saved copy: the first query with another encoder was answered
    (with what the wrong vectors found) and only the second raised. Every run form now raises on the first."""
    encoder = {"model": "a", "mode": "snippet", "dim": 4}
    other = {"model": "b", "mode": "mvr", "dim": 4}
    runs = {
        "run": lambda r: r.run(query_embedding=[1.0, 0, 0, 0], encoder=other),
        "run_batch": lambda r: r.run_batch(query_embeddings=[[1.0, 0, 0, 0]], encoder=other),
        "wrong dimension": lambda r: r.run(query_embedding=[1.0, 0, 0], encoder={**other, "dim": 3}),
    }
    for name, run in runs.items():
        retriever = MultiViewRetriever(document_store=_saved_store_of_encoder(tmp_path / name, encoder))
        with pytest.raises(ValueError, match="differ in"):
            run(retriever)
    retriever = MultiViewRetriever(document_store=_saved_store_of_encoder(tmp_path / "async", encoder))
    with pytest.raises(ValueError, match=r"differ in \['mode'\]"):
        await retriever.run_async(query_embedding=[1.0, 0, 0, 0], encoder=other)
    retriever = MultiViewRetriever(document_store=_saved_store_of_encoder(tmp_path / "same", encoder))
    found = retriever.run(query_embedding=[1.0, 0, 0, 0], encoder={**encoder, "model": "/path/to/a"})["documents"]
    assert [d.id for d in found] == ["d0", "d1"]


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
    # DocumentWriter carried every view into the store: one view per snippet, 2 + 1.
    assert store._views.ntotal == 3

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
