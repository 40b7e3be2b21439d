"""Haystack's own document store suites (sync and async) on the Qdrant store in local mode."""

import pytest
from haystack import Document
from haystack.testing.document_store import (
    CountDocumentsByFilterTest,
    CountUniqueMetadataByFilterTest,
    DocumentStoreBaseExtendedTests,
    GetMetadataFieldMinMaxTest,
    GetMetadataFieldsInfoTest,
    GetMetadataFieldUniqueValuesTest,
)
from haystack.testing.document_store_async import (
    CountDocumentsAsyncTest,
    CountDocumentsByFilterAsyncTest,
    CountUniqueMetadataByFilterAsyncTest,
    DeleteAllAsyncTest,
    DeleteByFilterAsyncTest,
    DeleteDocumentsAsyncTest,
    FilterDocumentsAsyncTest,
    GetMetadataFieldMinMaxAsyncTest,
    GetMetadataFieldsInfoAsyncTest,
    GetMetadataFieldUniqueValuesAsyncTest,
    UpdateByFilterAsyncTest,
    WriteDocumentsAsyncTest,
)

pytest.importorskip("qdrant_client")

from haystack_mvr.document_stores import QdrantMultiViewDocumentStore


class TestHaystackSuite(
    DocumentStoreBaseExtendedTests,
    CountDocumentsByFilterTest,
    CountUniqueMetadataByFilterTest,
    GetMetadataFieldsInfoTest,
    GetMetadataFieldMinMaxTest,
    GetMetadataFieldUniqueValuesTest,
):
    @pytest.fixture
    def document_store(self):
        store = QdrantMultiViewDocumentStore(location=":memory:")
        yield store
        store.close()

    def test_write_documents(self, document_store):
        docs = [Document(id="1", content="a"), Document(id="2", content="b", embedding=[0.1, 0.2])]
        assert document_store.write_documents(docs) == 2
        assert [d.id for d in document_store.filter_documents()] == ["1", "2"]
        assert document_store.filter_documents()[1].embedding == [0.1, 0.2]


class TestHaystackAsyncSuite(
    CountDocumentsAsyncTest,
    CountDocumentsByFilterAsyncTest,
    CountUniqueMetadataByFilterAsyncTest,
    GetMetadataFieldsInfoAsyncTest,
    GetMetadataFieldMinMaxAsyncTest,
    GetMetadataFieldUniqueValuesAsyncTest,
    DeleteAllAsyncTest,
    DeleteByFilterAsyncTest,
    DeleteDocumentsAsyncTest,
    FilterDocumentsAsyncTest,
    UpdateByFilterAsyncTest,
    WriteDocumentsAsyncTest,
):
    @pytest.fixture
    def document_store(self):
        store = QdrantMultiViewDocumentStore(location=":memory:")
        yield store
        store.close()

    @pytest.mark.asyncio
    async def test_write_documents_async(self, document_store):
        assert await document_store.write_documents_async([Document(id="x", content="x")]) == 1
        assert await document_store.count_documents_async() == 1
