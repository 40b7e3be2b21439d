"""
A corpus encoded once and reused: a FAISS multi-view store saved beside the key of what built it.

``haystack-mvr eval --index-dir`` and ``examples/quickstart.py`` keep their index this way. The key holds the
corpus bytes (SHA-256), the model (and, for a local folder, the names, sizes and modification times of its files,
so a checkpoint retrained into the same folder is encoded again), the sentence splitter, the haystack-mvr version
and the caller's settings (index type, embedded meta fields, limit...). A saved index whose key differs in any
of these is never reused: it is encoded again and replaced.

```python
key = index_key(Path("corpus.jsonl"), model, index_factory="Flat", meta_fields_to_embed=["title"])
store = open_saved_index(Path("runs/eval-index"), key)
if store is None:
    store = ...  # encode
    save_index(store, Path("runs/eval-index"), key)
```
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any

from haystack_mvr.document_stores import FaissMultiViewDocumentStore
from haystack_mvr.modeling.sentence_splitting import splitter_name

logger = logging.getLogger(__name__)

KEY_FILE = "built_from.json"
STORE_FOLDER = "store"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _folder_files(model: str) -> list[list[Any]] | None:
    """``[name, size, mtime_ns]`` of a local model folder's files (two levels), ``None`` for a hub id."""
    folder = Path(model)
    if not folder.is_dir():
        return None
    files = [p for p in folder.rglob("*") if p.is_file() and len(p.relative_to(folder).parts) <= 2]
    return sorted([str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns] for p in files)


def index_key(corpus: Path, model: str, **settings: Any) -> dict[str, Any]:
    """
    What an index is built from, as a JSON-able dict: compare two with ``==``.

    :param corpus: The corpus file (its bytes are hashed).
    :param model: The model name or folder given to the embedder.
    :param settings: Anything else that changes the vectors or the store (JSON values).
    """
    from haystack_mvr import __version__

    return {
        "corpus_sha256": _file_sha256(corpus),
        "model": str(model),
        "model_files": _folder_files(str(model)),
        "sentence_splitter": splitter_name(),
        "haystack_mvr": __version__,
        "settings": json.loads(json.dumps(settings, sort_keys=True)),
    }


def open_saved_index(index_dir: Path, key: dict[str, Any]) -> FaissMultiViewDocumentStore | None:
    """The store saved under ``index_dir`` when it was built from ``key``, else ``None`` (nothing there, another
    key, or a copy this version cannot read)."""
    stamp = index_dir / KEY_FILE
    try:
        saved = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if saved != key:
        return None
    try:
        store = FaissMultiViewDocumentStore(index_path=str(index_dir / STORE_FOLDER))
        if store.count_documents():
            return store
    except Exception as e:  # a cache this version cannot read is encoded again, never an error
        logger.warning("Could not read the saved index in %s (%s); encoding again.", index_dir, e)
    return None


def save_index(store: FaissMultiViewDocumentStore, index_dir: Path, key: dict[str, Any]) -> None:
    """
    Replace the index saved under ``index_dir`` with ``store`` and its key (the key last: a crash leaves no key).

    :raises ValueError: when ``index_dir`` holds anything but a saved index, which is never deleted.
    """
    if index_dir.is_dir() and any(p.name not in (KEY_FILE, STORE_FOLDER) for p in index_dir.iterdir()):
        msg = f"{index_dir} holds other files than a saved index ({KEY_FILE}, {STORE_FOLDER}/): pick an empty folder."
        raise ValueError(msg)
    shutil.rmtree(index_dir, ignore_errors=True)
    index_dir.mkdir(parents=True)
    store.save(index_dir / STORE_FOLDER)
    (index_dir / KEY_FILE).write_text(json.dumps(key, indent=2) + "\n", encoding="utf-8")
