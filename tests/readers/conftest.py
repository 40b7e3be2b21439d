"""Fixtures shared by the reader tests."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from haystack_mvr.readers import shipped
from haystack_mvr.readers.shipped import shipped_reader_card


@pytest.fixture
def gguf_of_the_card(tmp_path, monkeypatch) -> Path:
    """A file standing in for the GGUF, with the card's hash recorded for it (the real one is built below)."""
    path = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    path.write_bytes(b"gguf")
    card = {**shipped_reader_card(), "base": {**shipped_reader_card()["base"]}}
    card["base"]["sha256"] = hashlib.sha256(b"gguf").hexdigest()
    monkeypatch.setattr(shipped, "shipped_reader_card", lambda: card)
    monkeypatch.setattr(shipped, "packaged_smollm2", lambda: path)
    return path
