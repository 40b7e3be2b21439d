"""The multi-view document stores. Each backend's store is in its own package, whose engine is an optional extra
(its import error names the extra): ``haystack_mvr.document_stores.faiss`` (``[cpu]`` or ``[gpu]``),
``haystack_mvr.document_stores.qdrant`` (``[qdrant]``) and ``haystack_mvr.document_stores.pgvector``
(``[pgvector]``). This package holds what they share: the store protocol, its statistics and copying between
stores."""

from haystack_mvr.document_stores.copying import copy_documents
from haystack_mvr.document_stores.types import MultiViewDocumentStore, StoreStats

__all__ = ["MultiViewDocumentStore", "StoreStats", "copy_documents"]
