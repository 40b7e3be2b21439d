"""Inputs that are the caller's fault (an empty query, ``top_k`` below 1, a malformed filter) raise errors a server
can tell from its own failures: ``haystack_mvr.errors.InvalidRequestError`` (a ``ValueError``, so existing
``except ValueError`` code still catches it) and Haystack's ``FilterError``; ``client_error`` finds them inside the
``PipelineRuntimeError`` Haystack's ``Pipeline`` wraps every component error in."""

from __future__ import annotations

import numpy as np
import pytest
from haystack import Document, Pipeline
from haystack.core.errors import PipelineRuntimeError
from haystack.errors import FilterError

from haystack_mvr.components.embedders import MultiViewTextEmbedder
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.errors import InvalidRequestError, client_error
from haystack_mvr.views import ENCODER_KEY, VIEWS_KEY

ENCODER = {"model": "m", "mode": "snippet", "dim": 2}


@pytest.fixture
def pipeline() -> Pipeline:
    store = FaissMultiViewDocumentStore()
    store.write_documents(
        [Document(id="a", content="a", meta={VIEWS_KEY: np.eye(2, dtype=np.float32), ENCODER_KEY: ENCODER})]
    )
    pipeline = Pipeline()
    pipeline.add_component("retriever", MultiViewRetriever(document_store=store))
    return pipeline


def test_empty_query_is_an_invalid_request(tiny_backbone):
    embedder = MultiViewTextEmbedder(model=str(tiny_backbone))
    for text in ("", "   "):
        with pytest.raises(InvalidRequestError, match="empty query"):
            embedder.run(text)
    assert issubclass(InvalidRequestError, ValueError)


def test_top_k_below_one_is_an_invalid_request(pipeline):
    with pytest.raises(PipelineRuntimeError) as caught:
        pipeline.run({"retriever": {"query_embedding": [1.0, 0.0], "top_k": 0}})
    found = client_error(caught.value)
    assert isinstance(found, InvalidRequestError) and "top_k must be a positive integer" in str(found)


def test_an_unknown_filter_operator_is_a_client_error(pipeline):
    bad = {"field": "meta.k", "operator": "~", "value": 1}
    with pytest.raises(PipelineRuntimeError) as caught:
        pipeline.run({"retriever": {"query_embedding": [1.0, 0.0], "filters": bad}})
    assert isinstance(client_error(caught.value), FilterError)


def test_the_servers_own_failures_are_not_client_errors(pipeline):
    other = {**ENCODER, "mode": "mvr"}  # the store was built with another encoder: the deployment's fault
    with pytest.raises(PipelineRuntimeError) as caught:
        pipeline.run({"retriever": {"query_embedding": [1.0, 0.0], "encoder": other}})
    assert client_error(caught.value) is None
    assert client_error(RuntimeError("boom")) is None
    direct = InvalidRequestError("x")
    assert client_error(direct) is direct


def _nested_not(depth: int) -> dict:
    cond: dict = {"field": "meta.k", "operator": "==", "value": 1}
    for _ in range(depth):
        cond = {"operator": "NOT", "conditions": [cond]}
    return cond


@pytest.mark.parametrize(
    ("filters", "reason"),
    [
        ({"field": "meta.k", "value": 1}, "has no 'operator'"),
        ({"title": "Warsaw"}, "is not a Haystack filter (Haystack 1.x"),
        ({"field": 3, "operator": "==", "value": 1}, "'field' must be a string"),
        ({"field": "meta.k", "operator": ["=="], "value": 1}, "'operator' must be a string"),
        ({"field": "meta.k", "operator": "=="}, "needs 'field' and 'value'"),
        ({"operator": "AND", "conditions": {"field": "meta.k"}}, "'conditions' must be a list"),
        ({"operator": "==", "conditions": []}, "with 'conditions' must be one of"),
        ({"operator": "AND", "conditions": [{"field": "meta.k", "value": 1}]}, "filters.conditions[0] has no"),
        (_nested_not(40), "nest deeper than 32 levels"),
        ("meta.k == 1", "filters must be a dict"),
    ],
)
def test_every_malformed_filter_is_a_client_error_with_its_reason(pipeline, filters, reason):
    """Only an unknown operator was one before (issue 48): the others answered 500 from a server."""
    from haystack_mvr.errors import InvalidFilterError

    with pytest.raises(PipelineRuntimeError) as caught:
        pipeline.run({"retriever": {"query_embedding": [1.0, 0.0], "filters": filters}})
    found = client_error(caught.value)
    assert isinstance(found, InvalidFilterError) and isinstance(found, FilterError), caught.value
    assert reason in str(found), str(found)


def test_well_formed_filters_pass_the_check(pipeline):
    nested = {
        "operator": "OR",
        "conditions": [
            _nested_not(3),
            {"operator": "AND", "conditions": []},
            {"field": "id", "operator": "in", "value": ["a"]},
        ],
    }
    out = pipeline.run({"retriever": {"query_embedding": [1.0, 0.0], "filters": nested}})
    assert [d.id for d in out["retriever"]["documents"]] == ["a"]
