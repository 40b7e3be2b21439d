"""Several processes on one store: SIGKILL during a save, concurrent savers (processes and threads) and loaders.

Child processes are forked (the modules are already imported, so a child starts in milliseconds).
"""

import multiprocessing
import os
import random
import signal
import threading
import time
import traceback
from pathlib import Path

import faiss
import numpy as np
import pytest
from haystack.document_stores.errors import DocumentStoreError

from haystack_mvr.document_stores.faiss.index_versions import FaissVersionWriter as VersionWriter
from haystack_mvr.document_stores.faiss.index_versions import open_version, save_version
from haystack_mvr.document_stores.versioned_folder import current_version

FORK = multiprocessing.get_context("fork")
ROWS, DIM = 2000, 64  # about 1 MB of vectors, written twice (array and index): a save takes a few ms


def _data(seed: int) -> tuple[bytes, np.ndarray]:
    vectors = np.random.default_rng(seed).standard_normal((ROWS, DIM)).astype(np.float32)
    return f'{{"seed": {seed}}}\n'.encode() * 100, vectors


def _save(path: Path, seed: int) -> str:
    docs, vectors = _data(seed)

    def write(w: VersionWriter) -> None:
        w.write_bytes("documents.jsonl", docs)
        w.write_array("vectors.npy", vectors)
        index = faiss.IndexFlatIP(DIM)
        index.add(vectors)
        w.write_faiss_index("index.faiss", index)

    return save_version(path, write, {"seed": seed})


def _load_and_check(path: Path) -> int:
    """Load the current version and check it is one complete copy; returns its seed."""
    with open_version(path) as v:
        seed = v.meta["seed"]
        docs, vectors = _data(seed)
        assert v.read_bytes("documents.jsonl") == docs
        np.testing.assert_array_equal(v.read_array("vectors.npy"), vectors)
        index = v.read_faiss_index("index.faiss")
        np.testing.assert_array_equal(index.reconstruct_n(0, index.ntotal), vectors)
    return seed


def _entries(path: Path) -> list[str]:
    return sorted(os.listdir(path))


def _save_forever(path: Path, first_seed: int, saving=None) -> None:
    seed = first_seed
    if saving is not None:
        saving.set()  # the parent's random delay starts from here, not from a fork a loaded machine may delay
    while True:
        _save(path, seed)
        seed += 1


def _kill_during_saves(tmp_path: Path, runs: int) -> None:
    rng = random.Random(1234)
    store = tmp_path / "store"
    _save(store, seed=0)
    started = time.perf_counter()
    _save(store, seed=0)
    save_seconds = time.perf_counter() - started
    leftovers, previous = 0, 0
    for run in range(runs):
        saving = FORK.Event()
        child = FORK.Process(target=_save_forever, args=(store, 1000 * (run + 1), saving))
        child.start()
        assert saving.wait(60)
        time.sleep(rng.uniform(0, 4 * save_seconds))
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        assert child.exitcode == -signal.SIGKILL
        leftovers += len(_entries(store)) > 4  # .lock, .readers, CURRENT and one version
        seed = _load_and_check(store)  # the previous (or a completed) copy loads
        assert seed in (previous, *range(1000 * (run + 1), 1000 * (run + 2)))
        previous = run + 1
        name = _save(store, seed=previous)
        assert _entries(store) == [".lock", ".readers", "CURRENT", name]  # the next save cleaned what the kill left
        assert _load_and_check(store) == previous
    assert leftovers > 0, "no kill landed during a save: the test did not exercise anything"


def test_sigkill_during_save_leaves_a_loadable_copy(tmp_path):
    _kill_during_saves(tmp_path, runs=20)


@pytest.mark.slow
def test_sigkill_during_save_many_times(tmp_path):
    _kill_during_saves(tmp_path, runs=300)


