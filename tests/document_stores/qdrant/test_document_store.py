"""The Qdrant multi-view store in local mode: max-over-views search, writes, errors, persistence, encoder record."""

import asyncio
import dataclasses

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.errors import DocumentStoreError, DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy
from haystack.errors import FilterError
from haystack.utils import Secret

pytest.importorskip("qdrant_client")

from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore, converters
from haystack_mvr.document_stores.types import MultiViewDocumentStore
from haystack_mvr.views import (
    ENCODER_KEY,
    MATCHED_KEYS,
    MATCHED_TEXT_KEY,
    MATCHED_VIEW_KEY,
    SPANS_KEY,
    VIEWS_KEY,
    attach_views,
    document_views,
)

CONTENT = "First part. Second part."


def doc(i, views, spans=None, **meta) -> Document:
    return attach_views(Document(id=f"d{i}", content=CONTENT, meta=meta), np.asarray(views, dtype=np.float32), spans)


def random_docs(n, dim, rng, max_views=6):
    docs = []
    for i in range(n):
        views = rng.normal(size=(int(rng.integers(1, max_views + 1)), dim)).astype(np.float32)
        docs.append(doc(i, views, group=i % 3, rank=float(i)))
    return docs


def brute_force(docs, query, keep=lambda d: True):
    scored = [(float(np.max(document_views(d) @ query)), d.id) for d in docs if keep(d)]
    return sorted(scored, key=lambda s: -s[0])


def test_is_a_multi_view_store_and_opens_nothing_in_init(tmp_path):
    store = QdrantMultiViewDocumentStore(path=str(tmp_path / "never"))
    assert isinstance(store, MultiViewDocumentStore)
    MultiViewRetriever(document_store=store)
    assert store.encoder_config is None
    assert store._client is None and not (tmp_path / "never").exists()


def test_score_is_max_over_views_against_numpy(store):
    rng = np.random.default_rng(0)
    docs = random_docs(40, 8, rng)
    store.write_documents(docs)
    for query in rng.normal(size=(5, 8)).astype(np.float32):
        expected = brute_force(docs, query)[:10]
        hits = store.search(query.tolist(), top_k=10)
        assert [h.id for h in hits] == [e[1] for e in expected]
        assert [h.score for h in hits] == pytest.approx([e[0] for e in expected], abs=3e-7)


def test_filtered_search_is_exact_and_returns_top_k(store):
    rng = np.random.default_rng(1)
    docs = random_docs(40, 8, rng)
    store.write_documents(docs)
    query = rng.normal(size=8).astype(np.float32)
    filters = {"operator": "AND", "conditions": [{"field": "meta.group", "operator": "==", "value": 1}]}
    hits = store.search(query, top_k=7, filters=filters)
    expected = brute_force(docs, query, keep=lambda d: d.meta["group"] == 1)[:7]
    assert [h.id for h in hits] == [e[1] for e in expected]
    assert len(hits) == 7 and all(h.meta["group"] == 1 for h in hits)
    assert store.search(query, top_k=3, filters={"field": "meta.group", "operator": "==", "value": 9}) == []


def test_search_after_deletes_and_overwrites(store):
    rng = np.random.default_rng(2)
    docs = random_docs(20, 4, rng)
    store.write_documents(docs)
    store.delete_documents(["d0", "d1", "d1", "unknown"])
    replaced = doc(5, rng.normal(size=(3, 4)))
    store.write_documents([replaced], policy=DuplicatePolicy.OVERWRITE)
    current = [d for d in docs if d.id not in {"d0", "d1", "d5"}] + [replaced]
    query = rng.normal(size=4).astype(np.float32)
    hits = store.search(query, top_k=20)
    assert [h.id for h in hits] == [e[1] for e in brute_force(current, query)]
    assert store.count_documents() == 18


