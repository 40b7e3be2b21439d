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
def fake_build(monkeypatch, gguf_of_the_card) -> list:
    """A GGUF stand-in with the card's hash recorded for it, and a merge that writes a reader's files."""
    from haystack_mvr.readers import generative_model

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


def test_a_copy_of_a_real_build_with_one_weight_byte_flipped_is_rebuilt(tmp_path, monkeypatch):
    """The fast variant of a real damage test: a built folder of this machine's cache, copied (no merge), adopted
    with the record a build writes, then one byte of its weights flipped in place (same size)."""
    import shutil

    from haystack_mvr.readers import generative_model

    card = shipped_reader_card()
    name = f"reader-{card['name']}-{card['adapter_sha256'][:12]}"
    built = shipped.default_cache_dir() / name
    if not (built / "model.safetensors").is_file():
        pytest.skip(f"no built shipped reader in {built.parent} to copy")
    try:
        shipped.packaged_smollm2()  # a rebuild checks the real GGUF's hash first
    except Exception as error:
        pytest.skip(str(error))
    root = tmp_path / "cache"
    folder = root / name
    shutil.copytree(built, folder)
    record = {"adapter_sha256": card["adapter_sha256"], "files": shipped.file_records(folder)}
    (folder / "built.json").write_text(json.dumps(record), encoding="utf-8")
    good = {n: (folder / n).stat().st_size for n in record["files"]}
    calls: list = []

    def merge_by_copying(adapter, output_dir, base):  # stands in for the two-minute merge
        calls.append(output_dir)
        shutil.copytree(built, output_dir, dirs_exist_ok=True, ignore=shutil.ignore_patterns("built.json"))

    monkeypatch.setattr(generative_model, "merge_generative_adapter", merge_by_copying)
    shipped._VERIFIED.clear()
    assert shipped_reader_folder(root) == folder and calls == []  # intact: used as it is
    with (folder / "model.safetensors").open("r+b") as f:
        f.seek(good["model.safetensors"] // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0x01]))
    assert (folder / "model.safetensors").stat().st_size == good["model.safetensors"]
    shipped._VERIFIED.clear()  # the next process
    assert shipped_reader_folder(root) == folder and len(calls) == 1
    assert shipped.file_records(folder)["model.safetensors"] == record["files"]["model.safetensors"]


def test_a_build_killed_beside_a_finished_one_is_removed_by_the_next_use(tmp_path, fake_build):
    """Two builds at once, one killed with -9: the other finishes, later uses find its folder intact and never build
    again, so they remove the dead build's folder rather than leave it forever."""
    import os
    import subprocess
    import sys

    folder = shipped_reader_folder(tmp_path / "c")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / "c" / f".building-{folder.name}-{dead.pid}-abc"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"half written")
    mine = tmp_path / "c" / f".building-{folder.name}-{os.getpid()}-live"
    mine.mkdir()
    assert shipped_reader_folder(tmp_path / "c") == folder and len(fake_build) == 1
    assert not stale.exists() and mine.exists()


def test_a_killed_build_whose_pid_now_names_a_live_process_is_removed(tmp_path, fake_build):
    """A build killed with -9 leaves its folder and its free lock file; its pid may since name another, live
    process. The free lock tells it from a live build, whose lock is held."""
    import fcntl
    import os

    folder = shipped_reader_folder(tmp_path / "c")
    reused = os.getppid()  # alive, and not this process
    killed = tmp_path / "c" / f".building-{folder.name}-{reused}-killed"
    killed.mkdir()
    (killed / "model.safetensors").write_bytes(b"half written")
    killed.with_name(killed.name + ".lock").touch()
    orphan = tmp_path / "c" / f".building-{folder.name}-{reused}-nofolder.lock"  # killed before its mkdir
    orphan.touch()
    live = tmp_path / "c" / f".building-{folder.name}-{reused}-live"
    live.mkdir()
    fd = os.open(live.with_name(live.name + ".lock"), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a build in progress holds its lock
    try:
        assert shipped_reader_folder(tmp_path / "c") == folder and len(fake_build) == 1
    finally:
        os.close(fd)
    assert not killed.exists() and not killed.with_name(killed.name + ".lock").exists() and not orphan.exists()
    assert live.exists()


def test_a_build_leaves_neither_its_folder_nor_its_lock_file(tmp_path, fake_build):
    folder = shipped_reader_folder(tmp_path / "c")
    assert [p.name for p in (tmp_path / "c").iterdir()] == [folder.name]


def test_a_read_only_cache_with_an_intact_build_is_used(tmp_path, fake_build, monkeypatch):
    folder = shipped_reader_folder(tmp_path / "c")

    def refuse(*args, **kwargs):
        raise PermissionError("read-only file system")

    monkeypatch.setattr(shipped.shutil, "rmtree", refuse)
    assert shipped_reader_folder(tmp_path / "c") == folder
