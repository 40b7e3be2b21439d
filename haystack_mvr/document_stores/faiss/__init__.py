"""The FAISS multi-view document store, the embedded default (``pip install "haystack-mvr[cpu]"`` or ``[gpu]``).

- ``document_store``: the Haystack-facing store (documents, filters, the multi-view search, save/load);
- ``view_index``: the FAISS index of view rows and the collapse of view hits to documents;
- ``gpu_index``: searching a copy of the index on a GPU;
- ``persistence`` / ``versioned_directory``: the saved store's files, written as crash-safe versions;
- ``faiss_import``: the one place FAISS is imported.
"""

from haystack_mvr.document_stores.faiss.document_store import FaissMultiViewDocumentStore

__all__ = ["FaissMultiViewDocumentStore"]
