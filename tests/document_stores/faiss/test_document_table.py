"""The FAISS store's document table: documents held as their saved JSON lines, invisible to the garbage collector."""

import gc
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.errors import DocumentStoreError

from haystack_mvr.document_stores.compiled_filters import reads_only_meta
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.document_stores.faiss.document_table import DocumentTable, document_line
from haystack_mvr.views import SPANS_KEY, attach_views


def _documents(n: int, offset: int = 0) -> list[Document]:
    rng = np.random.default_rng(offset)
    out = []
    for i in range(offset, offset + n):
        views = rng.standard_normal((4, 8)).astype(np.float32)
        doc = Document(id=f"d{i}", content="a b c d e f g h", meta={"page": i, "title": f"t{i % 7}", "ok": i % 2 == 0})
        out.append(attach_views(doc, views, [(0, 1), (2, 3), (4, 5), None]))
    return out


def _tracked() -> int:
    gc.collect()
    return len(gc.get_objects())


def _oldest_generation_growth(action: Callable[[], Any]) -> tuple[int, Any]:
    """How far the collector's oldest generation grew past its size before ``action`` (at the largest, seen after
    each collection of an older generation than the youngest during it), and what ``action`` returned."""
    oldest = []

    def watch(phase: str, info: dict) -> None:
        if phase == "stop" and info["generation"] >= 1:
            oldest.append(len(gc.get_objects(generation=2)))

    gc.collect()
    before = len(gc.get_objects(generation=2))
    gc.callbacks.append(watch)
    thresholds = gc.get_threshold()
    gc.set_threshold(100, 2, 10)  # collections every few hundred allocations: the action cannot slip between them
    try:
        result = action()
    finally:
        gc.set_threshold(*thresholds)
        gc.callbacks.remove(watch)
    assert oldest, "no collection ran during the action"
    return max(oldest) - before, result


def test_stored_documents_add_no_objects_for_the_garbage_collector_to_traverse():
    store = FaissMultiViewDocumentStore(embedding_dim=8)
    store.write_documents(_documents(10))  # the first write builds the view index
    documents = _documents(3000, offset=10)
    before = _tracked()
    store.write_documents(documents)
    del documents
    grown = _tracked() - before
    # a Document, its meta and its spans' lists were about ten tracked objects a document: 30,000 here
    assert store.count_documents() == 3010
    assert grown < 100


def test_a_loaded_store_adds_no_objects_for_the_garbage_collector_to_traverse(tmp_path):
    store = FaissMultiViewDocumentStore(embedding_dim=8)
    store.write_documents(_documents(3000))
    store.save(tmp_path / "s")
    before = _tracked()
    loaded = FaissMultiViewDocumentStore(embedding_dim=8)
    loaded.load(tmp_path / "s")
    assert _tracked() - before < 200
    assert loaded.filter_documents({"field": "meta.page", "operator": "==", "value": 7})[0].meta[SPANS_KEY] == [
        [0, 1],
        [2, 3],
        [4, 5],
        None,
    ]


def test_every_read_builds_a_new_document():
    store = FaissMultiViewDocumentStore(embedding_dim=8)
    store.write_documents(_documents(3))
    first = store.filter_documents()[0]
    first.meta["title"] = "changed"
    first.meta[SPANS_KEY][0][0] = 99
    again = store.filter_documents()[0]
    assert again.meta["title"] == "t0" and again.meta[SPANS_KEY][0] == [0, 1]
    hit = store.search(np.ones(8, dtype=np.float32), top_k=3)[0]
    hit.meta["page"] = -1
    assert store.search(np.ones(8, dtype=np.float32), top_k=3)[0].meta["page"] != -1


@pytest.mark.parametrize(
    ("filters", "meta_only"),
    [
        ({"field": "meta.page", "operator": ">", "value": 3}, True),
        ({"field": "meta.a.b", "operator": "==", "value": 3}, True),
        ({"operator": "AND", "conditions": [{"field": "meta.page", "operator": "<", "value": 3}]}, True),
        ({"operator": "NOT", "conditions": [{"field": "meta.x", "operator": "in", "value": [1]}]}, True),
        ({"field": "content", "operator": "==", "value": "x"}, False),  # the document's own field
        ({"field": "id", "operator": "==", "value": "d1"}, False),
        ({"field": "page", "operator": "==", "value": 1}, False),  # a bare name: Haystack looks at fields first
        ({"field": f"meta.{SPANS_KEY}", "operator": "==", "value": None}, False),  # not in the table's meta
        ({"field": "meta.page", "operator": "~", "value": 1}, False),  # malformed: raises as Haystack does
        ({"field": "meta.page", "operator": "=="}, False),
        ({"operator": "XOR", "conditions": []}, False),
        ({"operator": "AND", "conditions": "meta.page"}, False),
    ],
)
def test_which_filters_read_only_the_tables_meta(filters, meta_only):
    assert reads_only_meta(filters, skip=(SPANS_KEY,)) is meta_only


