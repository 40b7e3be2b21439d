"""The FAISS store's module path before it moved to ``haystack_mvr.document_stores.faiss``.

Kept so that pipelines saved with ``type: haystack_mvr.document_stores.faiss_multi_view_document_store.
FaissMultiViewDocumentStore`` still load; new code imports ``haystack_mvr.document_stores.FaissMultiViewDocumentStore``.
"""

from haystack_mvr.document_stores.faiss.document_store import FaissMultiViewDocumentStore

__all__ = ["FaissMultiViewDocumentStore"]