def test_matched_view_annotation_and_embeddings(store):
    store.write_documents([doc(0, [[1, 0], [0, 1]], [(0, 11), (12, 24)], lang="en")])
    stored = store.filter_documents()[0]
    assert VIEWS_KEY not in stored.meta and stored.meta["lang"] == "en" and stored.embedding == [1.0, 0.0]
    hit = store.search([0.0, 1.0], top_k=1)[0]
    assert hit.score == pytest.approx(1.0)
    assert hit.meta[MATCHED_VIEW_KEY] == 1 and hit.meta[MATCHED_TEXT_KEY] == "Second part."
    assert hit.embedding is None and VIEWS_KEY not in hit.meta
    full = store.search([0.0, 1.0], top_k=1, return_embedding=True)[0]
    assert document_views(full).tolist() == [[1.0, 0.0], [0.0, 1.0]] and full.embedding == [1.0, 0.0]
    assert full.meta[SPANS_KEY] == [[0, 11], [12, 24]]


def test_same_results_as_the_faiss_store(store):
    rng = np.random.default_rng(3)
    docs = [
        attach_views(d, document_views(d), [None] + [(0, 11)] * (document_views(d).shape[0] - 1))
        for d in random_docs(30, 6, rng)
    ]
    faiss_store = FaissMultiViewDocumentStore()
    for s in (store, faiss_store):
        s.write_documents(docs)
    for query in rng.normal(size=(4, 6)):
        ours, theirs = store.search(query, top_k=8), faiss_store.search(query, top_k=8)
        assert [d.id for d in ours] == [d.id for d in theirs]
        for a, b in zip(ours, theirs, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-6)
            assert {k: a.meta[k] for k in MATCHED_KEYS} == {k: b.meta[k] for k in MATCHED_KEYS}


def test_search_batch_and_async_match_search(store):
    rng = np.random.default_rng(4)
    store.write_documents(random_docs(25, 5, rng))
    queries = rng.normal(size=(3, 5)).astype(np.float32)
    filters = {"field": "meta.rank", "operator": ">=", "value": 5.0}
    singles = [[(d.id, d.score) for d in store.search(q, top_k=4, filters=filters)] for q in queries]
    batch = [[(d.id, d.score) for d in r] for r in store.search_batch(queries.tolist(), top_k=4, filters=filters)]
    assert batch == singles
    async_single = asyncio.run(store.search_async(queries[0], top_k=4, filters=filters))
    async_batch = asyncio.run(store.search_batch_async(queries, top_k=4, filters=filters))
    assert [(d.id, d.score) for d in async_single] == singles[0]
    assert [[(d.id, d.score) for d in r] for r in async_batch] == singles
    assert store.search_batch([], top_k=3) == []


def test_returned_documents_are_copies(store):
    store.write_documents([doc(0, [[1, 0]], meta_key="v")])
    hit = store.search([1.0, 0.0], top_k=1)[0]
    hit.meta["meta_key"] = "changed"
    store.filter_documents()[0].meta["meta_key"] = "changed"
    assert store.filter_documents()[0].meta["meta_key"] == "v"
    assert store.search([1.0, 0.0], top_k=1)[0].meta["meta_key"] == "v"


def test_input_documents_are_not_changed_and_generators_are_accepted(store):
    original = doc(0, [[1, 0]], [(0, 11)], **{ENCODER_KEY: {"model": "m"}})
    before = original.to_dict()
    assert store.write_documents(d for d in [original]) == 1
    assert original.to_dict() == before


def test_duplicate_policies_with_views(store):
    store.write_documents([doc(0, [[1, 0]])])
    with pytest.raises(DuplicateDocumentError):
        store.write_documents([doc(0, [[0, 1]])])
    with pytest.raises(DuplicateDocumentError):
        store.write_documents([doc(1, [[0, 1]]), doc(1, [[1, 1]])], policy=DuplicatePolicy.FAIL)
    assert store.write_documents([doc(0, [[0, 1]]), doc(2, [[0, 1]]), doc(2, [[5, 5]])], DuplicatePolicy.SKIP) == 1
    assert store.search([1.0, 0.0], top_k=1)[0].score == pytest.approx(1.0)  # d0 kept its views
    assert store.search([0.0, 1.0], top_k=5)[0].score == pytest.approx(1.0)  # first d2 of the batch won
    assert store.write_documents([doc(0, [[0, 1]]), doc(0, [[0, 3]])], DuplicatePolicy.OVERWRITE) == 1
    assert {d.id: d.score for d in store.search([0.0, 1.0], top_k=5)}["d0"] == pytest.approx(3.0)
    assert store.count_documents() == 2


