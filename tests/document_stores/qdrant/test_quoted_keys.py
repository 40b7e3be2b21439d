"""Meta keys Qdrant's payload key syntax cannot name: the store still filters on them exactly as Haystack does.

Qdrant reads a payload key as a JSON path in which ``"..."`` quotes a key. Nothing escapes a ``"`` inside it
(qdrant-client's local engine, ``qdrant_client.local.json_path_parser``, as the server's parser), and a server's
parser also refuses a ``\\`` inside a quoted key (``lib/segment/src/json_path/parse.rs``: a quoted key is ``"``,
then no ``\\`` nor ``"``, then ``"``), though the local engine takes it. A comparison on such a key is evaluated in
Python on every document, so the store selects what Haystack's ``document_matches_filter`` (and the FAISS store,
and ``InMemoryDocumentStore``) selects, and no request names a key a server refuses.
"""

from __future__ import annotations

import re

import pytest
from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.errors import FilterError
from haystack.utils.filters import document_matches_filter
from pydantic import BaseModel

pytest.importorskip("qdrant_client")

from qdrant_client.http import models

from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore
from haystack_mvr.document_stores.qdrant.filters import convert_filters

DOCS = [Document(id="hit", content="a", meta={'a"b': 1}), Document(id="miss", content="b", meta={'a"b': 2})]
FILTER = {"field": 'meta.a"b', "operator": "==", "value": 1}

#: Keys a Qdrant server cannot name (``"``, ``\``), each with a plain key beside it, at the top and one dict down.
UNNAMEABLE = ['a"b', '"name"', 'it\'s "x"', "a\\b", "C:\\dir\\file", "\\", '"']
STORED = [
    Document(id="one", content="1", meta={**{k: 1 for k in UNNAMEABLE}, "plain": 1, "sub": {k: 1 for k in UNNAMEABLE}}),
    Document(
        id="two", content="2", meta={**{k: 2 for k in UNNAMEABLE}, "plain": 2, "sub": {k: [1, 2] for k in UNNAMEABLE}}
    ),
    Document(id="text", content="3", meta={k: "x" for k in UNNAMEABLE}),
    Document(id="none", content="4", meta={k: None for k in UNNAMEABLE}),
    Document(id="bare", content="5", meta={"plain": 3}),
]
COMPARISONS = [
    ("==", 1),
    ("!=", 1),
    ("==", None),
    ("!=", None),
    ("in", [1, "x"]),
    ("not in", [1]),
    ("==", [1, 2]),
    ("==", "x"),
    (">=", 2),
    ("<", 5),
]

# A Qdrant server's JSON path (lib/segment/src/json_path/parse.rs): keys raw ([alphanumeric _ -]+) or quoted ("..."
# without \ or "), joined by '.', each followed by any number of [n] or [].
_KEY = r'(?:[\w-]+|"[^"\\]*")'
SERVER_JSON_PATH = re.compile(rf"{_KEY}(?:\.{_KEY}|\[\d+\]|\[\])*")


def payload_keys(node, found):
    """Every payload key a Qdrant filter (or condition, or list of them) names."""
    if isinstance(node, list):
        for item in node:
            payload_keys(item, found)
    elif isinstance(node, models.PayloadField | models.FieldCondition):
        found.append(node.key)
    elif isinstance(node, BaseModel):
        for name in type(node).model_fields:
            payload_keys(getattr(node, name), found)
    return found


def haystack_selects(filters):
    return sorted(d.id for d in STORED if document_matches_filter(filters, d))


@pytest.fixture(scope="module")
def stores():
    qdrant = QdrantMultiViewDocumentStore(embedding_dim=2)
    qdrant.write_documents([Document(id=d.id, content=d.content, meta=d.meta, embedding=[1.0, 0.0]) for d in STORED])
    memory = InMemoryDocumentStore()
    memory.write_documents(STORED)
    yield qdrant, memory
    qdrant.close()


def test_haystack_and_the_faiss_store_filter_on_such_a_key():
    assert [d.id for d in DOCS if document_matches_filter(FILTER, d)] == ["hit"]
    faiss = FaissMultiViewDocumentStore()
    faiss.write_documents(DOCS)
    assert [d.id for d in faiss.filter_documents(FILTER)] == ["hit"]


@pytest.mark.parametrize("key", UNNAMEABLE)
@pytest.mark.parametrize("where", ["meta.{}", "meta.sub.{}", "{}"])
def test_a_key_qdrant_cannot_name_selects_what_haystack_selects(stores, key, where):
    """``meta."name"`` is the key ``"name"`` (quotes included) to Haystack; ``meta.a\\b`` the key ``a\\b``."""
    qdrant, memory = stores
    field = where.format(key)
    for operator, value in COMPARISONS:
        filters = {"field": field, "operator": operator, "value": value}
        try:
            expected = haystack_selects(filters)
        except (FilterError, TypeError):
            with pytest.raises(FilterError):
                qdrant.filter_documents(filters)
            continue
        assert sorted(d.id for d in memory.filter_documents(filters)) == expected, filters
        assert sorted(d.id for d in qdrant.filter_documents(filters)) == expected, filters
        assert qdrant.count_documents_by_filter(filters) == len(expected), filters
        assert sorted(d.id for d in qdrant.search([1.0, 0.0], top_k=10, filters=filters)) == expected, filters
    both = {
        "operator": "OR",
        "conditions": [
            {"field": field, "operator": "==", "value": 2},
            {"field": "meta.plain", "operator": "==", "value": 3},
        ],
    }
    assert sorted(d.id for d in qdrant.filter_documents(both)) == haystack_selects(both)
    assert qdrant.count_documents() == len(STORED)


@pytest.mark.parametrize("key", UNNAMEABLE)
def test_no_request_names_a_key_a_qdrant_server_refuses(key):
    """Fails with the keys the store used to send for ``\\``: the local engine takes them, a server does not."""
    for field in (f"meta.{key}", f"meta.sub.{key}", f"meta.{key}.x", key):
        for operator, value in COMPARISONS:
            plan = convert_filters({"field": field, "operator": operator, "value": value})
            for name in payload_keys([plan.lower, plan.verify], []):
                assert SERVER_JSON_PATH.fullmatch(name), (field, name)


def test_deletes_and_updates_on_such_a_key_match_haystack():
    store = QdrantMultiViewDocumentStore()
    store.write_documents([Document(id=d.id, content=d.content, meta=d.meta, embedding=[1.0, 0.0]) for d in DOCS])
    assert store.update_by_filter(FILTER, {"seen": True}) == 1
    assert [d.id for d in store.filter_documents({"field": "meta.seen", "operator": "==", "value": True})] == ["hit"]
    assert store.delete_by_filter({"field": "meta.a\\b", "operator": "==", "value": None}) == 2  # no such key
    assert store.count_documents() == 0


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
