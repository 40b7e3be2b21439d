"""
The contract suite every multi-view document store runs (FAISS, Qdrant, ...).

In the spirit of ``haystack.testing.document_store``: mixin classes whose tests take a ``document_store`` fixture
(an empty store, created fresh for each test) that the backend's test module defines. Compose them::

    from haystack_mvr.testing import MultiViewDocumentStoreTests, MultiViewPersistenceTests

    class TestMyStore(MultiViewDocumentStoreTests, MultiViewPersistenceTests):
        exact_search = True          # False for an approximate index (HNSW, IVF with few probes, PQ ...)

        @pytest.fixture
        def document_store(self):
            return MyMultiViewStore()

        @pytest.fixture
        def reopen(self, tmp_path):
            def _reopen(store):
                store.save(tmp_path / "copy")
                return MyMultiViewStore.load_from(tmp_path / "copy")
            return _reopen

Class attributes a backend may override:

- ``exact_search``: ``True`` when search is exact (scores and ranking equal numpy brute force over the written
  views); ``False`` for approximate indexes, which must still return valid documents, each scored by the max over
  the views they are returned with (their reconstruction), and exactly ``min(top_k, matching documents with
  vectors)`` of them.
- ``embedding_dim``: the dimension of the vectors these tests write (default 8).
- ``property_examples``: hypothesis examples for the brute-force property test.

``MultiViewDocumentStoreTests`` bundles Haystack's own sync and async suites with the multi-view ones;
``MultiViewPersistenceTests`` needs a ``reopen`` fixture: a function ``reopen(store) -> store`` returning the same
store's contents read back from wherever the backend persists them.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from typing import Any, ClassVar

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy
from haystack.errors import FilterError
from haystack.testing.document_store import (
    CountDocumentsByFilterTest,
    CountUniqueMetadataByFilterTest,
    DocumentStoreBaseExtendedTests,
    GetMetadataFieldMinMaxTest,
    GetMetadataFieldsInfoTest,
    GetMetadataFieldUniqueValuesTest,
)
from haystack.testing.document_store_async import (
    CountDocumentsAsyncTest,
    CountDocumentsByFilterAsyncTest,
    CountUniqueMetadataByFilterAsyncTest,
    DeleteAllAsyncTest,
    DeleteByFilterAsyncTest,
    DeleteDocumentsAsyncTest,
    FilterDocumentsAsyncTest,
    GetMetadataFieldMinMaxAsyncTest,
    GetMetadataFieldsInfoAsyncTest,
    GetMetadataFieldUniqueValuesAsyncTest,
    UpdateByFilterAsyncTest,
    WriteDocumentsAsyncTest,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haystack_mvr.views import (
    ENCODER_KEY,
    MATCHED_SCOPE_KEY,
    MATCHED_SPAN_KEY,
    MATCHED_TEXT_KEY,
    MATCHED_VIEW_KEY,
    SPANS_KEY,
    VIEWS_KEY,
    attach_views,
    document_views,
)

CONTENT = "First part. Second part."
SPANS = [(0, 11), (12, 24)]


class MultiViewFixturesMixin:
    """Helpers shared by the suites: vectors of the backend's dimension, documents carrying views."""

    exact_search: bool = True
    embedding_dim: int = 8
    property_examples: int = 30

    def vec(self, *values: float) -> list[float]:
        """``values`` padded with zeros to ``embedding_dim``."""
        out = [0.0] * self.embedding_dim
        out[: len(values)] = [float(v) for v in values]
        return out

    def mv_doc(self, doc_id: str, views: Any, spans: Any = None, content: str = CONTENT, **meta: Any) -> Document:
        """A document carrying ``views`` (rows padded to ``embedding_dim``) as ``haystack_mvr.views`` describes."""
        matrix = np.zeros((len(views), self.embedding_dim), dtype=np.float32)
        for i, row in enumerate(views):
            matrix[i, : len(row)] = row
        return attach_views(Document(id=doc_id, content=content, meta=meta), matrix, spans)

    def random_docs(self, n: int, views: int = 3, seed: int = 0, **meta: Any) -> list[Document]:
        rng = np.random.default_rng(seed)
        return [
            attach_views(
                Document(id=f"r{i}", content=f"doc {i}", meta={"i": i, "g": i % 3, **meta}),
                rng.normal(size=(views, self.embedding_dim)).astype(np.float32),
            )
            for i in range(n)
        ]

    @staticmethod
    def assert_valid_results(hits: list[Document], query: Any, top_k: int, expected_count: int) -> None:
        """Unique, best first, exactly ``expected_count``, each scored by the max over the views it came with."""
        assert len(hits) == min(top_k, expected_count), (len(hits), top_k, expected_count)
        assert len({h.id for h in hits}) == len(hits)
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        for h in hits:
            if VIEWS_KEY in h.meta:
                best = float(np.max(document_views(h) @ np.asarray(query, np.float32)))
                assert h.score == pytest.approx(best, rel=1e-4, abs=1e-4)


