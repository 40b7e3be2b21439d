"""The multi-view store contract suite (``haystack_mvr.testing``) on the Qdrant store in local mode.

``:memory:`` runs everything but persistence; ``path=`` runs the search suites and persistence (reopening the
folder in a new store after closing the first). Haystack's own suites run once, on ``:memory:``.
"""

from __future__ import annotations

import itertools

import pytest

pytest.importorskip("qdrant_client")

from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore
from haystack_mvr.testing import (
    MultiViewExportTests,
    MultiViewHaystackAsyncTests,
    MultiViewHaystackTests,
    MultiViewInputTests,
    MultiViewPersistenceTests,
    MultiViewPropertyTests,
    MultiViewSearchBatchTests,
    MultiViewSearchTests,
)

_folders = itertools.count()


@pytest.fixture
def memory_store():
    store = QdrantMultiViewDocumentStore(location=":memory:")
    yield store
    store.close()


@pytest.fixture
def path_store(tmp_path):
    store = QdrantMultiViewDocumentStore(path=str(tmp_path / f"qdrant-{next(_folders)}"), index="contract")
    yield store
    store.close()


class TestQdrantHaystackSuites(MultiViewHaystackTests, MultiViewHaystackAsyncTests):
    @pytest.fixture
    def document_store(self, memory_store):
        return memory_store


class TestQdrantMemoryContract(
    MultiViewSearchTests, MultiViewSearchBatchTests, MultiViewInputTests, MultiViewPropertyTests, MultiViewExportTests
):
    property_examples = 20

    @pytest.fixture
    def document_store(self, memory_store):
        return memory_store


class TestQdrantPathContract(
    MultiViewSearchTests,
    MultiViewSearchBatchTests,
    MultiViewInputTests,
    MultiViewPersistenceTests,
    MultiViewExportTests,
):
    @pytest.fixture
    def document_store(self, path_store):
        return path_store

    @pytest.fixture
    def reopen(self):
        def _reopen(store):
            store.close()  # releases the folder: the new store opens it afresh, as another process would
            reopened = QdrantMultiViewDocumentStore(path=store.path, index=store.index)
            reopened.count_documents()  # read it back (a store opens its collection on first use)
            return reopened

        return _reopen
