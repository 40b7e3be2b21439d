"""The query's way through a Haystack pipeline: MultiViewTextEmbedder -> MultiViewRetriever.

Haystack's ``Pipeline`` deep-copies every component's inputs, and a ``list[float]`` one float at a time (on squad-mv
the query path took 1.41x one vector per document that way, 1.15x packed: benchmarks/results/query_path.squad-mv.md).
The embedder's ``packed_embedding`` carries the same vector as an immutable ``PackedViews`` string, which that copy
hands on as it is. These tests pin
the behaviour (identity, exact values, the old ``list[float]`` socket still working), never timings.
"""

from __future__ import annotations

import copy
import subprocess
import sys

import numpy as np
import pytest
from haystack import Document, Pipeline
from haystack.components.writers import DocumentWriter
from haystack.core.pipeline.utils import _deepcopy_with_exceptions

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.components.retrievers import multi_view_retriever as retriever_module
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.views import MATCHED_TEXT_KEY, PackedViews, attach_views

DOCUMENTS = [
    Document(content="Warsaw is in Poland. It lies on the Vistula. Its old town was rebuilt."),
    Document(content="Paris is in France. The Seine flows through it."),
    Document(content="Kraków was the capital. The Wawel castle stands above the river."),
]


@pytest.fixture
def small_store():
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


@pytest.fixture(scope="module")
def indexed_store(tiny_backbone):
    store = FaissMultiViewDocumentStore()
    indexing = Pipeline()
    indexing.add_component("embedder", MultiViewDocumentEmbedder(model=str(tiny_backbone), progress_bar=False))
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    indexing.run({"embedder": {"documents": DOCUMENTS}})
    return store


def query_pipeline(model: str, store: FaissMultiViewDocumentStore, *, packed: bool) -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component("query_embedder", MultiViewTextEmbedder(model=model))
    pipeline.add_component("retriever", MultiViewRetriever(document_store=store, top_k=3))
    if packed:
        pipeline.connect("query_embedder.packed_embedding", "retriever.packed_query_embedding")
    else:
        pipeline.connect("query_embedder.embedding", "retriever.query_embedding")
    pipeline.connect("query_embedder.encoder", "retriever.encoder")
    return pipeline


def ranked(documents: list[Document]) -> list[tuple[str, float, str | None]]:
    return [(d.id, d.score, d.meta[MATCHED_TEXT_KEY]) for d in documents]


def test_packed_embedding_is_the_embedding_exactly_and_is_never_copied(tiny_backbone):
    out = MultiViewTextEmbedder(model=str(tiny_backbone)).run("Which river flows through Warsaw?")
    packed = out["packed_embedding"]
    assert type(packed) is PackedViews and packed.matrix.shape == (1, len(out["embedding"]))
    assert packed.matrix.dtype == np.float32
    # the same float32 values, bit for bit, as the list[float] every other retriever takes
    assert packed.matrix[0].tolist() == out["embedding"]
    assert type(out["embedding"]) is list and all(type(x) is float for x in out["embedding"])
    # what Haystack's Pipeline does to each component's inputs: a packed query passes as the same object
    assert _deepcopy_with_exceptions(packed) is packed
    assert copy.deepcopy(packed) is packed
    assert _deepcopy_with_exceptions(out["embedding"]) is not out["embedding"]  # why the packed socket exists


def test_retriever_takes_either_query_input_with_the_same_result(small_store):
    retriever = MultiViewRetriever(document_store=small_store)
    packed = PackedViews(np.array([[0.0, 1.0]]))
    from_list = retriever.run(query_embedding=[0.0, 1.0])["documents"]
    from_packed = retriever.run(packed_query_embedding=packed)["documents"]
    from_json = retriever.run(packed_query_embedding=str(packed))["documents"]  # a snapshot's plain string
    assert ranked(from_list) == ranked(from_packed) == ranked(from_json)
    assert [d.id for d in from_packed] == ["a", "b"] and from_packed[0].meta[MATCHED_TEXT_KEY] == "Dogs."


@pytest.mark.asyncio
async def test_run_async_takes_the_packed_query(small_store):
    retriever = MultiViewRetriever(document_store=small_store, top_k=1)
    found = await retriever.run_async(packed_query_embedding=PackedViews(np.array([[1.0, 0.0]])))
    assert [d.id for d in found["documents"]] == ["a"]


def test_a_packed_query_of_several_rows_is_a_multi_vector_query_scored_by_maxsim(small_store):
    retriever = MultiViewRetriever(document_store=small_store, top_k=2)
    found = retriever.run(packed_query_embedding=PackedViews(np.eye(2)))["documents"]
    assert [(d.id, round(d.score, 5)) for d in found] == [("a", 2.0), ("b", 1.2)]  # a: 1 + 1; b: 0.6 + 0.6