class MultiViewHaystackTests(
    DocumentStoreBaseExtendedTests,
    CountDocumentsByFilterTest,
    CountUniqueMetadataByFilterTest,
    GetMetadataFieldsInfoTest,
    GetMetadataFieldMinMaxTest,
    GetMetadataFieldUniqueValuesTest,
):
    """Haystack's own synchronous document store suite (every ``DocumentStore`` method)."""

    def test_write_documents(self, document_store):
        """No policy means ``FAIL``: a duplicate id raises, ``SKIP`` skips it, ``OVERWRITE`` replaces it."""
        # 4 dimensions: a PQ with 4 sub-quantizers (the contract's PQ, OPQ and IVF-PQ stores) cannot split 2
        docs = [Document(id="1", content="a"), Document(id="2", content="b", embedding=[0.1, 0.2, 0.3, 0.4])]
        assert document_store.write_documents(docs) == 2
        assert sorted(d.id for d in document_store.filter_documents()) == ["1", "2"]
        with pytest.raises(DuplicateDocumentError):
            document_store.write_documents([Document(id="1", content="again")])
        assert document_store.write_documents([Document(id="1", content="again")], DuplicatePolicy.SKIP) == 0
        assert document_store.write_documents([Document(id="1", content="new")], DuplicatePolicy.OVERWRITE) == 1
        assert {d.id: d.content for d in document_store.filter_documents()} == {"1": "new", "2": "b"}


class MultiViewHaystackAsyncTests(
    CountDocumentsAsyncTest,
    CountDocumentsByFilterAsyncTest,
    CountUniqueMetadataByFilterAsyncTest,
    GetMetadataFieldsInfoAsyncTest,
    GetMetadataFieldMinMaxAsyncTest,
    GetMetadataFieldUniqueValuesAsyncTest,
    DeleteAllAsyncTest,
    DeleteByFilterAsyncTest,
    DeleteDocumentsAsyncTest,
    FilterDocumentsAsyncTest,
    UpdateByFilterAsyncTest,
    WriteDocumentsAsyncTest,
):
    """Haystack's own asynchronous document store suite (every ``*_async`` method)."""

    @pytest.mark.asyncio
    async def test_write_documents_async(self, document_store):
        assert await document_store.write_documents_async([Document(id="x", content="x")]) == 1
        assert await document_store.count_documents_async() == 1
        with pytest.raises(DuplicateDocumentError):
            await document_store.write_documents_async([Document(id="x", content="again")])