def test_bad_input_loses_nothing(store):
    store.write_documents([doc(0, [[1, 0]])])
    with pytest.raises(ValueError, match="list of Documents"):
        store.write_documents([doc(1, [[1, 0]]), "not a document"])
    with pytest.raises(ValueError, match="list of Documents"):
        store.write_documents(doc(1, [[1, 0]]))
    with pytest.raises(ValueError, match="NaN"):
        store.write_documents([doc(2, [[0, 1]]), doc(3, [[float("nan"), 1]])])
    with pytest.raises(ValueError, match="3-dimensional"):
        store.write_documents([doc(4, [[0, 1]]), doc(5, [[1, 2, 3]])])
    with pytest.raises(DuplicateDocumentError):
        store.write_documents([doc(6, [[0, 1]]), doc(0, [[0, 1]])])
    with pytest.raises(ValueError, match="document ids"):
        store.delete_documents("d0")
    with pytest.raises(FilterError):
        store.search([1.0, 0.0], filters={"field": "meta.x", "operator": "in", "value": "abc"})
    assert [d.id for d in store.filter_documents()] == ["d0"]
    assert [h.id for h in store.search([1.0, 0.0], top_k=5)] == ["d0"]


@pytest.mark.parametrize(
    ("query", "top_k", "message"),
    [
        ([1.0, 2.0, 3.0], 1, "dimension"),
        ([float("nan"), 1.0], 1, "NaN"),
        ([], 1, "non-empty"),
        ([[[1.0, 0.0]]], 1, "1-D vector or an .m, d. matrix"),
        ([[1.0, 0.0, 0.0]] * 2, 1, "dimension"),
        ([1.0, 0.0], 0, "top_k"),
    ],
)
def test_bad_queries(query, top_k, message):
    store = QdrantMultiViewDocumentStore()
    store.write_documents([doc(0, [[1, 0]])])
    with pytest.raises(ValueError, match=message):
        store.search(query, top_k=top_k)


def test_a_multi_vector_query_goes_as_its_rows_and_ranks_by_maxsim():
    store = QdrantMultiViewDocumentStore()
    store.write_documents([doc(0, [[1, 0], [0, 1]]), doc(1, [[1, 0]]), doc(2, [[0.6, 0.6]])])
    sent = []
    original = store.client.query_points

    def spy(*args, **kwargs):
        sent.append(kwargs["query"])
        return original(*args, **kwargs)

    store.client.query_points = spy
    hits = store.search([[1.0, 0.0], [0.0, 1.0]], top_k=3)
    assert sent == [[[1.0, 0.0], [0.0, 1.0]]]  # Qdrant's MAX_SIM scores the whole query natively
    assert [(h.id, round(h.score, 4)) for h in hits] == [("d0", 2.0), ("d2", 1.2), ("d1", 1.0)]
    assert hits[0].meta["mvr_matched_spans"] == [] and hits[0].meta["mvr_matched_scope"] == "document"


def test_too_many_views_for_one_multivector_is_a_clear_error():
    store = QdrantMultiViewDocumentStore()
    store.write_documents([doc(0, np.ones((2, 384)))])
    with pytest.raises(ValueError, match="at most 1,048,576 numbers per multivector"):
        store.write_documents([doc(1, np.ones((2731, 384), dtype=np.float32))])
    assert store.count_documents() == 1


