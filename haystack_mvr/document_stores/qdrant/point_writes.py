"""Writing points: duplicate policies, upserts in requests a server takes, deletes and meta updates by filter.

Call these functions under the store's call lock, once the batch has been checked against the collection as it is
(``collection_state``): they write what they are given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy
from qdrant_client import QdrantClient
from qdrant_client.http import models

from haystack_mvr.document_stores.qdrant import converters
from haystack_mvr.document_stores.qdrant.converters import MAX_MULTIVECTOR_FLOATS
from haystack_mvr.document_stores.qdrant.filters import EMPTY_LIST_KEY
from haystack_mvr.document_stores.qdrant.point_reads import scroll_points
from haystack_mvr.document_stores.writes import (
    PreparedDocument,
    already_stored_message,
    repeated_in_batch_message,
)
from haystack_mvr.views import ENCODER_KEY, SPANS_KEY, VIEWS_KEY

#: Numbers (views x dimension) per upsert request at most, besides ``write_batch_size`` points: one maximal
#: document, about 20 MB of JSON, under a server's default 32 MB request limit.
MAX_REQUEST_FLOATS = MAX_MULTIVECTOR_FLOATS


def apply_policy(
    prepared: list[PreparedDocument], policy: DuplicatePolicy, client: QdrantClient | None, index: str
) -> list[PreparedDocument]:
    """
    The documents of ``prepared`` to write under ``policy`` (``FAIL``, ``SKIP`` or ``OVERWRITE``).

    :param client: The client of the collection ``index``, to look up the ids stored already; ``None`` while the
        collection does not exist (nothing is stored).
    :raises DuplicateDocumentError: under ``FAIL``, for an id stored already, or repeated in the batch (each with
        its own message and the ``DuplicatePolicy`` that would take it).
    """
    ids = [p.document.id for p in prepared]
    existing: set[str] = set()
    if client is not None and policy in (DuplicatePolicy.FAIL, DuplicatePolicy.SKIP) and ids:
        by_point = {converters.point_id(i): i for i in ids}
        found = client.retrieve(index, ids=list(by_point), with_payload=False, with_vectors=False)
        existing = {by_point[str(r.id)] for r in found}
    if policy == DuplicatePolicy.FAIL:
        if existing:
            raise DuplicateDocumentError(already_stored_message(sorted(existing)[0]))
        seen: set[str] = set()
        for i in ids:
            if i in seen:
                raise DuplicateDocumentError(repeated_in_batch_message(i))
            seen.add(i)
        return prepared
    if policy == DuplicatePolicy.SKIP:
        chosen: dict[str, PreparedDocument] = {}
        for p in prepared:
            if p.document.id not in existing:
                chosen.setdefault(p.document.id, p)
        return list(chosen.values())
    if policy == DuplicatePolicy.OVERWRITE:
        return list({p.document.id: p for p in prepared}.values())
    msg = f"Unknown duplicate policy {policy!r}."
    raise ValueError(msg)


def request_batches(prepared: list[PreparedDocument], max_points: int) -> Iterator[list[PreparedDocument]]:
    """
    ``prepared`` in upsert requests of at most ``max_points`` points and ``MAX_REQUEST_FLOATS`` numbers.

    A document alone may hold up to ``MAX_MULTIVECTOR_FLOATS`` numbers, so a request of many documents with
    hundreds of views each would pass a server's request size limit: it is cut by numbers as well as points.
    """
    batch: list[PreparedDocument] = []
    floats = 0
    for p in prepared:
        size = 0 if p.views is None else int(p.views.size)
        if batch and (len(batch) >= max_points or floats + size > MAX_REQUEST_FLOATS):
            yield batch
            batch, floats = [], 0
        batch.append(p)
        floats += size
    if batch:
        yield batch


def upsert_documents(
    client: QdrantClient,
    index: str,
    chosen: list[PreparedDocument],
    *,
    max_points: int,
    has_global: bool,
    next_seq: Callable[[], int],
) -> None:
    """Write ``chosen`` as points, in write order (``next_seq``), in requests of at most ``max_points`` points."""
    for batch in request_batches(chosen, max_points):
        points = [converters.to_point(p, next_seq(), has_global) for p in batch]
        client.upsert(index, points=points, wait=True)


def delete_matching(client: QdrantClient, index: str, qfilter: models.Filter) -> int:
    """Delete the points ``qfilter`` selects; returns how many."""
    count = client.count(index, count_filter=qfilter, exact=True).count
    if count:
        client.delete(index, points_selector=models.FilterSelector(filter=qfilter), wait=True)
    return count


def check_meta_update(meta: Any) -> None:
    """``update_by_filter``'s ``meta``: a dict that leaves the views, their spans and their encoder alone."""
    if not isinstance(meta, dict):
        msg = f"meta must be a dict, got {type(meta).__name__}."
        raise ValueError(msg)
    if {VIEWS_KEY, SPANS_KEY, ENCODER_KEY} & set(meta):
        msg = (
            f"update_by_filter cannot change '{VIEWS_KEY}', '{SPANS_KEY}' or '{ENCODER_KEY}'; "
            "write the documents again instead."
        )
        raise ValueError(msg)


def update_meta(
    client: QdrantClient, index: str, qfilter: models.Filter, meta: dict[str, Any], markers: dict[str, bool]
) -> int:
    """
    Merge ``meta`` into the meta of the points ``qfilter`` selects; returns how many.

    :param markers: The empty-list markers of ``meta`` (``filters.empty_list_markers``), set on the same points.
    """
    points: Any = qfilter
    if markers:  # a key set to []: mark it on exactly the points updated (ids: the meta update moves them)
        points = models.PointIdsList(points=[r.id for r in scroll_points(client, index, qfilter, with_vectors=False)])
        count = len(points.points)
    else:
        count = client.count(index, count_filter=qfilter, exact=True).count
    if count and meta:
        if markers:  # first: a marker without its [] (a crash between the two) is harmless, re-checked
            client.set_payload(index, payload=markers, key=EMPTY_LIST_KEY, points=points, wait=True)
        client.set_payload(index, payload=meta, key="meta", points=points, wait=True)
    return count


__all__ = [
    "MAX_REQUEST_FLOATS",
    "apply_policy",
    "check_meta_update",
    "delete_matching",
    "request_batches",
    "update_meta",
    "upsert_documents",
]
