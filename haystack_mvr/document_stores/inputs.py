"""The argument checks every multi-view store applies alike to ``write_documents`` and ``delete_documents``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from haystack import Document


def document_list(documents: Any) -> list[Document]:
    """``documents`` (any iterable of ``Document``, a generator too) as a list; anything else is a ``ValueError``."""
    if isinstance(documents, (str, bytes, dict, Document)) or not isinstance(documents, Iterable):
        msg = "Please provide a list of Documents."
        raise ValueError(msg)
    documents = list(documents)
    if any(not isinstance(d, Document) for d in documents):
        msg = "Please provide a list of Documents."
        raise ValueError(msg)
    return documents


def document_id_list(document_ids: Any) -> list[str]:
    """The unique ids of ``document_ids`` in order; a bare string or non-string ids are a ``ValueError``."""
    if isinstance(document_ids, (str, bytes)) or not isinstance(document_ids, Iterable):
        msg = f"document_ids must be a list of document ids, got {type(document_ids).__name__}."
        raise ValueError(msg)
    ids = list(dict.fromkeys(document_ids))
    if any(not isinstance(i, str) for i in ids):
        msg = "document_ids must be a list of strings."
        raise ValueError(msg)
    return ids
