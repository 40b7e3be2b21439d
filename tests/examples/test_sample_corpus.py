"""The sample corpus that ships in the repository: a clone without ../shared runs the quickstart on it, a clone beside
the shared data reads the full squad-mv corpus, and the sample carries its licence and attribution."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SAMPLE = EXAMPLES / "data" / "squad-mv-sample"


@pytest.fixture(autouse=True)
def examples_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))


def test_the_default_corpus_is_the_shared_one_where_it_exists_else_the_sample(tmp_path):
    import common

    assert common.default_corpus(tmp_path / "no-shared-data") == SAMPLE / "corpus.jsonl"
    shared = tmp_path / "data" / "squad-mv" / "corpus.jsonl"
    shared.parent.mkdir(parents=True)
    shared.write_text('{"id": "a#0", "title": "A", "text": "A paragraph."}\n', encoding="utf-8")
    assert common.default_corpus(tmp_path / "data") == shared
    if (common.DEFAULT_DATA / "squad-mv" / "corpus.jsonl").is_file():
        assert common.default_corpus() == common.DEFAULT_DATA / "squad-mv" / "corpus.jsonl"


def test_a_clone_without_the_shared_data_runs_the_quickstart_on_the_sample(tmp_path, tiny_backbone):
    clone = tmp_path / "clone"  # ../shared does not exist beside it
    shutil.copytree(EXAMPLES, clone / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    command = [sys.executable, "examples/quickstart.py", "--model", str(tiny_backbone), "--no-answers", "--no-cache"]
    command += ["--limit", "3", "--top-k", "2", "--question", "Which NFL team represented the AFC at Super Bowl 50?"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    sample = clone / "examples" / "data" / "squad-mv-sample" / "corpus.jsonl"
    assert f"Reading the corpus {sample}" in done.stdout and "Read 3 documents" in done.stdout
    assert "1. [" in done.stdout and "Super_Bowl_50#" in done.stdout


def test_the_sample_is_small_licensed_and_from_the_given_articles():
    corpus = SAMPLE / "corpus.jsonl"
    assert corpus.stat().st_size < 400_000
    licence = (SAMPLE / "LICENSE.md").read_text(encoding="utf-8")
    for needed in ("CC BY-SA 4.0", "creativecommons.org/licenses/by-sa/4.0", "Rajpurkar", "Wikipedia contributors"):
        assert needed in licence
    records = [json.loads(line) for line in corpus.open(encoding="utf-8")]
    assert len(records) == len({r["id"] for r in records}) >= 100
    assert all(set(r) == {"id", "title", "text"} and r["text"].strip() for r in records)
    titles = {r["title"] for r in records}
    assert all(title in licence for title in titles)  # the licence file names every article it attributes


def test_the_sample_is_the_shared_corpus_paragraphs_of_given_articles_answering_the_default_questions(squad_mv_dir):
    import common

    shared = {}
    for line in (squad_mv_dir / "corpus.jsonl").open(encoding="utf-8"):
        shared[json.loads(line)["id"]] = line
    sample = (SAMPLE / "corpus.jsonl").open(encoding="utf-8").readlines()
    assert all(line == shared[json.loads(line)["id"]] for line in sample)  # byte for byte, text unchanged
    questions = [json.loads(line) for line in (squad_mv_dir / "train.jsonl").open(encoding="utf-8")]
    given = {q["title"] for q in questions}  # the held-out test articles have no questions here
    titles = {json.loads(line)["title"] for line in sample}
    assert titles <= given
    article_paragraphs = {i for i, line in shared.items() if json.loads(line)["title"] in titles}
    assert {json.loads(line)["id"] for line in sample} == article_paragraphs  # whole articles
    gold = {q["question"]: q["positive_id"] for q in questions}
    sample_ids = {json.loads(line)["id"] for line in sample}
    assert all(gold[q] in sample_ids for q in common.DEFAULT_QUESTIONS if q in gold)
