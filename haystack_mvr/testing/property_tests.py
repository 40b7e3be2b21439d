"""Random histories of writes, overwrites, deletes and filters, checked against numpy brute force."""

from __future__ import annotations

import numpy as np
from haystack import Document
from haystack.document_stores.types import DuplicatePolicy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haystack_mvr.testing.fixtures import MultiViewFixturesMixin
from haystack_mvr.views import (
    attach_views,
    document_views,
)


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
