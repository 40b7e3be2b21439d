"""``haystack-mvr eval --reader``: answer EM / F1 after retrieval, in both context modes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from haystack_mvr.cli.main import main

CORPUS = [
    {"id": "river#0", "title": "River", "text": "The river book was written by Anna Smith. It tells of a long river."},
    {"id": "hills#0", "title": "Hills", "text": "The hills are green in spring. Sheep graze there all year."},
]
QUESTIONS = [
    {"id": "q1", "question": "Who wrote the river book?", "answers": ["Anna Smith"], "answer_starts": [30],
     "positive_id": "river#0", "title": "River"},
    {"id": "q2", "question": "What grazes on the hills?", "answers": ["Sheep"], "answer_starts": [31],
     "positive_id": "hills#0", "title": "Hills"},
]  # fmt: skip


@pytest.fixture
def data(write_eval_data) -> Path:
    return write_eval_data(CORPUS, QUESTIONS)


@pytest.mark.parametrize(("kind", "context"), [("extractive", "document"), ("fid", "matched_view")])
def test_eval_scores_answers_with_a_reader(data, tiny_backbone, tiny_extractive_reader, tiny_t5, kind, context):
    reader = tiny_extractive_reader if kind == "extractive" else tiny_t5
    output = data / "metrics.json"
    argv = ["eval", "--model", str(tiny_backbone), "--corpus", str(data / "corpus.jsonl")]
    argv += ["--questions", str(data / "questions.jsonl"), "--top-k", "2", "--output", str(output)]
    argv += ["--reader", str(reader), "--reader-kind", kind, "--reader-top-k", "1", "--context", context]
    assert main(argv) == 0
    metrics = json.loads(output.read_text())
    for name in ("answer_EM", "answer_F1", "context_has_answer", "context_tokens", "reader_ms"):
        assert name in metrics
    assert 0.0 <= metrics["answer_EM"] <= metrics["answer_F1"] <= 1.0
    assert 0 < metrics["context_tokens"] <= 14  # one document (or one snippet) of at most 14 words


def test_eval_with_a_missing_reader_is_one_line(data, tiny_backbone, capsys):
    argv = ["eval", "--model", str(tiny_backbone), "--corpus", str(data / "corpus.jsonl")]
    argv += ["--questions", str(data / "questions.jsonl"), "--reader", str(data / "no-reader")]
    assert main(argv) == 2
    assert "--reader" in capsys.readouterr().err
