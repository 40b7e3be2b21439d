from typing import Any

from haystack_mvr.document_stores.faiss_multi_view_document_store import FaissMultiViewDocumentStore

__all__ = ["FaissMultiViewDocumentStore", "QdrantMultiViewDocumentStore"]


def __getattr__(name: str) -> Any:
    # qdrant-client is optional: imported only when the Qdrant store is asked for.
    if name == "QdrantMultiViewDocumentStore":
        from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

        return QdrantMultiViewDocumentStore
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
