"""Haystack filters compiled to SQL: the pgvector store selects exactly what ``document_matches_filter`` selects.

The grid is the Qdrant store's (``tests/document_stores/qdrant/test_filter_grid.py``): every comparison operator
against every kind of stored value, each under its own meta key; the store must agree with Haystack on every cell,
for ``filter_documents``, ``search`` and ``count_documents_by_filter``, raising where Haystack raises. Then meta keys
and filter fields full of SQL (quotes, semicolons, comments): they are parameters, never SQL text.
"""

from __future__ import annotations

import pytest

from .conftest import require_server

require_server()

from datetime import UTC, datetime  # noqa: E402

from haystack import Document  # noqa: E402
from haystack.errors import FilterError  # noqa: E402
from haystack.utils import Secret  # noqa: E402
from haystack.utils.filters import document_matches_filter  # noqa: E402

from haystack_mvr.document_stores.pgvector import PgvectorMultiViewDocumentStore  # noqa: E402
from haystack_mvr.document_stores.pgvector.filters import convert_filters  # noqa: E402

from .conftest import drop_tables, new_table_name  # noqa: E402

#: Stored value kinds: the key of each is ``v_<kind>`` (the Qdrant grid's, and large numbers).
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
    "date_hour": "2021-06-01T12",
    "list_str": ["abc", "def"],
    "list_int": [1, 3],
    "list_one": [1],
    "empty_list": [],
    "list_null": [None],
    "dict": {"a": 1},
    "null": None,
    "big_int": 2**60,
    "big_float": 2.0**60,
}

FILTERS = [
    *((op, v) for op in ("==", "!=") for v in (1, True, 0, False, 3, 2.5, "abc", "", None, 2**60, 2.0**60)),
    *((op, v) for op in ("==", "!=") for v in ("2021-06-01T12:00:00", "2021-06-01T10:00:00+00:00", "2021-06-01")),
    *(("==", v) for v in (["abc", "def"], [1, 3], [1], [], {"a": 1}, [None])),
    ("==", datetime(2021, 6, 1, 10, tzinfo=UTC)),
    *((op, v) for op in (">", ">=", "<", "<=") for v in (2, 1, True, 2.5, None, 2**60, float("nan"))),
    *((op, v) for op in (">", "<=") for v in ("2021-06-01T11:00:00", "2021-06-01T11:00:00+01:00", "abc", [1])),
    (">=", datetime(2021, 6, 1, 12)),
    *((op, v) for op in ("in", "not in") for v in ([1, "abc"], [None], [], [True], [[1, 3]], ["2021-06-01"])),
    ("in", "abc"),
]


def _documents() -> list[Document]:
    docs = [Document(id="d_missing", content="missing", meta={"other": 1}, embedding=[1.0, 0.0])]
    for i, (kind, value) in enumerate(STORED.items()):
        docs.append(Document(id=f"d_{kind}", content=kind, meta={f"v_{kind}": value}, embedding=[1.0, i / 100]))
    return docs


def _outcome(select) -> object:
    try:
        return sorted(select())
    except (FilterError, TypeError):  # Haystack raises TypeError comparing a list or a dict with a number
        return "error"


@pytest.fixture(scope="module")
def grid_store(pg_uri):
    table = new_table_name()
    store = PgvectorMultiViewDocumentStore(connection_string=Secret.from_token(pg_uri), table_name=table)
    docs = _documents()
    store.write_documents(docs)
    yield docs, store
    store.close()
    drop_tables(pg_uri, table)


def _grid(docs: list[Document], store, logic: str) -> None:
    """Each cell as a filter under ``logic`` (AND: the comparison itself; NOT: its negation); a sample of them also
    through search and count (the same SQL)."""
    differ, cells = [], 0
    for operator, value in FILTERS:
        for kind in [*STORED, "missing"]:
            condition = {"field": f"meta.v_{kind}", "operator": operator, "value": value}
            filters = {"operator": logic, "conditions": [condition]}
            expected = _outcome(lambda f=filters: [d.id for d in docs if document_matches_filter(f, d)])
            got = _outcome(lambda f=filters: [d.id for d in store.filter_documents(f)])
            if got != expected:
                differ.append((filters, expected, got))
                continue
            cells += 1
            if cells % 9 == 0:
                hits = _outcome(lambda f=filters: [d.id for d in store.search([1.0, 0.0], top_k=50, filters=f)])
                assert hits == expected, filters
                if expected != "error":
                    assert store.count_documents_by_filter(filters) == len(expected), filters
    assert differ == []
    assert cells == len(FILTERS) * (len(STORED) + 1)


