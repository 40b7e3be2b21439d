"""Several store objects (and, simulated, several processes against a server) on one Qdrant collection.

In local mode, stores on one ``path`` share one client, as two processes share one server collection: what one
store remembers of the collection may be stale after another store's write. The "server" tests run the server code
path (``is_local`` False: descriptions reused for reads, refreshed when a call fails) over a shared local folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.errors import DocumentStoreError
from haystack.document_stores.types import DuplicatePolicy

pytest.importorskip("qdrant_client")

from qdrant_client import QdrantClient

from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores.qdrant import CollectionMismatchError, QdrantMultiViewDocumentStore
from haystack_mvr.testing import MultiViewInputTests, MultiViewSearchBatchTests, MultiViewSearchTests
from haystack_mvr.views import ENCODER_KEY, MATCHED_VIEW_KEY, attach_views


@pytest.fixture
def folder(tmp_path):
    return str(tmp_path / "qdrant")


@pytest.fixture
def as_server(monkeypatch):
    """Run the server code path over local folders (reads reuse descriptions; errors refresh them)."""
    monkeypatch.setattr(QdrantMultiViewDocumentStore, "is_local", property(lambda self: False))


def vdoc(doc_id, views, encoder=None, **meta):
    if encoder is not None:
        meta[ENCODER_KEY] = encoder
    return attach_views(Document(id=doc_id, content=f"content of {doc_id}", meta=meta), np.asarray(views, np.float32))


def ids(docs):
    return sorted(d.id for d in docs)


def close_all(*stores):
    for s in stores:
        s.close()


# ----------------------------------------------------------------------------- two stores, one collection
def test_two_stores_keep_each_others_views_when_the_schema_is_set_at_creation(folder):
    """The issue's reproduction, with ``embedding_dim``: the schema exists from the first write, no rebuild."""
    a = QdrantMultiViewDocumentStore(path=folder, embedding_dim=8)
    b = QdrantMultiViewDocumentStore(path=folder, embedding_dim=8)
    a.write_documents([Document(id="plain", content="no vectors yet")])
    assert b.count_documents() == 1
    a.write_documents([Document(id="from-a", content="x", embedding=[1.0] * 8)])
    b.write_documents([Document(id="from-b", content="y", embedding=[0.5] * 8)])
    assert ids(a.search([1.0] * 8, top_k=5)) == ["from-a", "from-b"]
    assert ids(b.search([1.0] * 8, top_k=5)) == ["from-a", "from-b"]
    assert ids(a.filter_documents()) == ["from-a", "from-b", "plain"]
    close_all(a, b)


def test_the_issue_reproduction_without_embedding_dim_is_a_clear_error_and_loses_nothing(folder):
    """Documents without vectors first, no ``embedding_dim``: vectors are refused; nothing is deleted or rebuilt."""
    a, b = QdrantMultiViewDocumentStore(path=folder), QdrantMultiViewDocumentStore(path=folder)
    a.write_documents([Document(id="plain", content="no vectors yet")])
    assert b.count_documents() == 1
    with pytest.raises(DocumentStoreError, match="created without vectors"):
        a.write_documents([Document(id="from-a", content="x", embedding=[1.0] * 8)])
    with pytest.raises(DocumentStoreError, match="created without vectors"):
        b.write_documents([Document(id="from-b", content="y", embedding=[0.5] * 8)])
    assert ids(a.filter_documents()) == ["plain"]
    close_all(a, b)


def test_a_stale_store_cannot_write_another_dimension(folder):
    a = QdrantMultiViewDocumentStore(path=folder, embedding_dim=8)
    b = QdrantMultiViewDocumentStore(path=folder)
    a.write_documents([Document(id="plain", content="no vectors yet")])
    assert b.count_documents() == 1  # b looks while the collection holds no vector
    a.write_documents([Document(id="from-a", content="x", embedding=[1.0] * 8)])
    with pytest.raises(CollectionMismatchError, match=r"4-dimensional.*8-dimensional"):
        b.write_documents([Document(id="from-b", content="y", embedding=[0.5] * 4)])
    assert ids(a.search([1.0] * 8, top_k=5)) == ["from-a"]
    assert a.count_documents() == 2
    close_all(a, b)


