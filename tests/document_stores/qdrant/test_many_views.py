"""Documents with hundreds of views (issue 31): written, found with their matched view, and Qdrant's cap.

A document is one point and its views one multivector, which Qdrant caps at ``MAX_MULTIVECTOR_FLOATS`` numbers
(2,730 views at d=384). The policy: a document over the cap is a ``ValueError`` naming it, its view count and the
cap, raised before anything of its batch is written. Upserts are cut by numbers as well as by points, so a batch
of many-view documents stays within a server's request size limit.
"""

from __future__ import annotations

import numpy as np
import pytest
from haystack import Document

pytest.importorskip("qdrant_client")

from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore, converters
from haystack_mvr.document_stores.qdrant.point_writes import MAX_REQUEST_FLOATS, request_batches
from haystack_mvr.document_stores.writes import prepare_document
from haystack_mvr.views import (
    MATCHED_SCOPE_KEY,
    MATCHED_TEXT_KEY,
    MATCHED_VIEW_KEY,
    attach_views,
    document_views,
)

DIM = 384


def long_document(doc_id: str, n_views: int, rng: np.random.Generator) -> Document:
    """A document of ``n_views - 1`` sentences: view 0 the whole document, view i sentence i - 1."""
    sentences = [f"{doc_id} sentence number {i}." for i in range(n_views - 1)]
    content = " ".join(sentences)
    spans, start = [None], 0
    for s in sentences:
        spans.append((start, start + len(s)))
        start += len(s) + 1
    views = rng.normal(size=(n_views, DIM)).astype(np.float32)
    return attach_views(Document(id=doc_id, content=content), views, spans)


def test_documents_with_hundreds_of_views_are_found_by_their_matched_view(store):
    rng = np.random.default_rng(0)
    big = [long_document(f"long{i}", 500, rng) for i in range(3)]
    small = [
        attach_views(Document(id=f"s{i}", content="short"), rng.normal(size=(2, DIM)).astype(np.float32))
        for i in range(10)
    ]
    assert store.write_documents(big + small) == 13
    target = document_views(big[1])[437]
    hits = store.search(target.tolist(), top_k=3)
    assert hits[0].id == "long1"
    assert hits[0].meta[MATCHED_VIEW_KEY] == 437 and hits[0].meta[MATCHED_SCOPE_KEY] == "snippet"
    assert hits[0].meta[MATCHED_TEXT_KEY] == "long1 sentence number 436."
    assert hits[0].score == pytest.approx(float(target @ target), rel=1e-5)
    full = store.search(target.tolist(), top_k=1, return_embedding=True)[0]
    np.testing.assert_array_equal(document_views(full), document_views(big[1]))


def test_a_document_at_the_cap_is_taken_and_one_over_is_refused_before_anything_is_written():
    store = QdrantMultiViewDocumentStore()
    rng = np.random.default_rng(1)
    at_cap = converters.MAX_MULTIVECTOR_FLOATS // DIM  # 2,730 views at d=384
    store.write_documents([attach_views(Document(id="kept", content="x"), np.ones((2, DIM), np.float32))])
    over = attach_views(Document(id="too-long", content="x"), rng.normal(size=(at_cap + 1, DIM)).astype(np.float32))
    fine = attach_views(Document(id="fine", content="x"), np.ones((3, DIM), np.float32))
    with pytest.raises(ValueError, match=r"'too-long' has 2731 views .*at most 1,048,576 numbers .*2,730 views"):
        store.write_documents([fine, over])
    assert [d.id for d in store.filter_documents()] == ["kept"]
    largest = rng.normal(size=(at_cap, DIM)).astype(np.float32)
    assert store.write_documents([attach_views(Document(id="largest", content="x"), largest)]) == 1
    hit = store.search(largest[2729].tolist(), top_k=1)[0]
    assert hit.id == "largest" and hit.meta[MATCHED_VIEW_KEY] == 2729


def test_upserts_are_cut_by_numbers_as_well_as_points():
    def prepared(doc_id, n_views):
        return prepare_document(attach_views(Document(id=doc_id, content="x"), np.zeros((n_views, DIM), np.float32)))

    many_views = [prepared(f"m{i}", 1500) for i in range(5)]  # 576,000 numbers each
    batches = list(request_batches(many_views, max_points=64))
    assert [len(b) for b in batches] == [1, 1, 1, 1, 1]
    small = [prepared(f"s{i}", 2) for i in range(150)]
    assert [len(b) for b in request_batches(small, max_points=64)] == [64, 64, 22]
    mixed = [prepared("a", 1000), prepared("b", 1000), prepared("c", 800), prepared("d", 1)]
    cut = [[p.document.id for p in b] for b in request_batches(mixed, max_points=64)]
    assert cut == [["a", "b"], ["c", "d"]]
    assert all(sum(p.views.size for p in b) <= MAX_REQUEST_FLOATS for b in request_batches(mixed, 64))


def test_a_large_batch_of_many_view_documents_goes_in_several_requests():
    store = QdrantMultiViewDocumentStore()
    rng = np.random.default_rng(2)
    docs = [long_document(f"long{i}", 1200, rng) for i in range(4)]  # 460,800 numbers each
    client = store.client
    sizes = []
    upsert = client.upsert

    def counting_upsert(collection_name, points, **kwargs):
        sizes.append(len(points))
        return upsert(collection_name, points=points, **kwargs)

    client.upsert = counting_upsert
    assert store.write_documents(docs) == 4
    assert sizes == [2, 2]
    assert store.search(document_views(docs[3])[5].tolist(), top_k=1)[0].meta[MATCHED_VIEW_KEY] == 5
