"""The multi-view store contract suite (``haystack_mvr.testing``) on the pgvector store against a real PostgreSQL.

Exact search runs every suite, Haystack's own sync and async ones included, and persistence (a new store object on
the same table, after closing the first). HNSW runs the search suites and the brute-force property test: on tables
this small the widened candidate scan finds every document, so its answers equal brute force too.
"""

from __future__ import annotations

import pytest

from .conftest import require_server

require_server()

from haystack_mvr.testing import (  # noqa: E402
    MultiViewExportTests,
    MultiViewHaystackAsyncTests,
    MultiViewHaystackTests,
    MultiViewInputTests,
    MultiViewPersistenceTests,
    MultiViewPropertyTests,
    MultiViewSearchBatchTests,
    MultiViewSearchTests,
)


class TestPgvectorHaystackSuites(MultiViewHaystackTests, MultiViewHaystackAsyncTests):
    @pytest.fixture
    def document_store(self, make_store):
        return make_store()


class TestPgvectorExactContract(
    MultiViewSearchTests,
    MultiViewSearchBatchTests,
    MultiViewInputTests,
    MultiViewPropertyTests,
    MultiViewExportTests,
    MultiViewPersistenceTests,
):
    property_examples = 10

    @pytest.fixture
    def document_store(self, make_store):
        return make_store()

    @pytest.fixture
    def reopen(self, make_store):
        def _reopen(store):
            store.close()
            reopened = make_store(table_name=store.table_name)
            reopened.count_documents()
            return reopened

        return _reopen


class TestPgvectorHnswContract(MultiViewSearchTests, MultiViewSearchBatchTests, MultiViewPropertyTests):
    property_examples = 10

    @pytest.fixture
    def document_store(self, make_store):
        return make_store(search_strategy="hnsw", hnsw_ef_search=100)
