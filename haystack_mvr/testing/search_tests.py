"""The contract of ``search``, ``search_batch`` and their async forms."""

from __future__ import annotations

import asyncio
import copy
import json

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.types import DuplicatePolicy
from haystack.errors import FilterError

from haystack_mvr.testing.fixtures import SPANS, MultiViewFixturesMixin
from haystack_mvr.views import (
    MATCHED_SCOPE_KEY,
    MATCHED_SPAN_KEY,
    MATCHED_SPANS_KEY,
    MATCHED_TEXT_KEY,
    MATCHED_VIEW_KEY,
    SPANS_KEY,
    VIEWS_KEY,
    document_views,
)


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
            document_store.search([[[1.0] * self.embedding_dim]], top_k=1)  # 3-D: neither a vector nor vectors
        with pytest.raises(ValueError, match="dimension"):
            document_store.search([[1.0] * (self.embedding_dim + 1)] * 2, top_k=1)
        with pytest.raises(ValueError, match="NaN"):
            document_store.search([[float("nan")] * self.embedding_dim] * 2, top_k=1)
        assert document_store.count_documents() == 1

    def test_a_multi_vector_query_ranks_by_maxsim(self, document_store):
        """A late-interaction query ``(m, d)``: each document's score is the sum over the query's vectors of each
        one's best view (MaxSim), and the results say which views matched."""
        document_store.write_documents(
            [
                self.mv_doc("d0", [[1, 0], [0, 1]], SPANS),  # both query vectors find their match here
                self.mv_doc("d1", [[1, 0]]),  # one of them does
                self.mv_doc("d2", [[0.6, 0.6]]),
            ]
        )
        query = [self.vec(1, 0), self.vec(0, 1)]
        hits = document_store.search(query, top_k=3, return_embedding=True)
        assert len(hits) == 3 and [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        for h in hits:  # scored by MaxSim over the views the store holds (a lossy index's decoded ones)
            held = document_views(h)
            assert h.score == pytest.approx(float((held @ np.asarray(query).T).max(axis=0).sum()), abs=1e-4)
        if self.exact_search:
            assert [h.id for h in hits] == ["d0", "d2", "d1"]
            assert [h.score for h in hits] == pytest.approx([2.0, 1.2, 1.0], abs=1e-2)
            assert hits[0].meta[MATCHED_SPANS_KEY] == [list(s) for s in SPANS]
        one_row = document_store.search([self.vec(1, 0)], top_k=3)  # one row: the single-vector search
        assert [(h.id, round(h.score, 3)) for h in one_row] == [
            (h.id, round(h.score, 3)) for h in document_store.search(self.vec(1, 0), top_k=3)
        ]

    def test_a_multi_vector_query_against_brute_force(self, document_store):
        docs = self.random_docs(30, views=5, seed=11)
        document_store.write_documents(docs)
        views = {d.id: document_views(d) for d in docs}
        rng = np.random.default_rng(12)
        for _ in range(3):
            query = rng.normal(size=(4, self.embedding_dim)).astype(np.float32)
            for filters in (None, {"field": "meta.g", "operator": "==", "value": 1}):
                allowed = [d.id for d in docs if filters is None or d.meta["g"] == 1]
                hits = document_store.search(query, top_k=5, filters=filters, return_embedding=True)
                assert len(hits) == 5 and {h.id for h in hits} <= set(allowed)
                for h in hits:  # scored by MaxSim over the views the store holds
                    held = document_views(h)
                    assert h.score == pytest.approx(float((held @ query.T).max(axis=0).sum()), rel=1e-4, abs=1e-4)
                assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
                if self.exact_search:
                    expected = sorted(allowed, key=lambda i: -float((views[i] @ query.T).max(axis=0).sum()))[:5]
                    assert [h.id for h in hits] == expected


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
