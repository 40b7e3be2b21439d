"""Snippet-level results from a multi-view store: the best snippet views across documents, exactly."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np
from haystack import Document

from haystack_mvr.views import SPANS_KEY, document_views, piece_document

Search = Callable[[int], list[Document]]


def _ranked_snippets(documents: list[Document], query: np.ndarray) -> list[tuple[float, int, int, int]]:
    """Every snippet view of ``documents`` as ``(score, document rank, start, view)``, best first."""
    found = []
    for rank, document in enumerate(documents):
        spans = document.meta.get(SPANS_KEY)
        views = document_views(document)
        if not spans or views is None:
            continue
        scores = views @ query
        found += [(float(scores[i]), rank, int(span[0]), i) for i, span in enumerate(spans) if span is not None]
    found.sort(key=lambda s: (-s[0], s[1], s[2]))
    return found


def _complete(documents: list[Document], depth: int, chosen: list[tuple[float, int, int, int]], top_k: int) -> bool:
    """Whether no document beyond the ``depth`` searched can hold a better snippet than the ``top_k``-th chosen:
    every unsearched document's best view scores at most the last searched one's ``score``."""
    if len(documents) < depth:
        return True  # every matching document was searched
    return len(chosen) == top_k and chosen[-1][0] >= (documents[-1].score or 0.0)


def _snippets(documents: list[Document], chosen: list[tuple[float, int, int, int]]) -> list[Document]:
    out = []
    for score, rank, _, view in chosen:
        source = documents[rank]
        start, end = source.meta[SPANS_KEY][view]
        out.append(piece_document(source, int(start), int(end), view, score))
    return out


def top_snippets(search: Search, query: Sequence[float], top_k: int) -> list[Document]:
    """
    The ``top_k`` best snippet views across documents, each as a snippet ``Document`` (``views.piece_document``).

    ``search(depth)`` is the store's search for the ``depth`` best documents with their views
    (``return_embedding=True``). A document's snippets score at most its best view, so once the ``top_k``-th best
    snippet found scores at least the last document searched, no other document can hold a better one; until
    then the search widens (4x).
    """
    vector = np.asarray(query, dtype=np.float32)
    depth = top_k
    while True:
        documents = search(depth)
        chosen = _ranked_snippets(documents, vector)[:top_k]
        if _complete(documents, depth, chosen, top_k):
            return _snippets(documents, chosen)
        depth *= 4


async def top_snippets_async(search: Callable[[int], Awaitable[list[Document]]], query: Any, top_k: int):
    """:func:`top_snippets` over an asynchronous ``search``."""
    vector = np.asarray(query, dtype=np.float32)
    depth = top_k
    while True:
        documents = await search(depth)
        chosen = _ranked_snippets(documents, vector)[:top_k]
        if _complete(documents, depth, chosen, top_k):
            return _snippets(documents, chosen)
        depth *= 4
