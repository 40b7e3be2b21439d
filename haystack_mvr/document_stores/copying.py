"""Moving an index between multi-view stores without encoding it again (FAISS -> Qdrant, Qdrant -> FAISS, ...)."""

from __future__ import annotations

from typing import Any

from haystack.document_stores.types import DuplicatePolicy

from haystack_mvr.document_stores.checks import check_batch_size


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
    bounded by one batch of views (``batch_size`` documents) beside what the stores hold themselves. A Qdrant target
    that does not exist yet is best given ``embedding_dim``, in case the first batch holds no vectors.

    Example::

        faiss = FaissMultiViewDocumentStore(index_path="runs/quickstart-index")
        qdrant = QdrantMultiViewDocumentStore(url="http://localhost:6333", index="squad_mv", embedding_dim=384)
        copy_documents(faiss, qdrant, batch_size=512)

    :param source: The store to read (it is not changed).
    :param target: The store to write; ``write_documents`` checks each batch as usual (dimension, encoder,
        duplicates): a refused batch raises, with the batches before it written.
    :param batch_size: Documents per batch read and written.
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
    written = 0
    for batch in export(batch_size=batch_size, filters=filters):
        written += target.write_documents(batch, policy=policy)
    return written


__all__ = ["check_batch_size", "copy_documents"]
