"""``haystack-mvr eval`` with a late-interaction (ColBERT) ``MultiVectorEncoder`` folder: the query travels as all its
vectors, the ranking is exact MaxSim (checked against brute force in numpy), ``--index-dir`` reuses a token-view
index, and ``--diagnostics`` (multi-view collapse) is refused before anything is loaded."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import haystack_mvr.evaluation.pipeline_evaluation as pipeline_evaluation
from haystack_mvr.cli.main import main

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CORPUS = [
    {"id": "river#0", "title": "River", "text": "The river book was written by Anna Smith. It tells of a long river."},
    {"id": "hills#0", "title": "Hills", "text": "The hills are green in spring. Sheep graze there all year."},
    {"id": "city#0", "title": "City", "text": "The city has a harbour and an old castle. Many people visit it."},
    {"id": "poland#0", "title": "Poland", "text": "The Vistula is the longest river in Poland. Warsaw lies on it."},
    {"id": "khan#0", "title": "Khan", "text": "Genghis Khan founded the Mongol Empire in 1206 after many wars."},
    {"id": "sea#0", "title": "Sea", "text": "The sea is deep and cold in winter. Boats rarely leave the harbour then."},
]
QUESTIONS = [
    {"id": "q1", "question": "Who wrote the river book?", "answers": ["Anna Smith"], "answer_starts": [30],
     "positive_id": "river#0", "title": "River"},
    {"id": "q2", "question": "What grazes on the hills?", "answers": ["Sheep"], "answer_starts": [31],
     "positive_id": "hills#0", "title": "Hills"},
    {"id": "q3", "question": "Which river is the longest in Poland?", "answers": ["The Vistula"], "answer_starts": [0],
     "positive_id": "poland#0", "title": "Poland"},
]  # fmt: skip


@pytest.fixture
def data(write_eval_data) -> Path:
    return write_eval_data(CORPUS, QUESTIONS)


@pytest.fixture
def rankings(monkeypatch) -> list:
    """Every ``RankedResults`` the eval command produces."""
    seen = []
    real = pipeline_evaluation.run_query_pipeline

    def recording(*args, **kwargs):
        seen.append(real(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(pipeline_evaluation, "run_query_pipeline", recording)
    return seen


def brute_force_maxsim(model: Path) -> np.ndarray:
    """``(questions, documents)`` MaxSim in float64 numpy from the encoder's own views, on the text eval embeds."""
    from haystack_mvr.modeling.st_encoder import open_encoder

    encoder = open_encoder(model, "cpu")
    documents = [d.views for d in encoder.encode_documents([f"{r['title']}\n{r['text']}" for r in CORPUS])]
    queries = encoder.query_views([q["question"] for q in QUESTIONS])
    return np.array([[(q.astype(np.float64) @ v.T).max(axis=1).sum() for v in documents] for q in queries])


def test_eval_ranks_a_colbert_by_exact_maxsim(data, tiny_colbert, rankings, capsys):
    argv = ["eval", "--model", str(tiny_colbert), "--corpus", str(data / "corpus.jsonl")]
    argv += ["--questions", str(data / "questions.jsonl"), "--top-k", str(len(CORPUS))]
    assert main([*argv, "--output", str(data / "metrics.json")]) == 0
    assert f"{len(QUESTIONS)} questions, {len(CORPUS)} documents" in capsys.readouterr().out

    expected = brute_force_maxsim(tiny_colbert)
    (ranked,) = rankings
    for row, documents in zip(expected, ranked.documents, strict=True):
        assert [d.id for d in documents] == [CORPUS[i]["id"] for i in np.argsort(-row, kind="stable")]
        np.testing.assert_allclose([d.score for d in documents], np.sort(row)[::-1], rtol=1e-5)

    # The metrics written are those of the brute-force ranking.
    from haystack import Document

    from haystack_mvr.evaluation.retrieval_metrics import DEFAULT_KS

    documents = [
        [Document(id=CORPUS[i]["id"], content=CORPUS[i]["text"]) for i in np.argsort(-row, kind="stable")]
        for row in expected
    ]
    metrics = pipeline_evaluation.evaluate_ranking(
        pipeline_evaluation.RankedResults(ranked.questions, documents), ks=[k for k in DEFAULT_KS if k <= len(CORPUS)]
    )
    saved = json.loads((data / "metrics.json").read_text())
    assert saved and saved == pytest.approx({k: v for k, v in metrics.items() if k in saved})


def test_eval_reuses_a_saved_colbert_index(data, tiny_colbert, capsys):
    index = data / "index"
    argv = ["eval", "--model", str(tiny_colbert), "--corpus", str(data / "corpus.jsonl")]
    argv += ["--questions", str(data / "questions.jsonl"), "--top-k", "3", "--index-dir", str(index)]
    assert main([*argv, "--output", str(data / "first.json")]) == 0
    first = capsys.readouterr().out
    assert f"Encoded {len(CORPUS)} documents" in first and f"Saved the index to {index}" in first

    assert main([*argv, "--output", str(data / "second.json")]) == 0
    second = capsys.readouterr().out
    assert f"Loaded {len(CORPUS)} documents from {index}" in second and "Encoded" not in second
    assert json.loads((data / "first.json").read_text()) == json.loads((data / "second.json").read_text())


def test_eval_refuses_diagnostics_for_a_colbert_before_loading_it(data, tiny_colbert, capsys, monkeypatch):
    import haystack_mvr.components.embedders as embedders
    from haystack_mvr.modeling.late_interaction import LateInteractionEncoder

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before --diagnostics was refused")

    monkeypatch.setattr(embedders, "MultiViewDocumentEmbedder", refuse)
    monkeypatch.setattr(embedders, "MultiViewTextEmbedder", refuse)
    monkeypatch.setattr(LateInteractionEncoder, "load", refuse)
    argv = ["eval", "--model", str(tiny_colbert), "--corpus", str(data / "corpus.jsonl")]
    code = main([*argv, "--questions", str(data / "questions.jsonl"), "--diagnostics"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("haystack-mvr eval: error: --diagnostics measures multi-view collapse")
    assert "late-interaction (ColBERT)" in err and err.endswith("drop --diagnostics.")