class MultiViewSearchTests(MultiViewFixturesMixin):
    """``search``: unique documents, max over views, exactly ``min(top_k, matches)``, filters, copies, annotation."""

    def test_views_leave_meta_and_score_is_max_over_views(self, document_store):
        document_store.write_documents(
            [
                self.mv_doc("d0", [[1, 0], [0.9, 0.1], [0.8, 0.2]]),
                self.mv_doc("d1", [[0.5, 0.5]]),
                self.mv_doc("d2", [[0, 1]]),
            ]
        )
        stored = {d.id: d for d in document_store.filter_documents()}
        assert all(VIEWS_KEY not in d.meta for d in stored.values())
        hits = document_store.search(self.vec(1, 0), top_k=3)
        assert [h.id for h in hits] == ["d0", "d1", "d2"]
        assert [h.score for h in hits] == pytest.approx([1.0, 0.5, 0.0], abs=1e-3)

    def test_matched_view_keys(self, document_store):
        document_store.write_documents([self.mv_doc("d0", [[1, 0], [0, 1]], SPANS, lang="en")])
        hit = document_store.search(self.vec(0, 1), top_k=1)[0]
        assert hit.score == pytest.approx(1.0, abs=1e-3)
        assert hit.meta[MATCHED_VIEW_KEY] == 1
        assert hit.meta[MATCHED_SCOPE_KEY] == "snippet"
        assert hit.meta[MATCHED_SPAN_KEY] == [12, 24]
        assert hit.meta[MATCHED_TEXT_KEY] == "Second part."
        assert hit.meta["lang"] == "en"
        assert hit.embedding is None and VIEWS_KEY not in hit.meta

    def test_matched_scope_is_document_without_spans(self, document_store):
        document_store.write_documents([self.mv_doc("d0", [[1, 0], [0, 1]])])
        hit = document_store.search(self.vec(1, 0), top_k=1)[0]
        assert hit.meta[MATCHED_VIEW_KEY] == 0 and hit.meta[MATCHED_SCOPE_KEY] == "document"
        assert hit.meta[MATCHED_SPAN_KEY] is None and hit.meta[MATCHED_TEXT_KEY] is None

    def test_return_embedding(self, document_store):
        document_store.write_documents([self.mv_doc("d0", [[1, 0], [0, 1]], SPANS)])
        full = document_store.search(self.vec(0, 1), top_k=1, return_embedding=True)[0]
        np.testing.assert_allclose(document_views(full), [self.vec(1, 0), self.vec(0, 1)], atol=1e-2)
        np.testing.assert_allclose(full.embedding, self.vec(1, 0), atol=1e-2)
        assert full.meta[SPANS_KEY] == [list(s) for s in SPANS]
        again = Document.from_dict(json.loads(json.dumps(full.to_dict())))  # returned views travel like attached ones
        assert again == full
        np.testing.assert_array_equal(document_views(again), document_views(full))

    def test_plain_embedding_is_one_view(self, document_store):
        document_store.write_documents([Document(id="p", content="plain", embedding=self.vec(0.5, 0.5))])
        hit = document_store.search(self.vec(1, 0), top_k=3)
        assert [h.id for h in hit] == ["p"] and hit[0].score == pytest.approx(0.5, abs=1e-3)

    def test_exactly_top_k_when_one_document_dominates(self, document_store):
        document_store.write_documents([self.mv_doc("d0", [[1.0, 0.0]] * 50)])
        document_store.write_documents([self.mv_doc(f"d{i}", [[0.01 * i, 1.0]]) for i in range(1, 6)])
        hits = document_store.search(self.vec(1, 0), top_k=4)
        assert len(hits) == 4 and len({h.id for h in hits}) == 4
        assert hits[0].id == "d0" or not self.exact_search

    def test_top_k_larger_than_store(self, document_store):
        document_store.write_documents([self.mv_doc(f"d{i}", [[1, i], [i, 1]]) for i in range(3)])
        assert sorted(h.id for h in document_store.search(self.vec(1, 1), top_k=50)) == ["d0", "d1", "d2"]

    def test_documents_without_vectors_are_stored_not_returned(self, document_store):
        document_store.write_documents([Document(id="plain", content="no vector"), self.mv_doc("d1", [[1, 0]])])
        assert document_store.count_documents() == 2
        assert [h.id for h in document_store.search(self.vec(1, 0), top_k=5)] == ["d1"]

    def test_store_with_documents_but_no_vectors_returns_nothing(self, document_store):
        document_store.write_documents([Document(id="plain", content="no vector")])
        assert document_store.search(self.vec(1, 0), top_k=5) == []

    def test_empty_store_returns_nothing(self, document_store):
        assert document_store.search(self.vec(1, 0), top_k=5) == []
        assert document_store.search_batch([self.vec(1, 0)], top_k=5) == [[]]

    def test_filters_return_exactly_top_k(self, document_store):
        docs = [self.mv_doc(f"d{i}", [[1.0 - i / 100, 0.0], [0.0, 0.5]], group=i % 2) for i in range(40)]
        document_store.write_documents(docs)
        group1 = {"field": "meta.group", "operator": "==", "value": 1}
        hits = document_store.search(self.vec(1, 0), top_k=7, filters=group1, return_embedding=True)
        self.assert_valid_results(hits, self.vec(1, 0), 7, 20)
        assert all(h.meta["group"] == 1 for h in hits)
        if self.exact_search:
            assert [h.id for h in hits] == [f"d{i}" for i in range(1, 15, 2)]

    def test_filter_matching_few_returns_all_matches(self, document_store):
        docs = self.random_docs(60, seed=1)
        document_store.write_documents(docs)
        few = {"field": "meta.i", "operator": "in", "value": [3, 17, 42, 59, 8, 21]}
        query = np.random.default_rng(2).normal(size=self.embedding_dim).astype(np.float32)
        hits = document_store.search(query.tolist(), top_k=5, filters=few, return_embedding=True)
        self.assert_valid_results(hits, query, 5, 6)
        assert {h.id for h in hits} <= {"r3", "r17", "r42", "r59", "r8", "r21"}
        hits = document_store.search(query.tolist(), top_k=10, filters=few)
        assert {h.id for h in hits} == {"r3", "r17", "r42", "r59", "r8", "r21"}

    def test_filter_matching_nothing(self, document_store):
        document_store.write_documents([self.mv_doc("d0", [[1, 0]], group=0)])
        assert (
            document_store.search(self.vec(1, 0), filters={"field": "meta.group", "operator": "==", "value": 9}) == []
        )

    def test_filter_matching_only_documents_without_vectors(self, document_store):
        document_store.write_documents(
            [Document(id="plain", content="x", meta={"group": 1}), self.mv_doc("d0", [[1, 0]], group=0)]
        )
        assert (
            document_store.search(self.vec(1, 0), filters={"field": "meta.group", "operator": "==", "value": 1}) == []
        )

    def test_invalid_filter_is_refused(self, document_store):
        document_store.write_documents([self.mv_doc("d0", [[1, 0]])])
        with pytest.raises((ValueError, FilterError)):
            document_store.search(self.vec(1, 0), filters={"field": "meta.group", "value": 1})

    def test_returned_documents_are_copies(self, document_store):
        document_store.write_documents([self.mv_doc("d0", [[1, 0]], nested={"tags": ["a"]})])
        hit = document_store.search(self.vec(1, 0), top_k=1)[0]
        hit.meta["nested"]["tags"].append("changed")
        hit.meta["added"] = True
        listed = document_store.filter_documents()[0]
        listed.meta["nested"]["tags"].append("changed too")
        again = document_store.search(self.vec(1, 0), top_k=1)[0]
        assert again.meta["nested"] == {"tags": ["a"]} and "added" not in again.meta
        assert document_store.filter_documents()[0].meta["nested"] == {"tags": ["a"]}

    def test_input_documents_are_not_mutated(self, document_store):
        doc = self.mv_doc("d0", [[1, 0], [0, 1]], SPANS, nested={"tags": ["a"]})
        before = copy.deepcopy(doc)
        document_store.write_documents([doc])
        document_store.search(self.vec(1, 0), top_k=1)
        assert doc == before

    def test_overwrite_replaces_views(self, document_store):
        document_store.write_documents([self.mv_doc("d0", [[1, 0], [0.9, 0]])])
        document_store.write_documents([self.mv_doc("d0", [[0, 1]])], policy=DuplicatePolicy.OVERWRITE)
        hits = document_store.search(self.vec(1, 0), top_k=5, return_embedding=True)
        assert len(hits) == 1 and hits[0].score == pytest.approx(0.0, abs=1e-3)
        assert document_views(hits[0]).shape[0] == 1

    def test_delete_removes_every_view(self, document_store):
        document_store.write_documents([self.mv_doc("d0", [[1, 0], [0, 1]]), self.mv_doc("d1", [[0.5, 0.5]])])
        document_store.search(self.vec(1, 0), top_k=1)
        document_store.delete_documents(["d0"])
        assert [h.id for h in document_store.search(self.vec(1, 0), top_k=5)] == ["d1"]
        document_store.delete_by_filter({"field": "id", "operator": "==", "value": "d1"})
        assert document_store.search(self.vec(1, 0), top_k=5) == []

    def test_update_by_filter_keeps_views(self, document_store):
        document_store.write_documents([self.mv_doc("d0", [[1, 0], [0, 1]], SPANS, group=0)])
        document_store.update_by_filter({"field": "meta.group", "operator": "==", "value": 0}, {"group": 5})
        hit = document_store.search(self.vec(0, 1), top_k=1)[0]
        assert (
            hit.meta["group"] == 5 and hit.meta[MATCHED_VIEW_KEY] == 1 and hit.meta[MATCHED_TEXT_KEY] == "Second part."
        )

    def test_many_writes_and_deletes_stay_consistent(self, document_store):
        docs = self.random_docs(30, seed=3)
        for start in range(0, 30, 7):
            document_store.write_documents(docs[start : start + 7])
            document_store.search(self.vec(1, 0), top_k=2)
        document_store.delete_documents([f"r{i}" for i in range(0, 30, 4)])
        query = np.random.default_rng(4).normal(size=self.embedding_dim).astype(np.float32)
        hits = document_store.search(query.tolist(), top_k=30, return_embedding=True)
        self.assert_valid_results(hits, query, 30, 30 - len(range(0, 30, 4)))
        assert not {h.id for h in hits} & {f"r{i}" for i in range(0, 30, 4)}

    @pytest.mark.parametrize("top_k", [0, -1, 1.5, True])
    def test_bad_top_k(self, document_store, top_k):
        document_store.write_documents([self.mv_doc("d0", [[1, 0]])])
        with pytest.raises(ValueError, match="top_k"):
            document_store.search(self.vec(1, 0), top_k=top_k)

    def test_bad_queries(self, document_store):
        document_store.write_documents([self.mv_doc("d0", [[1, 0]])])
        with pytest.raises(ValueError, match="dimension"):
            document_store.search([1.0] * (self.embedding_dim + 1), top_k=1)
        with pytest.raises(ValueError, match="NaN"):
            document_store.search([float("nan")] * self.embedding_dim, top_k=1)
        with pytest.raises(ValueError):
            document_store.search([], top_k=1)
        with pytest.raises(ValueError):
            document_store.search([[1.0] * self.embedding_dim], top_k=1)


