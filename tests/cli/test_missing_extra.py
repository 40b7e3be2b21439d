"""A command whose optional extra is not installed says which extra to install, in one line: training without the
``[train]`` extra was a bare ``No module named 'datasets'``."""

from __future__ import annotations

import pytest

from haystack_mvr.cli import evaluate, train, train_reader
from haystack_mvr.cli.main import main


def missing(module: str):
    def handler(namespace):
        raise ModuleNotFoundError(f"No module named '{module}'", name=module)

    return handler


@pytest.mark.parametrize(
    ("command", "patch", "module", "extra"),
    [
        (["train", "--model", "m", "--output-dir", "o"], (train, "run_train"), "datasets", "train"),
        (["train", "--model", "m", "--output-dir", "o"], (train, "run_train"), "accelerate", "train"),
        (["eval", "--model", "m", "--corpus", "c", "--questions", "q"], (evaluate, "run_eval"), "ranx", "eval"),
        (["eval", "--model", "m", "--corpus", "c", "--questions", "q"], (evaluate, "run_eval"), "faiss", "cpu"),
        (
            ["train-reader", "--kind", "generative", "--output-dir", "o"],
            (train_reader, "run_train_reader"),
            "peft",
            "generative",
        ),
        (
            ["train-reader", "--kind", "generative", "--output-dir", "o"],
            (train_reader, "run_train_reader"),
            "accelerate",
            "generative",
        ),
    ],
)
def test_a_missing_extra_is_named_with_its_install_command(monkeypatch, capsys, command, patch, module, extra):
    monkeypatch.setattr(*patch, missing(module))
    code = main(command)
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"No module named '{module}'" in err and f'pip install "haystack-mvr[{extra}]"' in err, err


def test_a_missing_module_of_no_extra_is_reported_as_it_is(monkeypatch, capsys):
    monkeypatch.setattr(train, "run_train", missing("something_else"))
    assert main(["train", "--model", "m", "--output-dir", "o"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "haystack-mvr train: error: No module named 'something_else'"
