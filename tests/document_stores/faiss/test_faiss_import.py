"""Packaging: FAISS comes from exactly one extra, and a missing FAISS is one clear message."""

import subprocess
import sys

from haystack_mvr.document_stores.faiss.faiss_import import installed_faiss_distributions


def test_this_environment_has_exactly_one_faiss_distribution():
    assert len(installed_faiss_distributions()) == 1, installed_faiss_distributions()


def test_a_missing_faiss_names_the_extras_to_install():
    code = (
        "import sys; sys.modules['faiss'] = None\n"  # what Python does for a module that cannot be imported
        "try:\n"
        "    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "FAISS" in out and "haystack-mvr[cpu]" in out and "haystack-mvr[gpu]" in out


def test_the_package_and_the_qdrant_store_import_without_faiss():
    code = (
        "import sys; sys.modules['faiss'] = None\n"
        "import haystack_mvr.document_stores\n"
        "from haystack_mvr.components.retrievers import MultiViewRetriever\n"
        "from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore\n"
        "print(QdrantMultiViewDocumentStore.__name__, MultiViewRetriever.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["QdrantMultiViewDocumentStore", "MultiViewRetriever"]
