"""What the FAISS store refuses at write, and what it converts (issue 28): meta JSON cannot hold, numpy numbers in
meta, views (and queries) long enough to overflow float32 scores. Each refusal names the document and loses nothing."""

from __future__ import annotations

import dataclasses
import datetime
import json
import re

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.types import DuplicatePolicy

from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.views import VIEWS_KEY, attach_views


def doc(doc_id: str, views=((1.0, 0.0, 0.0, 0.0),), **meta) -> Document:
    return Document(id=doc_id, content="x", meta={VIEWS_KEY: np.asarray(views, dtype=np.float32), **meta})


def saved_and_loaded(store: FaissMultiViewDocumentStore, path) -> FaissMultiViewDocumentStore:
    store.save(path)
    return FaissMultiViewDocumentStore(index_path=str(path))


def test_numpy_numbers_in_meta_are_stored_as_python_numbers(tmp_path):
    """np.float32 / np.int64 meta (common from upstream components) were accepted, then every save failed with a
    bare TypeError naming no document."""
    store = FaissMultiViewDocumentStore()
    meta = {
        "f": np.float32(0.5),
        "i": np.int64(7),
        "b": np.bool_(True),
        "d": np.float64(0.25),
        "nested": {"scores": [np.float32(1.5), np.int32(2)], "pair": (np.uint8(3), "s")},
        "s": np.str_("text"),
    }
    store.write_documents([doc("a", **meta)])
    expected = {"f": 0.5, "i": 7, "b": True, "d": 0.25, "nested": {"scores": [1.5, 2], "pair": [3, "s"]}, "s": "text"}
    for source in (store, saved_and_loaded(store, tmp_path / "s")):
        stored = source.filter_documents()[0].meta
        assert stored == expected
        assert [type(stored[k]) for k in ("f", "i", "b")] == [float, int, bool]
        assert type(stored["nested"]["scores"][1]) is int
    assert store.filter_documents({"field": "meta.i", "operator": ">", "value": 6})[0].id == "a"


@pytest.mark.parametrize(
    ("value", "field", "kind"),
    [
        (datetime.date(2024, 1, 2), "'when'", "date"),
        ({1, 2}, "'when'", "set"),
        (b"raw", "'when'", "bytes"),
        (object(), "'when'", "object"),
        ({"inner": [1, datetime.datetime(2024, 1, 2)]}, "'when.inner[1]'", "datetime"),
        ({3: "x"}, "'when' has the key 3", "int"),
        (np.datetime64("2024-01-02"), "'when'", "datetime64"),
        (np.zeros(3), "'when'", "ndarray"),
    ],
)
def test_meta_json_cannot_hold_is_refused_naming_document_and_field(tmp_path, value, field, kind):
    store = FaissMultiViewDocumentStore()
    store.write_documents([doc("kept", lang="en")])
    batch = [doc("new"), doc("kept", views=[[0.0, 1.0, 0.0, 0.0]], when=value)]
    message = rf"Document 'kept': meta field {re.escape(field)}.*{kind}.*Nothing was written"
    with pytest.raises(ValueError, match=message):
        store.write_documents(batch, policy=DuplicatePolicy.OVERWRITE)
    assert [(d.id, d.meta) for d in store.filter_documents()] == [("kept", {"lang": "en"})]
    assert store.search([1.0, 0.0, 0.0, 0.0], top_k=3)[0].score == pytest.approx(1.0)
    assert saved_and_loaded(store, tmp_path / "s").count_documents() == 1  # saving still works


def test_a_non_string_meta_key_is_refused():
    store = FaissMultiViewDocumentStore()
    bad = doc("k")
    bad.meta[5] = "five"
    with pytest.raises(ValueError, match=r"Document 'k': its meta has the key 5 \(int\)"):
        store.write_documents([bad])
    assert store.count_documents() == 0


