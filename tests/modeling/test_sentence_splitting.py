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
