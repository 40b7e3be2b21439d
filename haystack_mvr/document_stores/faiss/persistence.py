"""Save and verified load of a FaissMultiViewDocumentStore, on top of ``versioned_folder``.

A saved store is a version folder (``versioned_folder`` handles locking, atomic swaps and checksums) holding::

    documents.jsonl   one Document per line (its meta without views; spans kept), as the store holds it
    keys.npy          int64: each line's document key (its FAISS labels are (key << 12) | view)
    view_counts.npy   int32: each line's number of views (0: a document without vectors)
    index.faiss       the FAISS index with its labels (absent until a trainable index is trained)
    held.npy          float32 rows held beside the index: staged rows before training, or the rows kept beside a
                      lossy index with keep_vectors; empty for an exact index, which is the only copy of its rows
    tombstones.npy    int64: HNSW labels removed but still in the graph

Every row is written once. On load the files are checked against each other (line counts, unique ids and keys,
the index holding exactly the expected labels, held rows and spans matching the view counts); any disagreement is
a ``DocumentStoreError`` naming the file.

The store and this module exchange a :class:`StoreState`; this module never reads or writes the store's attributes
(nor imports its module): the store builds the state it saves from itself, and applies the state a load read.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from haystack.document_stores.errors import DocumentStoreError

from haystack_mvr.document_stores import versioned_folder
from haystack_mvr.document_stores.faiss import index_versions
from haystack_mvr.document_stores.faiss.document_table import DocumentTable
from haystack_mvr.document_stores.faiss.faiss_import import faiss
from haystack_mvr.document_stores.faiss.view_checks import all_unit
from haystack_mvr.document_stores.faiss.view_index import ViewIndex
from haystack_mvr.document_stores.faiss.view_labels import MAX_VIEWS, labels_of_keys, too_many_views
from haystack_mvr.document_stores.writes import same_encoder

FORMAT_VERSION = 2
KIND = "haystack-mvr.faiss-multi-view-store"


@dataclasses.dataclass
class StoreState:
    """A FAISS multi-view store's contents: what :func:`save` writes and what :func:`load` returns.

    The fields are the store's own objects, not copies (a save reads them under the store's lock).

    :param documents: The stored documents by id, in write order (views are not in their meta).
    :param keys: Each document's key; its rows are labelled ``(key << VIEW_BITS) | view``.
    :param views: The view index, ``None`` before the first vectors.
    :param embedding_dim: The vector dimension, ``None`` if not known yet.
    :param encoder_config: The config of the encoder the vectors come from, if known.
    :param index_settings: ``index_factory``, ``search_parameters``, ``keep_vectors`` and ``train_size``. For a
        save, those a new view index gets (recorded when the store has no view index yet); from a load, those the
        save recorded.
    """

    documents: DocumentTable
    keys: dict[str, int]
    views: ViewIndex | None
    embedding_dim: int | None
    encoder_config: dict[str, Any] | None
    index_settings: dict[str, Any]


@dataclasses.dataclass
class LoadingStore:
    """The store a load is for: what the saved copy is checked against, and how its view index is built.

    :param embedding_dim: The loading store's dimension (``None``: any).
    :param encoder_config: The loading store's encoder config (``None``: any).
    :param index_factory: The factory the loading store was given (``None``: the saved one); a trained saved index
        of another factory is refused.
    :param new_view_index: Builds an empty view index of a dimension with the store's settings, given the
        settings the save recorded (used where the store was given none).
    """

    embedding_dim: int | None
    encoder_config: dict[str, Any] | None
    index_factory: str | None
    new_view_index: Callable[[int, dict[str, Any]], ViewIndex]


def exists(path: str | Path) -> bool:
    return versioned_folder.current_version(path) is not None


def save(state: StoreState, path: Path) -> None:
    """Write ``state`` to the store folder ``path`` as a new version (the previous one stays current until then)."""
    views = state.views
    documents = state.documents
    ids = documents.ids()
    keys = np.array([state.keys[i] for i in ids], dtype=np.int64)
    counts = np.array([views.count(int(k)) if views is not None else 0 for k in keys], dtype=np.int32)
    index = views.faiss_index if views is not None else None
    held_by_key = views.kept_rows_by_key() if views is not None else {}
    dim = views.dim if views is not None else state.embedding_dim
    held_keys = [int(k) for k, c in zip(keys, counts, strict=True) if c and int(k) in held_by_key]

    def write(w: index_versions.FaissVersionWriter) -> None:
        with w.open("documents.jsonl") as f:
            lines = list(documents.lines())
            for start in range(0, len(lines), 4096):
                f.write(b"\n".join(lines[start : start + 4096]) + b"\n")
        w.write_array("keys.npy", keys)
        w.write_array("view_counts.npy", counts)
        held = [held_by_key[k] for k in held_keys]
        w.write_array("held.npy", np.concatenate(held) if held else np.zeros((0, dim or 0), dtype=np.float32))
        w.write_array("tombstones.npy", views.tombstones if views is not None else np.zeros(0, dtype=np.int64))
        if index is not None:
            w.write_faiss_index("index.faiss", index)

    settings = state.index_settings
    if views is not None:
        settings = {
            "index_factory": views.index_factory,
            "search_parameters": views.search_parameters or None,
            "keep_vectors": views.keep_vectors,
            "train_size": views.train_size,
        }
    meta = {
        "kind": KIND,
        "format_version": FORMAT_VERSION,
        "embedding_dim": dim,
        **settings,  # a store opened without these arguments reopens with them
        "encoder_config": state.encoder_config,
        "documents": len(ids),
        "rows": int(counts.sum()),
        "trained": index is not None,
        "held_rows": int(sum(len(held_by_key[k]) for k in held_keys)),
        "unit_rows": bool(views is not None and views.unit_rows),
    }
    index_versions.save_version(path, write, meta)


def _refuse_old_format(path: Path) -> None:
    """A store saved by haystack-mvr before format 2 (its own manifest, no versioned_folder envelope)."""
    try:
        name = (path / versioned_folder.POINTER).read_text(encoding="ascii").strip()
        manifest = json.loads((path / name / versioned_folder.MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(manifest, dict) and "checksums" in manifest and manifest.get("format_version") == 1:
        msg = (
            f"The saved store at {path} has store format 1 (haystack-mvr before the stable-id rewrite); this version "
            f"reads format {FORMAT_VERSION}. Load it with the older haystack-mvr and re-index, or write the documents "
            "again."
        )
        raise DocumentStoreError(msg)


def load(path: Path, target: LoadingStore) -> StoreState:
    """Read the copy saved at ``path`` and check it for ``target``; the store applies what it returns.

    :raises DocumentStoreError: no saved store at ``path``, a copy of another format, dimension, encoder or trained
        factory than ``target``'s, or damaged files (each named).
    """
    if not exists(path):
        _refuse_old_format(path)
        msg = f"No saved multi-view store at {path} (missing {versioned_folder.POINTER} file)."
        raise DocumentStoreError(msg)
    _refuse_old_format(path)
    with index_versions.open_version(path) as version:
        meta = version.meta
        where = f"The saved store at {path}"
        if meta.get("kind") != KIND or meta.get("format_version") != FORMAT_VERSION:
            msg = (
                f"{where} is not a FAISS multi-view store of format {FORMAT_VERSION} "
                f"(kind {str(meta.get('kind'))[:60]!r}, format {str(meta.get('format_version'))[:10]})."
            )
            raise DocumentStoreError(msg)
        _check_compatible(target, meta, where)
        saved = _saved_settings(meta, where)
        table, ids, spans = DocumentTable.from_jsonl(version.read_bytes("documents.jsonl"), where)
        keys = version.read_array("keys.npy")
        counts = version.read_array("view_counts.npy")
        held = version.read_array("held.npy")
        tombstones = version.read_array("tombstones.npy")
        index = version.read_faiss_index("index.faiss") if meta["trained"] else None
        views = _checked_view_index(
            target, meta, saved, where, ids, spans, len(table), keys, counts, held, tombstones, index
        )
        return StoreState(
            documents=table,
            keys=dict(zip(ids, keys.tolist(), strict=True)),
            views=views,
            embedding_dim=meta["embedding_dim"],
            encoder_config=meta["encoder_config"],
            index_settings=saved,
        )


def _check_compatible(target: LoadingStore, meta: dict[str, Any], where: str) -> None:
    dim = meta["embedding_dim"]
    if target.embedding_dim is not None and dim is not None and dim != target.embedding_dim:
        msg = f"{where} holds {dim}-dimensional vectors; this store expects {target.embedding_dim}."
        raise DocumentStoreError(msg)
    saved = meta["encoder_config"]
    if target.encoder_config is not None and saved is not None and not same_encoder(saved, target.encoder_config):
        msg = f"{where} was built with another encoder config: {meta['encoder_config']} != {target.encoder_config}."
        raise DocumentStoreError(msg)
    if meta["trained"] and target.index_factory is not None and meta["index_factory"] != target.index_factory:
        msg = (
            f"{where} holds a {meta['index_factory']!r} index; load it with index_factory="
            f"{meta['index_factory']!r}, not {target.index_factory!r} (its rows live in that index), or leave "
            "index_factory out to use the saved one."
        )
        raise DocumentStoreError(msg)


def _saved_settings(meta: dict[str, Any], where: str) -> dict[str, Any]:
    """The index settings the save recorded (``search_parameters``, ``keep_vectors`` and ``train_size`` only since
    they were recorded; older copies reopen with the defaults)."""
    saved = {k: meta.get(k) for k in ("index_factory", "search_parameters", "keep_vectors", "train_size")}
    params = saved["search_parameters"]
    ok = (
        isinstance(saved["index_factory"], str)
        and (params is None or (isinstance(params, dict) and all(type(v) in (int, float) for v in params.values())))
        and saved["keep_vectors"] in (None, True, False)
        and (saved["train_size"] is None or (type(saved["train_size"]) is int and saved["train_size"] > 0))
    )
    if not ok:
        raise _corrupt(where, "manifest.json", "holds index settings of the wrong types")
    return saved


def _corrupt(where: str, file: str, what: str) -> DocumentStoreError:
    return DocumentStoreError(f"{where} is corrupt: {file} {what}.")


def _checked_view_index(
    target: LoadingStore,
    meta: dict[str, Any],
    saved: dict[str, Any],
    where: str,
    ids: list[str],
    spans: list[int | None],
    unique_ids: int,
    keys: np.ndarray,
    counts: np.ndarray,
    held: np.ndarray,
    tombstones: np.ndarray,
    index: faiss.Index | None,
) -> ViewIndex | None:
    n = meta["documents"]
    if len(ids) != n:
        raise _corrupt(where, "documents.jsonl", f"has {len(ids)} documents, the manifest {n}")
    if unique_ids != n:
        raise _corrupt(where, "documents.jsonl", "repeats a document id")
    if keys.dtype != np.int64 or keys.shape != (n,):
        raise _corrupt(where, "keys.npy", f"has shape {keys.shape}, expected ({n},) int64")
    # keys are saved in write order, usually ascending: then one comparison pass and no sort (np.unique hashes)
    strictly_ascending = _ascending(keys)
    ordered = keys if strictly_ascending else np.sort(keys)
    if n and (not (strictly_ascending or _ascending(ordered)) or ordered[0] < 0 or ordered[-1] >= 1 << 50):
        raise _corrupt(where, "keys.npy", "repeats a key or holds an invalid one")
    bad_count = n and (counts.min() < 0 or too_many_views(int(counts.max())) is not None)
    if counts.dtype != np.int32 or counts.shape != (n,) or bad_count:
        raise _corrupt(where, "view_counts.npy", f"does not hold one view count (0..{MAX_VIEWS}) per document")
    if int(counts.sum()) != meta["rows"]:
        raise _corrupt(where, "view_counts.npy", f"counts {int(counts.sum())} rows, the manifest {meta['rows']}")
    for i, given in enumerate(spans):
        if given is not None and given != counts[i]:
            raise _corrupt(
                where, "documents.jsonl", f"gives document {ids[i]!r} spans for other than {counts[i]} views"
            )
    dim = meta["embedding_dim"]
    if meta["rows"] == 0 and index is None:
        views = None
        if dim is not None:
            views = target.new_view_index(dim, saved)
        return views
    if dim is None:
        raise _corrupt(where, "manifest.json", "has rows but no dimension")
    if held.dtype != np.float32 or held.ndim != 2 or held.shape[1] != dim or len(held) != meta["held_rows"]:
        raise _corrupt(where, "held.npy", f"has shape {held.shape}, expected ({meta['held_rows']}, {dim}) float32")
    has_rows = counts > 0
    live = list(zip(keys[has_rows].tolist(), counts[has_rows].tolist(), strict=True))
    views = target.new_view_index(dim, saved)
    by_key: dict[int, np.ndarray] = {}
    if len(held):
        if len(held) != meta["rows"]:
            raise _corrupt(where, "held.npy", f"holds {len(held)} rows for {meta['rows']} views")
        offsets = np.concatenate([[0], np.cumsum(counts[has_rows])]).tolist()
        by_key = {k: held[offsets[i] : offsets[i + 1]] for i, (k, _) in enumerate(live)}
    if index is None:
        if len(held) != meta["rows"]:
            raise _corrupt(where, "held.npy", f"holds {len(held)} rows for {meta['rows']} views of an untrained index")
        if meta["index_factory"] != views.index_factory or not len(live):
            views.add([k for k, _ in live], [by_key[k] for k, _ in live])  # rows not indexed yet: any factory
        else:
            views.restore(dict(live), None, by_key, np.zeros(0, dtype=np.int64), unit_rows=all_unit([held]))
        return views
    if index.d != dim:
        raise _corrupt(where, "index.faiss", f"has dimension {index.d}, the manifest {dim}")
    expected = _sorted(np.concatenate([labels_of_keys(keys[has_rows], counts[has_rows]), tombstones]))
    # whether every row had unit length: the kept rows say; without them the manifest (not recorded before: False)
    unit_rows = all_unit([held]) if len(held) else meta.get("unit_rows", False)
    if type(unit_rows) is not bool:
        raise _corrupt(where, "manifest.json", "holds a unit_rows that is not true or false")
    try:
        views.restore(dict(live), index, by_key, tombstones, unit_rows=unit_rows)
        actual = views.index_labels()
    except (ValueError, RuntimeError) as e:
        raise _corrupt(where, "index.faiss", f"cannot be used ({e})") from e
    if actual.shape != expected.shape or not np.array_equal(actual, expected):
        raise _corrupt(where, "index.faiss", f"holds {len(actual)} labels that are not the {len(expected)} expected")
    if views.keeps_rows and not len(held):  # saved index-only, loaded keeping rows: keep its reconstruction
        views.restore(dict(live), index, {k: views.views_of(k) for k, _ in live}, tombstones, unit_rows=unit_rows)
    return views


def _ascending(values: np.ndarray) -> bool:
    """Strictly ascending (sorted without repeats)."""
    return len(values) < 2 or bool((values[1:] > values[:-1]).all())


def _sorted(labels: np.ndarray) -> np.ndarray:
    """``labels`` sorted; one comparison pass when they already are (rows written in key order, the usual case)."""
    return labels if _ascending(labels) else np.sort(labels)