class MultiViewSearchBatchTests(MultiViewFixturesMixin):
    """``search_batch`` and the async forms answer exactly as ``search`` does, one list per query."""

    def _store_and_queries(self, document_store, n_queries=5):
        docs = self.random_docs(40, seed=5)
        document_store.write_documents(docs)
        queries = np.random.default_rng(6).normal(size=(n_queries, self.embedding_dim)).astype(np.float32)
        return queries

    @staticmethod
    def _key(hits):
        return [(h.id, round(h.score, 4), h.meta[MATCHED_VIEW_KEY]) for h in hits]

    @pytest.mark.parametrize("filtered", [False, True])
    def test_search_batch_equals_search(self, document_store, filtered):
        queries = self._store_and_queries(document_store)
        filters = {"field": "meta.g", "operator": "==", "value": 1} if filtered else None
        batched = document_store.search_batch(queries.tolist(), top_k=6, filters=filters)
        assert len(batched) == len(queries)
        for q, hits in zip(queries, batched, strict=True):
            assert self._key(hits) == self._key(document_store.search(q.tolist(), top_k=6, filters=filters))

    def test_search_batch_accepts_arrays_and_return_embedding(self, document_store):
        queries = self._store_and_queries(document_store, 3)
        batched = document_store.search_batch(queries, top_k=4, return_embedding=True)
        for q, hits in zip(queries, batched, strict=True):
            self.assert_valid_results(hits, q, 4, 40)
            assert all(VIEWS_KEY in h.meta for h in hits)

    def test_search_batch_results_are_independent_copies(self, document_store):
        document_store.write_documents([self.mv_doc("d0", [[1, 0]], nested={"tags": ["a"]})])
        first, second = document_store.search_batch([self.vec(1, 0), self.vec(1, 0)], top_k=1)
        first[0].meta["nested"]["tags"].append("changed")
        assert second[0].meta["nested"] == {"tags": ["a"]}
        assert document_store.search(self.vec(1, 0), top_k=1)[0].meta["nested"] == {"tags": ["a"]}

    def test_search_batch_empty_and_bad(self, document_store):
        self._store_and_queries(document_store)
        assert document_store.search_batch(np.zeros((0, self.embedding_dim), dtype=np.float32), top_k=3) == []
        with pytest.raises(ValueError):
            document_store.search_batch([[1.0] * (self.embedding_dim + 1)], top_k=3)
        with pytest.raises(ValueError, match="top_k"):
            document_store.search_batch([self.vec(1, 0)], top_k=0)

    def test_async_forms_equal_sync(self, document_store):
        queries = self._store_and_queries(document_store, 3)
        filters = {"field": "meta.g", "operator": "!=", "value": 0}

        async def both():
            one = await document_store.search_async(queries[0].tolist(), top_k=5, filters=filters)
            many = await document_store.search_batch_async(queries.tolist(), top_k=5, filters=filters)
            return one, many

        one, many = asyncio.run(both())
        assert self._key(one) == self._key(document_store.search(queries[0].tolist(), top_k=5, filters=filters))
        assert [self._key(h) for h in many] == [
            self._key(h) for h in document_store.search_batch(queries.tolist(), top_k=5, filters=filters)
        ]


