"""Atomic save and verified load of a FaissMultiViewDocumentStore.

Layout of a saved store directory::

    CURRENT                 name of the live version folder (replaced atomically, last)
    v-<uuid>/manifest.json  format version, dimension, index factory, encoder config, counts, file checksums
    v-<uuid>/documents.jsonl, vectors.npy, row_doc.npy, row_view.npy, index.faiss

A save writes and fsyncs a new version folder, then swaps ``CURRENT``; a crash at any point leaves the
previous copy loadable. Older versions are removed only after the swap.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import faiss
import numpy as np
from haystack import Document
from haystack.document_stores.errors import DocumentStoreError

from haystack_mvr.document_stores.view_index import ViewIndex

if TYPE_CHECKING:
    from haystack_mvr.document_stores.faiss_multi_view_document_store import FaissMultiViewDocumentStore

FORMAT_VERSION = 1
POINTER = "CURRENT"
DATA_FILES = ("documents.jsonl", "vectors.npy", "row_doc.npy", "row_view.npy", "index.faiss")


def exists(path: str | Path) -> bool:
    return (Path(path) / POINTER).is_file()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync(path: Path) -> None:
    with path.open("rb") as f:
        os.fsync(f.fileno())


def save(store: FaissMultiViewDocumentStore, path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    version = path / f"v-{uuid.uuid4().hex}"
    version.mkdir()
    try:
        ids = list(store._documents)
        new_slot = np.full(len(store._slot_ids), -1, dtype=np.int64)  # old slot -> line in documents.jsonl
        new_slot[[store._slot_of[i] for i in ids]] = np.arange(len(ids))
        with (version / "documents.jsonl").open("w", encoding="utf-8") as f:
            for doc_id in ids:
                f.write(json.dumps(store._documents[doc_id].to_dict(flatten=False)) + "\n")
        views = store._views
        dim = views.dim if views is not None else store.embedding_dim
        index = views.faiss_index() if views is not None and views.ntotal else faiss.IndexFlatIP(dim or 1)
        # with keep_vectors=False the index is the only copy of the indexed rows: no float32 rows are written
        vectors = views.stored_vectors if views is not None else np.zeros((0, dim or 0), dtype=np.float32)
        row_doc = new_slot[views.row_doc] if views is not None else np.zeros(0, dtype=np.int64)
        row_view = views.row_view if views is not None else np.zeros(0, dtype=np.int32)
        np.save(version / "vectors.npy", vectors)
        np.save(version / "row_doc.npy", row_doc)
        np.save(version / "row_view.npy", row_view)
        faiss.write_index(index, str(version / "index.faiss"))
        manifest = {
            "format_version": FORMAT_VERSION,
            "embedding_dim": dim,
            "index_factory": store.index_factory,
            "encoder_config": store.encoder_config,
            "documents": len(ids),
            "rows": int(row_doc.shape[0]),
            "checksums": {name: _sha256(version / name) for name in DATA_FILES},
        }
        (version / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        for name in (*DATA_FILES, "manifest.json"):
            _fsync(version / name)
        pointer_tmp = path / f"{POINTER}.{uuid.uuid4().hex}.tmp"
        pointer_tmp.write_text(version.name, encoding="utf-8")
        _fsync(pointer_tmp)
        os.replace(pointer_tmp, path / POINTER)
    except BaseException:
        shutil.rmtree(version, ignore_errors=True)
        raise
    for old in path.glob("v-*"):
        if old.name != version.name:
            shutil.rmtree(old, ignore_errors=True)


def load_into(store: FaissMultiViewDocumentStore, path: Path) -> None:
    if not exists(path):
        msg = f"No saved multi-view store at {path} (missing {POINTER} file)."
        raise DocumentStoreError(msg)
    version = path / (path / POINTER).read_text(encoding="utf-8").strip()
    try:
        manifest = json.loads((version / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        msg = f"The saved store at {path} is corrupt: its manifest cannot be read ({e})."
        raise DocumentStoreError(msg) from e
    if manifest.get("format_version") != FORMAT_VERSION:
        msg = f"The saved store at {path} has format {manifest.get('format_version')}, expected {FORMAT_VERSION}."
        raise DocumentStoreError(msg)
    for name, checksum in manifest["checksums"].items():
        file = version / name
        if not file.is_file() or _sha256(file) != checksum:
            msg = f"The saved store at {path} is corrupt: {name} is missing or does not match its checksum."
            raise DocumentStoreError(msg)
    dim = manifest["embedding_dim"]
    if store.embedding_dim is not None and dim is not None and dim != store.embedding_dim:
        msg = f"The saved store at {path} holds {dim}-dimensional vectors; this store expects {store.embedding_dim}."
        raise DocumentStoreError(msg)
    if store.encoder_config is not None and manifest["encoder_config"] not in (None, store.encoder_config):
        msg = (
            f"The saved store at {path} was built with another encoder config: "
            f"{manifest['encoder_config']} != {store.encoder_config}."
        )
        raise DocumentStoreError(msg)
    with (version / "documents.jsonl").open(encoding="utf-8") as f:
        documents = [Document.from_dict(json.loads(line)) for line in f]
    vectors = np.load(version / "vectors.npy")
    row_doc, row_view = np.load(version / "row_doc.npy"), np.load(version / "row_view.npy")
    views = None
    if dim is not None and len(row_doc):
        index = faiss.read_index(str(version / "index.faiss"))
        if index.d != dim:
            msg = f"The saved store at {path} is corrupt: its index has dimension {index.d}, its manifest {dim}."
            raise DocumentStoreError(msg)
        if manifest["index_factory"] != store.index_factory:
            if len(vectors) < len(row_doc):
                msg = (
                    f"The saved store at {path} keeps its vectors only in its {manifest['index_factory']!r} index "
                    f"(saved with keep_vectors=False); load it with index_factory={manifest['index_factory']!r}, "
                    f"not {store.index_factory!r}."
                )
                raise DocumentStoreError(msg)
            index = None
        views = ViewIndex(dim, store.index_factory, store.search_parameters, store.keep_vectors)
        try:
            views.set_rows(vectors, row_doc, row_view, index)
        except ValueError as e:
            msg = f"The saved store at {path} is corrupt: {e}"
            raise DocumentStoreError(msg) from e
    store.delete_all_documents()
    store._documents = {d.id: d for d in documents}
    store._slot_ids = [d.id for d in documents]
    store._slot_of = {d.id: n for n, d in enumerate(documents)}
    store._views = views
    store.embedding_dim = store.embedding_dim or dim
