"""The Qdrant multi-view document store (``pip install "haystack-mvr[qdrant]"``)."""

try:
    import qdrant_client  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    msg = 'QdrantMultiViewDocumentStore needs qdrant-client: pip install "haystack-mvr[qdrant]"'
    raise ImportError(msg) from e

from haystack_mvr.document_stores.qdrant.collection_state import CollectionMismatchError
from haystack_mvr.document_stores.qdrant.document_store import QdrantMultiViewDocumentStore

__all__ = ["CollectionMismatchError", "QdrantMultiViewDocumentStore"]