def test_retriever_refuses_both_neither_or_a_wrong_packed_query(small_store):
    retriever = MultiViewRetriever(document_store=small_store)
    packed = PackedViews(np.array([[0.0, 1.0]]))
    with pytest.raises(ValueError, match=r"exactly one of query_embedding .* got both"):
        retriever.run(query_embedding=[0.0, 1.0], packed_query_embedding=packed)
    with pytest.raises(ValueError, match=r"exactly one of query_embedding .* got neither"):
        retriever.run()
    with pytest.raises(ValueError, match="snippet"):  # a multi-vector query ranks documents, not snippets
        MultiViewRetriever(document_store=small_store, granularity="snippet").run(
            packed_query_embedding=PackedViews(np.eye(2))
        )
    with pytest.raises(ValueError, match="PackedViews"):
        retriever.run(packed_query_embedding="not packed")
    with pytest.raises(ValueError, match=r"pass a list\[float\] as query_embedding"):
        retriever.run(packed_query_embedding=[0.0, 1.0])
    with pytest.raises(ValueError, match="dimension"):
        retriever.run(packed_query_embedding=PackedViews(np.ones((1, 3))))


def test_pipeline_hands_the_packed_query_over_uncopied_and_exact(tiny_backbone, indexed_store, monkeypatch):
    """The retriever receives the very object the embedder returned, and the store the embedder's float32 row."""
    received, searched = [], []
    unpack = retriever_module._query_vector

    def spy(query_embedding, packed_query_embedding):
        received.append(packed_query_embedding)
        return unpack(query_embedding, packed_query_embedding)

    monkeypatch.setattr(retriever_module, "_query_vector", spy)
    search = indexed_store.search

    def spy_search(query_embedding, **kwargs):
        searched.append(query_embedding)
        return search(query_embedding, **kwargs)

    monkeypatch.setattr(indexed_store, "search", spy_search)
    pipeline = query_pipeline(str(tiny_backbone), indexed_store, packed=True)
    result = pipeline.run({"query_embedder": {"text": "Vistula river"}}, include_outputs_from={"query_embedder"})
    sent = result["query_embedder"]["packed_embedding"]
    assert len(received) == 1 and received[0] is sent  # no deep copy on the way
    assert len(searched) == 1 and type(searched[0]) is np.ndarray and searched[0].dtype == np.float32
    assert searched[0].tolist() == result["query_embedder"]["embedding"]  # the embedder's float32 row, as it is
    assert np.shares_memory(searched[0], sent.matrix)  # a row of the packed matrix: not converted to Python floats
    assert len(result["retriever"]["documents"]) == 3


def test_packed_and_list_wirings_rank_alike(tiny_backbone, indexed_store):
    for text in ("Vistula river", "castle above the river", "France"):
        found = [
            query_pipeline(str(tiny_backbone), indexed_store, packed=packed).run({"query_embedder": {"text": text}})
            for packed in (True, False)
        ]
        assert ranked(found[0]["retriever"]["documents"]) == ranked(found[1]["retriever"]["documents"])


def test_encoder_check_still_runs_on_the_packed_wiring(tiny_backbone, indexed_store):
    pipeline = query_pipeline(str(tiny_backbone), indexed_store, packed=True)
    encoder = pipeline.get_component("query_embedder")
    encoder.warm_up()
    identity = encoder.encoder.identity(encoder.model)
    retriever = pipeline.get_component("retriever")
    packed = encoder.run("Vistula")["packed_embedding"]
    with pytest.raises(ValueError, match="differ in"):
        retriever.run(packed_query_embedding=packed, encoder={**identity, "pooling": "something else"})


def test_both_wirings_round_trip_through_yaml_and_run(tiny_backbone, indexed_store, tmp_path):
    """Pipelines saved before the packed socket existed (embedding -> query_embedding) still load and run."""
    for packed in (True, False):
        pipeline = query_pipeline(str(tiny_backbone), indexed_store, packed=packed)
        loaded = Pipeline.loads(pipeline.dumps())
        assert loaded.to_dict() == pipeline.to_dict()
    old = query_pipeline(str(tiny_backbone), FaissMultiViewDocumentStore(), packed=False)
    (tmp_path / "old.yaml").write_text(old.dumps(), encoding="utf-8")
    code = (
        "import haystack_mvr; from haystack import Pipeline; "
        f"p = Pipeline.loads(open({str(tmp_path / 'old.yaml')!r}).read()); "
        "print(len(p.run({'query_embedder': {'text': 'Vistula'}})['retriever']['documents']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "0"  # an empty store: it ran, and found nothing
