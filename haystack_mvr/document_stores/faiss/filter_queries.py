"""What the FAISS store answers from its documents' fields alone: which documents a filter matches, and Haystack's
metadata queries over them."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

from haystack_mvr.document_stores import metadata_queries
from haystack_mvr.document_stores.compiled_filters import compile_filter, id_filter_members, reads_only_meta
from haystack_mvr.document_stores.faiss.document_table import DocumentTable
from haystack_mvr.views import SPANS_KEY


class FilterQueries:
    """Filter matching (:meth:`_matching`) and Haystack's metadata queries, mixed into ``FaissMultiViewDocumentStore``,
    which provides what they read: its lock, its document table, the keys of its documents, and its load on first
    use."""

    _lock: threading.RLock
    _documents: DocumentTable
    _key_of: dict[str, int]
    _ensure_loaded: Callable[[], None]

    def count_documents_by_filter(self, filters: dict[str, Any]) -> int:
        with self._lock:
            self._ensure_loaded()
            return len(self._matching(filters))

    def count_unique_metadata_by_filter(self, filters: dict[str, Any], metadata_fields: list[str]) -> dict[str, int]:
        with self._lock:
            self._ensure_loaded()
            return metadata_queries.count_unique(self._documents.meta_rows(self._matching(filters)), metadata_fields)

    def get_metadata_fields_info(self) -> dict[str, dict[str, str]]:
        with self._lock:
            self._ensure_loaded()
            return metadata_queries.fields_info(self._documents.meta_rows(self._documents.ids()))

    def get_metadata_field_min_max(self, metadata_field: str) -> dict[str, Any]:
        with self._lock:
            self._ensure_loaded()
            rows = self._documents.meta_rows(self._documents.ids())
            return copy.deepcopy(metadata_queries.min_max(rows, metadata_field))

    def get_metadata_field_unique_values(
        self,
        metadata_field: str,
        search_term: str | None = None,
        from_: int = 0,
        size: int = 10,
        filters: dict[str, Any] | None = None,
    ) -> tuple[list[Any], int]:
        with self._lock:
            self._ensure_loaded()
            values, total = metadata_queries.paged_unique_values(
                self._documents.meta_rows(self._matching(filters)), metadata_field, search_term, from_, size
            )
            return copy.deepcopy(values), total

    def _matching(self, filters: dict[str, Any] | None) -> list[str]:
        """The ids of the documents matching ``filters``, in write order. An ``id in [...]`` filter looks the ids up
        (its cost follows the list, not the store: the context builder's candidates); a filter on ``meta`` fields
        only reads the table's meta; any other field builds each document."""
        table = self._documents
        if not filters:
            return table.ids()
        members = id_filter_members(filters)
        if members is not None:  # keys grow in write order (an overwrite is a new key at the end of the table)
            keys = self._key_of
            return sorted((i for i in members if i in keys), key=keys.__getitem__)
        if "operator" not in filters and "conditions" not in filters:
            msg = "Invalid filter syntax. See https://docs.haystack.deepset.ai/docs/metadata-filtering for details."
            raise ValueError(msg)
        match = compile_filter(filters)  # parsed once; same results and errors as document_matches_filter
        if reads_only_meta(filters, skip=(SPANS_KEY,)):
            return table.matching_meta(match)
        return [i for i in table.ids() if match(table.document(i))]