@pytest.mark.parametrize(
    "filters",
    [
        {"field": "meta.page", "operator": ">", "value": 2995},
        {"field": "content", "operator": "==", "value": "a b c d e f g h"},
        {"field": "id", "operator": "in", "value": ["d3", "d4", "nope"]},
        {"field": f"meta.{SPANS_KEY}", "operator": "==", "value": None},
    ],
)
def test_filters_on_meta_and_on_other_fields_agree_with_haystack(filters):
    from haystack.utils.filters import document_matches_filter

    store = FaissMultiViewDocumentStore(embedding_dim=8)
    store.write_documents(_documents(3000))
    everything = store.filter_documents()
    expected = [d.id for d in everything if document_matches_filter(filters, d)]
    assert [d.id for d in store.filter_documents(filters)] == expected


def test_meta_json_writes_as_nan_is_stored_read_and_saved(tmp_path):
    store = FaissMultiViewDocumentStore(embedding_dim=8)
    doc = _documents(1)[0]
    doc.meta["score_hint"] = math.nan
    store.write_documents([doc])
    assert math.isnan(store.filter_documents()[0].meta["score_hint"])
    store.save(tmp_path / "s")
    loaded = FaissMultiViewDocumentStore(embedding_dim=8)
    loaded.load(tmp_path / "s")
    assert math.isnan(loaded.filter_documents()[0].meta["score_hint"])


def test_a_table_keeps_write_order_and_an_update_keeps_the_place():
    table = DocumentTable()
    for i in range(3):
        doc = Document(id=f"d{i}", content="x", meta={"i": i})
        table.put(doc.id, document_line(doc), dict(doc.meta))
    table.put("d0", document_line(Document(id="d0", content="y", meta={"i": 9})), {"i": 9})
    assert table.ids() == ["d0", "d1", "d2"] and table.document("d0").content == "y"
    table.delete("d0")
    table.put("d0", document_line(Document(id="d0", content="z")), {})
    assert table.ids() == ["d1", "d2", "d0"] and table.meta_rows(["d0"])[0].meta == {}


def test_the_store_keeps_its_own_copy_of_each_id():
    """The caller's id string sits among the document's freed floats; kept, it would keep their memory resident."""
    store = FaissMultiViewDocumentStore(embedding_dim=8)
    documents = [*_documents(2), Document(id="é-plain", content="no vectors")]
    store.write_documents(documents)
    kept = store._documents.ids()
    assert kept == [d.id for d in documents]
    assert all(k is not d.id for k, d in zip(kept, documents, strict=True))
    assert all(k in store._key_of for k in kept)


def test_a_load_never_holds_the_whole_files_records_for_the_collector():
    # 20,000 parsed records held at once were promoted to the oldest generation (and, past a quarter of the process's
    # objects, set off a full collection); a load drops each chunk's records before the next is parsed
    data = b"\n".join(document_line(d) for d in _documents(20_000)) + b"\n"
    grown, (table, ids, _) = _oldest_generation_growth(lambda: DocumentTable.from_jsonl(data, "test"))
    assert len(table) == len(ids) == 20_000
    assert grown < 5_000


@pytest.mark.parametrize(("line", "bad"), [(300, b"{not json"), (700, b"[1, 2]")])
def test_a_bad_line_past_the_first_chunk_is_named_by_its_number(line, bad):
    lines = [document_line(d) for d in _documents(1_000)]
    lines[line - 1] = bad
    with pytest.raises(DocumentStoreError, match=f"documents.jsonl line {line} is not a Document"):
        DocumentTable.from_jsonl(b"\n".join(lines) + b"\n", "the copy")


def test_a_write_never_holds_its_batchs_prepared_copies_for_the_collector():
    # each prepared copy (a Document, its meta, its span lists) lived until the whole batch was prepared: 3,000 of them
    # outlived the young generations (about 33,000 objects promoted, 11 a document); a write keeps each document's
    # line instead (what is left: the caller's own Document's __dict__, made when a copy reads it)
    store = FaissMultiViewDocumentStore(embedding_dim=8)
    store.write_documents(_documents(10))
    documents = _documents(3000, offset=10)
    grown, _ = _oldest_generation_growth(lambda: store.write_documents(documents))
    assert store.count_documents() == 3010
    assert grown < 2 * 3000
