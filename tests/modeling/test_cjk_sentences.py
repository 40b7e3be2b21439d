"""Chinese and Japanese sentence ends end sentences; English text is split as before, by every splitter."""

# ruff: noqa: RUF001 - the full-width punctuation is what these tests are about

from __future__ import annotations

import pytest

from haystack_mvr.modeling import sentence_splitting


@pytest.fixture(params=[sentence_splitting.UNTRAINED, sentence_splitting.PUNKT_ENGLISH])
def splitter(request, monkeypatch):
    if request.param == sentence_splitting.PUNKT_ENGLISH:
        pytest.importorskip("punkt", reason='the trained splitter ships with "haystack-mvr[punkt]"')
    monkeypatch.setenv(sentence_splitting.ENV_VAR, request.param)
    sentence_splitting._splitter.cache_clear()
    yield request.param
    monkeypatch.delenv(sentence_splitting.ENV_VAR, raising=False)
    sentence_splitting._splitter.cache_clear()


def split(text: str) -> list[str]:
    return [text[s:e] for s, e in sentence_splitting.sentence_spans(text)]


def test_chinese_sentence_ends(splitter):
    text = "今天天气很好。我们去公园吧！你来吗？好的．明天见。"
    assert split(text) == ["今天天气很好。", "我们去公园吧！", "你来吗？", "好的．", "明天见。"]


def test_japanese_sentence_ends_and_quotes(splitter):
    text = "東京は日本の首都です。人口は多い！「本当？」と彼は言った。　次の文です｡"
    assert split(text) == ["東京は日本の首都です。", "人口は多い！", "「本当？」と彼は言った。", "次の文です｡"]


def test_runs_of_ends_closing_brackets_and_numbers(splitter):
    text = "（これは括弧の中の文。）本当ですか？！円周率は３．１４です。"
    assert split(text) == ["（これは括弧の中の文。）本当ですか？！", "円周率は３．１４です。"]


def test_mixed_text_splits_at_both_kinds_of_ends(splitter):
    text = "Warsaw is the capital of Poland. 华沙是波兰的首都。它位于维斯瓦河畔。 It lies on the Vistula."
    assert split(text) == [
        "Warsaw is the capital of Poland.",
        "华沙是波兰的首都。",
        "它位于维斯瓦河畔。",
        "It lies on the Vistula.",
    ]


def test_an_unclosed_bracket_does_not_hide_every_sentence_end(splitter):
    text = "「開いたままの括弧。次の文。最後の文。"
    assert split(text) == ["「開いたままの括弧。", "次の文。", "最後の文。"]


@pytest.mark.parametrize(
    "text",
    [
        "It was the third-most watched U.S. broadcast ever. The game was close. Really?! Yes (it was).",
        "Dr. Smith arrived at 3.14 p.m. on Jan. 5. He left.\n\nA new paragraph starts here. 'Quoted.' Done.",
        "No sentence end at all",
    ],
)
def test_english_text_is_split_as_punkt_splits_it(splitter, text):
    punkt = sentence_splitting._splitter()[1]
    assert sentence_splitting.sentence_spans(text) == [(int(s), int(e)) for s, e in punkt(text)]
