"""EM / F1 with the SQuAD / DPR normalisation, and the end-to-end answer evaluation loop."""

from __future__ import annotations

import pytest
from haystack import Document, component
from haystack.dataclasses import ExtractedAnswer

from haystack_mvr.datasets import Question
from haystack_mvr.evaluation.answer_evaluation import context_documents, read_answers
from haystack_mvr.evaluation.answer_metrics import (
    answer_f1,
    exact_match,
    normalize_answer,
    paired_difference,
    question_scores,
    summarize_answers,
)
from haystack_mvr.views import MATCHED_TEXT_KEY


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("The Denver Broncos", "denver broncos"),
        ("  a  tale of an   apple ", "tale of apple"),  # articles go, whitespace collapses
        ("U.S.!", "us"),  # punctuation goes (SQuAD), not split into tokens
        ("Theater", "theater"),  # "the" only as a word
        ("Beyonc\u00e9", "beyonce\u0301"),  # NFD (DPR): the accent becomes a combining mark and stays
    ],
)
def test_normalize_answer(text, normal):
    assert normalize_answer(text) == normal


def test_exact_match_takes_the_best_gold_answer():
    assert exact_match("the Broncos", ["Denver Broncos", "Broncos"]) == 1.0
    assert exact_match("Denver", ["Denver Broncos"]) == 0.0
    assert exact_match("Beyonce\u0301", ["Beyonc\u00e9"]) == 1.0  # composed and decomposed agree


def test_f1_is_token_overlap():
    assert answer_f1("Denver Broncos", ["Denver Broncos"]) == 1.0
    assert answer_f1("Denver", ["Denver Broncos"]) == pytest.approx(2 / 3)  # p = 1, r = 1/2
    assert answer_f1("the", ["Denver"]) == 0.0  # nothing left after normalisation
    assert answer_f1("Carolina Panthers", ["Denver Broncos", "the Panthers"]) == pytest.approx(2 / 3)
    with pytest.raises(TypeError, match="list"):
        answer_f1("Denver", "Denver")


def test_summarize_answers_counts_missing_predictions_as_wrong():
    result = summarize_answers(["Denver Broncos", None], [["Denver Broncos"], ["Paris"]])
    assert result == {"answer_EM": 0.5, "answer_F1": 0.5}
    with pytest.raises(ValueError, match="predictions"):
        summarize_answers(["x"], [])
    assert question_scores(["Denver", None], [["Denver Broncos"], ["Paris"]]) == (
        [0.0, 0.0],
        [pytest.approx(2 / 3), 0.0],
    )


def test_paired_difference_is_the_mean_difference_with_its_interval():
    a, b = [1.0, 1.0, 0.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    d = paired_difference(a, b)
    # differences 1, 0, 0, 1, 0, 0: mean 1/3, sample sd sqrt(4/15)
    assert d.mean == pytest.approx(1 / 3) and d.n == 6
    assert d.standard_error == pytest.approx((4 / 15 / 6) ** 0.5)
    assert (d.low, d.high) == (
        pytest.approx(d.mean - 1.96 * d.standard_error),
        pytest.approx(d.mean + 1.96 * d.standard_error),
    )
    # pairing: a shared per-question effect leaves the difference and its interval unchanged
    shifted = paired_difference([x + q for q, x in enumerate(a)], [y + q for q, y in enumerate(b)])
    assert shifted.mean == pytest.approx(d.mean) and shifted.standard_error == pytest.approx(d.standard_error)
    assert paired_difference(b, a).mean == pytest.approx(-d.mean)
    same = paired_difference(a, a)
    assert same.mean == same.low == same.high == 0.0
    with pytest.raises(ValueError, match="same questions"):
        paired_difference(a, b[:-1])
    with pytest.raises(ValueError, match="at least two"):
        paired_difference([1.0], [0.0])


def test_context_documents_uses_the_matched_snippet_without_mutating():
    doc = Document(content="Warsaw is big. It lies on the Vistula.", meta={MATCHED_TEXT_KEY: "It lies on the Vistula."})
    bare = Document(content="no snippet here")
    matched = context_documents([doc, bare], "matched_view")
    assert matched[0].content == "It lies on the Vistula." and matched[0] is not doc
    assert doc.content.startswith("Warsaw")
    assert matched[1] is bare
    assert context_documents([doc], "document") == [doc]
    with pytest.raises(ValueError, match="context"):
        context_documents([doc], "snippet")


@component
class FirstWordReader:
    """Answers with the first word of the first document it reads; records what it read."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    @component.output_types(answers=list[ExtractedAnswer])
    def run(self, query: str, documents: list[Document]):
        self.seen.append([d.content for d in documents])
        return {"answers": [ExtractedAnswer(query=query, score=1.0, data=documents[0].content.split()[0])]}


def test_read_answers_scores_the_top_answer_and_counts_context():
    reader = FirstWordReader()
    questions = [
        Question(id="1", question="where?", answers=["Vistula"], positive_id="a", title="T"),
        Question(id="2", question="who?", answers=["Chopin"], positive_id="b", title="T"),
    ]
    docs = [
        [Document(content="Warsaw lies there", meta={MATCHED_TEXT_KEY: "Vistula river"}), Document(content="x y")],
        [Document(content="Chopin was born"), Document(content="z"), Document(content="never read")],
    ]
    run = read_answers(reader, questions, docs, context="matched_view", top_k=2)
    assert run.predictions == ["Vistula", "Chopin"]
    assert reader.seen == [["Vistula river", "x y"], ["Chopin was born", "z"]]
    metrics = run.metrics()
    assert metrics["answer_EM"] == 1.0 and metrics["context_tokens"] == (4 + 4) / 2
    whole = read_answers(FirstWordReader(), questions, docs, context="document", top_k=1).metrics()
    assert whole["answer_EM"] == 0.5 and whole["context_has_answer"] == 0.5
