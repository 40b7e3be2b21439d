"""Reusable test suites for multi-view document stores (needs the ``test`` extra: pytest, hypothesis)."""

from haystack_mvr.testing.multi_view_document_store import (
    MultiViewDocumentStoreTests,
    MultiViewExportTests,
    MultiViewFixturesMixin,
    MultiViewHaystackAsyncTests,
    MultiViewHaystackTests,
    MultiViewInputTests,
    MultiViewPersistenceTests,
    MultiViewPropertyTests,
    MultiViewSearchBatchTests,
    MultiViewSearchTests,
)

__all__ = [
    "MultiViewDocumentStoreTests",
    "MultiViewExportTests",
    "MultiViewFixturesMixin",
    "MultiViewHaystackAsyncTests",
    "MultiViewHaystackTests",
    "MultiViewInputTests",
    "MultiViewPersistenceTests",
    "MultiViewPropertyTests",
    "MultiViewSearchBatchTests",
    "MultiViewSearchTests",
]
