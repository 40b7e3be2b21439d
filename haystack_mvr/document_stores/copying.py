"""Moving an index between multi-view stores without encoding it again (FAISS -> Qdrant, Qdrant -> FAISS, ...)."""

from __future__ import annotations

from typing import Any

from haystack.document_stores.types import DuplicatePolicy

from haystack_mvr.document_stores.checks import check_batch_size
from haystack_mvr.views import VIEWS_KEY


def copy_documents(
    source: Any,
    target: Any,
    *,
    batch_size: int = 256,
    filters: dict[str, Any] | None = None,
    policy: DuplicatePolicy = DuplicatePolicy.FAIL,
) -> int:
    """
    Copy the documents of ``source`` matching ``filters``, with all their views, into ``target``, in batches.

    Any two multi-view stores (``FaissMultiViewDocumentStore``, ``QdrantMultiViewDocumentStore``, or another
    backend implementing ``export_documents``): nothing is encoded again, and the target answers as the source
    did (same documents, meta, spans, encoder record; scores equal to float precision on exact indexes). Memory is
    bounded by one batch of views (``batch_size`` documents) beside what the stores hold themselves.

    The target checks the source's views before anything is written: the first write always holds a document with
    views when the source has any (when the first batch has none, the first such document is found by reading the
    source ahead and written with the first batch, then left out of its own), and ``write_documents`` checks a
    whole batch before writing any of it. So a target of another dimension or encoder refuses the copy with
    nothing written, and a new Qdrant collection is created for the source's vectors even without
    ``embedding_dim``. Documents are written in the source's export order, but for that one document.

    Example::

        faiss = FaissMultiViewDocumentStore(index_path="runs/quickstart-index")
        qdrant = QdrantMultiViewDocumentStore(url="http://localhost:6333", index="squad_mv", embedding_dim=384)
        copy_documents(faiss, qdrant, batch_size=512)

    :param source: The store to read (it is not changed).
    :param target: The store to write; ``write_documents`` checks each batch as usual (dimension, encoder,
        duplicates): a refused batch raises, with the batches before it written (a refused first batch, as a
        mismatched dimension or encoder is, leaves the target as it was).
    :param batch_size: Documents per batch read (and written; the first write may hold one more).
    :param filters: Haystack filters selecting the documents to copy (all when ``None``).
    :param policy: The duplicate policy of the writes (``FAIL``: the target must not hold these ids yet;
        ``OVERWRITE`` makes a copy that stopped midway resumable).
    :returns: The number of documents written.
    """
    check_batch_size(batch_size)
    if source is target:
        msg = "copy_documents needs two different stores: source and target are the same object."
        raise ValueError(msg)
    export = getattr(source, "export_documents", None)
    if export is None:
        msg = (
            f"{type(source).__name__} has no export_documents: copy_documents reads documents with all their views "
            "from a haystack-mvr multi-view store (FaissMultiViewDocumentStore, QdrantMultiViewDocumentStore)."
        )
        raise TypeError(msg)
    batches = iter(export(batch_size=batch_size, filters=filters))
    first = next(batches, None)
    if first is None:
        return 0
    ahead = None
    if not any(_has_views(d) for d in first):
        ahead = _first_with_views(export(batch_size=batch_size, filters=filters))
    written = target.write_documents([*first, ahead] if ahead is not None else first, policy=policy)
    for batch in batches:
        if ahead is not None and any(d.id == ahead.id for d in batch):
            batch = [d for d in batch if d.id != ahead.id]  # written with the first batch
            ahead = None
        if batch:
            written += target.write_documents(batch, policy=policy)
    return written


def _has_views(document: Any) -> bool:
    return document.meta.get(VIEWS_KEY) is not None or document.embedding is not None


def _first_with_views(batches: Any) -> Any:
    """The first exported document with views (``None`` when none has any); reads no further than it."""
    try:
        for batch in batches:
            for document in batch:
                if _has_views(document):
                    return document
        return None
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()


__all__ = ["copy_documents"]
