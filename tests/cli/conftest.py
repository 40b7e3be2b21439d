"""Shared by the command-line tests: no hub access, and the small corpus / question files ``eval`` reads."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """Every command runs as on a machine without the hub: a model it would download fails at once."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def write_eval_data(tmp_path) -> Callable[[list[dict], list[dict]], Path]:
    """Writes ``corpus.jsonl`` and ``questions.jsonl`` (squad-mv's formats) of the given rows into ``tmp_path``."""

    def write(corpus: list[dict], questions: list[dict]) -> Path:
        (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus), encoding="utf-8")
        (tmp_path / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
        return tmp_path

    return write
