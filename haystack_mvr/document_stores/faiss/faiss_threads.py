"""How many OpenMP threads FAISS runs with: per call, restoring the process-wide setting afterwards."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from haystack_mvr.document_stores.faiss.faiss_import import faiss


@contextlib.contextmanager
def omp_threads(threads: int) -> Iterator[None]:
    """Run FAISS with ``threads`` OpenMP threads, restoring the process-wide setting afterwards."""
    before = faiss.omp_get_max_threads()
    if threads == before:
        yield
        return
    faiss.omp_set_num_threads(threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def default_threads(batch: bool, configured: int | None) -> int:
    """``configured``, else every core for a batch and one thread for a single query."""
    if configured is not None:
        return configured
    return max(1, os.cpu_count() or 1) if batch else 1
