"""Which sentence splitter cuts the snippets, and that the encoder configuration records it."""

from __future__ import annotations

import logging

import pytest

from haystack_mvr.modeling import sentence_splitting
from haystack_mvr.modeling.config import MultiViewConfig

TEXT = "It was the third-most watched U.S. broadcast ever. The game was close."


@pytest.fixture
def splitter(monkeypatch):
    """Force a splitter by name for one test (the choice is cached per process)."""

    def force(name: str) -> None:
        monkeypatch.setenv(sentence_splitting.ENV_VAR, name)
        sentence_splitting._splitter.cache_clear()

    yield force
    monkeypatch.delenv(sentence_splitting.ENV_VAR, raising=False)
    sentence_splitting._splitter.cache_clear()


def test_untrained_punkt_breaks_after_abbreviations(splitter):
    splitter(sentence_splitting.UNTRAINED)
    assert sentence_splitting.splitter_name() == "punkt-untrained"
    assert [TEXT[s:e] for s, e in sentence_splitting.sentence_spans(TEXT)] == [
        "It was the third-most watched U.S.",
        "broadcast ever.",
        "The game was close.",
    ]


def test_trained_english_punkt_keeps_abbreviations(splitter):
    pytest.importorskip("punkt", reason='the trained splitter ships with "haystack-mvr[punkt]"')
    splitter(sentence_splitting.PUNKT_ENGLISH)
    assert [TEXT[s:e] for s, e in sentence_splitting.sentence_spans(TEXT)] == [
        "It was the third-most watched U.S. broadcast ever.",
        "The game was close.",
    ]


def test_unknown_forced_splitter_names_the_choices(splitter):
    splitter("spacy")
    with pytest.raises(ValueError, match="punkt-english, nltk-punkt_tab-english, punkt-untrained"):
        sentence_splitting.sentence_spans(TEXT)


def test_config_records_the_splitter_and_warns_on_a_different_saved_one(splitter, tmp_path, caplog):
    splitter(sentence_splitting.UNTRAINED)
    config = MultiViewConfig(mode="snippet", num_views=4)
    assert config.sentence_splitter == "punkt-untrained"
    assert MultiViewConfig(mode="mvr").sentence_splitter == ""  # no snippets in mvr mode
    config.save(tmp_path)
    assert MultiViewConfig.load(tmp_path) == config

    saved = config.to_dict() | {"sentence_splitter": "punkt-english"}
    with caplog.at_level(logging.WARNING):
        loaded = MultiViewConfig.from_dict(saved)
    assert loaded.sentence_splitter == "punkt-untrained"  # what this process really cuts with
    assert any("'punkt-english' sentence splitter" in r.getMessage() for r in caplog.records)


def _view_module_config(checkpoint) -> tuple:
    """The path and JSON of the config a saved checkpoint's splitter lives in (SnippetViews, or CAMVR's
    ViewerTransformer)."""
    import json

    for module in json.loads((checkpoint / "modules.json").read_text()):
        kind = module["type"].rsplit(".", 1)[-1]
        name = {"SnippetViews": "config.json", "ViewerTransformer": "sentence_bert_config.json"}.get(kind)
        if name:
            path = checkpoint / module["path"] / name
            if kind == "SnippetViews" or json.loads(path.read_text()).get("mode") == "camvr":
                return path, json.loads(path.read_text())
    raise AssertionError("no module of the checkpoint records a splitter")


@pytest.mark.parametrize("mode", ["snippet", "camvr"])
def test_checkpoints_record_the_splitter_and_warn_when_another_is_active(
    mode, splitter, tiny_backbone, tmp_path, caplog
):
    """Issue 32 item 7: a saved snippet or CAMVR checkpoint says which splitter cut its snippets; loading it where
    another splitter is active warns (and the reloaded model records the active one, which cuts from now on)."""
    import json

    from sentence_transformers import MultiVectorEncoder

    from haystack_mvr.modeling.encoder_builders import snippet_encoder, viewer_encoder
    from haystack_mvr.modeling.st_encoder import open_encoder

    splitter(sentence_splitting.UNTRAINED)
    if mode == "snippet":
        model = snippet_encoder(str(tiny_backbone), num_snippets=2)
    else:
        model = viewer_encoder(str(tiny_backbone), mode="camvr", views=2)
    model.save(str(tmp_path / "model"))
    path, config = _view_module_config(tmp_path / "model")
    assert config["sentence_splitter"] == "punkt-untrained"

    with caplog.at_level(logging.WARNING):
        MultiVectorEncoder(str(tmp_path / "model"), trust_remote_code=True)
    assert not any("sentence splitter" in r.getMessage() for r in caplog.records)  # the same splitter: silent

    path.write_text(json.dumps(config | {"sentence_splitter": "punkt-english"}), encoding="utf-8")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        encoder = open_encoder(str(tmp_path / "model"), "cpu")  # the embedders' loader
    warnings = [r.getMessage() for r in caplog.records if "sentence splitter" in r.getMessage()]
    assert warnings and "'punkt-english' sentence splitter, this process uses 'punkt-untrained'" in warnings[0]
    assert encoder.config.sentence_splitter == "punkt-untrained"


def test_mvr_checkpoints_record_no_splitter(splitter, tiny_backbone, tmp_path):
    from haystack_mvr.modeling.encoder_builders import viewer_encoder

    splitter(sentence_splitting.UNTRAINED)
    viewer_encoder(str(tiny_backbone), mode="mvr", views=2).save(str(tmp_path / "model"))
    config = (tmp_path / "model" / "sentence_bert_config.json").read_text()
    assert '"sentence_splitter": null' in config
