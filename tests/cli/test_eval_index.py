"""``haystack-mvr eval``: optional dependencies checked before any encoding, and ``--index-dir`` reuse (issue 32)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from haystack_mvr.cli.main import main
from haystack_mvr.evaluation.saved_index import KEY_FILE, index_key, open_saved_index, save_index

CORPUS = [
    {"id": "river#0", "title": "River", "text": "The river book was written by Anna Smith. It tells of a long river."},
    {"id": "hills#0", "title": "Hills", "text": "The hills are green in spring. Sheep graze there all year."},
    {"id": "city#0", "title": "City", "text": "The city has a harbour and an old castle. Many people visit it."},
]
QUESTIONS = [
    {"id": "q1", "question": "Who wrote the river book?", "answers": ["Anna Smith"], "answer_starts": [30],
     "positive_id": "river#0", "title": "River"},
    {"id": "q2", "question": "What grazes on the hills?", "answers": ["Sheep"], "answer_starts": [31],
     "positive_id": "hills#0", "title": "Hills"},
]  # fmt: skip


@pytest.fixture
def data(write_eval_data) -> Path:
    return write_eval_data(CORPUS, QUESTIONS)


def test_eval_without_ranx_fails_before_loading_or_encoding(data, tiny_backbone, capsys, monkeypatch):
    import haystack_mvr.components.embedders as embedders

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ranx" else real_find_spec(name))

    def refuse(*args, **kwargs):
        raise AssertionError("encoding started before the dependency check")

    monkeypatch.setattr(embedders, "MultiViewDocumentEmbedder", refuse)
    argv = ["eval", "--model", str(tiny_backbone), "--corpus", str(data / "corpus.jsonl")]
    code = main([*argv, "--questions", str(data / "questions.jsonl")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("haystack-mvr eval: error: haystack-mvr eval needs ranx for its gold-id metrics")
    assert err.endswith('pip install "haystack-mvr[eval]"')


def test_eval_reuses_its_saved_index_and_encodes_again_when_an_input_changes(data, tiny_backbone, capsys):
    index = data / "index"
    argv = ["eval", "--model", str(tiny_backbone), "--corpus", str(data / "corpus.jsonl")]
    argv += ["--questions", str(data / "questions.jsonl"), "--top-k", "3", "--index-dir", str(index)]
    assert main([*argv, "--output", str(data / "first.json")]) == 0
    first = capsys.readouterr().out
    assert "Encoded 3 documents" in first and f"Saved the index to {index}" in first
    assert (index / KEY_FILE).is_file()

    assert main([*argv, "--output", str(data / "second.json")]) == 0
    second = capsys.readouterr().out
    assert f"Loaded 3 documents from {index}" in second and "Encoded" not in second
    assert json.loads((data / "first.json").read_text()) == json.loads((data / "second.json").read_text())

    assert main([*argv, "--index-factory", "HNSW8"]) == 0  # another setting: encoded again, and replaced
    assert "Encoded 3 documents" in capsys.readouterr().out
    (data / "corpus.jsonl").write_text(json.dumps(CORPUS[0]) + "\n", encoding="utf-8")  # another corpus
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Encoded 1 documents" in out and "1 documents, top 3" in out


def test_eval_never_deletes_a_folder_that_is_not_a_saved_index(data, tiny_backbone, capsys):
    (data / "notes.txt").write_text("mine", encoding="utf-8")
    argv = ["eval", "--model", str(tiny_backbone), "--corpus", str(data / "corpus.jsonl")]
    code = main([*argv, "--questions", str(data / "questions.jsonl"), "--index-dir", str(data)])
    err = capsys.readouterr().err
    assert code == 1 and "holds other files than a saved index" in err
    assert (data / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_index_key_follows_every_input(data, tiny_backbone, tmp_path):
    corpus = data / "corpus.jsonl"
    key = index_key(corpus, str(tiny_backbone), index_factory="Flat")
    assert key == index_key(corpus, str(tiny_backbone), index_factory="Flat")
    assert key != index_key(corpus, str(tiny_backbone), index_factory="HNSW32")
    assert key != index_key(corpus, "sentence-transformers/all-MiniLM-L6-v2", index_factory="Flat")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")
    before = index_key(corpus, str(model))
    (model / "model.safetensors").write_bytes(b"retrained")  # a checkpoint saved again into the same folder
    assert index_key(corpus, str(model)) != before
    assert open_saved_index(tmp_path / "nothing-here", key) is None


def test_a_saved_index_opens_only_under_its_own_key(data, tiny_backbone, tmp_path):
    from haystack import Document

    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

    store = FaissMultiViewDocumentStore()
    store.write_documents([Document(id="a", content="x", embedding=[1.0, 0.0])])
    key = index_key(data / "corpus.jsonl", str(tiny_backbone))
    save_index(store, tmp_path / "saved", key)
    assert open_saved_index(tmp_path / "saved", key).count_documents() == 1
    assert open_saved_index(tmp_path / "saved", {**key, "model": "other"}) is None


@pytest.mark.parametrize("content", ["", "\n\n"])
def test_eval_refuses_an_empty_corpus_before_loading_or_encoding(data, tiny_backbone, capsys, monkeypatch, content):
    import haystack_mvr.components.embedders as embedders

    def refuse(*args, **kwargs):
        raise AssertionError("encoding started before the corpus check")

    monkeypatch.setattr(embedders, "MultiViewDocumentEmbedder", refuse)
    (data / "corpus.jsonl").write_text(content, encoding="utf-8")
    argv = ["eval", "--model", str(tiny_backbone), "--corpus", str(data / "corpus.jsonl")]
    code = main([*argv, "--questions", str(data / "questions.jsonl")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "holds no documents" in err