def test_update_by_filter_refuses_and_converts_the_same_way(tmp_path):
    store = FaissMultiViewDocumentStore()
    store.write_documents([doc("a", n=1), doc("b", n=2)])
    everything = {"field": "meta.n", "operator": ">", "value": 0}
    with pytest.raises(ValueError, match=r"update_by_filter: meta field 'day' holds a date"):
        store.update_by_filter(everything, {"day": datetime.date(2024, 1, 2)})
    assert [d.meta for d in store.filter_documents()] == [{"n": 1}, {"n": 2}]
    assert store.update_by_filter(everything, {"score": np.float32(0.5)}) == 2
    loaded = saved_and_loaded(store, tmp_path / "s")
    assert [d.meta for d in loaded.filter_documents()] == [{"n": 1, "score": 0.5}, {"n": 2, "score": 0.5}]


def test_an_embedding_of_numpy_numbers_is_saved(tmp_path):
    """An embedding kept beside the views (it differs from view 0) given as numpy numbers is saved as numbers."""
    store = FaissMultiViewDocumentStore()
    views = attach_views(Document(id="own", content="x"), np.eye(2, 4, dtype=np.float32))
    own = dataclasses.replace(views, embedding=list(np.array([0.5, 0.25, 0.0, 1.0], dtype=np.float32)))
    store.write_documents([own])
    loaded = saved_and_loaded(store, tmp_path / "s")
    assert loaded.filter_documents()[0].embedding == [0.5, 0.25, 0.0, 1.0]
    folder = next((tmp_path / "s").glob("v-*"))
    assert json.loads((folder / "documents.jsonl").read_text())["embedding"] == [0.5, 0.25, 0.0, 1.0]


@pytest.mark.parametrize(
    ("factory", "options"),
    [
        ("Flat", {}),  # rows checked while they are added to the index
        ("HNSW8", {}),  # checked before anything is added (HNSW cannot remove rows)
        ("PQ2x4", {"train_size": 10_000}),  # staged: checked while copied
        ("IVF2,Flat", {"train_size": 16}),  # trained by the first write: rows checked while added
    ],
)
def test_views_long_enough_to_overflow_float32_scores_are_refused(factory, options):
    """Finite views of 1e19 gave inf scores (their inner product with a similar vector passes float32's 3.4e38),
    which broke fusion and thresholds."""
    rng = np.random.default_rng(0)
    store = FaissMultiViewDocumentStore(index_factory=factory, search_threads=1, **options)
    first = [doc(f"a{i}", views=rng.standard_normal((2, 4))) for i in range(20)]
    store.write_documents(first)
    huge = np.full((3, 4), 1e19, dtype=np.float32)
    batch = [doc(f"b{i}", views=rng.standard_normal((2, 4))) for i in range(50)] + [doc("huge", views=huge)]
    with pytest.raises(ValueError, match=r"Document 'huge': views view 0 has an L2 norm of 2e\+19, above the 1e\+18"):
        store.write_documents(batch)
    with pytest.raises(ValueError, match=r"Document 'a3': .*L2 norm of 2e\+19"):  # a skipped duplicate is checked too
        store.write_documents([doc("a3", views=huge)], policy=DuplicatePolicy.SKIP)
    assert store.count_documents() == 20 and store._views.ntotal == 40
    assert {h.id for h in store.search(np.ones(4), top_k=50)} == {d.id for d in first}
    large = np.full((2, 4), 4e17, dtype=np.float32)  # L2 norm 8e17: accepted, and its scores are finite
    store.write_documents([doc("large", views=large)])
    hit = store.search(np.full(4, 2e17), top_k=1)[0]
    assert hit.id == "large" and np.isfinite(hit.score) and hit.score == pytest.approx(3.2e35, rel=1e-5)


def test_queries_long_enough_to_overflow_float32_scores_are_refused():
    store = FaissMultiViewDocumentStore()
    store.write_documents([doc("a")])
    with pytest.raises(ValueError, match=r"query_embedding: query 0 has an L2 norm of 2e\+19, above the 1e\+18"):
        store.search([1e19, 1e19, 1e19, 1e19], top_k=1)
    with pytest.raises(ValueError, match=r"query_embeddings: query 1 has an L2 norm"):
        store.search_batch([[1.0, 0, 0, 0], [0, 0, 0, 3e18]], top_k=1)
    with pytest.raises(ValueError, match="NaN"):
        store.search([np.nan, 0, 0, 0], top_k=1)
