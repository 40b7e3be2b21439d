"""The FAISS store's search plan, made once per change of the rows: every change is seen by the next search."""

import faiss
import numpy as np
import pytest
from haystack import Document

from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.views import attach_views


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    rows = rng.standard_normal((n, 16)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize("factory", ["HNSW32", "Flat"])
def test_a_search_after_a_write_or_a_delete_sees_it(factory):
    rng = np.random.default_rng(0)
    store = FaissMultiViewDocumentStore(embedding_dim=16, index_factory=factory)
    store.write_documents([attach_views(Document(id=f"d{i}", content="x"), _unit(rng, 3)) for i in range(200)])
    query = _unit(rng, 1)[0]
    for search in (lambda: store.search(query, top_k=3), lambda: store.search_batch(query[None], top_k=3)[0]):
        before = search()
        assert len(before) == 3 and "new" not in {d.id for d in before}
        store.write_documents([attach_views(Document(id="new", content="x"), np.stack([query, -query]))])
        assert search()[0].id == "new"  # the plan of the search before was made for fewer rows
        store.delete_documents(["new"])
        assert [d.id for d in search()] == [d.id for d in before]


def test_a_plan_that_reads_the_graphs_search_depth_is_made_again_each_search():
    # with tombstones an HNSW search carries an id selector and efSearch copied from the index when planned: such a
    # plan is never kept, so a changed efSearch (set on the FAISS index itself) applies to the next search
    rng = np.random.default_rng(1)
    store = FaissMultiViewDocumentStore(embedding_dim=16, index_factory="HNSW32", search_parameters={"efSearch": 16})
    store.write_documents([attach_views(Document(id=f"d{i}", content="x"), _unit(rng, 2)) for i in range(300)])
    store.delete_documents(["d0"])
    query = _unit(rng, 1)[0]
    store.search(query, top_k=5)
    views = store._views
    plan = views._plan_search(5, None, batch=False, capped=True)
    assert plan.params is not None and plan.params.efSearch == 16
    faiss.downcast_index(views.faiss_index.index).hnsw.efSearch = 64  # the graph inside the IndexIDMap2
    assert views._plan_search(5, None, batch=False, capped=True).params.efSearch == 64
