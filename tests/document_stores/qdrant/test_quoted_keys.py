"""A meta key containing ``"``: Haystack and the FAISS store filter on it, Qdrant's key syntax cannot name it.

Qdrant reads a payload key as a JSON path in which ``"..."`` quotes a key and nothing escapes a ``"`` inside it
(qdrant-client's local engine, ``qdrant_client.local.json_path_parser``, as the server's parser). The store keeps
refusing such a filter, with a message that says why and what to do; the last test fails when qdrant-client learns
to escape one, so that the store can then accept it.
"""

from __future__ import annotations

import pytest
from haystack import Document
from haystack.errors import FilterError
from haystack.utils.filters import document_matches_filter

pytest.importorskip("qdrant_client")

from haystack_mvr.document_stores import FaissMultiViewDocumentStore, QdrantMultiViewDocumentStore

DOCS = [Document(id="hit", content="a", meta={'a"b': 1}), Document(id="miss", content="b", meta={'a"b': 2})]
FILTER = {"field": 'meta.a"b', "operator": "==", "value": 1}


def test_haystack_and_the_faiss_store_filter_on_such_a_key():
    assert [d.id for d in DOCS if document_matches_filter(FILTER, d)] == ["hit"]
    faiss = FaissMultiViewDocumentStore()
    faiss.write_documents(DOCS)
    assert [d.id for d in faiss.filter_documents(FILTER)] == ["hit"]


@pytest.mark.parametrize("call", ["filter_documents", "count_documents_by_filter", "delete_by_filter", "search"])
def test_the_qdrant_store_refuses_it_saying_why_and_what_to_do(call):
    store = QdrantMultiViewDocumentStore()
    store.write_documents([Document(id=d.id, content=d.content, meta=d.meta, embedding=[1.0, 0.0]) for d in DOCS])
    run = {
        "filter_documents": lambda: store.filter_documents(FILTER),
        "count_documents_by_filter": lambda: store.count_documents_by_filter(FILTER),
        "delete_by_filter": lambda: store.delete_by_filter(FILTER),
        "search": lambda: store.search([1.0, 0.0], top_k=2, filters=FILTER),
    }[call]
    with pytest.raises(FilterError) as error:
        run()
    message = str(error.value)
    assert "'a\"b'" in message and "double quote" in message
    assert "no escape" in message and "FaissMultiViewDocumentStore" in message and "rename" in message
    assert store.count_documents() == 2  # nothing deleted


@pytest.mark.parametrize("key", ['meta."a\\"b"', 'meta."a""b"', "meta.'a\"b'", 'meta."a\\u0022b"', 'meta.a"b'])
def test_qdrant_key_syntax_has_no_escape_for_a_double_quote(key):
    """Every escape one might try is refused or names another key: if one ever selects the document, use it."""
    from qdrant_client import QdrantClient, models

    client = QdrantClient(":memory:")
    client.create_collection("t", vectors_config={})
    client.upsert("t", points=[models.PointStruct(id=1, vector={}, payload={"meta": {'a"b': 1}})])
    condition = models.FieldCondition(key=key, match=models.MatchValue(value=1))
    try:
        found, _ = client.scroll("t", scroll_filter=models.Filter(must=[condition]))
    except ValueError:
        found = []
    assert found == []