class MultiViewInputTests(MultiViewFixturesMixin):
    """Bad input is refused clearly and loses nothing; odd but valid input is accepted."""

    def test_duplicate_ids_in_delete_are_harmless(self, document_store):
        document_store.write_documents([self.mv_doc("d1", [[1, 0]]), self.mv_doc("d2", [[0, 1]])])
        document_store.delete_documents(["d1", "d1"])
        assert document_store.count_documents() == 1
        assert [h.id for h in document_store.search(self.vec(1, 0), top_k=5)] == ["d2"]
        document_store.write_documents([self.mv_doc("d1", [[1, 0]])])
        assert [h.id for h in document_store.search(self.vec(1, 0), top_k=5)] == ["d1", "d2"]

    def test_bare_string_to_delete_is_refused(self, document_store):
        document_store.write_documents([self.mv_doc("d", [[1, 0]]), self.mv_doc("d1", [[0, 1]])])
        with pytest.raises((ValueError, TypeError)):
            document_store.delete_documents("d1")
        assert document_store.count_documents() == 2

    def test_generator_is_accepted(self, document_store):
        docs = [self.mv_doc(f"d{i}", [[1, i]]) for i in range(3)]
        assert document_store.write_documents(d for d in docs) == 3
        assert document_store.count_documents() == 3
        assert len(document_store.search(self.vec(1, 0), top_k=5)) == 3

    def test_not_documents_are_refused(self, document_store):
        document_store.write_documents([self.mv_doc("d0", [[1, 0]])])
        with pytest.raises(ValueError):
            document_store.write_documents([self.mv_doc("d1", [[1, 0]]), "not a document"])
        with pytest.raises(ValueError):
            document_store.write_documents("not documents")
        assert [d.id for d in document_store.filter_documents()] == ["d0"]

    def test_bad_vectors_lose_nothing(self, document_store):
        document_store.write_documents([self.mv_doc("d0", [[1, 0]])])
        with pytest.raises(ValueError, match="NaN"):
            document_store.write_documents([self.mv_doc("d2", [[0, 1]]), self.mv_doc("d3", [[float("nan"), 1]])])
        wrong_dim = attach_views(Document(id="d5", content="x"), np.ones((1, self.embedding_dim + 1)))
        with pytest.raises(ValueError, match="dimension"):
            document_store.write_documents([self.mv_doc("d4", [[0, 1]]), wrong_dim])
        with pytest.raises(DuplicateDocumentError):
            document_store.write_documents([self.mv_doc("d6", [[0, 1]]), self.mv_doc("d0", [[0, 1]])])
        assert [d.id for d in document_store.filter_documents()] == ["d0"]
        assert [h.id for h in document_store.search(self.vec(1, 0), top_k=5)] == ["d0"]

    def test_embedding_of_another_size_than_the_views_is_refused(self, document_store):
        doc = dataclasses.replace(self.mv_doc("d0", [[1, 0]]), embedding=[1.0] * (self.embedding_dim + 2))
        with pytest.raises(ValueError, match="d0"):
            document_store.write_documents([doc])
        assert document_store.count_documents() == 0

    def test_own_embedding_beside_views_is_kept(self, document_store):
        doc = dataclasses.replace(self.mv_doc("d0", [[1, 0], [0, 1]]), embedding=self.vec(0.5, 0.25))
        document_store.write_documents([doc])
        np.testing.assert_allclose(document_store.filter_documents()[0].embedding, self.vec(0.5, 0.25), atol=1e-6)

    @pytest.mark.parametrize(
        "spans",
        [[[0, 5]], [[0, 5], [1]], [[0, 5], "ab"], [[0, 5], [7, 2]], [[0, 5], [-1, 3]], [[0, 5], [0, 999]], "xy"],
        ids=["count", "short", "string", "reversed", "negative", "past-end", "not-a-list"],
    )
    def test_malformed_spans_name_field_and_document(self, document_store, spans):
        doc = self.mv_doc("bad-spans", [[1, 0], [0, 1]])
        doc = dataclasses.replace(doc, meta={**doc.meta, SPANS_KEY: spans})
        with pytest.raises(ValueError, match=rf"(?s)(?=.*{SPANS_KEY})(?=.*bad-spans)"):
            document_store.write_documents([doc])
        assert document_store.count_documents() == 0

    def test_encoder_is_taken_off_recorded_and_enforced(self, document_store):
        encoder = {"model": "enc-a", "mode": "snippet"}
        doc = self.mv_doc("d0", [[1, 0]])
        document_store.write_documents([dataclasses.replace(doc, meta={**doc.meta, ENCODER_KEY: encoder})])
        assert ENCODER_KEY not in document_store.filter_documents()[0].meta
        assert ENCODER_KEY not in document_store.search(self.vec(1, 0), top_k=1)[0].meta
        assert document_store.encoder_config == encoder
        other = self.mv_doc("d1", [[0, 1]])
        other = dataclasses.replace(other, meta={**other.meta, ENCODER_KEY: {"model": "enc-b", "mode": "snippet"}})
        with pytest.raises(ValueError, match="encoder"):
            document_store.write_documents([other])
        assert document_store.count_documents() == 1
        same = self.mv_doc("d2", [[0, 1]])
        document_store.write_documents([dataclasses.replace(same, meta={**same.meta, ENCODER_KEY: dict(encoder)})])
        assert document_store.count_documents() == 2


