"""examples/move_index.py moves an index FAISS -> Qdrant folder -> FAISS and the copies answer as the original."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from haystack import Document

pytest.importorskip("qdrant_client")

from haystack_mvr.document_stores import FaissMultiViewDocumentStore
from haystack_mvr.views import MATCHED_SPAN_KEY, attach_views

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def move_index(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import move_index

    return move_index


def test_help_is_fast_and_imports_nothing_heavy():
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['move_index.py', '--help']\n"
        "try:\n"
        f"    runpy.run_path({str(EXAMPLES / 'move_index.py')!r}, run_name='__main__')\n"
        "except SystemExit as e:\n    assert e.code in (0, None), e.code\n"
        "heavy = ('torch', 'transformers', 'haystack', 'qdrant_client', 'faiss', 'numpy')\n"
        "print('IMPORTED', sorted(m for m in heavy if m in sys.modules))\n"
    )
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert time.perf_counter() - started < 2.0
    assert "usage:" in result.stdout and "qdrant-path:FOLDER" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "IMPORTED []"


def test_faiss_to_qdrant_folder_to_faiss(tmp_path, move_index, capsys):
    rng = np.random.default_rng(0)
    docs = []
    for i in range(30):
        content = f"First sentence {i}. Second sentence {i}."
        spans = [None, (0, content.index(".") + 1), (content.index(".") + 2, len(content))]
        meta = {"lang": ["pl", "en"][i % 2], "i": i}
        docs.append(attach_views(Document(id=f"d{i}", content=content, meta=meta), rng.normal(size=(3, 16)), spans))
    original = FaissMultiViewDocumentStore(index_factory="Flat")
    original.write_documents(docs)
    original.save(tmp_path / "faiss")

    common = ["--index", "moved", "--batch-size", "7", "--verify", "5"]
    qdrant, back = f"qdrant-path:{tmp_path / 'qdrant'}", f"faiss:{tmp_path / 'back'}"
    assert move_index.main(["--from", f"faiss:{tmp_path / 'faiss'}", "--to", qdrant, *common]) == 0
    assert move_index.main(["--from", qdrant, "--to", back, *common]) == 0
    out = capsys.readouterr().out
    assert out.count("Copied 30 documents") == 2 and out.count("10 queries (2 filter settings): 0 differ.") == 2

    reloaded = FaissMultiViewDocumentStore(index_path=str(tmp_path / "back"))
    query = rng.normal(size=16)
    for filters in (None, {"field": "meta.lang", "operator": "==", "value": "en"}):
        expected = original.search(query, top_k=5, filters=filters)
        got = reloaded.search(query, top_k=5, filters=filters)
        assert [(h.id, h.meta[MATCHED_SPAN_KEY]) for h in got] == [(h.id, h.meta[MATCHED_SPAN_KEY]) for h in expected]
        np.testing.assert_allclose([h.score for h in got], [h.score for h in expected], rtol=1e-6)

    with pytest.raises(Exception, match="already exists"):  # the target holds them: --overwrite to resume
        move_index.main(["--from", f"faiss:{tmp_path / 'faiss'}", "--to", qdrant, "--index", "moved"])
    assert (
        move_index.main(["--from", f"faiss:{tmp_path / 'faiss'}", "--to", qdrant, "--index", "moved", "--overwrite"])
        == 0
    )


def test_bad_store_spec_is_a_usage_error(move_index, capsys):
    with pytest.raises(SystemExit):
        move_index.main(["--from", "faiss", "--to", "qdrant-path:x"])
    assert "faiss:FOLDER" in capsys.readouterr().err
