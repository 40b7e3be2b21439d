"""Training data from squad-mv, DPR and BEIR files; bad records are named by file, line (or record) and field."""

import json
import re

import pytest

from haystack_mvr.datasets.squad_mv import DEV_ARTICLES
from haystack_mvr.training.data import (
    Passage,
    TrainingExample,
    attach_negatives,
    load_beir,
    load_dpr,
    load_squad_mv,
    load_training_data,
)

CORPUS = [
    {"id": "Cats#0", "title": "Cats", "text": "Cats purr. They sleep a lot."},
    {"id": "Dogs#0", "title": "Dogs", "text": "Dogs bark loudly. Dogs like walks."},
]
QUESTIONS = [
    {
        "id": "q1",
        "question": "What do cats do?",
        "answers": ["sleep a lot"],
        "answer_starts": [16],
        "positive_id": "Cats#0",
        "title": "Cats",
    },
    {
        "id": "q2",
        "question": "What do dogs do?",
        "answers": ["bark"],
        "answer_starts": [5],
        "positive_id": "Dogs#0",
        "title": "Dogs",
    },
]


def write_jsonl(path, records, blank_line_after_first=False):
    lines = [json.dumps(r) for r in records]
    if blank_line_after_first:
        lines.insert(1, "")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def squad_dir(tmp_path):
    write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    write_jsonl(tmp_path / "train.jsonl", QUESTIONS)
    return tmp_path


def test_squad_mv_examples(squad_dir):
    data = load_squad_mv(squad_dir)
    assert [e.query_id for e in data.examples] == ["q1", "q2"]
    first = data.examples[0]
    assert first.positive == Passage("Cats#0", "Cats", CORPUS[0]["text"])
    assert first.positive.text[first.answer_start :].startswith("sleep a lot")
    assert first.answers == ("sleep a lot",) and first.positive_ids == frozenset({"Cats#0"})
    assert {p.id for p in data.corpus} == {"Cats#0", "Dogs#0"}


def test_squad_mv_bad_records_name_file_line_and_field(squad_dir):
    bad = dict(QUESTIONS[1], positive_id="Birds#0")
    write_jsonl(squad_dir / "train.jsonl", [QUESTIONS[0], bad], blank_line_after_first=True)
    with pytest.raises(ValueError, match=re.escape(f"{squad_dir / 'train.jsonl'}:3: field 'positive_id'")):
        load_squad_mv(squad_dir)
    write_jsonl(squad_dir / "train.jsonl", [QUESTIONS[0], dict(QUESTIONS[1], answer_starts=[999])])
    with pytest.raises(ValueError, match=r"train.jsonl:2: field 'answer_starts'"):
        load_squad_mv(squad_dir)
    write_jsonl(squad_dir / "train.jsonl", [dict(QUESTIONS[0], question="")])
    with pytest.raises(ValueError, match=r"train.jsonl:1: field 'question'"):
        load_squad_mv(squad_dir)
    write_jsonl(squad_dir / "corpus.jsonl", [CORPUS[0], {"id": "X", "title": "X"}])
    with pytest.raises(ValueError, match=r"corpus.jsonl:2: field 'text'"):
        load_squad_mv(squad_dir)


def test_real_squad_mv_holds_out_dev_articles(squad_mv_dir):
    data = load_squad_mv(squad_mv_dir)
    titles = {e.positive.title for e in data.examples}
    assert titles and not titles & set(DEV_ARTICLES)
    assert not {p.title for p in data.corpus} & set(DEV_ARTICLES)  # dev paragraphs are never negatives either
    assert len(titles) == 32 - len(DEV_ARTICLES)
    with_dev = load_squad_mv(squad_mv_dir, include_dev_articles=True)
    assert set(DEV_ARTICLES) <= {e.positive.title for e in with_dev.examples}
    e = data.examples[0]
    assert e.positive.text[e.answer_start :].startswith(e.answers[0])


DPR_RECORDS = [
    {
        "question": "who wrote hamlet",
        "answers": ["Shakespeare"],
        "positive_ctxs": [
            {"title": "Hamlet", "text": "Hamlet is a tragedy by William Shakespeare.", "passage_id": "7"}
        ],
        "negative_ctxs": [{"title": "Paris", "text": "Paris is in France."}],
        "hard_negative_ctxs": [{"title": "Macbeth", "text": "Macbeth is a play.", "passage_id": "9"}],
    },
    {
        "question": "capital of france",
        "answers": ["paris"],
        "positive_ctxs": [{"title": "France", "text": "Its capital is Paris."}],
        "negative_ctxs": [{"title": "Rome", "text": "Rome is in Italy."}],
    },
]


