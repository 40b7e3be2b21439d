"""Distribution-based score fusion (DBSF) in ``add_fusion_joiner``: each list's mean +- 3 std mapped to [0, 1] (the
normalisation of Haystack's ``DocumentJoiner(join_mode="distribution_based_rank_fusion")`` and of Qdrant's DBSF),
then summed with weights (Qdrant's sum; Haystack's own mode keeps the maximum and ignores weights)."""

from __future__ import annotations

import math

import pytest
from haystack import Document, Pipeline, component
from haystack.components.joiners import DocumentJoiner
from haystack.components.retrievers import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_mvr.components.joiners import DocumentScoreNormalizer, add_fusion_joiner


def ranked(*pairs):
    return [Document(id=i, content=i, score=s) for i, s in pairs]


def test_dbsf_normalisation_is_haystacks_per_list_rescaling():
    docs = ranked(("a", 12.0), ("b", 7.0), ("c", 2.0))
    out = DocumentScoreNormalizer("dbsf").run(docs)["documents"]
    std = math.sqrt(50 / 3)
    assert [d.score for d in out] == pytest.approx([0.5 + 5 / (6 * std), 0.5, 0.5 - 5 / (6 * std)])
    haystack = DocumentJoiner(join_mode="distribution_based_rank_fusion").run([docs])["documents"]
    assert {d.id: d.score for d in haystack} == pytest.approx({d.id: d.score for d in out})
    assert [d.score for d in docs] == [12.0, 7.0, 2.0]  # inputs untouched


def test_dbsf_equal_scores_sit_at_the_middle_and_empty_lists_stay_empty():
    assert [d.score for d in DocumentScoreNormalizer("dbsf").run(ranked(("a", 3.0), ("b", 3.0)))["documents"]] == [
        0.5,
        0.5,
    ]
    assert DocumentScoreNormalizer("dbsf").run([]) == {"documents": []}


@component
class Given:
    """A source that returns the documents it is given (a retriever stand-in with fixed scores)."""

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict:
        return {"documents": documents}


def sources(pipeline: Pipeline, names=("bm25", "dense"), *, given: bool = False) -> None:
    for name in names:
        if given:
            pipeline.add_component(name, Given())
        else:
            pipeline.add_component(name, InMemoryBM25Retriever(document_store=InMemoryDocumentStore(), top_k=100))


def test_add_fusion_joiner_dbsf_wires_one_named_input_per_source():
    pipeline = Pipeline()
    sources(pipeline)
    add_fusion_joiner(pipeline, ["bm25", "dense"], fusion="dbsf", weights=[0.3, 0.7], top_k=3)
    assert set(pipeline.graph.nodes) == {"bm25", "dense", "joiner"}
    joiner = pipeline.get_component("joiner")
    assert (joiner.fusion, joiner.sources, joiner.top_k) == ("dbsf", ["bm25", "dense"], 3)
    assert joiner.weights == pytest.approx([0.3, 0.7])
    again = Pipeline.loads(pipeline.dumps())  # dumps and loads
    assert set(again.graph.nodes) == set(pipeline.graph.nodes)
    assert again.get_component("joiner").to_dict() == joiner.to_dict()


def fused(bm25, dense, weights):
    """The fusion add_fusion_joiner wires, run on two fixed lists (normalizers fed directly)."""
    pipeline = Pipeline()
    sources(pipeline, given=True)
    add_fusion_joiner(pipeline, ["bm25", "dense"], fusion="dbsf", weights=weights, top_k=10)
    out = pipeline.run({"bm25": {"documents": bm25}, "dense": {"documents": dense}})
    return out["joiner"]["documents"]


def test_dbsf_sums_weighted_normalised_scores_where_haystacks_mode_keeps_the_maximum():
    bm25 = ranked(("a", 30.0), ("b", 20.0), ("c", 10.0))
    dense = ranked(("d", 0.9), ("b", 0.8), ("e", 0.1))
    norm = DocumentScoreNormalizer("dbsf")
    nb = {d.id: d.score for d in norm.run(bm25)["documents"]}
    nd = {d.id: d.score for d in norm.run(dense)["documents"]}

    out = fused(bm25, dense, [0.4, 0.6])
    scores = {d.id: d.score for d in out}
    assert scores["b"] == pytest.approx(0.4 * nb["b"] + 0.6 * nd["b"])  # found by both: the sum
    assert scores["a"] == pytest.approx(0.4 * nb["a"]) and scores["d"] == pytest.approx(0.6 * nd["d"])
    assert next(d.id for d in out) == "b"  # agreement wins

    # equal weights: Qdrant's DBSF (a sum), up to the factor 1/2 DocumentJoiner's weight normalisation gives
    equal = {d.id: d.score for d in fused(bm25, dense, None)}
    assert equal == pytest.approx({k: 0.5 * (nb.get(k, 0.0) + nd.get(k, 0.0)) for k in equal})
    # Haystack's own mode: the maximum of the two rescaled scores, so "b" does not gain from being in both
    haystack = DocumentJoiner(join_mode="distribution_based_rank_fusion").run([bm25, dense])["documents"]
    assert {d.id: d.score for d in haystack}["b"] == pytest.approx(max(nb["b"], nd["b"]))


def test_several_joiners_read_the_same_sources():
    """Weights compared side by side in one pipeline."""
    pipeline = Pipeline()
    sources(pipeline, given=True)
    add_fusion_joiner(pipeline, ["bm25", "dense"], fusion="dbsf", weights=[0.1, 0.9], name="dbsf_a")
    add_fusion_joiner(pipeline, ["bm25", "dense"], fusion="dbsf", weights=[0.9, 0.1], name="dbsf_b")
    add_fusion_joiner(pipeline, ["bm25", "dense"], fusion="convex", weights=[0.4, 0.6], name="convex")
    assert set(pipeline.graph.nodes) == {"bm25", "dense", "dbsf_a", "dbsf_b", "convex"}
    bm25 = ranked(("a", 30.0), ("b", 20.0), ("c", 10.0))
    dense = ranked(("c", 0.9), ("b", 0.8), ("a", 0.1))
    out = pipeline.run({"bm25": {"documents": bm25}, "dense": {"documents": dense}})
    assert next(d.id for d in out["dbsf_a"]["documents"]) == "c"
    assert next(d.id for d in out["dbsf_b"]["documents"]) == "a"
