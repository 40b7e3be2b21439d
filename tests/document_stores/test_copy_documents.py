"""Moving an index between stores without encoding it again: FAISS -> Qdrant -> FAISS answers exactly the same."""

from __future__ import annotations

import json

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.document_stores.types import DuplicatePolicy

pytest.importorskip("qdrant_client")

from haystack_mvr.document_stores import copy_documents
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore
from haystack_mvr.views import (
    ENCODER_KEY,
    MATCHED_SCOPE_KEY,
    MATCHED_SPAN_KEY,
    MATCHED_TEXT_KEY,
    MATCHED_VIEW_KEY,
    attach_views,
)

DIM = 8
ENCODER = {"model": "random-views", "mode": "snippet"}
FILTERS = [
    None,
    {"field": "meta.lang", "operator": "==", "value": "pl"},
    {"field": "meta.year", "operator": ">=", "value": 2000},
    {"field": "meta.date", "operator": "<", "value": "2021-06-01T12:00:00+02:00"},
    {"field": "meta.tags", "operator": "==", "value": None},
    {"operator": "NOT", "conditions": [{"field": "meta.lang", "operator": "in", "value": ["en", "de"]}]},
    {
        "operator": "OR",
        "conditions": [
            {"field": "meta.flag", "operator": "==", "value": 1},
            {"field": "id", "operator": "==", "value": "d3"},
        ],
    },
]


def corpus(n: int = 40, seed: int = 0) -> list[Document]:
    """Documents of 1-6 sentences with a view per sentence plus a global one, spans, assorted meta, some without
    vectors and one with its own embedding."""
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        sentences = [f"Sentence {j} of document {i}." for j in range(1 + i % 6)]
        content = " ".join(sentences)
        spans, start = [None], 0
        for s in sentences:
            spans.append((start, start + len(s)))
            start += len(s) + 1
        meta = {
            "lang": ["pl", "en", "de"][i % 3],
            "year": 1990 + i,
            "date": f"2021-06-0{1 + i % 3}T{10 + i % 5}:00:00" + ("+02:00" if i % 2 else ""),
            "flag": [True, 1, 0, False][i % 4],
            "tags": [[], ["a"], None, ["a", "b"]][i % 4],
            "nested": {"k": i},
            ENCODER_KEY: ENCODER,
        }
        doc = Document(id=f"d{i}", content=content, meta=meta)
        if i % 10 == 9:
            docs.append(doc)  # no vectors
            continue
        views = rng.normal(size=(len(spans), DIM)).astype(np.float32)
        doc = attach_views(doc, views, spans)
        if i == 4:
            doc = Document.from_dict({**doc.to_dict(flatten=False), "embedding": rng.normal(size=DIM).tolist()})
        docs.append(doc)
    return docs


def answers(store, queries: np.ndarray) -> list:
    out = []
    for filters in FILTERS:
        for hits in store.search_batch(queries, top_k=5, filters=filters):
            keys = (MATCHED_VIEW_KEY, MATCHED_SCOPE_KEY, MATCHED_SPAN_KEY, MATCHED_TEXT_KEY)
            out.append([(h.id, h.score, *(json.dumps(h.meta[k]) for k in keys)) for h in hits])
    return out


def assert_same_answers(a: list, b: list) -> None:
    assert len(a) == len(b)
    for hits_a, hits_b in zip(a, b, strict=True):
        assert [(h[0], *h[2:]) for h in hits_a] == [(h[0], *h[2:]) for h in hits_b]
        np.testing.assert_allclose([h[1] for h in hits_a], [h[1] for h in hits_b], rtol=1e-5, atol=1e-5)


def contents(store) -> list:
    return sorted(
        (d.id, d.content, json.dumps(d.meta, sort_keys=True), d.embedding is not None) for d in store.filter_documents()
    )


@pytest.mark.parametrize("qdrant_mode", ["memory", "path"])
def test_faiss_to_qdrant_to_faiss_answers_the_same(tmp_path, qdrant_mode):
    queries = np.random.default_rng(1).normal(size=(4, DIM)).astype(np.float32)
    source = FaissMultiViewDocumentStore(index_factory="Flat")
    source.write_documents(corpus())
    expected = answers(source, queries)
    assert sum(map(len, expected)) > 60  # the filters select documents

    options = {"path": str(tmp_path / "qdrant")} if qdrant_mode == "path" else {}
    qdrant = QdrantMultiViewDocumentStore(embedding_dim=DIM, **options)
    assert copy_documents(source, qdrant, batch_size=7) == 40
    assert qdrant.encoder_config == ENCODER
    assert contents(qdrant) == contents(source)
    assert_same_answers(answers(qdrant, queries), expected)

    back = FaissMultiViewDocumentStore(index_factory="Flat")
    assert copy_documents(qdrant, back, batch_size=5) == 40
    qdrant.close()
    assert back.encoder_config == ENCODER
    assert contents(back) == contents(source)
    assert_same_answers(answers(back, queries), expected)