@st.composite
def _operations(draw, n_docs: int = 24):
    """A random history: batches of writes (some overwriting), deletes, then a query, filter and top_k."""
    seed = draw(st.integers(0, 2**31 - 1))
    steps = draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("write"), st.lists(st.integers(0, n_docs - 1), min_size=1, max_size=10)),
                st.tuples(st.just("delete"), st.lists(st.integers(0, n_docs - 1), min_size=1, max_size=6)),
            ),
            min_size=1,
            max_size=8,
        )
    )
    top_k = draw(st.integers(1, 12))
    group = draw(st.sampled_from([None, 0, 1, 2]))
    return seed, steps, top_k, group


class MultiViewPropertyTests(MultiViewFixturesMixin):
    """Random writes, overwrites, deletes and filters: search agrees with numpy brute force over the views."""

    def test_search_equals_brute_force(self, document_store):
        @settings(
            max_examples=self.property_examples,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        )
        @given(_operations())
        def check(ops):
            self._check_history(document_store, *ops)

        check()

    def _check_history(self, store, seed, steps, top_k, group):
        store.delete_all_documents()
        rng = np.random.default_rng(seed)
        live: dict[str, tuple[np.ndarray, int]] = {}
        for kind, ids in steps:
            if kind == "write":
                batch = {}
                for i in ids:
                    views = rng.normal(size=(int(rng.integers(1, 6)), self.embedding_dim)).astype(np.float32)
                    batch[f"d{i}"] = (views, int(rng.integers(0, 3)))
                docs = [
                    attach_views(Document(id=doc_id, content="x", meta={"g": g}), v) for doc_id, (v, g) in batch.items()
                ]
                store.write_documents(docs, policy=DuplicatePolicy.OVERWRITE)
                live.update(batch)
            else:
                store.delete_documents([f"d{i}" for i in ids])
                for i in ids:
                    live.pop(f"d{i}", None)
            store.search(rng.normal(size=self.embedding_dim).tolist(), top_k=1)  # index between changes
        queries = rng.normal(size=(3, self.embedding_dim)).astype(np.float32)
        filters = None if group is None else {"field": "meta.g", "operator": "==", "value": group}
        allowed = {doc_id: v for doc_id, (v, g) in live.items() if group is None or g == group}
        batched = store.search_batch(queries, top_k=top_k, filters=filters, return_embedding=True)
        for query, got_batched in zip(queries, batched, strict=True):
            got = store.search(query.tolist(), top_k=top_k, filters=filters, return_embedding=True)
            assert [(h.id, round(h.score, 4)) for h in got] == [(h.id, round(h.score, 4)) for h in got_batched]
            self.assert_valid_results(got, query, top_k, len(allowed))
            assert {h.id for h in got} <= set(allowed)
            if not self.exact_search:
                continue
            expected = sorted(((float(np.max(v @ query)), i) for i, v in allowed.items()), key=lambda t: -t[0])
            expected = expected[:top_k]
            np.testing.assert_allclose([h.score for h in got], [s for s, _ in expected], rtol=1e-4, atol=1e-4)
            for h, (score, doc_id) in zip(got, expected, strict=True):
                if sum(abs(s - score) < 1e-4 for s, _ in expected) == 1:
                    assert h.id == doc_id
                np.testing.assert_allclose(document_views(h), allowed[h.id], atol=1e-5)


