"""examples/qdrant_rag.py runs end to end on tiny random models, in a local Qdrant folder, and reuses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from haystack import Pipeline

pytest.importorskip("qdrant_client")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CORPUS = [
    {"id": "river#0", "title": "River", "text": "The river book was written by Anna Smith. It tells of a long river."},
    {"id": "river#1", "title": "River", "text": "Boats sail on the river in summer. Fish live under them."},
    {"id": "hills#0", "title": "Hills", "text": "The hills are green in spring. Sheep graze there all year."},
    {"id": "city#0", "title": "City", "text": "The city has a harbour and an old castle. Many people visit it."},
]


@pytest.fixture(autouse=True)
def examples_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_qdrant_rag_indexes_once_answers_and_dumps_yaml(tmp_path, tiny_backbone, tiny_t5, capsys, monkeypatch):
    import qdrant_rag

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in CORPUS), encoding="utf-8")
    common = ["--corpus", str(corpus), "--model", str(tiny_backbone), "--path", str(tmp_path / "qdrant")]
    qdrant_rag.main([*common, "--question", "Where do fish live?", "--top-k", "2", "--save-yaml", str(tmp_path / "p")])
    out = capsys.readouterr().out
    assert "Indexed 4 documents" in out and out.count("matched:") == 2
    assert (tmp_path / "qdrant").is_dir()

    monkeypatch.setenv("QDRANT_API_KEY", "never-in-yaml")
    qdrant_rag.main([*common, "--reader", str(tiny_t5), "--title", "Hills", "--question", "What grazes?"])
    out = capsys.readouterr().out
    assert "already holds the 4 documents" in out and "A: " in out
    assert out.count("matched:") == 1 and "(hills#0)" in out  # the title filter ran inside Qdrant

    yaml = (tmp_path / "p").read_text(encoding="utf-8")
    assert "QdrantMultiViewDocumentStore" in yaml and "never-in-yaml" not in yaml
    loaded = Pipeline.loads(yaml)
    result = loaded.run({"query_embedder": {"text": "Where do fish live?"}})
    assert len(result["retriever"]["documents"]) == 2
    loaded.get_component("retriever").document_store.close()