@pytest.fixture(params=["memory", "path"])
def dim2_store(request, tmp_path):
    if request.param == "memory":
        s = QdrantMultiViewDocumentStore(location=":memory:", embedding_dim=2)
    else:
        s = QdrantMultiViewDocumentStore(path=str(tmp_path / "qdrant"), embedding_dim=2)
    yield s
    s.close()


def test_documents_without_vectors_then_vectors(dim2_store):
    """With ``embedding_dim`` the first write creates the whole schema: vectors come later, no rebuild."""
    dim2_store.write_documents([Document(id="plain", content="no vector", meta={"k": 1})])
    dim2_store.write_documents([doc(1, [[1, 0]])])
    assert dim2_store.count_documents() == 2
    assert [h.id for h in dim2_store.search([1.0, 0.0], top_k=5)] == ["d1"]
    assert [d.id for d in dim2_store.filter_documents({"field": "meta.k", "operator": "==", "value": 1})] == ["plain"]


def test_vectors_after_a_collection_created_without_them_are_a_clear_error(store, caplog):
    """Without ``embedding_dim``, documents without vectors first make a collection without vectors (warned)."""
    store.write_documents([Document(id="plain", content="no vector", meta={"k": 1})])
    assert "created without vectors" in caplog.text and "embedding_dim" in caplog.text
    with pytest.raises(DocumentStoreError, match=r"was created without vectors.*embedding_dim"):
        store.write_documents([doc(1, [[1, 0]]), Document(id="plain2", content="x")])
    assert [d.id for d in store.filter_documents()] == ["plain"]
    assert store.write_documents([Document(id="plain2", content="still fine")]) == 1
    assert store.search([1.0, 0.0], top_k=5) == []


def test_own_embedding_different_from_view_0_is_kept(store):
    views = np.array([[0.25, 0.5], [1.0, 0.0]], dtype=np.float32)
    own = dataclasses.replace(attach_views(Document(id="own", content="c"), views), embedding=[0.1, 0.2])
    same = attach_views(Document(id="same", content="a"), views)
    store.write_documents([own, same])
    assert {d.id: d.embedding for d in store.filter_documents()} == {"own": [0.1, 0.2], "same": [0.25, 0.5]}
    hits = store.search([1.0, 0.0], top_k=2, return_embedding=True)
    assert {d.id: d.embedding for d in hits} == {"own": [0.1, 0.2], "same": [0.25, 0.5]}


def test_encoder_is_recorded_and_other_encoders_refused(tmp_path):
    path = str(tmp_path / "q")
    store = QdrantMultiViewDocumentStore(path=path)
    store.write_documents([doc(0, [[1, 0]], **{ENCODER_KEY: {"model": "a", "mode": "snippet"}})])
    assert ENCODER_KEY not in store.filter_documents()[0].meta
    with pytest.raises(ValueError, match="encoded by"):
        store.write_documents([doc(1, [[1, 0]]), doc(2, [[0, 1]], **{ENCODER_KEY: {"model": "b"}})])
    assert store.count_documents() == 1
    store.write_documents([doc(3, [[0, 1]], **{ENCODER_KEY: {"mode": "snippet", "model": "a"}})])
    store.close()
    reopened = QdrantMultiViewDocumentStore(path=path)
    with pytest.raises(ValueError, match="encoded by"):
        reopened.write_documents([doc(4, [[1, 0]], **{ENCODER_KEY: {"model": "b"}})])
    reopened.close()
    with pytest.raises(DocumentStoreError, match="encoder"):
        QdrantMultiViewDocumentStore(path=path, encoder_config={"model": "b"}).count_documents()


