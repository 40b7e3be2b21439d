"""The multi-view contract suite (``haystack_mvr.testing``) on every README index type, vectors kept or not."""

from __future__ import annotations

import functools
import itertools

import pytest

from haystack_mvr.document_stores import FaissMultiViewDocumentStore
from haystack_mvr.testing import (
    MultiViewHaystackAsyncTests,
    MultiViewHaystackTests,
    MultiViewInputTests,
    MultiViewPersistenceTests,
    MultiViewPropertyTests,
    MultiViewSearchBatchTests,
    MultiViewSearchTests,
)

# name -> (store options, exact search?). Small parameters so that trained indexes are trained in tests.
CONFIGS: dict[str, tuple[dict, bool]] = {
    "Flat": ({"index_factory": "Flat"}, True),
    "HNSW": ({"index_factory": "HNSW8", "search_parameters": {"efSearch": 16}}, False),
    "IVF": ({"index_factory": "IVF4,Flat", "search_parameters": {"nprobe": 4}}, True),
    "IVF-1probe": ({"index_factory": "IVF4,Flat"}, False),
    "PQ": ({"index_factory": "PQ4x4"}, False),
    "OPQ": ({"index_factory": "OPQ4,PQ4x4"}, False),
    "IVF-PQ": ({"index_factory": "IVF4,PQ4x4", "search_parameters": {"nprobe": 2}}, False),
    "OPQ-IVF-PQ": ({"index_factory": "OPQ4,IVF4,PQ4x4", "search_parameters": {"nprobe": 2}}, False),
}
FULL_HAYSTACK_SUITE = {"Flat"}  # the Haystack suites never search: other index types run them under -m slow

_counter = itertools.count()

# issue 13 to-do: the store as it is on main fails these (each is one of the issue's defects)
TODO = {
    "test_malformed_spans_name_field_and_document",
    "test_search_equals_brute_force",
    "test_search_batch_results_are_independent_copies",
    "test_returned_documents_are_copies",
    "test_reopened_store_takes_writes_and_deletes",
    "test_reopened_store_keeps_its_encoder",
    "test_generator_is_accepted",
    "test_encoder_is_taken_off_recorded_and_enforced",
    "test_embedding_of_another_size_than_the_views_is_refused",
    "test_duplicate_ids_in_delete_are_harmless",
    "test_bare_string_to_delete_is_refused",
    "test_filter_matching_few_returns_all_matches",
    "test_many_writes_and_deletes_stay_consistent",
    "test_filters_return_exactly_top_k",
    "test_exactly_top_k_when_one_document_dominates",
    "test_views_leave_meta_and_score_is_max_over_views",
    "test_top_k_larger_than_store",
    "test_search_batch_accepts_arrays_and_return_embedding",
}


def _todo(cls: type) -> type:
    for name in TODO:
        test = getattr(cls, name)

        @functools.wraps(test)
        def wrapped(*args, _test=test, **kwargs):
            return _test(*args, **kwargs)

        setattr(cls, name, pytest.mark.xfail(reason="issue 13: not fixed yet", strict=False)(wrapped))
    return cls


def _make_classes(name: str, options: dict, exact: bool, keep_vectors: bool) -> None:
    label = f"{name.replace('-', '_')}_{'kept' if keep_vectors else 'index_only'}"
    kwargs = {**options, "keep_vectors": keep_vectors}

    def document_store(self):
        return FaissMultiViewDocumentStore(**kwargs)

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
        ),
        {
            "exact_search": exact,
            "property_examples": 30 if name == "Flat" else 12,
            "document_store": pytest.fixture(document_store),
            "reopen": pytest.fixture(reopen),
        },
    )
    haystack = type(
        f"TestFaissHaystack_{label}",
        (MultiViewHaystackTests, MultiViewHaystackAsyncTests),
        {"document_store": pytest.fixture(document_store)},
    )
    if name not in FULL_HAYSTACK_SUITE:
        haystack = pytest.mark.slow(haystack)
    globals()[search.__name__] = _todo(search)
    globals()[haystack.__name__] = haystack


for _name, (_options, _exact) in CONFIGS.items():
    for _keep in (True, False):
        _make_classes(_name, _options, _exact, _keep)
