"""The saved-index cache serves a store only when it is exactly what was saved under the key asked for, and the key
sees every byte of a local model's files."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from haystack import Document

from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.evaluation.saved_index import STORE_FOLDER, index_key, open_saved_index, save_index
from haystack_mvr.views import ENCODER_KEY, attach_views

ENCODER = {"model": "random-views", "mode": "snippet", "fingerprint": "abc"}


def store_of(texts: list[str], seed: int = 0, encoder: dict | None = None, factory: str = "Flat"):
    rng = np.random.default_rng(seed)
    store = FaissMultiViewDocumentStore(index_factory=factory)
    docs = []
    for i, text in enumerate(texts):
        doc = Document(id=f"d{i}", content=text, meta={"title": "T", ENCODER_KEY: encoder or ENCODER})
        docs.append(attach_views(doc, rng.normal(size=(3, 8)).astype(np.float32)))
    store.write_documents(docs)
    return store


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"id": "d0", "title": "T", "text": "a"}) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def model(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"A" * 64)
    return folder


def test_the_saved_store_is_served_under_its_key(tmp_path, corpus, model):
    key = index_key(corpus, str(model), index_factory="Flat")
    save_index(store_of(["one", "two"]), tmp_path / "cache", key)
    store = open_saved_index(tmp_path / "cache", key)
    assert store is not None and store.count_documents() == 2
    assert open_saved_index(tmp_path / "cache", {**key, "model": "other"}) is None


@pytest.mark.parametrize("factory", ["Flat", "HNSW8", "SQ8"])
def test_a_reopened_store_matches_its_record_on_every_index_type(tmp_path, corpus, model, factory):
    key = index_key(corpus, str(model), index_factory=factory)
    save_index(store_of([f"text {i}" for i in range(40)], factory=factory), tmp_path / "cache", key)
    assert open_saved_index(tmp_path / "cache", key) is not None


def test_a_store_from_another_corpus_placed_there_is_not_served(tmp_path, corpus, model, caplog):
    key = index_key(corpus, str(model))
    save_index(store_of(["one", "two"]), tmp_path / "cache", key)
    shutil.rmtree(tmp_path / "cache" / STORE_FOLDER)
    store_of(["three", "four", "five"]).save(tmp_path / "cache" / STORE_FOLDER)
    assert open_saved_index(tmp_path / "cache", key) is None
    assert any("not the one saved" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "placed",
    [
        lambda: store_of(["one", "two"], seed=1),  # the same documents, other vectors
        lambda: store_of(["one", "TWO"]),  # the same ids and vectors, another text
        lambda: store_of(["one", "two"], encoder={"model": "other", "mode": "snippet"}),  # another encoder
    ],
    ids=["vectors", "content", "encoder"],
)
def test_a_store_that_differs_in_anything_is_not_served(tmp_path, corpus, model, placed):
    key = index_key(corpus, str(model))
    save_index(store_of(["one", "two"]), tmp_path / "cache", key)
    shutil.rmtree(tmp_path / "cache" / STORE_FOLDER)
    placed().save(tmp_path / "cache" / STORE_FOLDER)
    assert open_saved_index(tmp_path / "cache", key) is None


def test_a_store_that_grew_after_it_was_saved_is_not_served(tmp_path, corpus, model):
    key = index_key(corpus, str(model))
    save_index(store_of(["one", "two"]), tmp_path / "cache", key)
    store = open_saved_index(tmp_path / "cache", key)
    extra = attach_views(Document(id="extra", content="x", meta={ENCODER_KEY: ENCODER}), np.ones((2, 8), np.float32))
    store.write_documents([extra])
    store.save(store.index_path)
    assert open_saved_index(tmp_path / "cache", key) is None


def test_weights_restored_with_the_same_size_and_time_change_the_key(corpus, model):
    weights = model / "model.safetensors"
    before = index_key(corpus, str(model))
    stat = weights.stat()
    weights.write_bytes(b"B" * 64)  # as `cp -p other/model.safetensors .`: same size, same modification time
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert weights.stat().st_size == stat.st_size and weights.stat().st_mtime_ns == stat.st_mtime_ns
    assert index_key(corpus, str(model)) != before


def test_files_at_any_depth_are_in_the_key(corpus, model):
    deep = model / "0_Router" / "document" / "0_SnippetTransformer"  # an untied checkpoint's backbone
    deep.mkdir(parents=True)
    (deep / "model.safetensors").write_bytes(b"A" * 64)
    before = index_key(corpus, str(model))
    (deep / "model.safetensors").write_bytes(b"C" * 64)
    assert index_key(corpus, str(model)) != before
    (deep / "extra.bin").write_bytes(b"")
    assert index_key(corpus, str(model)) != before


def test_the_key_of_an_unchanged_model_is_stable(corpus, model):
    assert index_key(corpus, str(model)) == index_key(corpus, str(model))
    assert index_key(corpus, "some-org/some-model")["model_files"] is None  # a hub id, no folder


def test_the_packaged_models_hub_id_is_keyed_by_the_packaged_files(corpus, model, monkeypatch):
    """The hub id a dumped pipeline names loads the packaged folder: an index built with other weights there must not
    be served after the package's weights change (issue 48)."""
    from haystack_mvr.modeling import loading

    monkeypatch.setattr(loading, "packaged_model_path", lambda: model)
    hub_id = loading.PACKAGED_HUB_ID
    before = index_key(corpus, hub_id)
    assert before["model"] == hub_id and before["model_files"] == index_key(corpus, str(model))["model_files"]
    (model / "model.safetensors").write_bytes(b"B" * 64)
    assert index_key(corpus, hub_id) != before


def test_an_older_cache_is_encoded_again(tmp_path, corpus, model):
    key = index_key(corpus, str(model))
    save_index(store_of(["one"]), tmp_path / "cache", key)
    (tmp_path / "cache" / "built_from.json").write_text(json.dumps(key), encoding="utf-8")  # the format before
    assert open_saved_index(tmp_path / "cache", key) is None
