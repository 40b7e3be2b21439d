"""
The contract suite every multi-view document store runs (FAISS, Qdrant, ...).

In the spirit of ``haystack.testing.document_store``: mixin classes whose tests take a ``document_store`` fixture
(an empty store, created fresh for each test) that the backend's test module defines. Compose them::

    from haystack_mvr.testing import MultiViewDocumentStoreTests, MultiViewPersistenceTests

    class TestMyStore(MultiViewDocumentStoreTests, MultiViewPersistenceTests):
        exact_search = True          # False for an approximate index (HNSW, IVF with few probes, PQ ...)

        @pytest.fixture
        def document_store(self):
            return MyMultiViewStore()

        @pytest.fixture
        def reopen(self, tmp_path):
            def _reopen(store):
                store.save(tmp_path / "copy")
                return MyMultiViewStore.load_from(tmp_path / "copy")
            return _reopen

Class attributes a backend may override:

- ``exact_search``: ``True`` when search is exact (scores and ranking equal numpy brute force over the written
  views); ``False`` for approximate indexes, which must still return valid documents, each scored by the max over
  the views they are returned with (their reconstruction), and exactly ``min(top_k, matching documents with
  vectors)`` of them.
- ``embedding_dim``: the dimension of the vectors these tests write (default 8).
- ``property_examples``: hypothesis examples for the brute-force property test.

``MultiViewDocumentStoreTests`` bundles Haystack's own sync and async suites with the multi-view ones;
``MultiViewPersistenceTests`` needs a ``reopen`` fixture: a function ``reopen(store) -> store`` returning the same
store's contents read back from wherever the backend persists them.

The suites live in modules by theme (``fixtures``, ``haystack_suites``, ``search_tests``, ``input_tests``,
``property_tests``, ``export_tests``, ``persistence_tests``); this module bundles them and ``haystack_mvr.testing``
exports them all.
"""

from haystack_mvr.testing.export_tests import MultiViewExportTests
from haystack_mvr.testing.haystack_suites import MultiViewHaystackAsyncTests, MultiViewHaystackTests
from haystack_mvr.testing.input_tests import MultiViewInputTests
from haystack_mvr.testing.property_tests import MultiViewPropertyTests
from haystack_mvr.testing.search_tests import MultiViewSearchBatchTests, MultiViewSearchTests


class MultiViewDocumentStoreTests(
    MultiViewHaystackTests,
    MultiViewHaystackAsyncTests,
    MultiViewSearchTests,
    MultiViewSearchBatchTests,
    MultiViewInputTests,
    MultiViewPropertyTests,
    MultiViewExportTests,
):
    """Everything a multi-view store must pass (persistence aside: :class:`MultiViewPersistenceTests`)."""


__all__ = ["MultiViewDocumentStoreTests"]