def test_stores_racing_to_create_the_collection_agree_or_refuse(folder):
    """The second creator finds the first's collection and checks against it instead of replacing it."""
    a = QdrantMultiViewDocumentStore(path=folder)
    b = QdrantMultiViewDocumentStore(path=folder, global_view=True)
    assert a.count_documents() == b.count_documents() == 0
    a.write_documents([vdoc("a0", [[1, 0]])])
    with pytest.raises(DocumentStoreError, match="without the global view"):
        b.write_documents([vdoc("b0", [[0, 1]])])
    assert ids(a.filter_documents()) == ["a0"]
    close_all(a, b)


# --------------------------------------------------------------------------------------- encoder record
def test_a_second_store_cannot_write_another_encoder_or_overwrite_the_record(folder):
    a = QdrantMultiViewDocumentStore(path=folder, embedding_dim=2)
    b = QdrantMultiViewDocumentStore(path=folder)
    a.write_documents([Document(id="plain", content="no vectors yet")])
    assert b.count_documents() == 1  # b looks before any encoder is recorded
    a.write_documents([vdoc("a0", [[1, 0]], encoder={"model": "x"})])
    with pytest.raises(ValueError, match="encoded by"):
        b.write_documents([vdoc("b0", [[0, 1]], encoder={"model": "y"})])
    assert ids(a.filter_documents()) == ["a0", "plain"]
    fresh = QdrantMultiViewDocumentStore(path=folder)
    assert fresh.encoder_config is None  # a plain attribute: the record is read when the store opens
    fresh.warm_up()
    assert fresh.encoder_config == {"model": "x"} == b.encoder_config
    close_all(a, b, fresh)


def test_a_store_given_another_encoder_config_is_refused_at_its_next_write(folder):
    a = QdrantMultiViewDocumentStore(path=folder)
    b = QdrantMultiViewDocumentStore(path=folder, encoder_config={"model": "y"})
    assert b.count_documents() == 0  # the collection does not exist yet
    a.write_documents([vdoc("a0", [[1, 0]], encoder={"model": "x"})])
    with pytest.raises(CollectionMismatchError, match="encoder"):
        b.write_documents([Document(id="plain", content="no vector")])
    assert ids(a.filter_documents()) == ["a0"]
    close_all(a, b)


def test_an_encoder_recorded_by_another_writer_at_the_same_moment_is_read_back_and_refused(folder):
    """Qdrant has no compare-and-set on metadata: the record is read back, and the loser writes nothing."""
    store = QdrantMultiViewDocumentStore(path=folder, embedding_dim=2)
    store.write_documents([Document(id="plain", content="no vector")])  # a collection without a record
    client = store.client
    update = client.update_collection

    def another_writer_lands_right_after(collection_name, **kwargs):
        update(collection_name, **kwargs)
        update(collection_name, metadata={"haystack_mvr": {"format": 1, "encoder_config": {"model": "x"}}})

    client.update_collection = another_writer_lands_right_after
    try:
        with pytest.raises(CollectionMismatchError, match="another writer recorded"):
            store.write_documents([vdoc("d0", [[1, 0]], encoder={"model": "y"})])
    finally:
        del client.update_collection
    assert ids(store.filter_documents()) == ["plain"] and store.encoder_config == {"model": "x"}
    store.close()


def test_the_encoder_is_recorded_at_creation(folder):
    store = QdrantMultiViewDocumentStore(path=folder, encoder_config={"model": "x"}, embedding_dim=2)
    store.write_documents([Document(id="plain", content="no vector")])
    store.close()
    with pytest.raises(ValueError, match="encoded by"):
        QdrantMultiViewDocumentStore(path=folder).write_documents([vdoc("d", [[1, 0]], encoder={"model": "y"})])


def test_the_first_query_after_opening_a_folder_checks_the_encoder(folder):
    """The retriever's encoder check holds on query 1 of a store opened on existing data (issue 28)."""
    writer = QdrantMultiViewDocumentStore(path=folder)
    writer.write_documents([vdoc("d0", [[1, 0]], encoder={"model": "m", "mode": "snippet"})])
    writer.close()
    store = QdrantMultiViewDocumentStore(path=folder)
    retriever = MultiViewRetriever(document_store=store)
    assert store._client is None  # building the retriever (isinstance on Python < 3.12) opened nothing
    with pytest.raises(ValueError, match="differ in"):
        retriever.run(query_embedding=[1.0, 0.0], encoder={"model": "m", "mode": "mvr"})
    assert retriever.run(query_embedding=[1.0, 0.0], encoder={"model": "m", "mode": "snippet"})["documents"]
    store.close()


def test_reading_encoder_config_opens_nothing_new():
    memory = QdrantMultiViewDocumentStore(encoder_config={"model": "m"})
    assert memory.encoder_config == {"model": "m"} and memory._client is None