def test_every_operator_against_every_stored_type(grid_store):
    _grid(*grid_store, "AND")


@pytest.mark.slow
def test_every_operator_against_every_stored_type_negated(grid_store):
    _grid(*grid_store, "NOT")


def test_id_content_and_fields_outside_meta(grid_store):
    docs, store = grid_store
    for filters in (
        {"field": "id", "operator": "in", "value": ["d_int", "d_str", "nope"]},
        {"field": "content", "operator": "==", "value": "str"},
        {"field": "content", "operator": "!=", "value": None},
        {"field": "content", "operator": ">", "value": "2021-01-01"},
        {"field": "score", "operator": "==", "value": None},
        {"field": "content.x", "operator": "==", "value": None},
        {"field": "v_int", "operator": "==", "value": 3},  # a legacy filter: a bare meta key
        {"field": "meta.v_dict.a", "operator": "==", "value": 1},
        {"field": "meta.v_list_int.0", "operator": "==", "value": 1},  # never read through a list
    ):
        expected = _outcome(lambda f=filters: [d.id for d in docs if document_matches_filter(f, d)])
        assert _outcome(lambda f=filters: [d.id for d in store.filter_documents(f)]) == expected, filters


@pytest.mark.parametrize("field", ["embedding", "blob", "sparse_embedding", "meta"])
def test_fields_the_store_cannot_filter_are_a_clear_filter_error(field):
    with pytest.raises(FilterError, match=field):
        convert_filters({"field": field, "operator": "==", "value": None})


def test_string_against_number_raises_as_haystack_everywhere(make_store):
    store = make_store()
    store.write_documents(
        [
            Document(id="a", content="x", meta={"n": "abc"}, embedding=[1.0, 0.0]),
            Document(id="b", content="y", meta={"n": 5}, embedding=[0.0, 1.0]),
        ]
    )
    filters = {"field": "meta.n", "operator": ">", "value": 3}
    for call in (
        lambda: store.filter_documents(filters),
        lambda: store.search([1.0, 0.0], top_k=2, filters=filters),
        lambda: store.count_documents_by_filter(filters),
        lambda: store.delete_by_filter(filters),
        lambda: store.update_by_filter(filters, {"x": 1}),
    ):
        with pytest.raises(FilterError, match="'a'"):
            call()
    assert store.count_documents() == 2


INJECTIONS = [
    "x'; DROP TABLE public.victim; --",
    'a"b',
    "a') OR TRUE --",
    "k; SELECT pg_sleep(10)",
    "$1",
    "%s",
    "{}",
    "\\",
    "🦜 -- */ /*",
]


@pytest.mark.parametrize("key", INJECTIONS)
def test_sql_in_meta_keys_and_filter_fields_is_only_data(make_store, pg_uri, key):
    import psycopg

    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS public.victim (x int)")
    store = make_store()
    docs = [
        Document(id=key, content=key, meta={key: key, "nested": {key: 1}}, embedding=[1.0, 0.0]),
        Document(id="other", content="o", meta={key: "no"}, embedding=[0.0, 1.0]),
    ]
    assert store.write_documents(docs) == 2
    for field in (f"meta.{key}", key, f"meta.nested.{key}", "id", "content"):
        for operator, value in (("==", key), ("!=", key), ("in", [key, 1]), ("==", 1), ("==", None)):
            filters = {"field": field, "operator": operator, "value": value}
            expected = sorted(d.id for d in docs if document_matches_filter(filters, d))
            assert sorted(d.id for d in store.filter_documents(filters)) == expected, filters
    store.update_by_filter({"field": "id", "operator": "==", "value": key}, {key: "updated"})
    assert store.filter_documents({"field": "id", "operator": "==", "value": key})[0].meta[key] == "updated"
    assert store.delete_by_filter({"field": "content", "operator": "==", "value": "o"}) == 1
    with psycopg.connect(pg_uri, autocommit=True) as conn:  # nothing ran as SQL: the table is still there
        assert conn.execute("SELECT to_regclass('public.victim')").fetchone()[0] is not None


def test_sql_in_a_table_name_is_only_a_name(make_store):
    store = make_store(table_name='t"; DROP TABLE public.victim; --', schema_name="odd schema")
    store.write_documents([Document(id="a", content="x", embedding=[1.0, 0.0])])
    assert [d.id for d in store.search([1.0, 0.0], top_k=1)] == ["a"]
