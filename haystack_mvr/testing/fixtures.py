"""What the contract suites share: vectors of the backend's dimension and documents carrying views."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from haystack import Document

from haystack_mvr.views import (
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