class MultiViewExportTests(MultiViewFixturesMixin):
    """``export_documents``: every document once, with all its views, in batches; written back, the same answers."""

    encoder: ClassVar[dict[str, str]] = {"model": "enc-export", "mode": "snippet"}

    def _corpus(self) -> list[Document]:
        own = self.mv_doc("own", [[0, 0, 1], [1, 1]], spans=SPANS, lang="en")
        docs = [
            self.mv_doc("a", [[1, 0], [0, 1]], spans=SPANS, lang="pl", tags=["x", "y"], empty=[]),
            self.mv_doc("b", [[0.5, 0.5], [0, 2], [1, 1]], spans=[None, (0, 11), (12, 24)], lang="en", n=2),
            dataclasses.replace(own, embedding=self.vec(0, 0, 0, 1)),  # its own embedding beside its views
            Document(id="plain", content="one plain embedding", embedding=self.vec(0, 0, 1), meta={"nested": {"k": 1}}),
            Document(id="none", content="no vectors", meta={"lang": "pl"}),
            *self.random_docs(5, views=4, seed=3, lang="en"),
        ]
        return [dataclasses.replace(d, meta={**d.meta, ENCODER_KEY: self.encoder}) for d in docs]

    def _export_answers(self, store: Any, filters: Any) -> list[tuple]:
        hits = store.search(self.vec(1, 0.5, 0.25, -0.5), top_k=4, filters=filters)
        keys = (MATCHED_VIEW_KEY, MATCHED_SCOPE_KEY, MATCHED_SPAN_KEY, MATCHED_TEXT_KEY)
        return [(h.id, round(h.score, 4), *(str(h.meta.get(k)) for k in keys)) for h in hits]

    def test_export_yields_every_document_once_with_all_its_views(self, document_store):
        written = {d.id: d for d in self._corpus()}
        document_store.write_documents(list(written.values()))
        batches = list(document_store.export_documents(batch_size=3))
        assert all(0 < len(b) <= 3 for b in batches)
        exported = [d for b in batches for d in b]
        assert sorted(d.id for d in exported) == sorted(written)
        for doc in exported:
            source = written[doc.id]
            assert doc.meta[ENCODER_KEY] == self.encoder and doc.content == source.content
            assert {k: v for k, v in doc.meta.items() if k != VIEWS_KEY} == {
                k: v for k, v in source.meta.items() if k != VIEWS_KEY
            }
            views, expected = document_views(doc), document_views(source)
            if expected is None:
                assert views is None and doc.embedding is None
                continue
            assert views.shape == expected.shape
            if self.exact_search:
                np.testing.assert_allclose(views, expected, rtol=1e-6, atol=1e-6)
                assert doc.embedding == pytest.approx(source.embedding, abs=1e-6)

    def test_exported_documents_written_back_answer_the_same(self, document_store):
        document_store.write_documents(self._corpus())
        filters = [
            None,
            {"field": "meta.lang", "operator": "==", "value": "en"},
            {"field": "meta.n", "operator": ">", "value": 1},
        ]
        before = [self._export_answers(document_store, f) for f in filters]
        stored = sorted(
            (d.id, d.content, json.dumps(d.meta, sort_keys=True)) for d in document_store.filter_documents()
        )
        exported = [d for b in document_store.export_documents(batch_size=4) for d in b]
        document_store.delete_all_documents()
        assert document_store.write_documents(exported) == len(exported)
        after = sorted((d.id, d.content, json.dumps(d.meta, sort_keys=True)) for d in document_store.filter_documents())
        assert after == stored
        if self.exact_search:
            assert [self._export_answers(document_store, f) for f in filters] == before

    def test_export_filters_and_refuses_a_bad_batch_size(self, document_store):
        assert list(document_store.export_documents()) == []
        document_store.write_documents(self._corpus())
        pl = {"field": "meta.lang", "operator": "==", "value": "pl"}
        assert sorted(d.id for b in document_store.export_documents(filters=pl) for d in b) == ["a", "none"]
        for bad in (0, -1, 1.5, True):
            with pytest.raises(ValueError, match="batch_size"):
                next(iter(document_store.export_documents(batch_size=bad)))

    def test_filter_documents_output_is_refused_with_the_way_to_move_an_index(self, document_store):
        document_store.write_documents(self._corpus())
        read_back = [d for d in document_store.filter_documents() if d.id == "a"]
        with pytest.raises(ValueError, match="export_documents"):
            document_store.write_documents(read_back, policy=DuplicatePolicy.OVERWRITE)
        assert document_store.count_documents() == len(self._corpus())


