from typing import Any

from haystack_mvr.document_stores.copying import copy_documents
from haystack_mvr.document_stores.types import MultiViewDocumentStore, StoreStats

__all__ = [
    "FaissMultiViewDocumentStore",
    "MultiViewDocumentStore",
    "PgvectorMultiViewDocumentStore",
    "QdrantMultiViewDocumentStore",
    "StoreStats",
    "copy_documents",
]


def __getattr__(name: str) -> Any:
    # Each backend's engine is optional (FAISS: the [cpu] or [gpu] extra; qdrant-client: the [qdrant] extra; psycopg
    # and pgvector: the [pgvector] extra), so a backend is imported only when it is asked for, and a missing engine's
    # error names its extra.
    if name == "FaissMultiViewDocumentStore":
        from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

        return FaissMultiViewDocumentStore
    if name == "QdrantMultiViewDocumentStore":
        from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

        return QdrantMultiViewDocumentStore
    if name == "PgvectorMultiViewDocumentStore":
        from haystack_mvr.document_stores.pgvector import PgvectorMultiViewDocumentStore

        return PgvectorMultiViewDocumentStore
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
