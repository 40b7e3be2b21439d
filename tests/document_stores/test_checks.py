"""The shared argument checks (``document_stores/checks.py``), and that both stores and the retriever use them alike."""

import re

import numpy as np
import pytest
from haystack import Document

from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores.checks import (
    check_batch_size,
    check_encoder_config,
    check_filters,
    check_optional_positive_int,
    check_query_dimension,
    check_top_k,
    document_dimension_message,
)
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.errors import InvalidFilterError
from haystack_mvr.validation import check_positive_int

NOT_POSITIVE = [0, -1, True, False, 1.0, 2.5, "3", None, [1]]


@pytest.mark.parametrize("value", NOT_POSITIVE)
def test_positive_int_refuses_what_is_not_a_positive_int_and_names_the_argument(value):
    with pytest.raises(ValueError, match=rf"^hnsw_ef must be a positive integer, got {re.escape(repr(value))}\.$"):
        check_positive_int("hnsw_ef", value)


@pytest.mark.parametrize("value", [v for v in NOT_POSITIVE if v is not None])
def test_optional_positive_int_says_none_is_allowed(value):
    with pytest.raises(ValueError, match=r"^train_size must be a positive integer or None, got "):
        check_optional_positive_int("train_size", value)


def test_accepted_values_are_returned():
    assert check_positive_int("n", 3) == 3
    assert check_optional_positive_int("n", None) is None
    assert check_optional_positive_int("n", 7) == 7
    assert check_top_k(1) == 1
    assert check_batch_size(256) == 256
    assert check_encoder_config(None) is None
    assert check_encoder_config({"mode": "snippet"}) == {"mode": "snippet"}
    check_query_dimension(np.zeros((2, 4), dtype=np.float32), 4)


def test_top_k_batch_size_encoder_and_dimension_messages():
    with pytest.raises(ValueError, match=r"^top_k must be a positive integer, got True\.$"):
        check_top_k(True)
    with pytest.raises(ValueError, match=r"^batch_size must be a positive integer, got 0\.$"):
        check_batch_size(0)
    with pytest.raises(ValueError, match=r"^encoder_config must be a dict or None, got list\.$"):
        check_encoder_config(["mode"])
    with pytest.raises(ValueError, match=r"^query_embedding has dimension 3 but the stored views have dimension 4\.$"):
        check_query_dimension(np.zeros((1, 3), dtype=np.float32), 4)
    assert document_dimension_message("d", 3, "the store", 4) == (
        "Document 'd' has 3-dimensional vectors but the store holds 4-dimensional ones; nothing of this batch was "
        "written."
    )


@pytest.mark.parametrize("name", ["embedding_dim", "train_size", "search_threads"])
@pytest.mark.parametrize("value", [True, 0, 2.0])
def test_faiss_store_refuses_the_same_values_as_qdrant(name, value):
    """``embedding_dim=True`` was accepted by the FAISS store (as 1) while the Qdrant store refused it."""
    with pytest.raises(ValueError, match=rf"^{name} must be a positive integer or None, got {value!r}\.$"):
        FaissMultiViewDocumentStore(**{name: value})


def test_qdrant_store_uses_the_same_checks():
    pytest.importorskip("qdrant_client")
    from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

    for name in ("embedding_dim", "hnsw_ef", "prefetch_limit", "timeout"):
        with pytest.raises(ValueError, match=rf"^{name} must be a positive integer or None, got True\.$"):
            QdrantMultiViewDocumentStore(location=":memory:", **{name: True})
    with pytest.raises(ValueError, match=r"^write_batch_size must be a positive integer, got 0\.$"):
        QdrantMultiViewDocumentStore(location=":memory:", write_batch_size=0)
    with pytest.raises(ValueError, match=r"^encoder_config must be a dict or None, got str\.$"):
        QdrantMultiViewDocumentStore(location=":memory:", encoder_config="mvr")


def test_stores_and_retriever_give_the_same_top_k_and_dimension_messages():
    store = FaissMultiViewDocumentStore()
    store.write_documents([Document(id="a", content="x", embedding=[1.0, 0.0])])
    with pytest.raises(ValueError, match=r"^top_k must be a positive integer, got 0\.$"):
        store.search([1.0, 0.0], top_k=0)
    with pytest.raises(ValueError, match=r"^top_k must be a positive integer, got 0\.$"):
        MultiViewRetriever(document_store=store).run(query_embedding=[1.0, 0.0], top_k=0)
    with pytest.raises(ValueError, match=r"^query_embedding has dimension 3 but the stored views have dimension 2\.$"):
        store.search([1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"^Document 'b' has 3-dimensional vectors but the store holds 2-dimensional"):
        store.write_documents([Document(id="b", content="y", embedding=[1.0, 0.0, 0.0])])


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (Document(id="e", embedding=[1.0, 0.0, 0.0], meta={"mvr_views": [[1.0, 0.0]]}), "embedding has 3 dimensions"),
        (Document(id="m", embedding=[1.0, 0.0], meta={"mvr_encoder": "mvr"}), r"must be a dict naming the encoder"),
        (Document(id="j", embedding=[1.0, 0.0], meta={"when": {1, 2}}), r"meta field 'when' holds a set"),
        (Document(id="n", meta={"mvr_views": np.array([[np.nan, 0.0]], np.float32)}), "NaN or infinite"),
    ],
)
def test_both_stores_refuse_a_document_alike_through_the_one_write_converter(document, message):
    """FAISS and Qdrant prepare writes with the same converter (``writes.prepare_documents``): same refusals, same
    messages, nothing written."""
    pytest.importorskip("qdrant_client")
    from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

    for store in (FaissMultiViewDocumentStore(), QdrantMultiViewDocumentStore()):
        with pytest.raises(ValueError, match=rf"^Document '{document.id}'.*{message}"):
            store.write_documents([Document(id="ok", embedding=[0.0, 1.0]), document])
        assert store.count_documents() == 0, type(store).__name__


def test_a_batch_with_two_encoders_is_refused_by_both_stores():
    pytest.importorskip("qdrant_client")
    from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

    docs = [Document(id=i, embedding=[1.0, 0.0], meta={"mvr_encoder": {"mode": i}}) for i in ("a", "b")]
    for store in (FaissMultiViewDocumentStore(), QdrantMultiViewDocumentStore()):
        with pytest.raises(ValueError, match=r"^Document 'b' was encoded by \{'mode': 'b'\} but other documents"):
            store.write_documents(docs)


@pytest.mark.parametrize("value", [{"a": 1}, [1], (1,), {1}])
@pytest.mark.parametrize("operator", [">", ">=", "<", "<="])
def test_an_ordering_against_a_container_is_a_client_error(operator, value):
    """A dict value raised Haystack's bare TypeError (a 500 when served), a list value its FilterError (issue 57)."""
    with pytest.raises(InvalidFilterError, match=rf"operator '{operator}' compares with a number, a string or a date"):
        check_filters({"field": "meta.year", "operator": operator, "value": value})
