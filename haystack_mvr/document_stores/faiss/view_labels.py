"""A view row's FAISS label: ``(document key << VIEW_BITS) | view``, so a label names its document and never changes.

The formula is written once (:func:`labels_of_keys`), and the limit it sets on a document's views is checked once
(:func:`too_many_views`).
"""

from __future__ import annotations

import numpy as np

VIEW_BITS = 12
MAX_VIEWS = 1 << VIEW_BITS  # views per document: a row's label is (document key << 12) | view


def too_many_views(views: int) -> str | None:
    """What is wrong with a document of ``views`` views, more than a label can number; ``None`` when it fits."""
    if views <= MAX_VIEWS:
        return None
    return (
        f"has {views} views; the store keeps at most {MAX_VIEWS} per document (a view's row is labelled "
        f"(document key << {VIEW_BITS}) | view)"
    )


def labels_of_keys(keys: np.ndarray, counts: list[int] | np.ndarray) -> np.ndarray:
    """The labels of every row of ``keys`` (``counts`` views each), grouped by key in the given order."""
    views = np.asarray(counts, dtype=np.int64)
    starts = np.cumsum(views) - views
    return (np.repeat(np.asarray(keys, dtype=np.int64), views) << VIEW_BITS) | (
        np.arange(int(starts[-1] + views[-1]) if len(views) else 0, dtype=np.int64) - np.repeat(starts, views)
    )


def labels_of(key: int, views: int) -> np.ndarray:
    """The FAISS labels of one document's ``views`` rows."""
    return labels_of_keys(np.array([key], dtype=np.int64), [views])


def keys_of(labels: np.ndarray) -> np.ndarray:
    """The document key of each label."""
    return labels >> VIEW_BITS
