"""The Qdrant store fixture the Qdrant tests share: in memory and on a local folder."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["memory", "path"])
def store(request, tmp_path):
    pytest.importorskip("qdrant_client")
    from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

    if request.param == "memory":
        s = QdrantMultiViewDocumentStore(location=":memory:")
    else:
        s = QdrantMultiViewDocumentStore(path=str(tmp_path / "qdrant"))
    yield s
    s.close()
