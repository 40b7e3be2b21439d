from haystack_mvr.document_stores.faiss_multi_view_document_store import FaissMultiViewDocumentStore

__all__ = ["FaissMultiViewDocumentStore"]
