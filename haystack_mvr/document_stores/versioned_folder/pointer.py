"""The store pointer, ``CURRENT``: the names inside a store folder, and finding (and checking) the version
``CURRENT`` names, read again when a save replaced it meanwhile."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from haystack.document_stores.errors import DocumentStoreError

from haystack_mvr.document_stores.versioned_folder.locking import fail as _fail
from haystack_mvr.document_stores.versioned_folder.locking import os_error as _os_error
from haystack_mvr.document_stores.versioned_folder.manifest import MANIFEST

POINTER = "CURRENT"
LOCK = ".lock"
READERS = ".readers"
PARTIAL = ".partial-"  # a version being written: ``.partial-<hex>``, renamed ``v-<hex>`` once complete
TRASH = ".trash-"  # a version being removed
_VERSION_RE = re.compile(rb"v-[0-9a-f]{32}\n?")
VERSION_NAME_RE = re.compile(r"v-[0-9a-f]{32}")
_MAX_POINTER = 64
_OPEN_RETRIES = 100
_T = TypeVar("_T")


def read_pointer(path: Path) -> str | None:
    """The version ``CURRENT`` names, ``None`` if there is no ``CURRENT``; a damaged one raises."""
    pointer = path / POINTER
    fix = (
        f"write the name of the newest complete version folder (v- and 32 hex digits) into {pointer}, "
        f"or move {path} aside to start an empty store"
    )
    try:
        fd = os.open(pointer, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as e:
        kind = "a symbolic link" if os.path.islink(pointer) else "unreadable"
        msg = f"The store pointer {pointer} is {kind} ({e.strerror}); it must be a regular file: {fix}."
        raise _fail(msg) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            msg = f"The store pointer {pointer} is not a regular file: {fix}."
            raise _fail(msg)
        if info.st_size > _MAX_POINTER:
            msg = f"The store pointer {pointer} is damaged ({info.st_size} bytes, expected 34): {fix}."
            raise _fail(msg)
        data = os.read(fd, _MAX_POINTER + 1)
    except OSError as e:
        raise _os_error("read the store pointer", pointer, e) from None
    finally:
        os.close(fd)
    if not _VERSION_RE.fullmatch(data):
        msg = f"The store pointer {pointer} is damaged: it does not hold a version name (v- and 32 hex digits): {fix}."
        raise _fail(msg)
    return data.decode("ascii").strip()


def _version_dirs(path: Path) -> list[str]:
    """Names of the real ``v-<hex>`` folders directly inside ``path`` (symbolic links are not versions)."""
    names = []
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if VERSION_NAME_RE.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
                    names.append(entry.name)
    except FileNotFoundError:
        return []
    except OSError as e:
        raise _os_error("list", path, e) from e
    return names


def _no_pointer_error(path: Path, versions: list[str]) -> DocumentStoreError:
    pointer = path / POINTER
    newest = max(versions, key=lambda v: _mtime(path / v / MANIFEST))
    msg = (
        f"{pointer} is missing, but {path} holds {len(versions)} saved version folder(s), so the current one is "
        f"unknown; nothing was loaded or deleted. If {path / newest} (the newest) is the right copy, run "
        f"`printf {newest} > {pointer}`; or move {path} aside to start an empty store."
    )
    return _fail(msg)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def current_version(path: str | Path) -> str | None:
    """The name of the current version saved at ``path``, or ``None`` if there is no store there.

    ``None`` means ``path`` is missing, or holds neither ``CURRENT`` nor version folders (a caller opens an empty
    store). A damaged ``CURRENT``, or version folders without a ``CURRENT``, raise ``DocumentStoreError``.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        msg = f"{path} is not a folder; a saved store is a folder."
        raise _fail(msg)
    return follow_current(
        path, lambda name, again: name if check_version_dir(path, name, missing_ok=not again) else None
    )


def follow_current(path: Path, attempt: Callable[[str, bool], _T | None]) -> _T | None:
    """Read ``CURRENT`` and call ``attempt(name, again)`` on the version it names, until an attempt returns a value.

    A save may replace the current version (and remove the old one) between reading ``CURRENT`` and using the
    version it names: an attempt returns ``None`` when the version (or its lock file) vanished, and ``CURRENT`` is
    read again. ``again`` is true when ``CURRENT`` named the same version at the previous try, so what is missing is
    missing for good: the attempt raises then, naming what to restore. ``None`` when there is no store at ``path``
    (neither ``CURRENT`` nor version folders); version folders without ``CURRENT`` raise.
    """
    last = None
    for _ in range(_OPEN_RETRIES):
        name = read_pointer(path)
        if name is None:
            versions = _version_dirs(path)
            if versions:
                raise _no_pointer_error(path, versions)
            return None
        result = attempt(name, name == last)
        if result is not None:
            return result
        last = name
    msg = f"Could not open the store at {path}: its current version kept changing ({_OPEN_RETRIES} tries)."
    raise DocumentStoreError(msg)


def check_version_dir(path: Path, name: str, missing_ok: bool = False) -> bool:
    """Raise unless ``path/name`` is a real folder; ``False`` instead of raising when it is missing and
    ``missing_ok``."""
    folder = path / name
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        if missing_ok:
            return False
        msg = (
            f"The store pointer {path / POINTER} names version {name}, but {folder} does not exist: restore it from a "
            f"backup, point {POINTER} at another complete v-... folder, or move {path} aside to start an empty store."
        )
        raise _fail(msg) from None
    except OSError as e:
        raise _os_error("inspect", folder, e) from e
    if not stat.S_ISDIR(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a folder"
        msg = (
            f"The version {folder} named by {path / POINTER} is {kind}; a version must be a real folder directly "
            f"inside {path}. Copy the version's files into a real folder of that name."
        )
        raise _fail(msg)
    return True
