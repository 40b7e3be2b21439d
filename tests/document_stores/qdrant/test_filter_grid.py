"""
Every comparison operator against every kind of stored value: the Qdrant store selects what Haystack's
``document_matches_filter`` selects over the same documents, and raises where it raises.

One store holds one document per stored value kind, each under its own meta key (and one without any); a cell is
(filter, kind): the filter on that kind's key, run by the store and by Haystack over all the documents. Cells
where the two disagree are listed in ``KNOWN_DIFFERENCES`` (the README's table of differences): the test fails
when a listed cell agrees (remove it from both) or an unlisted one differs.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from haystack import Document
from haystack.errors import FilterError
from haystack.utils.filters import document_matches_filter

pytest.importorskip("qdrant_client")

from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

#: Stored value kinds (20): the key of each is ``v_<kind>``.
STORED = {
    "int": 3,
    "one": 1,
    "zero": 0,
    "float": 2.5,
    "float_one": 1.0,
    "true": True,
    "false": False,
    "str": "abc",
    "empty_str": "",
    "date_naive": "2021-06-01T12:00:00",
    "date_aware": "2021-06-01T12:00:00+02:00",
    "date_only": "2021-06-01",
    "date_hour": "2021-06-01T12",  # ISO to Haystack, not a date Qdrant reads
    "list_str": ["abc", "def"],
    "list_int": [1, 3],
    "list_one": [1],
    "empty_list": [],
    "list_null": [None],
    "dict": {"a": 1},
    "null": None,
}

#: Filter operators and values (each run against every kind).
FILTERS = [
    *((op, v) for op in ("==", "!=") for v in (1, True, 0, False, 3, 2.5, "abc", "", None)),
    *((op, v) for op in ("==", "!=") for v in ("2021-06-01T12:00:00", "2021-06-01T10:00:00+00:00", "2021-06-01")),
    *(("==", v) for v in (["abc", "def"], [1, 3], [1], [], {"a": 1}, [None])),
    ("==", datetime(2021, 6, 1, 10, tzinfo=UTC)),
    *((op, v) for op in (">", ">=", "<", "<=") for v in (2, 1, True, 2.5, None)),
    *((op, v) for op in (">", "<=") for v in ("2021-06-01T11:00:00", "2021-06-01T11:00:00+01:00", "abc", [1])),
    (">=", datetime(2021, 6, 1, 12)),
    *((op, v) for op in ("in", "not in") for v in ([1, "abc"], [None], [], [True], [[1, 3]], ["2021-06-01"])),
    ("in", "abc"),
]

#: (filter, kind) cells where the Qdrant store and Haystack differ (the README's table lists exactly these).
KNOWN_DIFFERENCES: set[tuple[str, str]] = set()


def _documents() -> list[Document]:
    docs = [Document(id="d_missing", content="missing", meta={"other": 1}, embedding=[1.0, 0.0])]
    for i, (kind, value) in enumerate(STORED.items()):
        docs.append(Document(id=f"d_{kind}", content=kind, meta={f"v_{kind}": value}, embedding=[1.0, i / 100]))
    return docs


def _haystack(docs: list[Document], filters: dict) -> list[str]:
    return [d.id for d in docs if document_matches_filter(filters, d)]


def _selected(store, filters: dict) -> list[str]:
    return [d.id for d in store.filter_documents(filters)]


def _searched(store, filters: dict) -> list[str]:
    return [d.id for d in store.search([1.0, 0.0], top_k=len(STORED) + 1, filters=filters)]


def _outcome(select, *args) -> object:
    try:
        return sorted(select(*args))
    except (FilterError, TypeError):  # Haystack raises TypeError comparing a list or a dict with a number
        return "error"


def _label(operator: str, value: object) -> str:
    return f"{operator} {value!r}"


@pytest.fixture(scope="module")
def stores():
    qdrant = QdrantMultiViewDocumentStore()
    faiss = FaissMultiViewDocumentStore(index_factory="Flat")
    docs = _documents()
    qdrant.write_documents(docs)
    faiss.write_documents(docs)
    yield docs, qdrant, faiss
    qdrant.close()


def test_every_operator_against_every_stored_type(stores):
    docs, qdrant, faiss = stores
    differ, cells = set(), 0
    for operator, value in FILTERS:
        for kind in [*STORED, "missing"]:
            filters = {"field": f"meta.v_{kind}", "operator": operator, "value": value}
            wrapped = {"operator": "AND", "conditions": [filters]}
            expected = _outcome(_haystack, docs, wrapped)
            got = _outcome(_selected, qdrant, wrapped)
            assert _outcome(_selected, faiss, wrapped) == expected, (filters, kind)
            cells += 1
            if got != expected:
                differ.add((_label(operator, value), kind))
                continue
            # search and count go through the same translation
            assert _outcome(_searched, qdrant, wrapped) == expected, (filters, kind)
            if expected != "error":
                assert qdrant.count_documents_by_filter(wrapped) == len(expected), filters
    assert cells == len(FILTERS) * (len(STORED) + 1)
    assert differ == KNOWN_DIFFERENCES, sorted(differ ^ KNOWN_DIFFERENCES)


@pytest.mark.parametrize(
    "key",
    [
        "tags[]",
        "tags[0]",
        "dotted.key",
        "a b",
        "x:y",
        "$price",
        "a/b",
        "user@host",
        "c++",
        "🦜",
        "",
        "nested",
    ],
)
def test_any_meta_key_is_a_plain_key(key):
    """No key is read as a Qdrant JSON path: each selects as Haystack selects (a dotted key is a path there too)."""
    docs = [
        Document(id="hit", content="a", meta={key: "v", "tags": ["v"], "nested": {"a": {"b": [{"c": "v"}]}}}),
        Document(id="miss", content="b", meta={key: "w", "dotted": {"key": "v"}}),
    ]
    store = QdrantMultiViewDocumentStore()
    store.write_documents(docs)
    for field in (f"meta.{key}", key, "meta.nested.a.b[1].c", "meta.nested.a.b.c", "meta.tags[]"):
        for operator, value in (("==", "v"), ("!=", "v"), ("==", None), ("in", ["v", "w"])):
            filters = {"field": field, "operator": operator, "value": value}
            expected = [d.id for d in docs if document_matches_filter(filters, d)]
            assert [d.id for d in store.filter_documents(filters)] == expected, filters


@pytest.mark.parametrize("field", ['meta."dotted.key"', 'meta.a"b', 'say"hi"', "meta.a\\b"])
def test_key_qdrant_cannot_name_selects_as_haystack(field):
    """A key with ``"`` or ``\\`` (no Qdrant key names it on a server) is checked in Python, as Haystack reads it."""
    docs = [
        Document(id="a", content="x", meta={"k": 1, '"dotted': {'key"': 1}, 'a"b': 1, 'say"hi"': 1, "a\\b": 1}),
        Document(id="b", content="y", meta={"k": 2}),
    ]
    store = QdrantMultiViewDocumentStore()
    store.write_documents(docs)
    for operator, value in (("==", 1), ("!=", 1), ("==", None)):
        filters = {"field": field, "operator": operator, "value": value}
        expected = [d.id for d in docs if document_matches_filter(filters, d)]
        assert [d.id for d in store.filter_documents(filters)] == expected, filters
    assert store.count_documents() == 2