class MultiViewDocumentStoreTests(
    MultiViewHaystackTests,
    MultiViewHaystackAsyncTests,
    MultiViewSearchTests,
    MultiViewSearchBatchTests,
    MultiViewInputTests,
    MultiViewPropertyTests,
    MultiViewExportTests,
):
    """Everything a multi-view store must pass (persistence aside: :class:`MultiViewPersistenceTests`)."""


class MultiViewPersistenceTests(MultiViewFixturesMixin):
    """A store read back answers exactly as it did. Needs a ``reopen(store) -> store`` fixture."""

    @pytest.fixture
    def reopen(self):
        msg = "Define a `reopen` fixture returning a function store -> the same store read back."
        raise NotImplementedError(msg)

    @staticmethod
    def _answers(store, query, **kwargs):
        return [
            (h.id, round(h.score, 4), h.meta[MATCHED_VIEW_KEY], h.meta[MATCHED_TEXT_KEY])
            for h in store.search(query, top_k=10, **kwargs)
        ]

    def test_reopened_store_answers_the_same(self, document_store, reopen):
        docs = [self.mv_doc(f"d{i}", [[1, i / 10], [i / 10, 1]], SPANS, i=i) for i in range(12)]
        document_store.write_documents([*docs, Document(id="plain", content="no vector", meta={"i": 99})])
        document_store.delete_documents(["d3"])
        document_store.write_documents(
            [self.mv_doc("d4", [[0, 1], [0.2, 0]], SPANS, i=4)], policy=DuplicatePolicy.OVERWRITE
        )
        query = self.vec(1, 0.3)
        before = self._answers(document_store, query)
        filtered_before = self._answers(document_store, query, filters={"field": "meta.i", "operator": ">", "value": 6})
        listed_before = sorted((d.id, d.content, d.meta.get("i")) for d in document_store.filter_documents())
        loaded = reopen(document_store)
        assert loaded.count_documents() == 12
        assert self._answers(loaded, query) == before
        assert self._answers(loaded, query, filters={"field": "meta.i", "operator": ">", "value": 6}) == filtered_before
        assert sorted((d.id, d.content, d.meta.get("i")) for d in loaded.filter_documents()) == listed_before

    def test_reopened_store_takes_writes_and_deletes(self, document_store, reopen):
        document_store.write_documents([self.mv_doc(f"d{i}", [[1, i]]) for i in range(5)])
        loaded = reopen(document_store)
        loaded.write_documents([self.mv_doc("new", [[5, 0]])])
        loaded.delete_documents(["d0", "d0"])
        hits = loaded.search(self.vec(1, 0), top_k=10)
        assert hits[0].id == "new" and "d0" not in {h.id for h in hits} and len(hits) == 5

    def test_reopened_store_keeps_its_encoder(self, document_store, reopen):
        doc = self.mv_doc("d0", [[1, 0]])
        encoder = {"model": "enc-a"}
        document_store.write_documents([dataclasses.replace(doc, meta={**doc.meta, ENCODER_KEY: encoder})])
        loaded = reopen(document_store)
        assert loaded.encoder_config == encoder
        other = self.mv_doc("d1", [[0, 1]])
        with pytest.raises(ValueError, match="encoder"):
            loaded.write_documents([dataclasses.replace(other, meta={**other.meta, ENCODER_KEY: {"model": "b"}})])

    def test_reopened_empty_store(self, document_store, reopen):
        loaded = reopen(document_store)
        assert loaded.count_documents() == 0 and loaded.search(self.vec(1, 0), top_k=3) == []


__all__ = [
    "MultiViewDocumentStoreTests",
    "MultiViewFixturesMixin",
    "MultiViewHaystackAsyncTests",
    "MultiViewHaystackTests",
    "MultiViewInputTests",
    "MultiViewPersistenceTests",
    "MultiViewPropertyTests",
    "MultiViewSearchBatchTests",
    "MultiViewSearchTests",
]