# ---------------------------------------------------------------------------- a collection dropped meanwhile
@pytest.mark.parametrize("mode", ["local", "server"])
def test_another_store_recreating_the_collection(folder, request, mode):
    if mode == "server":
        request.getfixturevalue("as_server")
    a, b = QdrantMultiViewDocumentStore(path=folder), QdrantMultiViewDocumentStore(path=folder)
    a.write_documents([vdoc("a0", [[1, 0]]), vdoc("a1", [[0, 1]])])
    assert b.count_documents() == 2 and len(b.search([1.0, 0.0], top_k=5)) == 2
    a.delete_all_documents(recreate_index=True)
    assert b.count_documents() == 0
    assert b.search([1.0, 0.0], top_k=5) == [] and b.search_batch([[1.0, 0.0]], top_k=5) == [[]]
    assert b.filter_documents() == []
    assert b.count_documents_by_filter({"field": "id", "operator": "==", "value": "a0"}) == 0
    b.delete_documents(["a0"])
    assert b.write_documents([vdoc("b0", [[1, 1, 1]])]) == 1  # a new collection, of another dimension
    assert ids(a.search([1.0, 0.0, 0.0], top_k=5)) == ["b0"]
    close_all(a, b)


def test_recreate_index_with_embedding_dim_recreates_at_once(folder):
    a = QdrantMultiViewDocumentStore(path=folder, embedding_dim=2)
    b = QdrantMultiViewDocumentStore(path=folder)
    a.write_documents([vdoc("a0", [[1, 0]])])
    b.count_documents()
    a.delete_all_documents(recreate_index=True)
    assert b.write_documents([Document(id="plain", content="no vector")]) == 1
    assert b.write_documents([vdoc("b0", [[0, 1]])]) == 1  # the schema was there before the vectorless write
    assert ids(a.search([0.0, 1.0], top_k=5)) == ["b0"]
    close_all(a, b)


def test_server_reads_recover_from_a_recreated_collection_of_another_dimension(folder, as_server):
    a, b = QdrantMultiViewDocumentStore(path=folder), QdrantMultiViewDocumentStore(path=folder)
    a.write_documents([vdoc("a0", [[1, 0]])])
    assert len(b.search([1.0, 0.0], top_k=5)) == 1  # b now holds a description: 2 dimensions
    a.delete_all_documents(recreate_index=True)
    a.write_documents([vdoc("c0", [[1, 0, 0]])])
    assert ids(b.search([1.0, 0.0, 0.0], top_k=5)) == ["c0"]  # refreshed, not refused by the stale dimension
    with pytest.raises(ValueError, match="dimension 2 but the stored views have dimension 3"):
        b.search([1.0, 0.0], top_k=5)
    with pytest.raises(CollectionMismatchError, match=r"2-dimensional.*3-dimensional"):
        b.write_documents([vdoc("b0", [[1, 0]])])
    close_all(a, b)


# ------------------------------------------------------------------------------------------------ locks
def test_stores_on_one_folder_share_one_lock_from_construction(tmp_path):
    folder = tmp_path / "qdrant"
    a = QdrantMultiViewDocumentStore(path=str(folder))
    b = QdrantMultiViewDocumentStore(path=str(tmp_path / "." / "qdrant"))
    lock = a._lock
    assert b._lock is lock
    a.write_documents([vdoc("a0", [[1, 0]])])
    b.count_documents()
    a.close()
    assert a._lock is lock and b._lock is lock
    b.close()


def test_two_threads_are_never_inside_the_engine_at_once(folder):
    """Fresh stores on an open folder, used from many threads at once: their calls never overlap."""
    opener = QdrantMultiViewDocumentStore(path=folder)
    opener.write_documents([vdoc("d0", [[1, 0]])])
    client = opener.client
    inside, overlaps = [0], [0]
    guard = threading.Lock()
    original = client.get_collection

    def probe(*args, **kwargs):
        with guard:
            inside[0] += 1
            overlaps[0] += inside[0] > 1
        time.sleep(0.01)
        try:
            return original(*args, **kwargs)
        finally:
            with guard:
                inside[0] -= 1

    client.get_collection = probe
    stores = [QdrantMultiViewDocumentStore(path=folder) for _ in range(8)]
    start = threading.Barrier(len(stores))
    errors = []

    def work(store):
        start.wait()
        try:
            for _ in range(3):
                store.count_documents()
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    del client.get_collection
    assert not errors and overlaps[0] == 0
    close_all(opener, *stores)