def test_faiss_to_faiss_with_a_filter_and_another_index_type(tmp_path):
    source = FaissMultiViewDocumentStore(index_factory="Flat")
    source.write_documents(corpus())
    source.save(tmp_path / "saved")
    reopened = FaissMultiViewDocumentStore(index_path=str(tmp_path / "saved"))
    target = FaissMultiViewDocumentStore(index_factory="HNSW16")
    polish = {"field": "meta.lang", "operator": "==", "value": "pl"}
    assert copy_documents(reopened, target, filters=polish, batch_size=3) == 14
    assert {d.id for d in target.filter_documents()} == {d.id for d in source.filter_documents(polish)}
    query = np.random.default_rng(2).normal(size=DIM).astype(np.float32)
    got = [(h.id, round(h.score, 5)) for h in target.search(query, top_k=3)]
    assert got == [(h.id, round(h.score, 5)) for h in source.search(query, top_k=3, filters=polish)]


def test_copy_writes_in_batches_of_at_most_batch_size():
    sizes: list[int] = []

    class Recording(FaissMultiViewDocumentStore):
        def write_documents(self, documents, policy=DuplicatePolicy.NONE):
            documents = list(documents)
            sizes.append(len(documents))
            return super().write_documents(documents, policy)

    source = QdrantMultiViewDocumentStore(embedding_dim=DIM)
    source.write_documents(corpus())
    target = Recording(index_factory="Flat")
    assert copy_documents(source, target, batch_size=16) == 40
    assert sizes == [16, 16, 8]


def test_copy_is_resumable_with_overwrite_and_refuses_duplicates_by_default():
    source = FaissMultiViewDocumentStore(index_factory="Flat")
    source.write_documents(corpus())
    target = QdrantMultiViewDocumentStore(embedding_dim=DIM)
    copy_documents(source, target, filters={"field": "meta.lang", "operator": "==", "value": "pl"})
    with pytest.raises(Exception, match="already exists"):
        copy_documents(source, target)
    assert copy_documents(source, target, policy=DuplicatePolicy.OVERWRITE) == 40
    assert contents(target) == contents(source)


def test_bad_calls_are_refused_clearly():
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    with pytest.raises(ValueError, match="same object"):
        copy_documents(store, store)
    with pytest.raises(TypeError, match="export_documents"):
        copy_documents(InMemoryDocumentStore(), store)
    with pytest.raises(ValueError, match="batch_size"):
        copy_documents(FaissMultiViewDocumentStore(), store, batch_size=0)


def test_a_target_of_another_encoder_refuses_and_keeps_what_it_holds():
    source = FaissMultiViewDocumentStore(index_factory="Flat")
    source.write_documents(corpus(10))
    target = QdrantMultiViewDocumentStore(embedding_dim=DIM, encoder_config={"model": "other", "mode": "snippet"})
    target.write_documents([Document(id="kept", content="x", embedding=[1.0] * DIM)])
    with pytest.raises(ValueError, match="encoder"):
        copy_documents(source, target)
    assert [d.id for d in target.filter_documents()] == ["kept"]


def test_filter_documents_output_cannot_move_an_index_and_the_error_says_how():
    """The issue's report: documents read back with filter_documents carry only view 0 beside all spans."""
    source = FaissMultiViewDocumentStore(index_factory="Flat")
    source.write_documents(corpus(10))
    with pytest.raises(ValueError, match="copy_documents"):
        QdrantMultiViewDocumentStore().write_documents(source.filter_documents())


