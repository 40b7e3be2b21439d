"""Hard negatives never are the positive and never contain an answer (DPR has_answer), on real squad-mv passages."""

import dataclasses
import json

import pytest
import torch

from haystack_mvr.evaluation.answer_matching import has_answer
from haystack_mvr.training.data import Passage, TrainingExample, load_squad_mv
from haystack_mvr.training.negatives import (
    bm25_negatives,
    is_valid_negative,
    mine_negatives,
    read_negatives,
    write_negatives,
)

ARTICLES = {"Super Bowl 50", "Warsaw", "Normans"}


@pytest.fixture(scope="module")
def real(squad_mv_dir):
    data = load_squad_mv(squad_mv_dir)
    examples = [e for e in data.examples if e.positive.title in ARTICLES][::4]  # about 100 questions
    corpus = [p for p in data.corpus if p.title in ARTICLES]
    assert len(examples) > 50 and len(corpus) > 50
    return examples, corpus


def assert_clean(examples, negatives, text_of=lambda p: p.text):
    for e in examples:
        for p in negatives.get(e.query_id, []):
            assert p.id not in e.positive_ids, (e.query, p.id)
            assert not has_answer(list(e.answers), text_of(p)), (e.query, e.answers, p.text)


def test_bm25_negatives_exclude_positive_and_answers(real):
    examples, corpus = real
    negatives = bm25_negatives(examples, corpus, num_negatives=10, depth=40)
    assert set(negatives) == {e.query_id for e in examples}
    assert sum(len(v) for v in negatives.values()) > 5 * len(examples)
    assert_clean(examples, negatives)
    # The filter matters: without answers, answer-bearing passages would be among the "negatives".
    unfiltered = bm25_negatives(
        [dataclasses.replace(e, answers=()) for e in examples], corpus, num_negatives=10, depth=40
    )
    leaked = sum(has_answer(list(e.answers), p.text) for e in examples for p in unfiltered[e.query_id])
    assert leaked > 0


def test_bm25_negatives_are_topically_hard(real):
    examples, corpus = real
    negatives = bm25_negatives(examples, corpus, num_negatives=3, depth=40)
    same_article = sum(p.title == e.positive.title for e in examples for p in negatives[e.query_id])
    assert same_article > 0.5 * sum(len(v) for v in negatives.values())


def test_answer_check_runs_on_the_encoded_text():
    example = TrainingExample("q", "who?", Passage("p", "T", "x"), answers=("Warsaw",))
    titled = Passage("n", "Warsaw", "The city has a river.")
    assert is_valid_negative(example, titled)
    assert not is_valid_negative(example, titled, text_of=lambda p: p.title + "\n" + p.text)
    assert not is_valid_negative(example, Passage("p", "", "other"))


def test_mined_negatives_exclude_positive_and_answers(real, tiny_backbone):
    examples, corpus = real
    torch.manual_seed(0)
    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter
    from haystack_mvr.modeling.st_modules import viewer_encoder

    encoder = MultiVectorEncoderAdapter(viewer_encoder(tiny_backbone, mode="mvr", views=2, doc_max_length=32))
    negatives = mine_negatives(encoder, examples[:20], corpus[:60], num_negatives=5, depth=30, batch_size=32)
    assert all(len(v) == 5 for v in negatives.values())
    assert_clean(examples[:20], negatives)


def test_negatives_file_round_trip_and_errors(tmp_path):
    negatives = {"q1": [Passage("a", "T", "text a")], "q2": []}
    path = write_negatives(tmp_path / "neg.jsonl", negatives)
    assert read_negatives(path) == negatives
    path.write_text(json.dumps({"query_id": "q1", "negatives": [{"id": "a", "title": "T"}]}) + "\n")
    with pytest.raises(ValueError, match=r"neg.jsonl:1: field 'negatives\[0\]'"):
        read_negatives(path)
    path.write_text("\n" + json.dumps({"negatives": []}) + "\n")
    with pytest.raises(ValueError, match=r"neg.jsonl:2: field 'query_id'"):
        read_negatives(path)