def _saver_process(path: Path, process: int, saves: int, threads: int) -> None:
    errors = []

    def run(thread: int) -> None:
        try:
            for n in range(saves):
                _save(path, seed=10_000 * (process + 1) + 100 * thread + n)
        except BaseException:
            errors.append(traceback.format_exc())

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise AssertionError("\n".join(errors))


def _loader_process(path: Path, stop, loads) -> None:
    count, seeds = 0, set()
    while not stop.is_set() or count == 0:
        seeds.add(_load_and_check(path))  # any exception (a raw FileNotFoundError included) fails the process
        count += 1
    with loads.get_lock():
        loads.value += count


def _concurrent(tmp_path: Path, saves: int) -> None:
    store = tmp_path / "store"
    _save(store, seed=1)
    stop, loads = FORK.Event(), FORK.Value("i", 0)
    savers = [FORK.Process(target=_saver_process, args=(store, p, saves, 2)) for p in range(2)]
    loaders = [FORK.Process(target=_loader_process, args=(store, stop, loads)) for _ in range(2)]
    for p in savers + loaders:
        p.start()
    for p in savers:
        p.join(timeout=300)
    stop.set()
    for p in loaders:
        p.join(timeout=300)
    assert [p.exitcode for p in savers + loaders] == [0, 0, 0, 0]
    assert loads.value >= 2
    _load_and_check(store)
    name = _save(store, seed=2)
    assert _entries(store) == [".lock", ".readers", "CURRENT", name]


def test_processes_and_threads_saving_and_loading(tmp_path):
    _concurrent(tmp_path, saves=8)


@pytest.mark.slow
def test_processes_and_threads_saving_and_loading_long(tmp_path):
    _concurrent(tmp_path, saves=100)


def _hold_version(path: Path, ready, release) -> None:
    with open_version(path):
        ready.set()
        release.wait(60)


def test_a_reader_in_another_process_keeps_its_version(tmp_path):
    old = _save(tmp_path, seed=1)
    ready, release = FORK.Event(), FORK.Event()
    reader = FORK.Process(target=_hold_version, args=(tmp_path, ready, release))
    reader.start()
    assert ready.wait(60)
    new = _save(tmp_path, seed=2)
    assert old in _entries(tmp_path) and new in _entries(tmp_path)
    assert _load_and_check(tmp_path) == 2
    release.set()
    reader.join()
    newest = _save(tmp_path, seed=3)
    assert _entries(tmp_path) == [".lock", ".readers", "CURRENT", newest]


def test_a_killed_reader_releases_its_version(tmp_path):
    old = _save(tmp_path, seed=1)
    ready, release = FORK.Event(), FORK.Event()
    reader = FORK.Process(target=_hold_version, args=(tmp_path, ready, release))
    reader.start()
    assert ready.wait(60)
    _save(tmp_path, seed=2)
    assert old in _entries(tmp_path)
    os.kill(reader.pid, signal.SIGKILL)
    reader.join()
    newest = _save(tmp_path, seed=3)
    assert _entries(tmp_path) == [".lock", ".readers", "CURRENT", newest]


def test_a_child_forked_during_a_save_waits_for_it_then_saves(tmp_path):
    """The per-folder thread lock held at fork time is not inherited; the folder's flock still orders the saves."""
    entered, release = threading.Event(), threading.Event()

    def slow(w: VersionWriter) -> None:
        entered.set()
        release.wait(60)
        w.write_bytes("documents.jsonl", b"parent")

    parent = threading.Thread(target=save_version, args=(tmp_path, slow, {"seed": 1}))
    parent.start()
    assert entered.wait(60)
    child = FORK.Process(target=_save, args=(tmp_path, 2))
    child.start()
    time.sleep(0.3)
    assert child.is_alive()  # waiting for the parent's save
    release.set()
    parent.join()
    child.join(60)
    assert child.exitcode == 0
    assert _load_and_check(tmp_path) == 2


def _sleep(seconds: float, started=None) -> None:
    if started is not None:
        started.set()
    time.sleep(seconds)