def test_move_an_index_built_by_the_embedder(tiny_backbone):
    """Views, spans and the encoder record as MultiViewDocumentEmbedder makes them survive FAISS -> Qdrant -> FAISS."""
    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder

    texts = [
        "The river flows north. Boats carry grain to the sea. Fish live under them.",
        "Hills rise to the west. Sheep graze there all year.",
        "The city has a harbour. Its castle is old. Many people visit it in summer.",
        "Winter is cold. Snow covers the hills and the river freezes.",
    ]
    docs = [Document(id=f"t{i}", content=t, meta={"topic": ["water", "land"][i % 2]}) for i, t in enumerate(texts)]
    embedder = MultiViewDocumentEmbedder(model=str(tiny_backbone))
    source = FaissMultiViewDocumentStore(index_factory="Flat")
    source.write_documents(embedder.run(docs)["documents"])
    query = MultiViewTextEmbedder(model=str(tiny_backbone)).run("Where do sheep graze?")["embedding"]
    qdrant = QdrantMultiViewDocumentStore(embedding_dim=len(query))
    copy_documents(source, qdrant, batch_size=3)
    back = FaissMultiViewDocumentStore(index_factory="Flat")
    copy_documents(qdrant, back, batch_size=3)
    assert back.encoder_config == qdrant.encoder_config == source.encoder_config is not None
    land = {"field": "meta.topic", "operator": "==", "value": "land"}
    for filters in (None, land):
        expected = source.search(query, top_k=4, filters=filters)
        for store in (qdrant, back):
            got = store.search(query, top_k=4, filters=filters)
            assert [h.id for h in got] == [h.id for h in expected]
            assert [h.meta[MATCHED_TEXT_KEY] for h in got] == [h.meta[MATCHED_TEXT_KEY] for h in expected]
            np.testing.assert_allclose([h.score for h in got], [h.score for h in expected], rtol=1e-5, atol=1e-6)


@pytest.mark.integration
def test_move_a_minilm_index_faiss_to_qdrant_to_faiss(minilm, tmp_path):
    """The packaged all-MiniLM-L6-v2: an index moved twice answers filtered questions identically."""
    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder

    texts = [
        ("Warsaw", "Warsaw is the capital of Poland. It lies on the Vistula. Its old town was rebuilt after 1945."),
        ("Kraków", "Kraków was the capital of Poland until 1596. The Wawel castle stands above the river."),
        ("Gdańsk", "Gdańsk is a port on the Baltic Sea. The Solidarity movement began in its shipyard in 1980."),
        ("Berlin", "Berlin is the capital of Germany. The Spree flows through it. The wall fell in 1989."),
        ("Paris", "Paris is the capital of France. The Seine divides it into the Left and Right Banks."),
    ]
    docs = [
        Document(id=t, content=c, meta={"country": "Poland" if i < 3 else "other", "rank": i})
        for i, (t, c) in enumerate(texts)
    ]
    source = FaissMultiViewDocumentStore(index_factory="Flat")
    source.write_documents(MultiViewDocumentEmbedder(model=str(minilm)).run(docs)["documents"])
    qdrant = QdrantMultiViewDocumentStore(path=str(tmp_path / "qdrant"), embedding_dim=384)
    copy_documents(source, qdrant, batch_size=2)
    back = FaissMultiViewDocumentStore(index_factory="Flat")
    copy_documents(qdrant, back, batch_size=2)
    embed = MultiViewTextEmbedder(model=str(minilm))
    for question, filters in [
        ("Which river flows through Warsaw?", None),
        ("Where did Solidarity begin?", {"field": "meta.country", "operator": "==", "value": "Poland"}),
        ("Which river divides a capital?", {"field": "meta.rank", "operator": ">", "value": 1}),
    ]:
        query = embed.run(question)["embedding"]
        expected = source.search(query, top_k=3, filters=filters)
        for store in (qdrant, back):
            got = store.search(query, top_k=3, filters=filters)
            assert [h.id for h in got] == [h.id for h in expected]
            assert [h.meta[MATCHED_SPAN_KEY] for h in got] == [h.meta[MATCHED_SPAN_KEY] for h in expected]
            np.testing.assert_allclose([h.score for h in got], [h.score for h in expected], rtol=1e-5, atol=1e-6)
    qdrant.close()


def test_qdrant_to_qdrant_between_collections_of_one_folder(tmp_path):
    """Two collections in one folder share a client and its lock: the export never holds it across a batch."""
    queries = np.random.default_rng(3).normal(size=(3, DIM)).astype(np.float32)
    source = QdrantMultiViewDocumentStore(path=str(tmp_path / "q"), index="first", embedding_dim=DIM)
    source.write_documents(corpus())
    target = QdrantMultiViewDocumentStore(path=str(tmp_path / "q"), index="second", embedding_dim=DIM, global_view=True)
    assert copy_documents(source, target, batch_size=9) == 40
    assert contents(target) == contents(source)
    assert_same_answers(answers(target, queries), answers(source, queries))
    source.close()
    target.close()
