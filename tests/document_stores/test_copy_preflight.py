"""copy_documents lets the target check the source's views (dimension, encoder) in its first write: a source whose
first batches carry no vectors no longer leaves them written in a target that then refuses the rest."""

from __future__ import annotations

import numpy as np
import pytest
from haystack import Document

pytest.importorskip("qdrant_client")

from haystack_mvr.document_stores import copy_documents
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore
from haystack_mvr.views import ENCODER_KEY, attach_views

ENCODER = {"model": "random-views", "mode": "snippet"}


def source_documents(dim: int = 8, plain: int = 10, with_views: int = 10) -> list[Document]:
    """``plain`` documents without vectors first, then ``with_views`` documents of 3 views each: first in write
    order (FAISS exports in it) and in Qdrant's point order (Qdrant exports in it)."""
    rng = np.random.default_rng(0)
    ids = qdrant_point_order([f"d{i}" for i in range(plain + with_views)])
    docs = [Document(id=i, content=f"Plain {i}.", meta={ENCODER_KEY: ENCODER}) for i in ids[:plain]]
    for i in ids[plain:]:
        doc = Document(id=i, content=f"Views {i}.", meta={ENCODER_KEY: ENCODER})
        docs.append(attach_views(doc, rng.normal(size=(3, dim)).astype(np.float32)))
    return docs


def qdrant_point_order(ids: list[str]) -> list[str]:
    """``ids`` in the order a Qdrant store exports them (its point order, a function of the ids alone)."""
    probe = QdrantMultiViewDocumentStore()
    probe.write_documents([Document(id=i, content=i) for i in ids])
    order = [d.id for batch in probe.export_documents(batch_size=1) for d in batch]
    probe.close()
    return order


@pytest.fixture(params=["faiss", "qdrant"])
def source(request):
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    if request.param == "qdrant":
        store = QdrantMultiViewDocumentStore(embedding_dim=8)
    store.write_documents(source_documents())
    yield store
    if hasattr(store, "close"):
        store.close()


def faiss_of_16() -> FaissMultiViewDocumentStore:
    target = FaissMultiViewDocumentStore(index_factory="Flat")
    target.write_documents([Document(id="kept", content="x", embedding=[1.0] * 16)])
    return target


def qdrant_of_16() -> QdrantMultiViewDocumentStore:
    target = QdrantMultiViewDocumentStore(embedding_dim=16)
    target.write_documents([Document(id="kept", content="x", embedding=[1.0] * 16)])
    return target


@pytest.mark.parametrize(
    ("make_target", "held"),
    [
        (faiss_of_16, 1),  # a FAISS index of another dimension
        (lambda: FaissMultiViewDocumentStore(embedding_dim=16), 0),  # an empty store given another dimension
        (qdrant_of_16, 1),  # a Qdrant collection of another dimension
        (lambda: QdrantMultiViewDocumentStore(embedding_dim=16), 0),  # a collection still to create
    ],
    ids=["faiss-index", "faiss-empty", "qdrant-collection", "qdrant-new"],
)
def test_another_dimension_is_refused_before_anything_is_written(source, make_target, held):
    target = make_target()
    with pytest.raises(ValueError, match="dimension"):
        copy_documents(source, target, batch_size=4)
    assert target.count_documents() == held


def test_a_qdrant_collection_without_vectors_is_refused_before_anything_is_written(source):
    target = QdrantMultiViewDocumentStore()  # no embedding_dim: created by documents without vectors
    target.write_documents([Document(id="kept", content="x")])
    with pytest.raises(ValueError, match="without vectors"):
        copy_documents(source, target, batch_size=4)
    assert target.count_documents() == 1


@pytest.mark.parametrize("kind", ["faiss", "qdrant"])
def test_another_encoder_is_refused_before_anything_is_written(source, kind):
    other = {"model": "other", "mode": "snippet"}
    if kind == "faiss":
        target = FaissMultiViewDocumentStore(index_factory="Flat", encoder_config=other)
    else:
        target = QdrantMultiViewDocumentStore(embedding_dim=8, encoder_config=other)
    with pytest.raises(ValueError, match="encode"):
        copy_documents(source, target, batch_size=4)
    assert target.count_documents() == 0


@pytest.mark.parametrize("kind", ["faiss", "qdrant", "qdrant-without-dim"])
def test_a_compatible_target_gets_every_document(source, kind):
    """Also a new Qdrant collection without embedding_dim: the first write carries views, so it is created for them."""
    if kind == "faiss":
        target = FaissMultiViewDocumentStore(index_factory="Flat")
    else:
        target = QdrantMultiViewDocumentStore(embedding_dim=8 if kind == "qdrant" else None)
    assert copy_documents(source, target, batch_size=4) == 20
    exported = [d.id for batch in source.export_documents(batch_size=4) for d in batch]
    copied = [d.id for d in target.filter_documents()]
    assert sorted(copied) == sorted(exported)
    if isinstance(source, FaissMultiViewDocumentStore):  # written in the source's order, but for one document:
        with_views = {d.id for d in source_documents() if d.content.startswith("Views")}
        first_with_views = next(i for i in exported if i in with_views)
        exported.remove(first_with_views)  # the first with views goes with the first batch, which has none
        exported.insert(4, first_with_views)
        assert copied == exported
