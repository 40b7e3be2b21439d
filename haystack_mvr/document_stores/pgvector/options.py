"""The store's constructor options, checked before anything is connected or stored.

Names follow ``pgvector-haystack`` where they apply. A table name must leave room for the two tables created beside
it (``<table>_views``, ``<table>_mvr``) inside PostgreSQL's 63-byte identifier limit; names are never spliced into
SQL as text (``schema.py`` quotes them), so any other character is allowed.
"""

from __future__ import annotations

from typing import Any

from haystack.utils import Secret

from haystack_mvr.document_stores.checks import check_encoder_config, check_optional_positive_int

#: PostgreSQL truncates identifiers longer than this many bytes.
MAX_IDENTIFIER_BYTES = 63
#: The longest suffix of a table created beside the documents table (``_views_hnsw`` names its index).
LONGEST_SUFFIX = len("_views_hnsw")
SEARCH_STRATEGIES = ("exact", "hnsw")
#: The score of a document is its best view's inner product with the query, as in every haystack-mvr store.
VECTOR_FUNCTIONS = ("inner_product",)
#: The HNSW build settings pgvector takes (``CREATE INDEX ... WITH (m = ..., ef_construction = ...)``).
HNSW_INDEX_KEYS = {"m": (2, 100), "ef_construction": (4, 1000)}


def check_options(
    *,
    connection_string: Any,
    schema_name: Any,
    table_name: Any,
    embedding_dimension: Any,
    vector_function: Any,
    search_strategy: Any,
    hnsw_ef_search: Any,
    hnsw_index_creation_kwargs: Any,
    recreate_table: Any,
    create_extension: Any,
    encoder_config: Any,
) -> None:
    """Each option as the class docs describe it; a ``ValueError`` naming the option otherwise."""
    if not isinstance(connection_string, Secret):
        msg = (
            "connection_string must be a haystack.utils.Secret, e.g. Secret.from_env_var('PG_CONN_STR') or "
            "Secret.from_token('postgresql://user:password@host:5432/db')."
        )
        raise ValueError(msg)
    for name, value in (("schema_name", schema_name), ("table_name", table_name)):
        if not isinstance(value, str) or not value:
            msg = f"{name} must be a non-empty string, got {value!r}."
            raise ValueError(msg)
        limit = MAX_IDENTIFIER_BYTES - (LONGEST_SUFFIX if name == "table_name" else 0)
        if len(value.encode()) > limit or "\x00" in value:
            msg = f"{name} {value!r} must be at most {limit} bytes without NUL characters (PostgreSQL's name limit)."
            raise ValueError(msg)
    check_optional_positive_int("embedding_dimension", embedding_dimension)
    if embedding_dimension is not None and embedding_dimension > 16000:
        msg = f"embedding_dimension must be at most 16000 (pgvector's vector type), got {embedding_dimension}."
        raise ValueError(msg)
    if vector_function not in VECTOR_FUNCTIONS:
        msg = (
            f"vector_function must be 'inner_product', got {vector_function!r}: haystack-mvr scores a document by its "
            "best view's inner product (for cosine similarity, write unit-length views)."
        )
        raise ValueError(msg)
    if search_strategy not in SEARCH_STRATEGIES:
        msg = f"search_strategy must be 'exact' or 'hnsw', got {search_strategy!r}."
        raise ValueError(msg)
    check_optional_positive_int("hnsw_ef_search", hnsw_ef_search)
    if hnsw_ef_search is not None and search_strategy != "hnsw":
        msg = "hnsw_ef_search applies to search_strategy='hnsw' only."
        raise ValueError(msg)
    check_hnsw_index_kwargs(hnsw_index_creation_kwargs)
    if hnsw_index_creation_kwargs and search_strategy != "hnsw":
        msg = "hnsw_index_creation_kwargs applies to search_strategy='hnsw' only."
        raise ValueError(msg)
    for name, flag in (("recreate_table", recreate_table), ("create_extension", create_extension)):
        if not isinstance(flag, bool):
            msg = f"{name} must be True or False, got {flag!r}."
            raise ValueError(msg)
    check_encoder_config(encoder_config)


def check_hnsw_index_kwargs(kwargs: Any) -> dict[str, int]:
    """``hnsw_index_creation_kwargs``: only ``m`` and ``ef_construction``, each an integer in pgvector's range."""
    if kwargs is None:
        return {}
    if not isinstance(kwargs, dict):
        msg = f"hnsw_index_creation_kwargs must be a dict such as {{'m': 16, 'ef_construction': 64}}, got {kwargs!r}."
        raise ValueError(msg)
    unknown = sorted(str(k) for k in set(kwargs) - set(HNSW_INDEX_KEYS))
    if unknown:
        msg = f"hnsw_index_creation_kwargs takes only {sorted(HNSW_INDEX_KEYS)}, got {unknown}."
        raise ValueError(msg)
    for key, value in kwargs.items():
        low, high = HNSW_INDEX_KEYS[key]
        if type(value) is not int or not low <= value <= high:
            msg = f"hnsw_index_creation_kwargs[{key!r}] must be an integer from {low} to {high}, got {value!r}."
            raise ValueError(msg)
    return dict(kwargs)


__all__ = ["HNSW_INDEX_KEYS", "SEARCH_STRATEGIES", "VECTOR_FUNCTIONS", "check_hnsw_index_kwargs", "check_options"]