@pytest.mark.parametrize("field", ["embedding", "blob", "sparse_embedding", "meta"])
def test_fields_qdrant_cannot_filter_are_a_clear_filter_error(field):
    with pytest.raises(FilterError, match=field):
        QdrantMultiViewDocumentStore().filter_documents({"field": field, "operator": "==", "value": None})


def test_string_against_number_raises_as_haystack_and_search_too():
    store = QdrantMultiViewDocumentStore()
    docs = [
        Document(id="a", content="x", meta={"n": "abc"}, embedding=[1.0, 0.0]),
        Document(id="b", content="y", meta={"n": 5}, embedding=[0.0, 1.0]),
    ]
    store.write_documents(docs)
    filters = {"field": "meta.n", "operator": ">", "value": 3}
    with pytest.raises(FilterError):
        [d for d in docs if document_matches_filter(filters, d)]
    for call in (
        lambda: store.filter_documents(filters),
        lambda: store.search([1.0, 0.0], top_k=2, filters=filters),
        lambda: store.count_documents_by_filter(filters),
        lambda: store.delete_by_filter(filters),
        lambda: store.update_by_filter(filters, {"x": 1}),
    ):
        with pytest.raises(FilterError, match="'a'"):
            call()
    assert store.count_documents() == 2  # nothing deleted or changed
    assert all("x" not in d.meta for d in store.filter_documents())


def test_filtered_search_exactly_top_k_with_python_checked_documents():
    """Documents only Python can decide (same instant, other time zone) are found by a filtered search too."""
    store = QdrantMultiViewDocumentStore()
    docs = [
        Document(id=f"d{i}", content=str(i), meta={"date": date}, embedding=[1.0, float(i)])
        for i, date in enumerate(["2021-06-01T12:00:00+02:00", "2021-06-01T10:00:00", "2021-06-01T10:00:00+00:00"])
    ]
    store.write_documents(docs)
    filters = {"field": "meta.date", "operator": "==", "value": "2021-06-01T10:00:00Z"}
    expected = [d.id for d in docs if document_matches_filter(filters, d)]
    assert len(expected) == 3
    assert sorted(d.id for d in store.search([1.0, 0.0], top_k=3, filters=filters)) == expected


def test_update_by_filter_to_an_empty_list_is_not_none():
    store = QdrantMultiViewDocumentStore()
    store.write_documents([Document(id="a", content="x", meta={"tags": ["a"]}), Document(id="b", content="y")])
    assert store.update_by_filter({"field": "meta.tags", "operator": "==", "value": ["a"]}, {"tags": []}) == 1
    docs = store.filter_documents()
    for value in (None, []):
        filters = {"field": "meta.tags", "operator": "==", "value": value}
        assert [d.id for d in store.filter_documents(filters)] == [
            d.id for d in docs if document_matches_filter(filters, d)
        ]


def test_malformed_filter_raises_even_where_haystack_evaluates_nothing():
    """Pinned difference: the store checks a filter's shape up front; Haystack only where it evaluates it."""
    filters = {"operator": "OR", "conditions": [{"field": "meta.n", "operator": "in", "value": "abc"}]}
    assert [d for d in [] if document_matches_filter(filters, d)] == []
    with pytest.raises(FilterError, match="list"):
        QdrantMultiViewDocumentStore().filter_documents(filters)


def test_empty_list_written_by_an_older_version_reads_as_none():
    """Pinned difference: a point without the empty-list marker (an older haystack-mvr wrote it) reads [] as None."""
    from haystack_mvr.document_stores.qdrant.filters import EMPTY_LIST_KEY

    store = QdrantMultiViewDocumentStore()
    store.write_documents([Document(id="a", content="x", meta={"tags": []})])
    filters = {"field": "meta.tags", "operator": "==", "value": None}
    assert store.filter_documents(filters) == []
    (point,), _ = store.client.scroll(store.index)
    store.client.delete_payload(store.index, keys=[EMPTY_LIST_KEY], points=[point.id])
    assert [d.id for d in store.filter_documents(filters)] == ["a"]
