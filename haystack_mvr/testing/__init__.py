"""Reusable test suites for multi-view document stores (needs the ``test`` extra: pytest, hypothesis)."""

from haystack_mvr.testing.export_tests import MultiViewExportTests
from haystack_mvr.testing.fixtures import MultiViewFixturesMixin
from haystack_mvr.testing.haystack_suites import MultiViewHaystackAsyncTests, MultiViewHaystackTests
from haystack_mvr.testing.input_tests import MultiViewInputTests
from haystack_mvr.testing.multi_view_document_store import MultiViewDocumentStoreTests
from haystack_mvr.testing.persistence_tests import MultiViewPersistenceTests
from haystack_mvr.testing.property_tests import MultiViewPropertyTests
from haystack_mvr.testing.search_tests import MultiViewSearchBatchTests, MultiViewSearchTests

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
