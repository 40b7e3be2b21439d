"""kill -9 during a write to a ``path=`` folder loses no document stored before the write began.

Each writer is a forked child of the test process, killed with SIGKILL: at every step of the first write that
carries vectors (before each call that changes the collection), and at timed moments of a large write. The folder
is then opened again by the test process, as the next run of a crashed service would.
"""

from __future__ import annotations

import os
import shutil
import signal
import time

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.types import DuplicatePolicy

pytest.importorskip("qdrant_client")

from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore
from haystack_mvr.views import ENCODER_KEY, attach_views, document_views

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")

MUTATIONS = ("create_collection", "update_collection", "delete_collection", "upsert", "delete", "set_payload")
DIM = 8
ENCODER = {"model": "enc", "mode": "snippet"}


def plain_docs(n):
    return [Document(id=f"plain{i}", content=f"stored before {i}", meta={"i": i}) for i in range(n)]


def vector_docs(prefix, n, dim, seed, encoder=ENCODER):
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        views = rng.normal(size=(int(rng.integers(1, 4)), dim)).astype(np.float32)
        meta = {"i": i} if encoder is None else {"i": i, ENCODER_KEY: encoder}
        docs.append(attach_views(Document(id=f"{prefix}{i}", content=f"{prefix} {i}", meta=meta), views))
    return docs


def run_child(body) -> int:
    """Run ``body()`` in a forked child; its exit status (0 done, 3 refused, 4 failed) or -signal."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 4
        try:
            body()
            code = 0
        except ValueError:  # the store refused the write (CollectionMismatchError is one)
            code = 3
        except BaseException:
            code = 4
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def kill_before_call(store, n):
    """SIGKILL this process just before the ``n``-th call that changes the collection (1-based)."""
    client = store.client
    calls = [0]
    for name in MUTATIONS:
        method = getattr(client, name)

        def wrapped(*args, _method=method, **kwargs):
            calls[0] += 1
            if calls[0] == n:
                os.kill(os.getpid(), signal.SIGKILL)
            return _method(*args, **kwargs)

        setattr(client, name, wrapped)


def say_at_first_change(store, fd):
    """Write ``go`` to ``fd`` just before the first call that changes the collection."""
    client, said = store.client, []
    for name in MUTATIONS:
        method = getattr(client, name)

        def wrapped(*args, _method=method, **kwargs):
            if not said:
                said.append(os.write(fd, b"go"))
            return _method(*args, **kwargs)

        setattr(client, name, wrapped)


def assert_nothing_lost(folder, before, dim):
    store = QdrantMultiViewDocumentStore(path=str(folder))
    try:
        stored = {d.id: d for d in store.filter_documents()}
        for d in before:
            assert d.id in stored, f"{d.id} stored before the write is gone"
            assert stored[d.id].content == d.content
            if d.embedding is not None or "mvr_views" in d.meta:
                assert stored[d.id].embedding == pytest.approx(document_views(d)[0].tolist())
        if dim is not None:  # the schema the collection was created with
            assert store._describe().dim == dim
        return stored
    finally:
        store.close()


@pytest.mark.parametrize("embedding_dim", [DIM, None], ids=["created-with-embedding_dim", "created-without"])
def test_kill_at_every_step_of_the_first_vector_write(tmp_path, embedding_dim):
    pristine = tmp_path / "pristine"
    before = plain_docs(50)
    seed = QdrantMultiViewDocumentStore(path=str(pristine), embedding_dim=embedding_dim)
    seed.write_documents(before)
    seed.close()
    new = vector_docs("new", 100, DIM, seed=0)
    outcomes = []
    for n in range(1, 20):
        folder = tmp_path / f"trial{n}"
        shutil.copytree(pristine, folder)

        def write(folder=folder, n=n):
            store = QdrantMultiViewDocumentStore(path=str(folder), write_batch_size=32)
            kill_before_call(store, n)
            store.write_documents(new)

        outcome = run_child(write)
        outcomes.append(outcome)
        stored = assert_nothing_lost(folder, before, embedding_dim)
        written = [d for d in new if d.id in stored]
        for d in written:  # a point is written whole or not at all
            assert stored[d.id].embedding == pytest.approx(document_views(d)[0].tolist())
        if outcome == 0:
            assert len(written) == len(new)
        if outcome != -signal.SIGKILL:
            break
    if embedding_dim is None:
        # A collection made without vectors never gets them: refused before anything changes, nothing rebuilt.
        assert outcomes == [3]
    else:
        assert outcomes == [-signal.SIGKILL] * 5 + [0]  # the encoder record, 4 upserts, then done


def test_timed_kills_during_a_large_write(tmp_path):
    """SIGKILL at random moments of a large write that also overwrites stored documents."""
    pristine = tmp_path / "pristine"
    dim = 16
    old = vector_docs("doc", 60, dim, seed=1, encoder=None) + plain_docs(10)
    seed = QdrantMultiViewDocumentStore(path=str(pristine))
    started = time.perf_counter()
    seed.write_documents(old)
    per_document = (time.perf_counter() - started) / len(old)  # local mode commits every point: disk-bound
    seed.close()
    replaced = {d.id: d for d in vector_docs("doc", 30, dim, seed=2, encoder=None)}
    new = vector_docs("new", 400, dim, seed=3, encoder=None)
    batch = new[:200] + list(replaced.values()) + new[200:]
    rng = np.random.default_rng(0)
    delays = [0.02, *rng.uniform(0.1, 0.9, size=4) * per_document * len(batch)]
    interrupted = 0
    for trial, delay in enumerate(delays):
        folder = tmp_path / f"trial{trial}"
        shutil.copytree(pristine, folder)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read)
                store = QdrantMultiViewDocumentStore(path=str(folder))
                store.count_documents()
                say_at_first_change(store, write)  # the delay runs from the write's first change, not the fork
                store.write_documents(batch, policy=DuplicatePolicy.OVERWRITE)
            finally:
                os._exit(0)
        os.close(write)
        assert os.read(read, 2) == b"go"
        os.close(read)
        time.sleep(float(delay))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        store = QdrantMultiViewDocumentStore(path=str(folder))
        try:
            stored = {d.id: d for d in store.filter_documents()}
        finally:
            store.close()
        for d in old:
            assert d.id in stored, f"{d.id} stored before the write is gone (trial {trial})"
            if d.id in replaced:  # the old version or the new one, never a mix or nothing
                versions = [document_views(x)[0].tolist() for x in (d, replaced[d.id])]
                assert any(stored[d.id].embedding == pytest.approx(v) for v in versions)
            elif d.id.startswith("doc"):
                assert stored[d.id].embedding == pytest.approx(document_views(d)[0].tolist())
        written = [d for d in new if d.id in stored]
        for d in written:
            assert stored[d.id].embedding == pytest.approx(document_views(d)[0].tolist())
        interrupted += 0 < len(written) < len(new)
    assert interrupted, "no kill landed inside the write"
