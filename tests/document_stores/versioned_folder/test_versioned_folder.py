import json
import os
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import faiss
import numpy as np
import pytest
from haystack.document_stores.errors import DocumentStoreError

from haystack_mvr.document_stores import versioned_folder
from haystack_mvr.document_stores.faiss.index_versions import FaissVersionWriter as VersionWriter
from haystack_mvr.document_stores.faiss.index_versions import open_version, save_version
from haystack_mvr.document_stores.versioned_folder import current_version, pointer, saving

DOCS = b'{"id": "a", "content": "hello"}\n{"id": "b", "content": "world"}\n'


def _index(seed: int = 0, n: int = 20, dim: int = 8) -> faiss.Index:
    index = faiss.IndexFlatIP(dim)
    index.add(np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32))
    return index


def _writer(seed: int = 0):
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((20, 8)).astype(np.float32)
    rows = np.arange(20, dtype=np.int64) + seed

    def write(w: VersionWriter) -> None:
        w.write_bytes("documents.jsonl", DOCS)
        w.write_array("vectors.npy", vectors)
        w.write_array("rows.npy", rows)
        w.write_faiss_index("index.faiss", _index(seed))

    return write, vectors, rows


def _save(path: Path, seed: int = 0) -> str:
    write, _, _ = _writer(seed)
    return save_version(path, write, {"seed": seed, "dim": 8, "name": "é"})


def _load(path: Path) -> dict:
    with open_version(path) as v:
        index = v.read_faiss_index("index.faiss")
        return {
            "meta": v.meta,
            "docs": v.read_bytes("documents.jsonl"),
            "vectors": v.read_array("vectors.npy"),
            "rows": v.read_array("rows.npy"),
            "index": index.reconstruct_n(0, index.ntotal),
            "name": v.name,
        }


def _versions(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.name.startswith("v-"))


def test_round_trip(tmp_path):
    name = _save(tmp_path / "store", seed=3)
    _, vectors, rows = _writer(3)
    loaded = _load(tmp_path / "store")
    assert loaded["name"] == name == current_version(tmp_path / "store")
    assert loaded["meta"] == {"seed": 3, "dim": 8, "name": "é"}
    assert loaded["docs"] == DOCS
    np.testing.assert_array_equal(loaded["vectors"], vectors)
    assert loaded["rows"].dtype == np.int64 and loaded["rows"].flags.writeable
    np.testing.assert_array_equal(loaded["rows"], rows)
    np.testing.assert_array_equal(loaded["index"], vectors)  # same seed, same rows
    assert _versions(tmp_path / "store") == [name]


def test_arrays_of_every_layout_round_trip(tmp_path):
    arrays = {
        "empty.npy": np.zeros((0, 384), dtype=np.float32),
        "scalar.npy": np.array(7, dtype=np.int32),
        "fortran.npy": np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4)),
        "strided.npy": np.arange(20, dtype=np.int16)[::2],
        "bool.npy": np.array([True, False]),
    }

    def write(w):
        for name, array in arrays.items():
            w.write_array(name, array)
        with w.open("streamed.bin") as f:
            for i in range(1000):
                f.write(i.to_bytes(4, "little"))
            f.write(np.arange(100_000, dtype=np.int32))

    save_version(tmp_path, write, {})
    with open_version(tmp_path) as v:
        for name, array in arrays.items():
            out = v.read_array(name)
            assert out.dtype == array.dtype and out.shape == array.shape
            np.testing.assert_array_equal(out, array)
        expected = b"".join(i.to_bytes(4, "little") for i in range(1000)) + np.arange(100_000, dtype=np.int32).tobytes()
        assert v.read_bytes("streamed.bin") == expected
        assert v.files["streamed.bin"] == len(expected)


def test_object_arrays_and_bad_names_are_refused(tmp_path):
    for write in (
        lambda w: w.write_array("o.npy", np.array([{}], dtype=object)),
        lambda w: w.write_bytes("../escape", b""),
        lambda w: w.write_bytes("manifest.json", b""),
        lambda w: w.write_bytes(".lock", b""),
        lambda w: (w.write_bytes("a", b""), w.write_bytes("a", b"")),
    ):
        with pytest.raises(ValueError):
            save_version(tmp_path, write, {})
    assert current_version(tmp_path) is None
    assert sorted(os.listdir(tmp_path)) == [".lock"]  # failed saves leave nothing behind


