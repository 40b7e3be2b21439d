"""benchmarks/answers.py's paired differences: which rows are compared, and the numbers under the table."""

from __future__ import annotations

import pytest

from benchmarks.answers import BASELINE, gold_breakdown, markdown, paired_rows

HYBRID = "convex hybrid (BM25 0.4 + multi-view 0.6)"


def row(system: str, context: str, predictions: list[str], tokens: float) -> dict:
    return {
        "system": system,
        "context": context,
        "query_ms": 1.0,
        "gold_in_context": 1.0,
        "context_has_answer": 1.0,
        "context_tokens": tokens,
        "readers": {"extractive": {"answer_EM": 0.0, "answer_F1": 0.0, "reader_ms": 1.0, "predictions": predictions}},
    }


def payload() -> dict:
    return {
        "questions": 4,
        "dev_questions": 4,
        "top_k": 3,
        "machine": "test",
        "date": "today",
        "question_ids": ["a", "b", "c", "d"],
        "readers": {"extractive": {"training": {}}},
        "rows": [
            row("gold paragraph (upper bound)", "document", ["x", "y", "z", "w"], 100),
            row(BASELINE[0], "document", ["x", "no", "no", "no"], 500),
            row(HYBRID, "document", ["x", "y", "no", "no"], 520),
            row(HYBRID, "matched_view", ["x", "y", "z", "no"], 130),
        ],
    }


def test_paired_rows_compare_each_row_with_bm25_and_each_snippet_row_with_its_documents():
    answers = {"a": ["x"], "b": ["y"], "c": ["z"], "d": ["w"]}
    pairs = {(p["row"], p["against"]): p for p in paired_rows(payload(), answers)}
    bm25 = f"{BASELINE[0]} / document"
    assert set(pairs) == {
        (f"{HYBRID} / document", bm25),
        (f"{HYBRID} / matched_view", bm25),
        (f"{HYBRID} / matched_view", f"{HYBRID} / document"),
    }  # the gold paragraph is a bound, not a system: never paired
    documents = pairs[(f"{HYBRID} / document", bm25)]
    assert documents["EM_difference"] == pytest.approx(25.0)  # one question of four won, none lost
    low, high = documents["EM_interval"]
    assert low < 25.0 < high
    snippets = pairs[(f"{HYBRID} / matched_view", f"{HYBRID} / document")]
    assert snippets["EM_difference"] == pytest.approx(25.0)
    assert snippets["token_ratio"] == pytest.approx(130 / 520)
    text = markdown({**payload(), "paired": list(pairs.values())})
    assert "Paired differences" in text and "+25.0 [" in text and "| 0.25 |" in text


def test_rows_without_predictions_are_left_out_of_the_pairs():
    old = payload()
    for r in old["rows"]:
        del r["readers"]["extractive"]["predictions"]  # results written before predictions were kept
    assert paired_rows(old, {"a": ["x"], "b": ["y"], "c": ["z"], "d": ["w"]}) == []
    assert "Paired differences" not in markdown(old)


def test_gold_breakdown_splits_the_difference_by_which_row_read_the_gold_paragraph():
    ranked = payload()
    ranks = {BASELINE[0]: [0, None, 1, None], HYBRID: [1, 0, None, None]}
    for r in ranked["rows"]:
        r["gold_ranks"] = ranks.get(r["system"], [0, 0, 0, 0])
    answers = {"a": ["x"], "b": ["y"], "c": ["z"], "d": ["w"]}
    groups = {b["gold_read_by"]: b for b in gold_breakdown(ranked, answers)}
    # only whole-document rows are split, each against BM25's documents
    assert {b["row"] for b in gold_breakdown(ranked, answers)} == {f"{HYBRID} / document"}
    assert {name: g["questions"] for name, g in groups.items()} == {
        "both": 1,
        "row only": 1,
        "against only": 1,
        "neither": 1,
    }
    assert groups["row only"]["row_EM"] == 100.0 and groups["row only"]["against_EM"] == 0.0
    assert groups["row only"]["share_of_difference"] == pytest.approx(25.0)
    assert groups["both"]["gold_first_row"] == 0.0 and groups["both"]["gold_first_against"] == 100.0
    total = sum(g["share_of_difference"] for g in groups.values())
    paired = {(p["row"], p["against"]): p for p in paired_rows(ranked, answers)}
    assert total == pytest.approx(paired[(f"{HYBRID} / document", f"{BASELINE[0]} / document")]["EM_difference"])
    text = markdown({**ranked, "gold_breakdown": gold_breakdown(ranked, answers)})
    assert "read the gold paragraph" in text and "| row only | 1 | 100.0 | 0.0 | +25.0 |" in text


def test_rows_without_gold_ranks_have_no_breakdown():
    assert gold_breakdown(payload(), {"a": ["x"], "b": ["y"], "c": ["z"], "d": ["w"]}) == []
