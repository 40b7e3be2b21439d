"""examples/move_index.py moves an index FAISS -> pgvector -> FAISS and Qdrant -> pgvector -> Qdrant (views of a
late-interaction encoder included); each copy answers as its source (``--verify``: 0 differ)."""

from __future__ import annotations

import pytest

from .conftest import require_server

require_server()

import dataclasses  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from haystack import Document  # noqa: E402

from haystack_mvr.views import ENCODER_KEY, attach_views  # noqa: E402

from .conftest import drop_tables, new_table_name  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.fixture
def move_index(monkeypatch, pg_uri):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setenv("PG_CONN_STR", pg_uri)
    import move_index

    return move_index


def _documents(encoder: dict | None = None) -> list[Document]:
    rng = np.random.default_rng(0)
    docs = []
    for i in range(24):
        content = f"First sentence {i}. Second sentence {i}."
        spans = [None, (0, content.index(".") + 1), (content.index(".") + 2, len(content))]
        meta = {"lang": ["pl", "en"][i % 2], "i": i}
        if encoder is not None:
            meta[ENCODER_KEY] = encoder
        docs.append(attach_views(Document(id=f"d{i}", content=content, meta=meta), rng.normal(size=(3, 16)), spans))
    return docs


def test_faiss_to_pgvector_to_faiss(tmp_path, move_index, capsys, pg_uri):
    pytest.importorskip("faiss")
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

    original = FaissMultiViewDocumentStore(index_factory="Flat")
    original.write_documents(_documents())
    original.save(tmp_path / "faiss")
    table = new_table_name()
    try:
        common = ["--batch-size", "7", "--verify", "4"]
        assert move_index.main(["--from", f"faiss:{tmp_path / 'faiss'}", "--to", f"pgvector:{table}", *common]) == 0
        assert "0 differ" in capsys.readouterr().out
        assert move_index.main(["--from", f"pgvector:{table}", "--to", f"faiss:{tmp_path / 'back'}", *common]) == 0
        out = capsys.readouterr().out
        assert "Verified: 24 documents in both stores." in out and "0 differ" in out
        with pytest.raises(SystemExit, match="already holds 24 documents"):
            move_index.main(["--from", f"faiss:{tmp_path / 'faiss'}", "--to", f"pgvector:{table}"])
        with pytest.raises(SystemExit, match="holds no documents"):
            move_index.main(["--from", "pgvector:no_such_table", "--to", f"faiss:{tmp_path / 'none'}"])
    finally:
        drop_tables(pg_uri, table)


def test_qdrant_to_pgvector_with_token_views(tmp_path, move_index, capsys, pg_uri):
    pytest.importorskip("qdrant_client")
    from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

    source = QdrantMultiViewDocumentStore(path=str(tmp_path / "qdrant"), index="moved")
    late = {"model": "tiny-colbert", "mode": "late_interaction"}
    source.write_documents([dataclasses.replace(d, embedding=None) for d in _documents(late)])
    source.close()
    table = new_table_name()
    try:
        args = ["--index", "moved", "--verify", "4"]
        assert (
            move_index.main(["--from", f"qdrant-path:{tmp_path / 'qdrant'}", "--to", f"pgvector:{table}", *args]) == 0
        )
        assert "0 differ" in capsys.readouterr().out
    finally:
        drop_tables(pg_uri, table)