def test_a_failed_write_keeps_the_previous_version(tmp_path):
    name = _save(tmp_path, seed=1)

    def failing(w):
        w.write_bytes("documents.jsonl", b"x")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        save_version(tmp_path, failing, {})
    assert _load(tmp_path)["name"] == name
    assert sorted(os.listdir(tmp_path)) == [".lock", ".readers", "CURRENT", name]


def test_non_json_meta_is_refused(tmp_path):
    with pytest.raises(ValueError, match="JSON"):
        save_version(tmp_path, lambda w: None, {"x": float("nan")})
    with pytest.raises(ValueError, match="JSON"):
        save_version(tmp_path, lambda w: None, {"x": object()})


def test_no_store(tmp_path):
    assert current_version(tmp_path / "missing") is None
    assert current_version(tmp_path) is None
    with pytest.raises(DocumentStoreError, match="No saved store"), open_version(tmp_path):
        pass
    (tmp_path / "file").write_text("x")
    with pytest.raises(DocumentStoreError, match="not a folder"):
        current_version(tmp_path / "file")


def test_save_without_fsync(tmp_path):
    write, vectors, _ = _writer(0)
    save_version(tmp_path, write, {}, fsync=False)
    np.testing.assert_array_equal(_load(tmp_path)["vectors"], vectors)


# ------------------------------------------------------------------------------------------- damaged files


