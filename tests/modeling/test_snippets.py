import itertools
import logging

import pytest

from haystack_mvr.modeling import sentence_splitting
from haystack_mvr.modeling.snippets import merge_to_n, split_into_snippets, view_for_offset


def test_merge_shortest_with_shorter_neighbour():
    # lengths 10, 2, 5, 20: the 2-long sentence merges with its shorter neighbour (5), not with 10.
    spans = [(0, 10), (11, 13), (14, 19), (20, 40)]
    assert merge_to_n(spans, 3) == [(0, 10), (11, 19), (20, 40)]
    # then the shortest (10) merges with its only neighbour
    assert merge_to_n(spans, 2) == [(0, 19), (20, 40)]
    assert merge_to_n(spans, 1) == [(0, 40)]


def test_merge_keeps_spans_when_few_enough():
    spans = [(0, 3), (4, 9)]
    assert merge_to_n(spans, 5) == spans


def test_split_pads_with_empty_snippets():
    text = "The cat sat. The dog ran."
    snippets = split_into_snippets(text, 4)
    assert len(snippets) == 4
    assert [text[s:e] for s, e in snippets[:2]] == ["The cat sat.", "The dog ran."]
    assert snippets[2:] == [None, None]
    assert split_into_snippets(text, 4, pad=False) == snippets[:2]


def test_split_merges_to_exactly_n_and_covers_text():
    text = " ".join(f"Sentence number {i} is here." for i in range(11))
    snippets = split_into_snippets(text, 4)
    assert len(snippets) == 4 and None not in snippets
    assert snippets[0][0] == 0 and snippets[-1][1] == len(text)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(snippets))


def test_split_rejects_bad_n():
    with pytest.raises(ValueError, match="at least 1"):
        split_into_snippets("A. B.", 0)


def test_empty_text_has_only_empty_snippets():
    assert split_into_snippets("   ", 3) == [None, None, None]


def test_view_for_offset():
    spans = [(0, 10), None, (12, 20)]
    assert view_for_offset(spans, 3) == 0
    assert view_for_offset(spans, 15) == 2
    assert view_for_offset(spans, 11) == 2  # whitespace between snippets goes to the next one
    assert view_for_offset(spans, 25) is None


def test_sentence_splitting_without_trained_punkt_logs_once(monkeypatch, caplog):
    import nltk.tokenize.punkt as punkt

    def missing(*args, **kwargs):
        raise LookupError("punkt_tab not found")

    monkeypatch.setattr(punkt, "PunktTokenizer", missing)
    monkeypatch.setitem(sentence_splitting._LOADERS, sentence_splitting.PUNKT_ENGLISH, lambda: None)
    monkeypatch.delenv(sentence_splitting.ENV_VAR, raising=False)
    sentence_splitting._splitter.cache_clear()
    try:
        with caplog.at_level(logging.WARNING):
            first = sentence_splitting.sentence_spans("One sentence. Another one here.")
            sentence_splitting.sentence_spans("Third. Fourth.")
        assert first == [(0, 13), (14, 31)]
        assert sentence_splitting.splitter_name() == sentence_splitting.UNTRAINED
        messages = [r.getMessage() for r in caplog.records if "Punkt" in r.getMessage()]
        assert len(messages) == 1
        assert "haystack-mvr[punkt]" in messages[0] and "download" not in messages[0].replace("no download", "")
    finally:
        sentence_splitting._splitter.cache_clear()
