"""The contract of a store read back from wherever its backend persists it."""

from __future__ import annotations

import dataclasses

import pytest
from haystack import Document
from haystack.document_stores.types import DuplicatePolicy

from haystack_mvr.testing.fixtures import SPANS, MultiViewFixturesMixin
from haystack_mvr.views import (
    ENCODER_KEY,
    MATCHED_TEXT_KEY,
    MATCHED_VIEW_KEY,
)


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
