"""The shipped reader's cached build is used only while every file of it is the one the build wrote: weights, and the
tokenizer, chat template and configs the reader also reads (a damaged one would change every prompt silently)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from haystack_mvr.readers import shipped
from haystack_mvr.readers.shipped import shipped_reader_card, shipped_reader_folder

FILES = {
    "config.json": b'{"model_type": "llama"}',
    "generation_config.json": b'{"max_new_tokens": 32}',
    "chat_template.jinja": b"{% for m in messages %}{{ m['content'] }}{% endfor %}",
    "tokenizer.json": b'{"version": "1.0", "model": {"vocab": {"a": 0, "b": 1}}}',
    "tokenizer_config.json": b'{"model_max_length": 8192}',
    "model.safetensors": bytes(range(256)) * 4,
}


def _fake_merge(calls: list):
    def merge(adapter, output_dir, base):
        calls.append(output_dir)
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        for name, data in FILES.items():
            (Path(output_dir) / name).write_bytes(data)

    return merge


@pytest.fixture
def fake_build(tmp_path, monkeypatch) -> list:
    """A GGUF stand-in with the card's hash recorded for it, and a merge that writes a reader's files."""
    from haystack_mvr.readers import generative_model

    path = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    path.write_bytes(b"gguf")
    card = {**shipped_reader_card(), "base": {**shipped_reader_card()["base"]}}
    card["base"]["sha256"] = hashlib.sha256(b"gguf").hexdigest()
    monkeypatch.setattr(shipped, "shipped_reader_card", lambda: card)
    monkeypatch.setattr(shipped, "packaged_smollm2", lambda: path)
    calls: list = []
    monkeypatch.setattr(generative_model, "merge_generative_adapter", _fake_merge(calls))
    return calls


@pytest.mark.parametrize("name", sorted(set(FILES) - {"model.safetensors"}))
def test_a_same_size_change_to_any_file_of_the_build_is_found_and_rebuilt(tmp_path, fake_build, name):
    folder = shipped_reader_folder(tmp_path / "c")
    path = folder / name
    good = path.read_bytes()
    path.write_bytes(good[:-2] + bytes([good[-2] ^ 0x20]) + good[-1:])  # same size, one byte changed
    shipped._VERIFIED.clear()  # a new process
    assert shipped_reader_folder(tmp_path / "c") == folder and len(fake_build) == 2
    assert path.read_bytes() == good


def test_a_file_missing_from_the_build_is_found_and_rebuilt(tmp_path, fake_build):
    folder = shipped_reader_folder(tmp_path / "c")
    (folder / "tokenizer.json").unlink()
    assert shipped_reader_folder(tmp_path / "c") == folder and len(fake_build) == 2  # sizes: every call
    assert (folder / "tokenizer.json").read_bytes() == FILES["tokenizer.json"]


def test_the_build_record_names_every_file_with_its_size_and_hash(tmp_path, fake_build):
    folder = shipped_reader_folder(tmp_path / "c")
    record = json.loads((folder / "built.json").read_text(encoding="utf-8"))
    assert set(record["files"]) == set(FILES)
    for name, data in FILES.items():
        assert record["files"][name] == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def test_an_intact_build_is_hashed_once_a_process(tmp_path, fake_build, monkeypatch):
    folder = shipped_reader_folder(tmp_path / "c")
    shipped._VERIFIED.clear()
    hashed: list = []
    real = shipped.file_sha256
    monkeypatch.setattr(shipped, "file_sha256", lambda p: hashed.append(Path(p).name) or real(p))
    for _ in range(3):
        assert shipped_reader_folder(tmp_path / "c") == folder
    adapter_and_gguf = {"adapter_model.safetensors", "SmolLM2-135M-Instruct.Q4_1.gguf"}
    assert sorted(n for n in hashed if n not in adapter_and_gguf) == sorted(FILES)  # each file once, not 3 times
    assert len(fake_build) == 1


def test_the_docstring_states_no_build_time():
    assert "minute" not in (shipped.shipped_reader_folder.__doc__ or "")
