"""The contract on bad and odd input: refused clearly, nothing lost; accepted when valid."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.errors import DuplicateDocumentError

from haystack_mvr.testing.fixtures import MultiViewFixturesMixin
from haystack_mvr.views import (
    ENCODER_KEY,
    SPANS_KEY,
    attach_views,
)


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