def test_dpr_json_and_jsonl(tmp_path):
    path = tmp_path / "train.json"
    path.write_text(json.dumps(DPR_RECORDS), encoding="utf-8")
    data = load_dpr(path)
    first, second = data.examples
    assert first.positive.id == "7" and first.answer_start == first.positive.text.index("Shakespeare")
    assert [p.id for p in first.hard_negatives] == ["9"]  # hard negatives first
    assert [p.text for p in second.hard_negatives] == ["Rome is in Italy."]  # else plain negatives
    assert second.answer_start == second.positive.text.index("Paris")  # case-insensitive fallback
    assert len(data.corpus) == 5
    jsonl = write_jsonl(tmp_path / "train.jsonl", DPR_RECORDS)
    assert [e.query for e in load_dpr(jsonl).examples] == ["who wrote hamlet", "capital of france"]
    assert load_dpr(path, use_file_negatives=False).examples[0].hard_negatives == ()


def test_dpr_bad_records_name_the_record_and_field(tmp_path):
    path = tmp_path / "train.json"
    path.write_text(json.dumps([DPR_RECORDS[0], dict(DPR_RECORDS[1], positive_ctxs=[])]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"train.json record 1: field 'positive_ctxs'"):
        load_dpr(path)
    bad_ctx = dict(DPR_RECORDS[1], hard_negative_ctxs=[{"title": "t"}])
    path.write_text(json.dumps([bad_ctx]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"record 0 hard_negative_ctxs\[0\]: field 'text'"):
        load_dpr(path)
    jsonl = write_jsonl(tmp_path / "train.jsonl", [DPR_RECORDS[0], dict(DPR_RECORDS[1], answers="paris")])
    with pytest.raises(ValueError, match=r"train.jsonl:2: field 'answers'"):
        load_dpr(jsonl)


@pytest.fixture
def beir_dir(tmp_path):
    write_jsonl(
        tmp_path / "corpus.jsonl",
        [
            {"_id": "d1", "title": "A", "text": "alpha text"},
            {"_id": "d2", "title": "B", "text": "beta text"},
            {"_id": "d3", "title": "C", "text": "gamma text"},
        ],
    )
    write_jsonl(tmp_path / "queries.jsonl", [{"_id": "q1", "text": "alpha?"}, {"_id": "q2", "text": "beta?"}])
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td3\t1\nq2\td2\t1\nq2\td3\t0\n"
    )
    return tmp_path


def test_beir_examples(beir_dir):
    data = load_beir(beir_dir)
    assert [(e.query_id, e.positive.id) for e in data.examples] == [("q1", "d1"), ("q1", "d3"), ("q2", "d2")]
    assert data.examples[0].positive_ids == frozenset({"d1", "d3"})
    assert data.examples[0].answer_start is None and data.examples[0].answers == ()
    assert len(load_training_data("beir", beir_dir, max_examples=2).examples) == 2


def test_beir_bad_qrels_name_line_and_field(beir_dir):
    qrels = beir_dir / "qrels" / "train.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td9\t1\n")
    with pytest.raises(ValueError, match=re.escape(f"{qrels}:3: field 'corpus-id'")):
        load_beir(beir_dir)
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\tone\n")
    with pytest.raises(ValueError, match=r"train.tsv:2: field 'score'"):
        load_beir(beir_dir)
    write_jsonl(beir_dir / "queries.jsonl", [{"_id": "q1", "text": "alpha?"}, {"_id": "q2"}])
    with pytest.raises(ValueError, match=r"queries.jsonl:2: field 'text'"):
        load_beir(beir_dir)


def test_missing_files_and_unknown_format(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"train\.jsonl"):
        load_squad_mv(tmp_path)
    with pytest.raises(ValueError, match="Unknown data format"):
        load_training_data("msmarco", tmp_path)


def test_attach_negatives_skips_positives_and_duplicates():
    example = TrainingExample(
        "q",
        "query",
        Passage("p", "", "positive"),
        positive_ids=frozenset({"p", "p2"}),
        hard_negatives=(Passage("a", "", "x"),),
    )
    merged = attach_negatives([example], {"q": [Passage("a", "", "x"), Passage("p2", "", "y"), Passage("b", "", "z")]})
    assert [p.id for p in merged[0].hard_negatives] == ["a", "b"]
    assert merged[0] is not example
