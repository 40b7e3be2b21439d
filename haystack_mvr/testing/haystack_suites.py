"""Haystack's own document store suites, synchronous and asynchronous, as a multi-view store runs them."""

from __future__ import annotations

import pytest
from haystack import Document
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy
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


class MultiViewHaystackTests(
    DocumentStoreBaseExtendedTests,
    CountDocumentsByFilterTest,
    CountUniqueMetadataByFilterTest,
    GetMetadataFieldsInfoTest,
    GetMetadataFieldMinMaxTest,
    GetMetadataFieldUniqueValuesTest,
):
    """Haystack's own synchronous document store suite (every ``DocumentStore`` method)."""

    def test_write_documents(self, document_store):
        """No policy means ``FAIL``: a duplicate id raises, ``SKIP`` skips it, ``OVERWRITE`` replaces it."""
        # 4 dimensions: a PQ with 4 sub-quantizers (the contract's PQ, OPQ and IVF-PQ stores) cannot split 2
        docs = [Document(id="1", content="a"), Document(id="2", content="b", embedding=[0.1, 0.2, 0.3, 0.4])]
        assert document_store.write_documents(docs) == 2
        assert sorted(d.id for d in document_store.filter_documents()) == ["1", "2"]
        with pytest.raises(DuplicateDocumentError):
            document_store.write_documents([Document(id="1", content="again")])
        assert document_store.write_documents([Document(id="1", content="again")], DuplicatePolicy.SKIP) == 0
        assert document_store.write_documents([Document(id="1", content="new")], DuplicatePolicy.OVERWRITE) == 1
        assert {d.id: d.content for d in document_store.filter_documents()} == {"1": "new", "2": "b"}


class MultiViewHaystackAsyncTests(
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
    """Haystack's own asynchronous document store suite (every ``*_async`` method)."""

    @pytest.mark.asyncio
    async def test_write_documents_async(self, document_store):
        assert await document_store.write_documents_async([Document(id="x", content="x")]) == 1
        assert await document_store.count_documents_async() == 1
        with pytest.raises(DuplicateDocumentError):
            await document_store.write_documents_async([Document(id="x", content="again")])