@pytest.mark.parametrize("name", ["documents.jsonl", "vectors.npy", "rows.npy", "index.faiss"])
def test_a_flipped_byte_in_any_file_is_detected(tmp_path, name):
    version = _save(tmp_path)
    file = tmp_path / version / name
    data = bytearray(file.read_bytes())
    for position in (0, len(data) // 2, len(data) - 1):
        damaged = bytearray(data)
        damaged[position] ^= 0x01
        file.write_bytes(damaged)
        with pytest.raises(DocumentStoreError, match=rf"{name} is damaged") as e:
            _load(tmp_path)
        assert "restore" in str(e.value)
    file.write_bytes(data[:-1])  # truncated
    with pytest.raises(DocumentStoreError, match=rf"{name} is damaged"):
        _load(tmp_path)
    file.unlink()
    with pytest.raises(DocumentStoreError, match=rf"{name} cannot be opened"):
        _load(tmp_path)


def test_a_version_saved_with_crc32_checksums_still_loads(tmp_path):
    """Versions saved before XXH3 (manifest format 1: a CRC-32 per block) load the same, and damage in them is still
    refused."""
    from haystack_mvr.document_stores.versioned_folder import manifest as manifest_format

    version = _save(tmp_path)
    expected = _load(tmp_path)
    manifest = tmp_path / version / "manifest.json"
    saved = json.loads(manifest.read_text())
    assert saved["checksum"] == "xxh3_64"
    files = {}
    for name, entry in saved["files"].items():
        data, block = (tmp_path / version / name).read_bytes(), entry["block_bytes"]
        crcs = [f"{zlib.crc32(data[i : i + block]):08x}" for i in range(0, len(data), block)]
        files[name] = {"bytes": len(data), "block_bytes": block, "crc32": crcs}
    assert saved["format_version"] == 2
    body = {"format": saved["format"], "format_version": 1, "checksum": "crc32", "files": files, "meta": saved["meta"]}
    crc = f"{zlib.crc32(manifest_format._canonical(body)):08x}"
    manifest.write_text(json.dumps({**body, "manifest_crc32": crc}, indent=1))
    loaded = _load(tmp_path)
    assert loaded["meta"] == expected["meta"] and loaded["docs"] == expected["docs"]
    for key in ("vectors", "rows", "index"):
        np.testing.assert_array_equal(loaded[key], expected[key])
    rows = tmp_path / version / "rows.npy"
    data = bytearray(rows.read_bytes())
    data[-1] ^= 0x01
    rows.write_bytes(data)
    with pytest.raises(DocumentStoreError, match=r"rows\.npy is damaged"):
        _load(tmp_path)


def test_every_single_bit_flip_of_the_manifest(tmp_path):
    version = _save(tmp_path)
    expected = _load(tmp_path)
    manifest = tmp_path / version / "manifest.json"
    data = manifest.read_bytes()
    assert len(data) < 1500
    outcomes = {"error": 0, "identical": 0}
    fd = os.open(manifest, os.O_WRONLY)  # flip in place: rewriting the file 3,600 times is slow on some disks
    try:
        for position in range(len(data)):
            for bit in range(8):
                os.pwrite(fd, bytes([data[position] ^ (1 << bit)]), position)
                try:
                    loaded = _load(tmp_path)
                except DocumentStoreError as e:
                    assert "manifest.json" in str(e)
                    outcomes["error"] += 1
                    continue
                assert loaded["meta"] == expected["meta"] and loaded["docs"] == expected["docs"]
                for key in ("vectors", "rows", "index"):
                    np.testing.assert_array_equal(loaded[key], expected[key])
                outcomes["identical"] += 1
            os.pwrite(fd, data[position : position + 1], position)
    finally:
        os.close(fd)
    assert outcomes["error"] > 0.99 * len(data) * 8  # only flips between JSON whitespace characters load


def test_manifest_of_another_shape(tmp_path):
    version = _save(tmp_path)
    manifest = tmp_path / version / "manifest.json"
    for content in (b"", b"[]", b'{"format": 1}', b"\xff\xfe", b"{" * 100_000, b"x" * (17 << 20)):
        manifest.write_bytes(content)
        with pytest.raises(DocumentStoreError, match=r"manifest\.json"):
            _load(tmp_path)


# ------------------------------------------------------------------------------------------- crafted CURRENT

SECRET = "top-secret-content-42"


def _crafted(tmp_path: Path, kind: str) -> Path:
    store = tmp_path / "store"
    _save(store)
    pointer = store / "CURRENT"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    pointer.unlink()
    if kind == "dotdot":
        pointer.write_text("../outside")
    elif kind == "absolute":
        pointer.write_text(str(outside))
    elif kind == "symlink-file":
        pointer.symlink_to(outside / "secret.txt")
    elif kind == "symlink-folder":
        pointer.symlink_to(outside)
    elif kind == "folder":
        pointer.mkdir()
    elif kind == "empty":
        pointer.write_text("")
    elif kind == "huge":
        pointer.write_bytes(b"v-" + b"0" * 10_000_000)
    elif kind == "binary":
        pointer.write_bytes(bytes(range(256)))
    elif kind == "uppercase":
        pointer.write_text("v-" + "A" * 32)
    elif kind == "missing-version":
        pointer.write_text("v-" + "0" * 32)
    elif kind == "version-symlink":
        (outside / "manifest.json").write_text(SECRET)
        (store / ("v-" + "1" * 32)).symlink_to(outside, target_is_directory=True)
        pointer.write_text("v-" + "1" * 32)
    elif kind == "version-is-file":
        (store / ("v-" + "2" * 32)).write_text(SECRET)
        pointer.write_text("v-" + "2" * 32)
    return store


CRAFTED = [
    "dotdot",
    "absolute",
    "symlink-file",
    "symlink-folder",
    "folder",
    "empty",
    "huge",
    "binary",
    "uppercase",
    "missing-version",
    "version-symlink",
    "version-is-file",
]


@pytest.mark.parametrize("kind", CRAFTED)
def test_crafted_current_is_refused(tmp_path, kind):
    store = _crafted(tmp_path, kind)
    before = sorted(os.listdir(store))
    for attempt in (lambda: _load(store), lambda: current_version(store), lambda: _save(store, seed=9)):
        with pytest.raises(DocumentStoreError) as e:
            attempt()
        message = str(e.value)
        assert "CURRENT" in message
        assert SECRET not in message and "outside" not in message.replace(str(tmp_path / "store"), "")
    assert sorted(os.listdir(store)) == before  # the refused save deleted nothing
    assert (tmp_path / "outside" / "secret.txt").read_text() == SECRET


def test_a_current_with_a_trailing_newline_is_accepted(tmp_path):
    name = _save(tmp_path)
    (tmp_path / "CURRENT").write_text(name + "\n")
    assert _load(tmp_path)["name"] == name


def test_lost_current_with_versions_present(tmp_path):
    name = _save(tmp_path)
    (tmp_path / "CURRENT").unlink()
    with pytest.raises(DocumentStoreError, match="CURRENT is missing") as e:
        _load(tmp_path)
    assert f"printf {name} > {tmp_path / 'CURRENT'}" in str(e.value)
    with pytest.raises(DocumentStoreError, match="CURRENT is missing"):
        current_version(tmp_path)
    with pytest.raises(DocumentStoreError, match="nothing was loaded or deleted"):
        _save(tmp_path, seed=5)
    assert _versions(tmp_path) == [name]
    (tmp_path / "CURRENT").write_text(name)  # the fix the message suggests
    assert _load(tmp_path)["name"] == name


def test_a_folder_left_by_a_killed_first_save_is_not_a_store(tmp_path):
    (tmp_path / ".partial-0123").mkdir()
    (tmp_path / ".partial-0123" / "index.faiss").write_bytes(b"half")
    assert current_version(tmp_path) is None
    name = _save(tmp_path)
    assert sorted(os.listdir(tmp_path)) == [".lock", ".readers", "CURRENT", name]


def test_save_cleans_leftovers_but_not_foreign_files(tmp_path):
    _save(tmp_path)
    (tmp_path / ".trash-abc").mkdir()
    (tmp_path / "CURRENT.deadbeef.tmp").write_text("v-")
    (tmp_path / "notes.txt").write_text("mine")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (tmp_path / ("v-" + "3" * 32)).symlink_to(outside)  # not a version: left alone
    name = _save(tmp_path, seed=2)
    assert sorted(os.listdir(tmp_path)) == sorted([".lock", ".readers", "CURRENT", name, "notes.txt", "v-" + "3" * 32])
    assert outside.is_dir()


# ------------------------------------------------------------------------------------------- readers and savers


def test_a_reader_keeps_its_version_until_it_is_done(tmp_path):
    old = _save(tmp_path, seed=1)
    with open_version(tmp_path) as v:
        new = _save(tmp_path, seed=2)
        assert _versions(tmp_path) == sorted([old, new])  # held by the reader
        assert v.read_array("rows.npy")[0] == 1
        assert _load(tmp_path)["name"] == new
    assert _versions(tmp_path) == sorted([old, new])
    newest = _save(tmp_path, seed=3)
    assert _versions(tmp_path) == [newest]


def test_reading_after_the_block_is_refused(tmp_path):
    _save(tmp_path)
    with open_version(tmp_path) as v:
        pass
    with pytest.raises(DocumentStoreError, match="closed"):
        v.read_bytes("documents.jsonl")
    with open_version(tmp_path) as v, pytest.raises(DocumentStoreError, match="no file 'nope'"):
        v.read_bytes("nope")


def test_threads_saving_and_loading_concurrently(tmp_path):
    seeds = {}
    for seed in range(4):
        _, vectors, rows = _writer(seed)
        seeds[seed] = (vectors, rows)
    _save(tmp_path, seed=0)
    errors: list[BaseException] = []
    stop = threading.Event()

    def saver(seed: int) -> None:
        try:
            for _ in range(15):
                _save(tmp_path, seed=seed)
        except BaseException as e:
            errors.append(e)

    def loader() -> None:
        try:
            while not stop.is_set():
                loaded = _load(tmp_path)
                vectors, rows = seeds[loaded["meta"]["seed"]]
                np.testing.assert_array_equal(loaded["vectors"], vectors)
                np.testing.assert_array_equal(loaded["rows"], rows)
                np.testing.assert_array_equal(loaded["index"], vectors)
        except BaseException as e:
            errors.append(e)

    savers = [threading.Thread(target=saver, args=(s,)) for s in (1, 2, 3)]
    loaders = [threading.Thread(target=loader) for _ in range(2)]
    for t in savers + loaders:
        t.start()
    for t in savers:
        t.join()
    stop.set()
    for t in loaders:
        t.join()
    assert not errors, errors
    name = _save(tmp_path, seed=0)
    assert sorted(os.listdir(tmp_path)) == [".lock", ".readers", "CURRENT", name]


def test_internal_names_match_the_docs():
    assert versioned_folder.POINTER == "CURRENT" and versioned_folder.MANIFEST == "manifest.json"
    assert versioned_folder.LOCK == ".lock"


# ------------------------------------------------------------------------------------------- blocks and failures


@pytest.mark.parametrize("io_flags", [0, faiss.IO_FLAG_READ_ONLY], ids=["streamed", "verified-first"])
def test_each_block_is_verified_before_faiss_parses_it(tmp_path, monkeypatch, io_flags):
    monkeypatch.setattr(saving, "BLOCK", 4096)  # the test files span several blocks
    write, _, _ = _writer(0)
    big = np.random.default_rng(1).standard_normal((300, 64)).astype(np.float32)

    def write_more(w):
        write(w)
        w.write_array("big.npy", big)
        w.write_bytes("big.bin", big)
        index = faiss.IndexFlatL2(64)
        index.add(big)
        w.write_faiss_index("big.faiss", index)

    version = save_version(tmp_path, write_more, {})
    monkeypatch.setattr(saving, "BLOCK", 1 << 20)  # readers follow the block size the manifest records
    with open_version(tmp_path) as v:
        np.testing.assert_array_equal(v.read_array("big.npy"), big)
        assert v.read_bytes("big.bin") == big.tobytes()
        np.testing.assert_array_equal(v.read_faiss_index("big.faiss", io_flags).reconstruct_n(0, 300), big)
    for name in ("big.npy", "big.bin"):
        file = tmp_path / version / name
        data = bytearray(file.read_bytes())
        assert len(data) > 3 * 4096
        for position in (100, 4096 + 10, len(data) - 1):
            damaged = bytearray(data)
            damaged[position] ^= 0x10
            file.write_bytes(damaged)
            with open_version(tmp_path) as v, pytest.raises(DocumentStoreError, match="does not match its checksum"):
                v.read_array(name) if name.endswith(".npy") else v.read_bytes(name)
        file.write_bytes(data)
    file = tmp_path / version / "big.faiss"
    data = bytearray(file.read_bytes())
    for position in [*range(0, 120, 3), 4096 * 2 + 5, len(data) - 1]:  # a damaged size field must never reach FAISS
        damaged = bytearray(data)
        damaged[position] ^= 0xFF
        file.write_bytes(damaged)
        with open_version(tmp_path) as v, pytest.raises(DocumentStoreError, match="does not match its checksum"):
            v.read_faiss_index("big.faiss", io_flags)


def _open_fds(folder: Path) -> list[str]:
    """What this process holds open inside ``folder`` (other threads of the test process open and close their own
    files meanwhile: a count of every descriptor is not the saver's)."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed while listed
            continue
        if target.startswith(str(folder)):
            held.append(target)
    return sorted(held)


def test_files_left_open_are_refused_and_closed(tmp_path):
    before = _open_fds(tmp_path)

    def write(w):
        w.open("a.bin").write(b"x")

    with pytest.raises(ValueError, match="left open"):
        save_version(tmp_path, write, {})
    with pytest.raises(ZeroDivisionError):
        save_version(tmp_path, lambda w: (w.open("b.bin"), 1 / 0), {})
    assert _open_fds(tmp_path) == before == []
    assert sorted(os.listdir(tmp_path)) == [".lock"]


def test_a_full_disk_keeps_the_previous_version(tmp_path, monkeypatch):
    name = _save(tmp_path, seed=1)
    real_write = os.write
    written = [0]

    def failing_write(fd, data):
        written[0] += 1
        if written[0] > 2:
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", failing_write)
    with pytest.raises(DocumentStoreError, match="No space left on device"):
        _save(tmp_path, seed=2)
    monkeypatch.setattr(os, "write", real_write)
    assert sorted(os.listdir(tmp_path)) == [".lock", ".readers", "CURRENT", name]
    assert _load(tmp_path)["meta"]["seed"] == 1


def test_a_damaged_lock_or_manifest_is_named(tmp_path):
    version = _save(tmp_path)
    (tmp_path / version / ".lock").unlink()
    with pytest.raises(DocumentStoreError, match=r"has no \.lock file; create it"):
        _load(tmp_path)
    (tmp_path / version / ".lock").touch()
    (tmp_path / version / "manifest.json").unlink()
    with pytest.raises(DocumentStoreError, match=r"manifest\.json cannot be opened"):
        _load(tmp_path)


def test_a_failure_after_the_swap_keeps_the_new_version(tmp_path, monkeypatch):
    _save(tmp_path, seed=1)
    real_replace, real_fsync = os.replace, os.fsync
    swapped = [False]

    def replace(*args, **kwargs):
        real_replace(*args, **kwargs)
        swapped[0] = True

    def fsync(fd):
        if swapped[0]:
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(DocumentStoreError, match="Input/output error"):
        _save(tmp_path, seed=2)
    monkeypatch.undo()
    assert _load(tmp_path)["meta"]["seed"] == 2  # CURRENT names it: it was not deleted


def test_a_store_of_the_previous_layout_is_refused_then_replaced_by_a_save(tmp_path):
    old = tmp_path / "v-0123456789abcdef0123456789abcdef"  # persistence.py before versioned_directory
    old.mkdir()
    (old / "manifest.json").write_text('{"format_version": 1, "checksums": {"index.faiss": "ab"}}')
    (old / "index.faiss").write_bytes(b"old")
    (tmp_path / "CURRENT").write_text(old.name)
    with pytest.raises(versioned_folder.UnsupportedFormatError, match="older haystack-mvr"):
        _load(tmp_path)
    name = _save(tmp_path)
    assert sorted(os.listdir(tmp_path)) == [".lock", ".readers", "CURRENT", name]


def test_io_flags_are_passed_to_faiss_after_verification(tmp_path, monkeypatch):
    version = _save(tmp_path)
    with open_version(tmp_path) as v:
        index = v.read_faiss_index("index.faiss", faiss.IO_FLAG_MMAP_IFC)  # read-only: codes mapped from the file
        np.testing.assert_array_equal(index.reconstruct_n(0, index.ntotal), _writer(0)[1])
    file = tmp_path / version / "index.faiss"
    data = bytearray(file.read_bytes())
    data[10] ^= 1
    file.write_bytes(data)
    with open_version(tmp_path) as v, pytest.raises(DocumentStoreError, match="does not match its checksum"):
        v.read_faiss_index("index.faiss", faiss.IO_FLAG_MMAP_IFC)


def test_streamed_index_verifies_bytes_faiss_does_not_need_and_closes_the_file(tmp_path, monkeypatch):
    """``read_faiss_index`` hands FAISS verified blocks: blocks after the index are still verified (damage there
    is refused too), FAISS failing on verified bytes is named as such, and no way out leaves a file open."""
    monkeypatch.setattr(saving, "BLOCK", 4096)
    big = np.random.default_rng(3).standard_normal((300, 64)).astype(np.float32)
    index = faiss.IndexFlatL2(64)
    index.add(big)
    payload = faiss.serialize_index(index).tobytes()
    junk = bytes(range(256)) * 16 * 40  # 40 blocks FAISS never reads, or cannot parse

    def write(w):
        w.write_bytes("trailing.faiss", payload + junk)
        w.write_bytes("junk.faiss", junk)

    version = save_version(tmp_path, write, {})
    fds = _open_fds(tmp_path)
    with open_version(tmp_path) as v:
        np.testing.assert_array_equal(v.read_faiss_index("trailing.faiss").reconstruct_n(0, 300), big)
        with pytest.raises(DocumentStoreError, match="FAISS could not read"):
            v.read_faiss_index("junk.faiss")
    assert _open_fds(tmp_path) == fds
    file = tmp_path / version / "trailing.faiss"
    data = bytearray(file.read_bytes())
    for position in (len(payload) + 5 * 4096, len(data) - 1):  # damage where FAISS has finished reading
        damaged = bytearray(data)
        damaged[position] ^= 0x08
        file.write_bytes(damaged)
        with open_version(tmp_path) as v, pytest.raises(DocumentStoreError, match="does not match its checksum"):
            v.read_faiss_index("trailing.faiss")
    assert _open_fds(tmp_path) == fds


# ------------------------------------------------------------------- nothing happens at import: fcntl, fork hooks

_SPY = (
    "import os, sys, threading\n"
    "hooks = []\n"
    "real = os.register_at_fork\n"
    "def spy(**kw):\n"
    "    hooks.append(getattr(kw.get('after_in_child'), '__module__', None) or '')\n"
    "    return real(**kw)\n"
    "os.register_at_fork = spy\n"
    "def ours():\n"
    "    return [h for h in hooks if h.startswith('haystack_mvr')]\n"
)


def _run(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", _SPY + code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def test_importing_the_faiss_store_without_fcntl_works_and_registers_no_fork_hook(tmp_path):
    """Where fcntl is missing (Windows) the store imports and works in memory; only a save or load says why not."""
    saved = str(tmp_path / "saved")
    _save(Path(saved))
    out = _run(
        "sys.modules['fcntl'] = None\n"  # what Python does for a module that cannot be imported
        "from haystack import Document\n"
        "from haystack.document_stores.errors import DocumentStoreError\n"
        "from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore\n"
        "print('hooks after import', ours())\n"
        "store = FaissMultiViewDocumentStore()\n"
        "store.write_documents([Document(id='a', content='x', embedding=[1.0, 0.0]),\n"
        "                       Document(id='b', content='y', embedding=[0.0, 1.0])])\n"
        "print('found', [d.id for d in store.search([0.1, 0.9], top_k=2)])\n"
        f"calls = [lambda: store.save({str(tmp_path / 'new')!r}),\n"
        f"         lambda: FaissMultiViewDocumentStore(index_path={saved!r}).count_documents()]\n"
        "for call in calls:\n"
        "    try:\n"
        "        call()\n"
        "    except DocumentStoreError as e:\n"
        "        print('refused', e)\n"
        "print('hooks at the end', ours())\n"
    )
    assert out[0] == "hooks after import []"
    assert out[1] == "found ['b', 'a']"
    for line in out[2:4]:  # the save, then the load
        assert line.startswith("refused Saving and loading a multi-view store needs fcntl.flock"), out
        assert "use the store in memory (no index_path, no save or load), or run on Linux" in line
    assert out[4:] == ["hooks at the end []"]
    assert current_version(tmp_path / "new") is None  # nothing was saved


def test_the_fork_hook_is_registered_once_at_the_first_save_or_open(tmp_path):
    out = _run(
        "from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore\n"
        "from haystack_mvr.document_stores import versioned_folder\n"
        "assert 'fcntl' not in vars(versioned_folder)\n"
        "print(len(ours()))\n"
        "barrier = threading.Barrier(4)\n"
        "def save(i):\n"
        "    barrier.wait()\n"
        f"    versioned_folder.save_version({str(tmp_path)!r} + f'/s{{i}}',"
        " lambda w: w.write_bytes('a', b'x'), {})\n"
        "threads = [threading.Thread(target=save, args=(i,)) for i in range(4)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "with versioned_folder.open_version(" + repr(str(tmp_path / "s0")) + ") as v:\n"
        "    print(v.read_bytes('a').decode())\n"
        "print(ours())\n"
    )
    assert out[0] == "0"  # importing registers nothing
    assert out[1] == "x"
    assert out[2] == "['haystack_mvr.document_stores.versioned_folder.locking']"  # four threads raced: once


def test_a_slow_reader_beside_a_saver_in_a_loop_always_opens_a_version(tmp_path, monkeypatch):
    """Each version check taking 20 ms (NFS- or FUSE-like) made every load give up, "its current version kept
    changing (100 tries)", beside a process saving in a loop (issue 48): a reader pins the version it read, so its
    first try succeeds and it gets the old or the new copy.

    Each load waits, between reading CURRENT and locking the version it names, until a save has replaced that
    version: what must hold is checked on every load however fast the machine, rather than counting the saves that
    fit in a time."""
    _save(tmp_path, seed=0)
    real = pointer.read_pointer
    tries = []
    replaced = []

    reader = threading.current_thread()

    def slow(path):
        name = real(path)
        if threading.current_thread() is reader:
            tries.append(name)
            deadline = time.monotonic() + 120  # a bound for a hung saver only: a save takes milliseconds
            while real(path) == name and time.monotonic() < deadline:
                time.sleep(0.001)
            replaced.append(real(path) != name)
        return name

    monkeypatch.setattr(pointer, "read_pointer", slow)
    stop = threading.Event()
    saves = []

    def saver() -> None:
        while not stop.is_set():
            write, _, _ = _writer(1 + len(saves) % 3)
            saves.append(save_version(tmp_path, write, {"seed": 1 + len(saves) % 3}, fsync=False))

    thread = threading.Thread(target=saver)
    thread.start()
    try:
        for _ in range(5):
            tries.clear()
            loaded = _load(tmp_path)
            assert loaded["meta"]["seed"] in (0, 1, 2, 3) and len(tries) == 1  # pinned: no retry
    finally:
        stop.set()
        thread.join()
    assert replaced == [True] * 5  # every load's version was replaced by a save while it was being opened
    assert len(saves) >= 5
    monkeypatch.undo()
    last = _save(tmp_path, seed=1)  # no reader now: the versions the loads held go
    assert sorted(p for p in os.listdir(tmp_path) if p.startswith("v-")) == [last] == [current_version(tmp_path)]