# ------------------------------------------------------------------------------------------------- fork
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_is_refused_and_leaves_the_parents_folder_lock_alone(folder):
    """
    The child of a process holding ``path=`` cannot use it (its writes would never reach the parent), cannot
    reopen it, and exiting normally does not release the parent's folder lock.
    """
    script = textwrap.dedent(
        f"""
        import os, sys
        from haystack import Document
        from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore
        store = QdrantMultiViewDocumentStore(path={folder!r})
        store.write_documents([Document(id="parent", content="x", embedding=[1.0, 0.0])])
        pid = os.fork()
        if pid == 0:
            calls = (
                store.count_documents,
                lambda: store.write_documents([Document(id="child", content="y")]),
                lambda: store.search([1.0, 0.0]),
                lambda: QdrantMultiViewDocumentStore(path={folder!r}).count_documents(),
            )
            for call in calls:
                try:
                    call()
                    print("child: allowed", flush=True)
                except Exception as e:
                    print("child:", type(e).__name__, "fork" in str(e), "already accessed" in str(e), flush=True)
            store.close()
            sys.exit(0)  # a normal exit: finalizers, atexit, __del__ of the inherited client
        os.waitpid(pid, 0)
        print("parent: ready", flush=True)
        sys.stdin.readline()
        print("parent: documents", sorted(d.id for d in store.filter_documents()), flush=True)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        lines = []
        while not lines or lines[-1] != "parent: ready":
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            lines.append(line.strip())
        with pytest.raises(RuntimeError, match="already accessed"):  # the parent still holds its folder
            QdrantClient(path=folder)
        out, err = proc.communicate("continue\n", timeout=120)
    finally:
        proc.kill()
    lines += out.strip().splitlines()
    child = [line for line in lines if line.startswith("child:")]
    assert len(child) == 4, (lines, err)
    assert child[:3] == ["child: DocumentStoreError True False"] * 3, child
    assert child[3].startswith("child: RuntimeError") and child[3].endswith("True"), child  # the folder is held
    assert lines[-1] == "parent: documents ['parent']"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_store_opened_after_the_fork_works_in_the_child(folder):
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            store = QdrantMultiViewDocumentStore(path=folder)
            store.write_documents([vdoc("child", [[1, 0]])])
            store.close()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    store = QdrantMultiViewDocumentStore(path=folder)
    assert ids(store.filter_documents()) == ["child"]
    store.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_memory_store_is_a_private_copy_in_a_forked_child():
    store = QdrantMultiViewDocumentStore()
    store.write_documents([vdoc("d0", [[1, 0]])])
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            store.write_documents([vdoc("child", [[0, 1]])])
            ok = store.count_documents() == 2
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert ids(store.filter_documents()) == ["d0"]


# ---------------------------------------------------------------------- the contract, through two stores
class _TwoStores:
    """Every call goes to one of two stores on the same folder, in turn: each sees what the other did."""

    def __init__(self, a, b):
        self._stores = [a, b]
        self._turn = 0

    def __getattr__(self, name):
        value = getattr(self._stores[self._turn % 2], name)
        if callable(value):
            self._turn += 1
        return value

    def close(self):
        close_all(*self._stores)


class TestTwoStoresOnOneFolderContract(MultiViewSearchTests, MultiViewSearchBatchTests, MultiViewInputTests):
    @pytest.fixture(params=["local", "server"])
    def document_store(self, request, tmp_path):
        if request.param == "server":
            request.getfixturevalue("as_server")
        folder = str(tmp_path / "two")
        both = _TwoStores(QdrantMultiViewDocumentStore(path=folder), QdrantMultiViewDocumentStore(path=folder))
        both.simulated_server = request.param == "server"
        yield both
        both.close()

    def test_async_forms_equal_sync(self, document_store):
        if document_store.simulated_server:
            pytest.skip("the simulation's AsyncQdrantClient cannot open a folder the sync client holds")
        super().test_async_forms_equal_sync(document_store)


def test_replaced_documents_keep_no_stale_views(folder):
    a, b = QdrantMultiViewDocumentStore(path=folder), QdrantMultiViewDocumentStore(path=folder)
    a.write_documents([vdoc("d", [[1, 0], [0, 1]])])
    b.write_documents([vdoc("d", [[0, 1]])], policy=DuplicatePolicy.OVERWRITE)
    hit = a.search([1.0, 0.0], top_k=1)[0]
    assert hit.score == pytest.approx(0.0) and hit.meta[MATCHED_VIEW_KEY] == 0
    close_all(a, b)
