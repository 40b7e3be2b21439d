"""The ``*_async`` forms of Haystack's store protocol, for stores whose engine is synchronous: each runs its sync
method in a worker thread (``asyncio.to_thread``). Both multi-view stores inherit them; a backend overrides any it
can serve natively (the Qdrant store's server-mode search uses ``AsyncQdrantClient``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from haystack import Document
from haystack.document_stores.types import DuplicatePolicy


class ThreadedAsyncMethods:
    """Haystack's async store methods and the multi-view `search_async` / `search_batch_async`, each the sync method
    run in a worker thread."""

    async def count_documents_async(self) -> int:
        return await asyncio.to_thread(self.count_documents)

    async def write_documents_async(
        self, documents: Iterable[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE
    ) -> int:
        return await asyncio.to_thread(self.write_documents, documents, policy)

    async def delete_all_documents_async(self) -> None:
        await asyncio.to_thread(self.delete_all_documents)

    async def filter_documents_async(self, filters: dict[str, Any] | None = None) -> list[Document]:
        return await asyncio.to_thread(self.filter_documents, filters)

    async def delete_documents_async(self, document_ids: list[str]) -> None:
        await asyncio.to_thread(self.delete_documents, document_ids)

    async def delete_by_filter_async(self, filters: dict[str, Any]) -> int:
        return await asyncio.to_thread(self.delete_by_filter, filters)

    async def update_by_filter_async(self, filters: dict[str, Any], meta: dict[str, Any]) -> int:
        return await asyncio.to_thread(self.update_by_filter, filters, meta)

    async def count_documents_by_filter_async(self, filters: dict[str, Any]) -> int:
        return await asyncio.to_thread(self.count_documents_by_filter, filters)

    async def count_unique_metadata_by_filter_async(
        self, filters: dict[str, Any], metadata_fields: list[str]
    ) -> dict[str, int]:
        return await asyncio.to_thread(self.count_unique_metadata_by_filter, filters, metadata_fields)

    async def get_metadata_fields_info_async(self) -> dict[str, dict[str, str]]:
        return await asyncio.to_thread(self.get_metadata_fields_info)

    async def get_metadata_field_min_max_async(self, metadata_field: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.get_metadata_field_min_max, metadata_field)

    async def get_metadata_field_unique_values_async(
        self,
        metadata_field: str,
        search_term: str | None = None,
        from_: int = 0,
        size: int = 10,
        filters: dict[str, Any] | None = None,
    ) -> tuple[list[Any], int]:
        return await asyncio.to_thread(
            self.get_metadata_field_unique_values, metadata_field, search_term, from_, size, filters
        )

    async def check_query_encoder_async(self, encoder: dict[str, Any] | None) -> None:
        await asyncio.to_thread(self.check_query_encoder, encoder)

    async def search_async(
        self,
        query_embedding: Any,
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]:
        return await asyncio.to_thread(self.search, query_embedding, top_k, filters, return_embedding)

    async def search_batch_async(
        self,
        query_embeddings: Any,
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[list[Document]]:
        return await asyncio.to_thread(self.search_batch, query_embeddings, top_k, filters, return_embedding)


__all__ = ["ThreadedAsyncMethods"]
