"""The RAG benchmarks' own logic: filling a budget, gold ensured in training contexts, the claims' pairing."""

from __future__ import annotations

import random

import pytest

from benchmarks.generative_examples import ensured
from benchmarks.packaged_model import packaged_minilm
from benchmarks.rag_answers import READER_ROWS, claims, row_key
from benchmarks.rag_context import TokenBudgetCounter, context_text, fill, uncovered
from haystack_mvr.datasets import Question


@pytest.fixture(scope="module")
def counter() -> TokenBudgetCounter:
    return TokenBudgetCounter(packaged_minilm())


def test_uncovered_leaves_out_what_was_taken():
    assert uncovered([(5, 10)], 0, 20) == [(0, 5), (10, 20)]
    assert uncovered([(0, 30)], 5, 10) == []
    assert uncovered([(2, 4), (6, 8)], 0, 10) == [(0, 2), (4, 6), (8, 10)]


def test_fill_takes_spans_in_order_without_repeats_and_cuts_the_last(counter):
    texts = {"a": "one two three four five six", "b": "seven eight nine ten"}
    spans = [["a", 0, 13], ["a", 4, 23], ["b", 0, 20]]  # the second overlaps the first: only its new text counts
    out = fill(spans, texts, 7, counter)
    assert out == [["a", 0, 13], ["a", 13, 23], ["b", 0, 11]]  # 3 + 2 tokens, then "seven eight"
    text = context_text(out, texts)
    assert counter.count(text.replace("\n\n", " ")) == 7
    assert fill(spans, texts, 100, counter) == [["a", 0, 13], ["a", 13, 23], ["b", 0, 20]]


def test_window_is_centred_on_the_answer(counter):
    text = " ".join(f"w{i}" for i in range(200))
    lo, hi = counter.window(text, text.index("w100"), 8)
    assert "w100" in text[lo:hi] and counter.count(text[lo:hi]) == 8


def test_gold_is_ensured_only_when_the_answer_is_missing(counter):
    texts = {"p": "Paris lies on the Seine.", "q": "London lies on the Thames.", "g": "The war ended in 1945."}
    question = Question(id="1", question="When?", answers=["1945"], positive_id="g", title="t")
    spans = [["p", 0, 24], ["q", 0, 26]]
    kept, added = ensured(question, spans, ["g", 0, 22], 14, texts, counter, random.Random(0))
    assert added and ["g", 0, 22] in kept and counter.count(context_text(kept, texts)) <= 14 + 2
    assert ["q", 0, 26] not in kept  # dropped for room
    found, added = ensured(question, [["g", 0, 22]], ["g", 0, 22], 14, texts, counter, random.Random(0))
    assert not added and found == [["g", 0, 22]]


def test_claims_pair_each_row_with_its_baseline():
    rows = {row_key(r): ["x"] * 4 for r in READER_ROWS}
    rows[row_key(("builder after hybrid", 256))] = ["a", "a", "a", "x"]
    answers = [["a"], ["a"], ["a"], ["a"]]
    found = {c["row"] + " | " + c["against"]: c for c in claims(rows, answers)}
    within = found["builder after hybrid @ 256 | hybrid documents @ whole"]
    assert within["difference"] == pytest.approx(75.0)
    assert found["builder after hybrid @ 128 | chunks @ 128"]["difference"] == 0.0


def test_the_mix_names_budgets_gold_and_none_and_refuses_anything_else():
    from benchmarks.generative_examples import parse_mix

    assert parse_mix(["128=0.2", "gold=0.1", "none=0.05"]) == {"128": 0.2, "gold": 0.1, "none": 0.05}
    for bad in (["big=1"], ["128"], ["none="]):
        with pytest.raises(SystemExit, match="BUDGET=WEIGHT"):
            parse_mix(bad)


def test_a_context_without_the_gold_paragraph_counts_only_when_the_answer_is_gone():
    from benchmarks.generative_examples import without_gold

    question = Question(id="q", question="Where?", answers=["Vistula"], positive_id="gold", title="t")
    texts = {"gold": "Warsaw lies on the Vistula.", "a": "Paris lies on the Seine.", "b": "The Vistula is long."}
    assert without_gold(question, [["gold", 0, 27], ["a", 0, 24]], texts) == [["a", 0, 24]]
    assert without_gold(question, [["gold", 0, 27], ["b", 0, 20]], texts) is None  # the answer is elsewhere too
    assert without_gold(question, [["gold", 0, 27]], texts) is None  # nothing left


def test_an_asked_row_is_any_row_the_contexts_hold_and_an_unknown_one_is_refused():
    from benchmarks.rag_answers import asked_row

    contexts = [{"gold ceiling": {"256": [], "whole": []}, "builder after hybrid": {"128": []}}]
    assert asked_row("gold ceiling @ 256", contexts) == ("gold ceiling", 256)  # not in READER_ROWS: still read
    assert asked_row("gold ceiling @ whole", contexts) == ("gold ceiling", "whole")
    with pytest.raises(SystemExit, match=r"no such row.*builder after hybrid @ 128"):
        asked_row("builder after hybrid @ 999", contexts)


def test_a_second_reader_is_paired_with_the_first_row_by_row():
    from benchmarks.rag_answers import reader_claims

    answers = [["a"], ["b"], ["c"], ["d"]]
    first = {"builder after hybrid @ 256": ["a", "x", "x", "x"], "gold ceiling @ 256": ["a", "b", "c", "d"]}
    second = {"builder after hybrid @ 256": ["a", "b", "c", "x"], "chunks @ 256": ["a", "b", "c", "d"]}
    found = reader_claims(second, first, answers, "shipped, auto")
    assert [c["row"] for c in found] == ["builder after hybrid @ 256"]  # rows only one reader read are not paired
    assert found[0]["difference"] == pytest.approx(50.0) and found[0]["low"] <= 50.0 <= found[0]["high"]
    assert found[0]["against"] == "builder after hybrid @ 256 (shipped, auto)"


def test_the_command_line_names_paths_lists_and_rows_as_a_shell_reads_them():
    import shlex
    from pathlib import Path

    from benchmarks.rag_answers import command_line

    args = {
        "tier": "pages", "questions": 150, "reader": ["shipped", "runs/reader cpu2"], "precision": ["auto"],
        "rows": ["builder after hybrid @ 256"], "paired_with": [Path("benchmarks/results/a.json")],
        "contexts": Path("/somewhere/contexts-tokens.json"), "cache_dir": Path("runs/rag"), "extractive": None,
        "threads": 1,
    }  # fmt: skip
    line = command_line(args)
    assert shlex.split(line) == [
        "python", "-m", "benchmarks.rag_answers", "--tier", "pages", "--questions", "150",
        "--reader", "shipped", "runs/reader cpu2", "--rows", "builder after hybrid @ 256",
        "--paired-with", "benchmarks/results/a.json", "--contexts", "contexts-tokens.json",
    ]  # fmt: skip
