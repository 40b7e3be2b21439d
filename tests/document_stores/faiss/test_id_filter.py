"""An ``id in [...]`` filter is looked up, not tested on every document: same results as Haystack, in write order,
and its cost follows the ids asked for (the context builder's candidates), not the store."""

from __future__ import annotations

import numpy as np
import pytest
from haystack import Document
from haystack.errors import FilterError
from haystack.utils.filters import document_matches_filter

from haystack_mvr.document_stores.compiled_filters import id_filter_members
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore, document_table
from haystack_mvr.views import attach_views

IDS = ["a", "b", "2024-01-01", "2024-01-01T00:00:00", "c", "x" * 3, "2024-02-30"]


def _store() -> tuple[FaissMultiViewDocumentStore, list[Document]]:
    rng = np.random.default_rng(0)
    docs = [attach_views(Document(id=i, content=f"text {i}"), rng.normal(size=(2, 4)).astype("float32")) for i in IDS]
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    store.write_documents(docs)
    return store, [Document(id=i, content=f"text {i}") for i in IDS]


@pytest.mark.parametrize(
    ("filters", "members"),
    [
        ({"field": "id", "operator": "in", "value": ["a", "b"]}, {"a", "b"}),
        ({"field": "id", "operator": "in", "value": []}, set()),
        ({"field": "id", "operator": "in", "value": ["a", "2024-01-01"]}, None),  # Haystack matches dates as instants
        ({"field": "id", "operator": "in", "value": ["a", 1]}, None),
        ({"field": "id", "operator": "in", "value": "a"}, None),  # Haystack raises: the filter is compiled
        ({"field": "id", "operator": "==", "value": "a"}, None),
        ({"field": "meta.id", "operator": "in", "value": ["a"]}, None),
        ({"operator": "AND", "conditions": [{"field": "id", "operator": "in", "value": ["a"]}]}, None),
    ],
)
def test_only_a_plain_id_list_is_looked_up(filters, members):
    found = id_filter_members(filters)
    assert (found if found is None else set(found)) == members


@pytest.mark.parametrize(
    "value",
    [["a"], ["c", "a", "missing", "a"], [], ["xxx", "b", "2024-02-30"], ["2024-01-01", "a"], IDS[::-1]],
)
def test_id_filters_match_what_haystack_matches_in_write_order(value):
    store, docs = _store()
    filters = {"field": "id", "operator": "in", "value": value}
    expected = [d.id for d in docs if document_matches_filter(filters, d)]
    assert [d.id for d in store.filter_documents(filters)] == expected
    assert store.count_documents_by_filter(filters) == len(expected)
    store.write_documents(  # an overwrite moves "a" to the end of the write order, as a new write
        [attach_views(Document(id="a", content="again"), np.ones((1, 4), dtype="float32"))], policy="overwrite"
    )
    order = [i for i in IDS if i != "a"] + ["a"]
    assert [d.id for d in store.filter_documents(filters)] == [i for i in order if i in expected]
    if value:
        found = store.search(np.ones(4, dtype="float32"), top_k=len(IDS), filters=filters)
        assert sorted(d.id for d in found) == sorted(set(expected))


def test_a_malformed_id_filter_still_raises_as_haystack_does():
    store, _ = _store()
    with pytest.raises(FilterError):
        store.filter_documents({"field": "id", "operator": "in", "value": "a"})


def test_an_id_filter_builds_only_the_documents_it_returns(monkeypatch):
    store, _ = _store()
    built = []
    for name in ("document_from_line", "record_from_line"):  # a whole Document, or the fields a result is built from
        real = getattr(document_table, name)
        monkeypatch.setattr(document_table, name, lambda line, real=real: built.append(line) or real(line))
    store.search(np.ones(4, dtype="float32"), top_k=2, filters={"field": "id", "operator": "in", "value": ["a", "b"]})
    assert len(built) == 2
