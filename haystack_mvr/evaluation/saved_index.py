"""
A corpus encoded once and reused: a FAISS multi-view store saved beside the key of what built it.

``haystack-mvr eval --index-dir`` and ``examples/quickstart.py`` keep their index this way. The key holds the
corpus bytes (SHA-256), the model (for a local folder, the SHA-256 of every file at any depth, so weights retrained
or restored into the same folder are seen whatever their size and modification time; for a hub id, the cached
snapshot it resolves to), the sentence splitter, the haystack-mvr version and the caller's settings (index type,
embedded meta fields, limit...). A saved index whose key differs in any of these is never reused: it is encoded
again and replaced.

The key alone would not tie the ``store/`` folder to it: beside the key, ``built_from.json`` records the store that
was saved: its saved version (each save of a FAISS store writes a new version folder, ``v-`` + a random UUID) and
the SHA-256 of that version's manifest (every file's size and the checksum of each of its blocks, which the store
checks every byte against when it loads), its document count and its encoder record. A store there that is not
that version (another store placed in the folder, or the saved one written to and saved again) or does not load
as recorded is not served: it is encoded again. The check reads one small file before the store loads.

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
import os
import shutil
from pathlib import Path
from typing import Any

from haystack_mvr.document_stores import versioned_folder
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.modeling.loading import local_model_name
from haystack_mvr.modeling.sentence_splitting import splitter_name

logger = logging.getLogger(__name__)

KEY_FILE = "built_from.json"
STORE_FOLDER = "store"
# built_from.json format: 2 records the saved store's contents beside the key (1 was the key alone).
FORMAT = 2


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _folder_files(model: str) -> list[list[Any]] | None:
    """
    ``[relative path, size, SHA-256]`` of every file of a local model folder, at any depth (symbolic links
    followed, as a loader reads them); ``None`` for a hub id. The contents are hashed, never trusted to names,
    sizes or times.
    """
    folder = Path(model)
    if not folder.is_dir():
        return None
    files = []
    for root, _, names in os.walk(folder, followlinks=True):
        for name in names:
            path = Path(root) / name
            if path.is_file():
                files.append([path.relative_to(folder).as_posix(), path.stat().st_size, _file_sha256(path)])
    return sorted(files)


def _hub_snapshot(model: str) -> str | None:
    """The commit of the cached snapshot a hub id loads from (``None`` for a folder, or when none is cached)."""
    if Path(model).is_dir():
        return None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(model, "config.json")
    except Exception:  # not a valid repo id, no hub library: nothing cached to name
        return None
    return Path(found).parent.name if isinstance(found, str) else None


def index_key(corpus: Path, model: str, **settings: Any) -> dict[str, Any]:
    """
    What an index is built from, as a JSON-able dict: compare two with ``==``.

    :param corpus: The corpus file (its bytes are hashed).
    :param model: The model name or folder given to the embedder (the files of the folder it loads from are hashed:
        also the packaged all-MiniLM-L6-v2 folder its hub id names).
    :param settings: Anything else that changes the vectors or the store (JSON values).
    """
    from haystack_mvr import __version__

    loaded_from = local_model_name(str(model))  # the packaged folder for its hub id: its files are what load
    return {
        "corpus_sha256": _file_sha256(corpus),
        "model": str(model),
        "model_files": _folder_files(loaded_from),
        "model_snapshot": _hub_snapshot(loaded_from),
        "sentence_splitter": splitter_name(),
        "haystack_mvr": __version__,
        "settings": json.loads(json.dumps(settings, sort_keys=True)),
    }


def _saved_version(folder: Path) -> dict[str, Any] | None:
    """The current saved version of the FAISS store in ``folder`` and its manifest's SHA-256 (``None``: no store)."""
    name = versioned_folder.current_version(folder)
    if name is None:
        return None
    return {"version": name, "manifest_sha256": _file_sha256(folder / name / versioned_folder.MANIFEST)}


def _loaded(store: FaissMultiViewDocumentStore) -> dict[str, Any]:
    """The document count and the encoder record of ``store`` (counting loads a store opened on a folder first)."""
    documents = store.count_documents()
    encoder = json.loads(json.dumps(store.encoder_config, sort_keys=True, default=repr))
    return {"documents": documents, "encoder_config": encoder}


def open_saved_index(index_dir: Path, key: dict[str, Any]) -> FaissMultiViewDocumentStore | None:
    """
    The store saved under ``index_dir`` when it was built from ``key`` and is still the one saved there, else
    ``None`` (nothing there, another key, another or a changed store, or a copy this version cannot read): the
    caller encodes again and :func:`save_index` replaces it.
    """
    stamp = index_dir / KEY_FILE
    try:
        saved = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT or saved.get("key") != key:
        return None
    recorded = saved.get("store") if isinstance(saved.get("store"), dict) else {}
    folder = index_dir / STORE_FOLDER
    try:
        version = _saved_version(folder)
        if version is None:
            return None
        if any(version[k] != recorded.get(k) for k in version):
            _stale(folder, "it was saved after the index, or put there: not the version recorded")
            return None
        store = FaissMultiViewDocumentStore(index_path=str(folder))
        loaded = _loaded(store)
    except Exception as e:  # a cache this version cannot read is encoded again, never an error
        logger.warning("Could not read the saved index in %s (%s); encoding again.", index_dir, e)
        return None
    if loaded["documents"] != recorded.get("documents"):
        _stale(folder, f"it holds {loaded['documents']} documents, {recorded.get('documents')} were saved")
        return None
    if loaded["encoder_config"] != recorded.get("encoder_config"):
        _stale(folder, "its encoder record differs")
        return None
    return store if loaded["documents"] else None


def _stale(folder: Path, why: str) -> None:
    logger.warning("The store in %s is not the one saved there with %s (%s); encoding again.", folder, KEY_FILE, why)


def save_index(store: FaissMultiViewDocumentStore, index_dir: Path, key: dict[str, Any]) -> None:
    """
    Replace the index saved under ``index_dir`` with ``store``, its key and a record of what it holds (the key
    file last: a crash leaves no key).

    :raises ValueError: when ``index_dir`` holds anything but a saved index, which is never deleted.
    """
    if index_dir.is_dir() and any(p.name not in (KEY_FILE, STORE_FOLDER) for p in index_dir.iterdir()):
        msg = f"{index_dir} holds other files than a saved index ({KEY_FILE}, {STORE_FOLDER}/): pick an empty folder."
        raise ValueError(msg)
    shutil.rmtree(index_dir, ignore_errors=True)
    index_dir.mkdir(parents=True)
    store.save(index_dir / STORE_FOLDER)
    record = {**_loaded(store), **(_saved_version(index_dir / STORE_FOLDER) or {})}
    stamp = {"format": FORMAT, "key": key, "store": record}
    (index_dir / KEY_FILE).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