def test_a_child_forked_by_a_reader_does_not_keep_its_version(tmp_path):
    old = _save(tmp_path, seed=1)
    started = FORK.Event()
    with open_version(tmp_path):
        child = FORK.Process(target=_sleep, args=(30, started))  # forked while this thread holds the version's lock
        child.start()
    # The child closes its copy of the lock in its after-fork hook, before its target runs: on a loaded machine
    # the parent could otherwise save before the child was ever scheduled.
    assert started.wait(60)
    try:
        new = _save(tmp_path, seed=2)
        assert _entries(tmp_path) == [".lock", ".readers", "CURRENT", new]  # the child's copy of the lock was closed
        assert old not in _entries(tmp_path)
    finally:
        child.kill()
        child.join()


def _save_slowly(path: Path, entered, release) -> None:
    def slow(w: VersionWriter) -> None:
        entered.set()
        release.wait(60)

    save_version(path, slow, {})


def test_a_save_waiting_too_long_for_another_names_it(tmp_path):
    entered, release = FORK.Event(), FORK.Event()
    other = FORK.Process(target=_save_slowly, args=(tmp_path, entered, release))
    other.start()
    try:
        assert entered.wait(60)
        with pytest.raises(DocumentStoreError, match=rf"Process {other.pid} is saving into"):
            save_version(tmp_path, lambda w: None, {}, lock_timeout=0.2)
    finally:
        release.set()
        other.join(60)
    entered, release = threading.Event(), threading.Event()
    thread = threading.Thread(target=_save_slowly, args=(tmp_path, entered, release))
    thread.start()
    try:
        assert entered.wait(60)
        with pytest.raises(DocumentStoreError, match="Another thread of this process"):
            save_version(tmp_path, lambda w: None, {}, lock_timeout=0.1)
    finally:
        release.set()
        thread.join()
    assert _save(tmp_path, seed=3)


def _save_and_stop_while_removing(path: Path, seed: int) -> None:
    from haystack_mvr.document_stores.versioned_folder import cleanup

    real = cleanup._remove_unpinned

    def stopped(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGSTOP)  # holding .readers exclusively, as a saver stopped mid-removal does
        return real(*args, **kwargs)

    cleanup._remove_unpinned = stopped
    _save(path, seed)


def test_a_load_beside_a_saver_stopped_while_removing_old_versions_gives_up_and_names_it(tmp_path, monkeypatch):
    """A saver SIGSTOPped while it removes old versions holds ``.readers``: a load waited on it forever."""
    from haystack_mvr.document_stores.versioned_folder import reading

    monkeypatch.setattr(reading, "PIN_WAIT", 0.5, raising=False)
    _save(tmp_path, seed=1)
    saver = FORK.Process(target=_save_and_stop_while_removing, args=(tmp_path, 2))
    saver.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # wait for the saver to stop itself (state T in /proc)
            with open(f"/proc/{saver.pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "T":
                    break
            time.sleep(0.01)
        outcome = []

        def load() -> None:
            try:
                outcome.append(_load_and_check(tmp_path))
            except DocumentStoreError as e:
                outcome.append(e)

        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        loader.join(30)
        assert not loader.is_alive(), "the load still waits on .readers"
        (error,) = outcome
        assert isinstance(error, DocumentStoreError), error
        assert f"Process {saver.pid} holds {tmp_path / '.readers'}" in str(error)
        assert "did not let go within 0.5 s" in str(error) and "Resume or stop that process" in str(error)
        os.kill(saver.pid, signal.SIGCONT)
        saver.join(60)
        assert saver.exitcode == 0
        assert _load_and_check(tmp_path) == 2  # the save finished once resumed, and loads again
        assert _entries(tmp_path) == [".lock", ".readers", "CURRENT", current_version(tmp_path)]
    finally:
        if saver.is_alive():
            os.kill(saver.pid, signal.SIGCONT)
            saver.kill()
            saver.join()
