"""The contract of ``export_documents``: every document once, with all its views, ready to write back."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, ClassVar

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.types import DuplicatePolicy

from haystack_mvr.testing.fixtures import SPANS, MultiViewFixturesMixin
from haystack_mvr.views import (
    ENCODER_KEY,
    MATCHED_SCOPE_KEY,
    MATCHED_SPAN_KEY,
    MATCHED_TEXT_KEY,
    MATCHED_VIEW_KEY,
    VIEWS_KEY,
    document_views,
)


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
