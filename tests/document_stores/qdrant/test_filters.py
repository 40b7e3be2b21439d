"""Haystack filters translated to Qdrant filters select exactly what Haystack's own filter engine selects."""

import random

import numpy as np
import pytest
from haystack import Document
from haystack.errors import FilterError
from haystack.utils.filters import document_matches_filter

pytest.importorskip("qdrant_client")

from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore
from haystack_mvr.document_stores.qdrant.filters import convert_filters

NUMBERS = [-3, -1, 0, 1, 2, 2.0, 2.5, 7, 100]
STRINGS = ["alpha", "beta", "gamma", ""]
DATES = ["1969-07-21T20:17:40", "1972-12-11T19:54:58", "1989-11-09T17:53:00", "2001-01-01"]
FIELDS = {"n": NUMBERS, "s": STRINGS, "date": DATES, "flag": [True, False]}
ORDERED = {"n": NUMBERS, "date": DATES}


def random_documents(rng: random.Random, count: int) -> list[Document]:
    docs = []
    for i in range(count):
        meta = {}
        for field, values in FIELDS.items():
            roll = rng.random()
            if roll < 0.15:
                continue  # missing
            meta[field] = None if roll < 0.25 else rng.choice(values)
        meta["nested"] = {"x": rng.choice(NUMBERS)} if rng.random() < 0.5 else {}
        embedding = [rng.random(), rng.random()] if rng.random() < 0.7 else None
        docs.append(Document(id=f"d{i}", content=rng.choice(STRINGS) + str(i % 3), meta=meta, embedding=embedding))
    return docs


def random_comparison(rng: random.Random) -> dict:
    if rng.random() < 0.5:
        field = rng.choice(list(ORDERED))
        operator = rng.choice([">", ">=", "<", "<="])
        value = rng.choice([*ORDERED[field], None])
        return {"field": f"meta.{field}", "operator": operator, "value": value}
    field = rng.choice([*FIELDS, "nested.x"])
    values = FIELDS.get(field, NUMBERS)
    operator = rng.choice(["==", "!=", "in", "not in"])
    if operator in ("in", "not in"):
        value = rng.sample([*values, None], k=rng.randint(0, 3))
    else:
        value = rng.choice([*values, None])
    prefix = "" if field == "flag" else "meta."  # a bare name is a meta field (legacy filters)
    return {"field": prefix + field, "operator": operator, "value": value}


def random_filter(rng: random.Random, depth: int = 0) -> dict:
    if depth >= 2 or rng.random() < 0.4:
        return random_comparison(rng)
    operator = rng.choice(["AND", "OR", "NOT"])
    return {"operator": operator, "conditions": [random_filter(rng, depth + 1) for _ in range(rng.randint(0, 3))]}


def test_random_filters_match_haystack_semantics():
    rng = random.Random(0)
    docs = random_documents(rng, 60)
    store = QdrantMultiViewDocumentStore()
    store.write_documents(docs)
    checked = 0
    for _ in range(300):
        filters = random_filter(rng)
        if "field" in filters:
            filters = {"operator": "AND", "conditions": [filters]}
        expected = [d.id for d in docs if document_matches_filter(filters, d)]
        assert [d.id for d in store.filter_documents(filters)] == expected, filters
        assert store.count_documents_by_filter(filters) == len(expected)
        checked += bool(expected) and len(expected) < len(docs)
    assert checked > 100  # most filters select a proper, non-empty subset


def test_filtered_search_uses_the_same_translation():
    rng = random.Random(1)
    docs = random_documents(rng, 40)
    store = QdrantMultiViewDocumentStore()
    store.write_documents(docs)
    query = np.array([0.3, -0.7], dtype=np.float32)
    for _ in range(40):
        filters = {"operator": "OR", "conditions": [random_filter(rng), random_filter(rng)]}
        keep = [d for d in docs if d.embedding is not None and document_matches_filter(filters, d)]
        expected = sorted(keep, key=lambda d: -float(np.asarray(d.embedding, dtype=np.float32) @ query))[:5]
        assert [d.id for d in store.search(query, top_k=5, filters=filters)] == [d.id for d in expected]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [("content", "Warsaw", ["a"]), ("id", "b", ["b"]), ("meta.person.name", "Ada", ["b"]), ("lang", "pl", ["a"])],
)
def test_document_fields_nested_and_legacy_fields(field, value, expected):
    store = QdrantMultiViewDocumentStore()
    store.write_documents(
        [
            Document(id="a", content="Warsaw", meta={"lang": "pl"}),
            Document(id="b", content="Paris", meta={"lang": "fr", "person": {"name": "Ada"}}),
        ]
    )
    assert [d.id for d in store.filter_documents({"field": field, "operator": "==", "value": value})] == expected


def test_same_instant_in_another_iso_spelling_is_equal():
    store = QdrantMultiViewDocumentStore()
    store.write_documents([Document(id="a", content="x", meta={"date": "2020-01-01T00:00:00"})])
    for value in ("2020-01-01T00:00:00", "2020-01-01", "2020-01-01T00:00:00.000"):
        filters = {"field": "meta.date", "operator": "==", "value": value}
        assert (
            [d.id for d in store.filter_documents(filters)]
            == ["a"]
            == [d.id for d in store.filter_documents() if document_matches_filter(filters, d)]
        )


@pytest.mark.parametrize(
    "filters",
    [
        {"field": "meta.n", "operator": "in", "value": (1, 2)},
        {"field": "meta.n", "operator": "~", "value": 1},
        {"operator": "XOR", "conditions": []},
        {"conditions": []},
        {"operator": "AND"},
        {"operator": "AND", "conditions": [{"field": "meta.n", "value": 1}]},
    ],
)
def test_malformed_or_unsupported_filters_raise_filter_error(filters):
    with pytest.raises(FilterError):
        convert_filters(filters)


@pytest.mark.parametrize(
    "filters",
    [
        {"field": "meta.n", "operator": ">", "value": "not a date"},
        {"field": "meta.n", "operator": "<=", "value": [1]},
        {"field": "meta.n", "operator": "<", "value": {"a": 1}},
    ],
)
def test_comparisons_haystack_refuses_raise_where_a_document_has_the_field(filters):
    """As in Haystack: ``FilterError`` when a document holds a value, nothing selected when none does."""
    store = QdrantMultiViewDocumentStore()
    store.write_documents([Document(id="a", content="x", meta={"m": 1})])
    assert store.filter_documents(filters) == []
    store.write_documents([Document(id="b", content="y", meta={"n": 1})])
    with pytest.raises(FilterError, match="'b'"):
        store.filter_documents(filters)
    with pytest.raises((FilterError, TypeError)):  # Haystack: FilterError, or TypeError for a dict
        [d for d in store.filter_documents() if document_matches_filter(filters, d)]


def test_no_filter_is_none():
    assert convert_filters(None) is None and convert_filters({}) is None