def test_persistence_and_reopen(tmp_path):
    path = str(tmp_path / "q")
    rng = np.random.default_rng(5)
    docs = random_docs(15, 4, rng)
    store = QdrantMultiViewDocumentStore(path=path, index="papers")
    store.write_documents(docs)
    store.delete_documents(["d3"])
    query = rng.normal(size=4).astype(np.float32)
    before = [(d.id, d.score) for d in store.search(query, top_k=5)]
    twin = QdrantMultiViewDocumentStore.from_dict(store.to_dict())  # same folder, same process: shares the client
    assert [(d.id, d.score) for d in twin.search(query, top_k=5)] == before
    twin.close()
    store.close()
    reopened = QdrantMultiViewDocumentStore(path=path, index="papers")
    assert reopened.count_documents() == 14
    assert [(d.id, d.score) for d in reopened.search(query, top_k=5)] == before
    assert QdrantMultiViewDocumentStore(path=path, index="other").count_documents() == 0
    reopened.close()


def test_collection_layout_is_checked(tmp_path):
    path = str(tmp_path / "q")
    store = QdrantMultiViewDocumentStore(path=path)
    store.write_documents([doc(0, [[1, 0]])])
    assert store.write_documents([doc(1, [[0, 1]])]) == 1  # creating an existing collection is idempotent
    store.close()
    with pytest.raises(DocumentStoreError, match="embedding_dim=3"):
        QdrantMultiViewDocumentStore(path=path, embedding_dim=3).count_documents()
    with pytest.raises(DocumentStoreError, match="global view"):
        QdrantMultiViewDocumentStore(path=path, global_view=True).count_documents()
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(tmp_path / "foreign"))
    params = models.VectorParams(size=2, distance=models.Distance.COSINE, multivector_config=None)
    client.create_collection("haystack_mvr", vectors_config={converters.VIEWS_VECTOR: params})
    client.close()
    with pytest.raises(DocumentStoreError, match="MAX_SIM"):
        QdrantMultiViewDocumentStore(path=str(tmp_path / "foreign")).count_documents()


def test_global_view_prefetch_then_max_sim():
    rng = np.random.default_rng(6)
    docs = random_docs(30, 4, rng)
    store = QdrantMultiViewDocumentStore(global_view=True, prefetch_limit=30)
    store.write_documents(docs)
    query = rng.normal(size=4).astype(np.float32)
    # A prefetch as wide as the collection: MAX_SIM rescoring gives the exact ranking.
    assert [d.id for d in store.search(query, top_k=5)] == [e[1] for e in brute_force(docs, query)[:5]]
    narrow = QdrantMultiViewDocumentStore(global_view=True, prefetch_limit=5)
    narrow.write_documents(docs)
    by_global = sorted(docs, key=lambda d: -float(document_views(d)[0] @ query))[:5]
    assert {d.id for d in narrow.search(query, top_k=5)} == {d.id for d in by_global}


def test_init_parameters_and_serialization(monkeypatch):
    store = QdrantMultiViewDocumentStore(
        url="http://qdrant.example:6333",
        api_key=Secret.from_env_var("MY_QDRANT_KEY"),
        index="docs",
        embedding_dim=384,
        global_view=True,
        on_disk=True,
        shard_number=4,
        replication_factor=2,
        hnsw_config={"m": 16, "ef_construct": 200},
        quantization_config={"scalar": {"type": "int8", "always_ram": True}},
        hnsw_ef=256,
        prefetch_limit=200,
    )
    data = store.to_dict()
    assert data["init_parameters"]["api_key"] == {"type": "env_var", "env_vars": ["MY_QDRANT_KEY"], "strict": True}
    assert data["init_parameters"]["hnsw_config"] == {"m": 16, "ef_construct": 200}
    restored = QdrantMultiViewDocumentStore.from_dict(data)
    assert restored.to_dict() == data and isinstance(restored.api_key, Secret)
    assert restored._client is None
    with pytest.raises(ValueError, match="Cannot serialize token"):
        QdrantMultiViewDocumentStore(api_key=Secret.from_token("secret")).to_dict()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"location": ":memory:", "path": "x"}, "at most one"),
        ({"embedding_dim": 0}, "embedding_dim"),
        ({"prefetch_limit": 10}, "global_view"),
        ({"hnsw_config": {"m": "many"}}, "hnsw_config"),
        ({"quantization_config": {"scalar": {"type": "int3"}}}, "quantization_config"),
        ({"api_key": "plain-text"}, "Secret"),
        ({"exact": "yes"}, "exact"),
    ],
)
def test_init_rejects_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        QdrantMultiViewDocumentStore(**kwargs)


