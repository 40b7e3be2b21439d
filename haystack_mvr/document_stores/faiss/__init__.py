"""The FAISS multi-view document store, the embedded default (``pip install "haystack-mvr[cpu]"`` or ``[gpu]``).

- ``document_store``: the Haystack-facing store (documents, the multi-view and MaxSim search, save/load), with
  ``filter_queries`` (filters and the metadata queries) and ``write_batch`` (a write's checked copies);
- ``view_index``: the FAISS index of view rows the store uses (``ViewIndex``), composing:
  - ``view_labels``: a row's label, ``(document key << 12) | view`` (the formula and the ``MAX_VIEWS`` check, once);
  - ``view_checks``: which views are accepted (finite, no longer than ``MAX_NORM``);
  - ``row_book``: ``DocumentRows``, which key owns how many rows, and the float32 rows held beside the index;
  - ``index_family``: what each FAISS index type needs (stable ids, training, id selectors, reconstruction);
  - ``chunked_add``: rows into FAISS in checked chunks;
  - ``view_search``: the widening search, rows to documents, exact scoring of candidates (returning the
    similarities scored); ``flat_scan``: every document's best view or MaxSim over Flat rows, a batch's top rows;
    both score through ``haystack_mvr.maxsim``, the one scorer (max over views is MaxSim of a one-row query);
  - ``gpu_index``: searching a copy of the index on a GPU, and its depth cap;
  - ``faiss_threads``: FAISS's OpenMP threads per call;
- ``persistence`` / ``index_versions``: the saved store's files, written as crash-safe versions (the backend-neutral
  ``haystack_mvr.document_stores.versioned_folder`` with FAISS's own reader and writer);
- ``faiss_import``: the one place FAISS is imported.
"""

from haystack_mvr.document_stores.faiss.document_store import FaissMultiViewDocumentStore

__all__ = ["FaissMultiViewDocumentStore"]
