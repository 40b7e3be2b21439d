"""Qdrant's own Rust engine (qdrant-edge-py, in process) agrees with the store's local mode; HNSW recall.

The points are the store's own (``converters.to_point``): the same layout in Qdrant's real engine must give the
same max-over-views ranking and scores, with payload filters, after deletes and upserts, and HNSW over the
multivectors must find the exact top-10 at the ``hnsw_ef`` the README recommends.
"""

from __future__ import annotations

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.types import DuplicatePolicy

qe = pytest.importorskip("qdrant_edge")
pytest.importorskip("qdrant_client")

from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore, converters  # noqa: E402
from haystack_mvr.document_stores.writes import prepare_document  # noqa: E402
from haystack_mvr.views import attach_views  # noqa: E402

pytestmark = pytest.mark.slow
DIM = 16


def edge_shard(path, hnsw: bool):
    config = qe.EdgeConfig(
        vectors={
            converters.VIEWS_VECTOR: qe.EdgeVectorParams(
                size=DIM,
                distance=qe.Distance.Dot,
                multivector_config=qe.MultiVectorConfig(comparator=qe.MultiVectorComparator.MaxSim),
            )
        },
        hnsw_config=qe.HnswIndexConfig(m=16, ef_construct=100, full_scan_threshold=10) if hnsw else None,
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1, default_segment_number=1) if hnsw else None,
        max_search_threads=1,
    )
    return qe.EdgeShard.create(str(path), config)


def upsert(shard, docs):
    points = []
    for doc in docs:
        point = converters.to_point(prepare_document(doc), 0, global_view=False)
        points.append(qe.Point(id=point.id, vector=point.vector, payload=point.payload))
    shard.update(qe.UpdateOperation.upsert_points(points))


def edge_search(shard, query, top_k, qfilter=None, params=None):
    request = qe.QueryRequest(
        limit=top_k,
        query=qe.Query.Nearest([query.tolist()], using=converters.VIEWS_VECTOR),
        filter=qfilter,
        params=params or qe.SearchParams(exact=True),
        with_payload=True,
    )
    return [(p.payload["id"], p.score) for p in shard.query(request)]


def random_docs(rng, ids):
    return [
        attach_views(
            Document(id=f"d{i}", content="x", meta={"g": int(rng.integers(0, 3)), "r": float(rng.random())}),
            rng.normal(size=(int(rng.integers(1, 7)), DIM)).astype(np.float32),
        )
        for i in ids
    ]


def test_same_ranking_and_scores_as_local_mode_with_filters_deletes_and_upserts(tmp_path):
    rng = np.random.default_rng(0)
    store, shard = QdrantMultiViewDocumentStore(), edge_shard(tmp_path / "edge", hnsw=False)
    docs = random_docs(rng, range(300))
    store.write_documents(docs)
    upsert(shard, docs)
    cases = [
        (None, None),
        (
            {"field": "meta.g", "operator": "==", "value": 1},
            qe.Filter(must=[qe.FieldCondition("meta.g", match=qe.MatchValue(1))]),
        ),
        (
            {"field": "meta.r", "operator": "<", "value": 0.3},
            qe.Filter(must=[qe.FieldCondition("meta.r", range=qe.RangeFloat(lt=0.3))]),
        ),
    ]

    def check():
        for query in rng.normal(size=(5, DIM)).astype(np.float32):
            for filters, edge_filter in cases:
                ours = [(d.id, d.score) for d in store.search(query, top_k=10, filters=filters)]
                theirs = edge_search(shard, query, 10, edge_filter)
                assert [i for i, _ in ours] == [i for i, _ in theirs]
                np.testing.assert_allclose([s for _, s in ours], [s for _, s in theirs], atol=3e-6)

    check()
    gone = [converters.point_id(f"d{i}") for i in range(0, 300, 7)]
    store.delete_documents([f"d{i}" for i in range(0, 300, 7)])
    shard.update(qe.UpdateOperation.delete_points(gone))
    replaced = random_docs(rng, range(1, 300, 5))  # whole points again, never update_vectors (qdrant #6738)
    store.write_documents(replaced, policy=DuplicatePolicy.OVERWRITE)
    upsert(shard, replaced)
    check()
    shard.close()


def test_hnsw_recall_at_the_recommended_ef(tmp_path):
    rng = np.random.default_rng(1)
    shard = edge_shard(tmp_path / "hnsw", hnsw=True)
    topics = rng.normal(size=(50, DIM))
    docs = []
    for i in range(3000):  # documents whose views share a topic, as real views do
        centre = topics[rng.integers(0, 50)] + rng.normal(size=DIM)
        views = centre + 0.7 * rng.normal(size=(int(rng.integers(2, 7)), DIM))
        docs.append(attach_views(Document(id=f"d{i}", content="x"), views.astype(np.float32)))
    upsert(shard, docs)
    shard.optimize()
    assert shard.info().indexed_vectors_count == len(docs)
    queries = rng.normal(size=(100, DIM)).astype(np.float32)
    recall = {}
    for ef in (16, 128):
        hits = 0
        for query in queries:
            exact = {i for i, _ in edge_search(shard, query, 10)}
            hits += len(exact & {i for i, _ in edge_search(shard, query, 10, params=qe.SearchParams(hnsw_ef=ef))})
        recall[ef] = hits / (10 * len(queries))
    assert recall[128] >= 0.97, recall
    assert recall[128] >= recall[16]
    shard.close()
