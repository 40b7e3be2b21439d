import math

import pytest
from haystack import Document, Pipeline
from haystack.components.joiners import DocumentJoiner

from haystack_mvr.components.joiners import DocumentScoreNormalizer


def ranked(*pairs):
    return [Document(id=i, content=i, score=s) for i, s in pairs]


def test_min_max_and_z_score_values_order_and_copies():
    docs = ranked(("a", 12.0), ("b", 7.0), ("c", 2.0))
    out = DocumentScoreNormalizer().run(docs)["documents"]
    assert [(d.id, d.score) for d in out] == [("a", 1.0), ("b", 0.5), ("c", 0.0)]
    assert [d.score for d in docs] == [12.0, 7.0, 2.0]  # inputs untouched
    z = DocumentScoreNormalizer("z_score").run(docs)["documents"]
    std = math.sqrt(50 / 3)
    assert [d.score for d in z] == pytest.approx([5 / std, 0.0, -5 / std])


def test_equal_scores_and_empty_lists():
    assert [d.score for d in DocumentScoreNormalizer().run(ranked(("a", 3.0), ("b", 3.0)))["documents"]] == [1, 1]
    assert DocumentScoreNormalizer("z_score").run(ranked(("a", 3.0)))["documents"][0].score == 0.0
    assert DocumentScoreNormalizer().run([]) == {"documents": []}


@pytest.mark.parametrize(
    ("documents", "message"),
    [
        ([Document(id="x", content="x")], "'x' has no finite score"),
        (ranked(("y", float("nan"))), "'y' has no finite score"),
        (["text"], "list of Documents"),
        (None, "list of Documents"),
    ],
)
def test_bad_input_is_named(documents, message):
    with pytest.raises(ValueError, match=message):
        DocumentScoreNormalizer().run(documents)
    with pytest.raises(ValueError, match="method"):
        DocumentScoreNormalizer("softmax")


def test_convex_fusion_keeps_a_confident_first_place_that_rrf_loses():
    # BM25 is sure of "a"; the dense list barely prefers "b" over "a".
    bm25 = ranked(("a", 30.0), ("b", 10.0), ("c", 9.0))
    dense = ranked(("b", 0.81), ("a", 0.80), ("c", 0.20))
    fused = Pipeline()
    fused.add_component("bm25", DocumentScoreNormalizer())
    fused.add_component("dense", DocumentScoreNormalizer())
    fused.add_component("joiner", DocumentJoiner(join_mode="merge", weights=[0.5, 0.5], sort_by_score=True))
    fused.connect("bm25.documents", "joiner.documents")
    fused.connect("dense.documents", "joiner.documents")
    fused = Pipeline.loads(fused.dumps())  # the saved pipeline loads back
    out = fused.run({"bm25": {"documents": bm25}, "dense": {"documents": dense}})["joiner"]["documents"]
    assert [d.id for d in out] == ["a", "b", "c"]
    assert out[0].score == pytest.approx(0.5 * 1.0 + 0.5 * (0.80 - 0.20) / 0.61)

    rrf = DocumentJoiner(join_mode="reciprocal_rank_fusion").run([[*bm25], [*dense]])["documents"]
    assert rrf[0].score == pytest.approx(rrf[1].score)  # rank fusion sees a tie between "a" and "b"


def test_to_dict_round_trip():
    data = DocumentScoreNormalizer("z_score").to_dict()
    assert data["init_parameters"] == {"method": "z_score"}
    assert DocumentScoreNormalizer.from_dict(data).method == "z_score"


def test_add_fusion_joiner_wires_each_source_into_its_own_input_and_names_bad_fusions():
    from haystack.components.retrievers import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from haystack_mvr.components.joiners import FusionJoiner, add_fusion_joiner

    for fusion in ("convex", "rrf", "dbsf"):
        pipeline = Pipeline()
        for name in ("a", "b"):
            pipeline.add_component(name, InMemoryBM25Retriever(document_store=InMemoryDocumentStore()))
        add_fusion_joiner(pipeline, ["a", "b"], fusion=fusion, weights=[0.3, 0.7], top_k=3)
        assert set(pipeline.graph.nodes) == {"a", "b", "joiner"}
        joiner = pipeline.get_component("joiner")
        assert isinstance(joiner, FusionJoiner) and joiner.fusion == fusion
        assert joiner.weights == [0.3, 0.7] and joiner.top_k == 3
        edges = {(u, d["to_socket"].name) for u, _, d in pipeline.graph.edges(data=True)}
        assert edges == {("a", "a"), ("b", "b")}
    with pytest.raises(ValueError, match="fusion must be one of"):
        add_fusion_joiner(Pipeline(), ["a"], fusion="max")


def test_add_fusion_joiner_warns_when_a_source_offers_no_more_candidates_than_it_keeps(caplog):
    """The README's hybrid once used top_k=5 everywhere and scored below BM25 alone (issue 32): warn about that."""
    from haystack.components.retrievers import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from haystack_mvr.components.joiners import add_fusion_joiner

    # (candidates offered by "a", fused documents kept, warned): equal at 100 is an evaluation's deliberate choice
    for offered, kept, warned in ((5, 5, True), (6, 5, False), (100, 5, False), (100, 100, False), (50, 50, True)):
        pipeline = Pipeline()
        pipeline.add_component("a", InMemoryBM25Retriever(document_store=InMemoryDocumentStore(), top_k=offered))
        pipeline.add_component("b", InMemoryBM25Retriever(document_store=InMemoryDocumentStore(), top_k=100))
        caplog.clear()
        with caplog.at_level("WARNING", logger="haystack_mvr.components.joiners.hybrid_fusion"):
            add_fusion_joiner(pipeline, ["a", "b"], fusion="convex", weights=[0.4, 0.6], top_k=kept)
        messages = [r.getMessage() for r in caplog.records]
        assert bool(messages) is warned, messages
        if warned:
            assert len(messages) == 1 and f"'a' offers top_k={offered} candidates" in messages[0]
