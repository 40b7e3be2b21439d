"""The PostgreSQL + pgvector multi-view document store (``pip install "haystack-mvr[pgvector]"``)."""

try:
    import pgvector  # noqa: F401
    import psycopg  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    msg = 'PgvectorMultiViewDocumentStore needs psycopg 3 and pgvector: pip install "haystack-mvr[pgvector]"'
    raise ImportError(msg) from e

from haystack_mvr.document_stores.pgvector.connection import ConnectionLostError
from haystack_mvr.document_stores.pgvector.document_store import PgvectorMultiViewDocumentStore
from haystack_mvr.document_stores.pgvector.schema import TableMismatchError

__all__ = ["ConnectionLostError", "PgvectorMultiViewDocumentStore", "TableMismatchError"]
