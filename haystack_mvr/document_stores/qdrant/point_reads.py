"""Reading points: scrolling a collection, and resolving a filter plan into the Qdrant filter of exactly its matches.

A Haystack filter is translated into a :class:`~haystack_mvr.document_stores.qdrant.filters.QdrantFilter`: a Qdrant
filter exact outside a (usually empty) set of documents Qdrant cannot decide. :func:`resolve_filter` reads those and
evaluates the Haystack filter on each in Python, so every read, count, delete and search selects exactly what
Haystack selects. Call these functions under the store's call lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from haystack import Document
from haystack.errors import FilterError
from qdrant_client import QdrantClient
from qdrant_client.http import models

from haystack_mvr.document_stores.compiled_filters import compile_filter
from haystack_mvr.document_stores.qdrant import converters
from haystack_mvr.document_stores.qdrant.converters import SEQ_KEY, VIEWS_VECTOR
from haystack_mvr.document_stores.qdrant.filters import QdrantFilter
from haystack_mvr.views import exported_document

#: Points per scroll request.
SCROLL_PAGE = 256


def scroll_points(
    client: QdrantClient, index: str, qfilter: models.Filter | None, with_vectors: Any
) -> Iterator[models.Record]:
    """Every point of ``index`` that ``qfilter`` selects, with its payload, page by page."""
    offset = None
    while True:
        records, offset = client.scroll(
            index,
            scroll_filter=qfilter,
            limit=SCROLL_PAGE,
            offset=offset,
            with_payload=True,
            with_vectors=with_vectors,
        )
        yield from records
        if offset is None:
            return


def resolve_filter(
    plan: QdrantFilter | None, scroll: Callable[[models.Filter], Iterable[models.Record]]
) -> models.Filter | None:
    """
    The Qdrant filter selecting exactly what the Haystack filter selects, now (call it under the lock).

    The documents ``plan.verify`` selects (usually none) are read and the Haystack filter is evaluated on each
    in Python: where it raises, this raises ``FilterError``; those it selects are added by id.

    :param scroll: Reads the points a Qdrant filter selects, with their payloads (called only when ``verify`` is set).
    """
    if plan is None:
        return None
    if plan.verify is None:
        return plan.lower
    match = compile_filter(plan.filters)
    selected = []
    verify = plan.verify if isinstance(plan.verify, models.Filter) else models.Filter(must=[plan.verify])
    for record in scroll(verify):  # a filter as it is: every document is models.Filter(), not a nested empty one
        document = converters.to_document(record.payload)
        try:
            matched = match(document)
        except (FilterError, TypeError, ValueError) as e:
            msg = f"Filter {plan.filters} cannot be evaluated on document {document.id!r}: {e}"
            raise FilterError(msg) from e
        if matched:
            selected.append(record.id)
    if not selected:
        return plan.lower
    return models.Filter(should=[plan.lower, models.HasIdCondition(has_id=selected)])


def payload_documents(client: QdrantClient, index: str, qfilter: models.Filter | None) -> list[Document]:
    """The documents ``qfilter`` selects, without their vectors."""
    return [converters.to_document(r.payload) for r in scroll_points(client, index, qfilter, with_vectors=False)]


def export_page(
    client: QdrantClient, index: str, qfilter: models.Filter | None, batch_size: int, start: Any, *, with_views: bool
) -> tuple[list[models.Record], Any]:
    """One scroll page of the points ``qfilter`` selects, with all their views, and the offset of the next page."""
    return client.scroll(
        index,
        scroll_filter=qfilter,
        limit=batch_size,
        offset=start,
        with_payload=True,
        with_vectors=[VIEWS_VECTOR] if with_views else False,
    )


def stored_documents(records: list[models.Record]) -> list[Document]:
    """The points' documents in write order, each with view 0 as its ``embedding`` when it has none of its own."""
    records.sort(key=lambda r: r.payload.get(SEQ_KEY, 0))
    return [converters.to_document(r.payload, converters.first_view(r.vector)) for r in records]


def exported_documents(records: list[models.Record], encoder: dict[str, Any] | None) -> list[Document]:
    """The points' documents in write order, with all their views and the encoder record, ready for any store."""
    records.sort(key=lambda r: r.payload.get(SEQ_KEY, 0))
    return [
        exported_document(converters.to_document(r.payload), converters.views_of(r.vector), encoder) for r in records
    ]


__all__ = [
    "SCROLL_PAGE",
    "export_page",
    "exported_documents",
    "payload_documents",
    "resolve_filter",
    "scroll_points",
    "stored_documents",
]
