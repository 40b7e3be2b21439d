"""Adding view rows to a FAISS index in chunks: one reused buffer, each chunk checked on its way in."""

from __future__ import annotations

import itertools

import numpy as np

from haystack_mvr.document_stores.faiss.faiss_import import faiss
from haystack_mvr.document_stores.faiss.index_family import IndexFamily, reserve
from haystack_mvr.document_stores.faiss.row_book import CHUNK_ROWS
from haystack_mvr.document_stores.faiss.view_checks import MAX_SQUARED_NORM, InvalidViews, first_invalid, squared_norm
from haystack_mvr.document_stores.faiss.view_labels import labels_of_keys

ADD_ROWS = 2048  # rows copied into the reused buffer per FAISS add: ~3 MiB at d=384, still in cache when added


def add_views(
    index: faiss.Index,
    family: IndexFamily,
    keys: list[int],
    views: list[np.ndarray],
    counts: np.ndarray | None = None,
    checked: bool = True,
) -> None:
    """Add the ``(k, d)`` rows of ``keys`` to ``index`` in chunks copied into one small reused buffer (each chunk is
    still in the CPU cache when FAISS copies it, and when an unchecked chunk's sum of squares is taken for the checks
    of :func:`~haystack_mvr.document_stores.faiss.view_checks.first_invalid`). An invalid chunk raises
    :class:`InvalidViews` after the rows already added are removed again."""
    if counts is None:
        counts = np.fromiter(map(len, views), dtype=np.int64, count=len(views))
    ends = np.cumsum(counts)
    total = int(ends[-1])
    labels = labels_of_keys(keys, counts)
    # document boundaries of chunks of about `step` rows (a chunk holds at least one document)
    step = family.rows_per_add(ADD_ROWS)
    cuts = np.unique(np.searchsorted(ends, np.arange(step, total, step), side="left") + 1)
    bounds = [0, *cuts[cuts < len(keys)].tolist(), len(keys)]
    row_at = [0, *ends.tolist()]
    buffer = np.empty((min(total, step + int(counts.max())), family.dim), dtype=np.float32)
    reserve(index, total)
    for first, last in itertools.pairwise(bounds):
        lo, hi = row_at[first], row_at[last]
        if last - first == 1:
            matrix = np.ascontiguousarray(views[first], dtype=np.float32)
        else:
            matrix = np.concatenate(views[first:last], out=buffer[: hi - lo])
        if not checked and not squared_norm(matrix) <= MAX_SQUARED_NORM:
            bad = first_invalid(views[first:last])
            if bad is not None:  # else only the sum of many rows is that large
                if lo:
                    family.remove(index, labels[:lo])
                raise InvalidViews(first + bad[0], bad[1])
        index.add_with_ids(matrix, labels[lo:hi])


def add_labelled_rows(index: faiss.Index, family: IndexFamily, labels: np.ndarray, vectors: np.ndarray) -> None:
    """Add ``vectors`` under their ``labels`` (rows the store already checked and labelled), in chunks."""
    step = family.rows_per_add(CHUNK_ROWS)
    for lo in range(0, len(labels), step):
        index.add_with_ids(vectors[lo : lo + step], labels[lo : lo + step])
