"""The argument checks every multi-view store applies alike to ``write_documents`` and ``delete_documents``, and
``gc_paused`` for writing or loading large batches of documents."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterable, Iterator
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


_GC_PAUSE_DOCUMENTS = 10_000


@contextlib.contextmanager
def gc_paused(documents: int) -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a batch of ``documents`` (at least 10,000) is written or loaded.

    Each stored document is a few new container objects (the Document, its meta); 125,000 of them (10^6 views) set off
    generation-2 collections that traverse every object the process holds again and again: a quarter of the time
    of writing 10^6 views. These objects form no reference cycles, so pausing loses nothing; the collector is
    switched back on afterwards (only if it was on) and runs at its usual thresholds.
    """
    if documents < _GC_PAUSE_DOCUMENTS or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
