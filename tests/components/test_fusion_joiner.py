"""``FusionJoiner`` (what ``add_fusion_joiner`` wires): each source's weight is its own whatever order the sources
run in, scores of any real type and size, and bad weights refused (issue 48's first-week defects)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from haystack import Document, Pipeline, component
from haystack.components.joiners import DocumentJoiner

from haystack_mvr.components.joiners import DocumentScoreNormalizer, FusionJoiner, add_fusion_joiner


def ranked(tag: str, *scores) -> list[Document]:
    return [Document(id=f"{tag}{i}", content=f"{tag}{i}", score=s) for i, s in enumerate(scores)]


@component
class Source:
    """A retriever stand-in: fixed documents."""

    def __init__(self, documents: list[Document]) -> None:
        self.documents = documents
        self.top_k = 100

    @component.output_types(documents=list[Document])
    def run(self, query: str) -> dict:
        return {"documents": self.documents}


@component
class Hop:
    @component.output_types(query=str)
    def run(self, query: str) -> dict:
        return {"query": query}


@pytest.mark.parametrize("fusion", ["convex", "rrf", "dbsf"])
@pytest.mark.parametrize(("names", "deep"), [(("dense", "bm25"), "dense"), (("a", "z"), "a"), (("z", "a"), "z")])
def test_weights_follow_the_sources_whatever_order_they_run_in(fusion, names, deep):
    """The source named first runs last here (behind an extra component): the old DocumentJoiner wiring gave its
    weight to the other source."""
    pipeline = Pipeline()
    for name in names:
        pipeline.add_component(name, Source(ranked(name, 1.0, 0.0)))
    pipeline.add_component("hop", Hop())
    pipeline.connect("hop.query", f"{deep}.query")
    add_fusion_joiner(pipeline, list(names), fusion=fusion, weights=[0.9, 0.1], top_k=4)
    shallow = next(n for n in names if n != deep)
    out = pipeline.run({shallow: {"query": "q"}, "hop": {"query": "q"}})["joiner"]["documents"]
    assert out[0].id == f"{names[0]}0", [(d.id, d.score) for d in out]


def test_fused_scores_are_haystacks_for_each_fusion():
    bm25, dense = ranked("x", 30.0, 20.0, 10.0), [*ranked("y", 0.9), *ranked("x", 0.5, 0.4)[1:]]
    for fusion, mode, method in (("convex", "merge", "min_max"), ("dbsf", "merge", "dbsf"), ("rrf", None, None)):
        ours = FusionJoiner(["bm25", "dense"], fusion=fusion, weights=[0.25, 0.75], top_k=10)
        got = {d.id: d.score for d in ours.run(bm25=bm25, dense=dense)["documents"]}
        lists = [bm25, dense]
        if method:
            lists = [DocumentScoreNormalizer(method).run(docs)["documents"] for docs in lists]
        haystack = DocumentJoiner(join_mode=mode or "reciprocal_rank_fusion", weights=[0.25, 0.75], top_k=10)
        assert got == pytest.approx({d.id: d.score for d in haystack.run(lists)["documents"]}), fusion


def test_numpy_and_extreme_finite_scores_are_fused():
    huge = [Document(id=str(i), content=str(i), score=s) for i, s in enumerate([1e308, -1e308, 0.0])]
    for method in ("min_max", "z_score", "dbsf"):
        scores = [d.score for d in DocumentScoreNormalizer(method).run(huge)["documents"]]
        assert all(math.isfinite(s) for s in scores), (method, scores)
    assert [d.score for d in DocumentScoreNormalizer("min_max").run(huge)["documents"]] == [1.0, 0.0, 0.5]
    tiny = [Document(id=str(i), content=str(i), score=s) for i, s in enumerate([5e-324, 0.0])]
    assert [d.score for d in DocumentScoreNormalizer("min_max").run(tiny)["documents"]] == [1.0, 0.0]
    numpy = [Document(id=str(i), content=str(i), score=np.float32(s)) for i, s in enumerate([0.7, 0.2])]
    assert [d.score for d in DocumentScoreNormalizer("min_max").run(numpy)["documents"]] == [1.0, 0.0]
    fused = FusionJoiner(["a", "b"]).run(a=numpy, b=huge)["documents"]
    assert all(math.isfinite(d.score) for d in fused)
    for bad in (float("nan"), float("inf"), None, True, "1"):
        with pytest.raises(ValueError, match="no finite score"):
            DocumentScoreNormalizer().run([Document(id="x", content="x", score=bad)])


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([float("nan"), 1.0], "finite"),
        ([float("inf"), 1.0], "finite"),
        ([-0.5, 1.5], ">= 0"),
        ([0.0, 0.0], "not all be 0"),
        ([1.0], "one value per source"),
        ([0.2, 0.3, 0.5], "one value per source"),
        ([True, 1.0], "finite numbers"),
    ],
)
def test_bad_weights_are_refused_naming_them(weights, message):
    with pytest.raises(ValueError, match=message):
        FusionJoiner(["bm25", "dense"], weights=weights)
    pipeline = Pipeline()
    with pytest.raises(ValueError, match=message):
        add_fusion_joiner(pipeline, ["bm25", "dense"], weights=weights)
    assert not pipeline.graph.nodes  # nothing wired


@pytest.mark.parametrize("sources", [[], ["a", "a"], ["a.b"], [""], "ab"])
def test_bad_sources_are_refused(sources):
    with pytest.raises(ValueError, match="sources"):
        FusionJoiner(sources)


def test_fusion_joiner_round_trips_in_a_pipeline():
    pipeline = Pipeline()
    pipeline.add_component("joiner", FusionJoiner(["bm25", "dense"], fusion="rrf", weights=[1, 3], top_k=4))
    joiner = Pipeline.loads(pipeline.dumps()).get_component("joiner")
    assert (joiner.sources, joiner.fusion, joiner.weights, joiner.top_k) == (["bm25", "dense"], "rrf", [1.0, 3.0], 4)
    out = joiner.run(bm25=ranked("a", 2.0, 1.0), dense=ranked("b", 2.0, 1.0))["documents"]
    assert [d.id for d in out] == ["b0", "b1", "a0", "a1"]


# ------------------------------------------------------------------------- issue 57's first-week defects
def test_huge_finite_weights_are_normalised_without_overflow():
    joiner = FusionJoiner(["bm25", "dense"], weights=[1e308, 1e308])
    assert joiner._weights == [0.5, 0.5] and joiner.weights == [1e308, 1e308]
    assert FusionJoiner(["bm25", "dense"], weights=[1e308, 1.5e308])._weights == pytest.approx([0.4, 0.6])
    out = joiner.run(bm25=ranked("a", 2.0, 1.0), dense=ranked("b", 2.0, 1.0))["documents"]
    assert [d.score for d in out] == [0.5, 0.5, 0.0, 0.0]


@pytest.mark.parametrize(
    "weights",
    [np.array([1.0, 3.0]), np.array([1, 3], dtype=np.int64), np.array([1, 3], dtype=np.float32), [np.int32(1), 3.0]],
    ids=["float64-array", "int64-array", "float32-array", "numpy-scalars"],
)
def test_numpy_weights_are_accepted_like_numpy_scores(weights):
    joiner = FusionJoiner(["bm25", "dense"], weights=weights)
    assert joiner._weights == [0.25, 0.75]
    assert joiner.to_dict()["init_parameters"]["weights"] == [1.0, 3.0]
    assert all(type(w) is float for w in joiner.to_dict()["init_parameters"]["weights"])  # YAML-safe


@pytest.mark.parametrize(
    "weights",
    [[None, 1.0], [[0.5], [0.5]], {"bm25": 0.5, "dense": 0.5}, "ab", 0.5, np.array([[0.5, 0.5]]), [np.bool_(1), 1.0]],
    ids=["none-value", "nested", "dict", "string", "scalar", "2-d-array", "numpy-bool"],
)
def test_malformed_weights_are_refused_naming_weights(weights):
    with pytest.raises(ValueError, match=r"^weights must be"):
        FusionJoiner(["bm25", "dense"], weights=weights)


def test_a_source_named_self_works():
    joiner = FusionJoiner(["self", "dense"], fusion="rrf")
    out = joiner.run(self=ranked("a", 2.0), dense=ranked("b", 2.0))["documents"]
    assert [d.id for d in out] == ["a0", "b0"]
    pipeline = Pipeline()
    pipeline.add_component("joiner", joiner)
    out = pipeline.run({"joiner": {"self": ranked("a", 2.0), "dense": []}})["joiner"]["documents"]
    assert [d.id for d in out] == ["a0"]


def test_a_fused_document_does_not_share_its_meta_with_its_input():
    given = [Document(id="a", content="a", score=1.0, meta={"tags": ["x"], "source": "bm25"})]
    (fused,) = FusionJoiner(["bm25", "dense"]).run(bm25=given, dense=[])["documents"]
    assert fused is not given[0] and fused.meta is not given[0].meta
    fused.meta["source"] = "fused"
    fused.meta["tags"].append("y")
    assert given[0].meta == {"tags": ["x"], "source": "bm25"}