def test_point_ids_are_deterministic():
    assert converters.point_id("doc-1") == converters.point_id("doc-1") != converters.point_id("doc-2")
    assert converters.point_id("doc-1") == "80a7ebca-8789-532e-9b05-7f73793e7b90"


def test_async_client_path_used_for_servers(tmp_path, monkeypatch):
    """Away from local mode, async search goes through ``AsyncQdrantClient`` (here over a local folder)."""
    path = str(tmp_path / "q")
    rng = np.random.default_rng(7)
    docs = random_docs(20, 4, rng)
    writer = QdrantMultiViewDocumentStore(path=path)
    writer.write_documents(docs)
    query = rng.normal(size=4).astype(np.float32)
    expected = [(d.id, d.score) for d in writer.search(query, top_k=5)]
    writer.close()  # the folder is free for the asynchronous client
    monkeypatch.setattr(QdrantMultiViewDocumentStore, "is_local", property(lambda self: False))
    store = QdrantMultiViewDocumentStore(path=path)

    async def run():
        single = await store.search_async(query, top_k=5)
        batch = await store.search_batch_async([query, -query], top_k=5)
        await store.close_async()
        return single, batch

    single, batch = asyncio.run(run())
    assert store._client is None  # the synchronous client was never opened
    assert [(d.id, d.score) for d in single] == expected == [(d.id, d.score) for d in batch[0]]
    assert [d.id for d in batch[1]] == [e[1] for e in brute_force(docs, -query)[:5]]


def test_package_imports_without_qdrant_client():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['qdrant_client'] = None\n"
        "import haystack_mvr.document_stores\n"
        "from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore\n"
        "try:\n    from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert 'pip install "haystack-mvr[qdrant]"' in out


def test_folder_client_released_by_a_finalizer_inside_acquire_does_not_deadlock(tmp_path):
    """Garbage collection can run a dropped store's finalizer while ``acquire`` holds the registry lock."""
    import threading

    from haystack_mvr.document_stores.qdrant.connection import LocalClients

    registry = LocalClients()
    key = registry.key(str(tmp_path / "a"))
    client = registry.acquire(key)

    def finalizer_during_acquire():
        with registry._lock:
            registry.release(key, client)
            registry.acquire(registry.key(str(tmp_path / "b")))

    worker = threading.Thread(target=finalizer_during_acquire, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert list(registry._open) == [str((tmp_path / "b").resolve())]


@pytest.mark.parametrize("where", ["memory", "path"])
def test_a_duplicate_id_within_one_batch_says_so_and_names_the_policies(where, tmp_path):
    """On an empty store it was reported as "already exists", with no DuplicatePolicy hint (issue 57)."""
    place = {"location": ":memory:"} if where == "memory" else {"path": str(tmp_path / "q")}
    store = QdrantMultiViewDocumentStore(embedding_dim=2, **place)
    try:
        with pytest.raises(DuplicateDocumentError, match=r"ID 'd1' is duplicated within this batch") as error:
            store.write_documents([doc(0, [[1, 0]]), doc(1, [[0, 1]]), doc(1, [[1, 1]])])
        assert "already exists" not in str(error.value) and "DuplicatePolicy.OVERWRITE" in str(error.value)
        assert store.count_documents() == 0
        store.write_documents([doc(0, [[1, 0]])])
        with pytest.raises(DuplicateDocumentError, match=r"ID 'd0' already exists\. .*DuplicatePolicy\.OVERWRITE"):
            store.write_documents([doc(0, [[0, 1]]), doc(0, [[1, 1]])])
    finally:
        store.close()
