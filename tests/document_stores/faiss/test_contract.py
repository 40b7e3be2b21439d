"""The multi-view contract suite (``haystack_mvr.testing``) on every README index type, vectors kept or not."""

from __future__ import annotations

import itertools

import pytest

from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.document_stores.faiss.view_index import ViewIndex
from haystack_mvr.testing import (
    MultiViewExportTests,
    MultiViewHaystackAsyncTests,
    MultiViewHaystackTests,
    MultiViewInputTests,
    MultiViewPersistenceTests,
    MultiViewPropertyTests,
    MultiViewSearchBatchTests,
    MultiViewSearchTests,
)

# name -> (store options, exact search?, keep_vectors settings). Small parameters, and train_size=48, so that
# trainable indexes are trained within the tests' few rows; keep_vectors matters only beside a lossy index.
TRAIN = {"train_size": 48, "search_threads": 1}  # one thread: k-means on a loaded 2-core VM
CONFIGS: dict[str, tuple[dict, bool, tuple[bool, ...]]] = {
    "Flat": ({"index_factory": "Flat"}, True, (True,)),
    "HNSW": ({"index_factory": "HNSW8", "search_parameters": {"efSearch": 16}}, False, (True,)),
    "IVF": ({"index_factory": "IVF4,Flat", "search_parameters": {"nprobe": 4}, **TRAIN}, True, (True,)),
    "IVF-1probe": ({"index_factory": "IVF4,Flat", **TRAIN}, False, (True,)),
    "PQ": ({"index_factory": "PQ4x4", **TRAIN}, False, (True, False)),
    "OPQ": ({"index_factory": "OPQ4,PQ4x4", **TRAIN}, False, (True, False)),
    "IVF-PQ": ({"index_factory": "IVF4,PQ4x4", "search_parameters": {"nprobe": 2}, **TRAIN}, False, (True, False)),
    "OPQ-IVF-PQ": (
        {"index_factory": "OPQ4,IVF4,PQ4x4", "search_parameters": {"nprobe": 2}, **TRAIN},
        False,
        (True, False),
    ),
}
FULL_HAYSTACK_SUITE = {"Flat"}  # the Haystack suites never search: other index types run them under -m slow
_counter = itertools.count()


def _make_classes(name: str, options: dict, exact: bool, keep_vectors: bool) -> None:
    label = f"{name.replace('-', '_')}_{'kept' if keep_vectors else 'index_only'}"
    kwargs = {**options, "keep_vectors": keep_vectors}

    def document_store(self):
        return FaissMultiViewDocumentStore(**kwargs)

    def selector_paths(self, monkeypatch):
        """Small filters are scored exactly; 0 sends every filtered search through FAISS (selector or widening)."""
        if name != "Flat":
            monkeypatch.setattr(ViewIndex, "exact_rows", 0)

    def reopen(self, tmp_path):
        def _reopen(store):
            path = tmp_path / f"copy-{next(_counter)}"
            store.save(path)
            loaded = FaissMultiViewDocumentStore(**kwargs)
            loaded.load(path)
            return loaded

        return _reopen

    search = type(
        f"TestFaissMultiView_{label}",
        (
            MultiViewSearchTests,
            MultiViewSearchBatchTests,
            MultiViewInputTests,
            MultiViewPropertyTests,
            MultiViewPersistenceTests,
            MultiViewExportTests,
        ),
        {
            "exact_search": exact,
            "property_examples": 30 if name == "Flat" else 12,
            "document_store": pytest.fixture(document_store),
            "reopen": pytest.fixture(reopen),
            "selector_paths": pytest.fixture(autouse=True)(selector_paths),
        },
    )
    haystack = type(
        f"TestFaissHaystack_{label}",
        (MultiViewHaystackTests, MultiViewHaystackAsyncTests),
        {"document_store": pytest.fixture(document_store)},
    )
    if name not in FULL_HAYSTACK_SUITE:
        haystack = pytest.mark.slow(haystack)
    globals()[search.__name__] = search
    globals()[haystack.__name__] = haystack


for _name, (_options, _exact, _keeps) in CONFIGS.items():
    for _keep in _keeps:
        _make_classes(_name, _options, _exact, _keep)
