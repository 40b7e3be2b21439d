"""A view row's FAISS label: ``(document key << VIEW_BITS) | view``, so a label names its document and never changes."""

from __future__ import annotations

import numpy as np

VIEW_BITS = 12
MAX_VIEWS = 1 << VIEW_BITS  # views per document: a row's label is (document key << 12) | view


def labels_of(key: int, views: int) -> np.ndarray:
    """The FAISS labels of a document's ``views`` rows."""
    return (np.int64(key) << VIEW_BITS) | np.arange(views, dtype=np.int64)


def labels_of_keys(keys: np.ndarray, counts: list[int]) -> np.ndarray:
    """The labels of every row of ``keys`` (``counts`` views each), grouped by key in the given order."""
    views = np.asarray(counts, dtype=np.int64)
    starts = np.cumsum(views) - views
    return (np.repeat(np.asarray(keys, dtype=np.int64), views) << VIEW_BITS) | (
        np.arange(int(starts[-1] + views[-1]) if len(views) else 0, dtype=np.int64) - np.repeat(starts, views)
    )


def keys_of(labels: np.ndarray) -> np.ndarray:
    """The document key of each label."""
    return labels >> VIEW_BITS
