"""Removing what a save left behind: the versions no reader holds, and what killed saves left (the caller holds the
store's save lock)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from haystack_mvr.document_stores.versioned_folder.locking import close_lock_fd, fcntl_module, open_lock_fd
from haystack_mvr.document_stores.versioned_folder.pointer import (
    LOCK,
    PARTIAL,
    POINTER,
    READERS,
    TRASH,
    VERSION_NAME_RE,
)

logger = logging.getLogger(__name__)

_REMOVAL_WAIT = 2.0  # seconds a save waits for readers to pin their versions before it leaves old ones for later


def remove_unused(path: Path, current: str) -> None:
    """Remove the versions no reader holds and what killed saves left; the caller holds the store lock. Readers
    between reading ``CURRENT`` and locking their version hold ``.readers`` shared: the removal waits for them
    (:data:`_REMOVAL_WAIT` at most; after that, a later save removes what is left). ``.readers`` is held only while
    the old folders are renamed aside; their files are deleted after, so a load never waits for a large deletion."""
    with _readers_excluded(path) as excluded:
        doomed = _remove_unpinned(path, current) if excluded else []
    for folder in doomed:
        try:
            shutil.rmtree(folder)
        except OSError as e:
            logger.warning("Could not remove %s (a later save retries): %s", folder, e)


@contextlib.contextmanager
def _readers_excluded(path: Path) -> Iterator[bool]:
    """``.readers`` held exclusively (``True``), or ``False`` when readers kept it for :data:`_REMOVAL_WAIT`."""
    fcntl = fcntl_module()
    try:
        fd = open_lock_fd(path / READERS, os.O_RDWR | os.O_CREAT)
    except OSError as e:
        logger.warning("Could not open %s to remove old versions (a later save retries): %s", path / READERS, e)
        yield False
        return
    try:
        deadline = time.monotonic() + _REMOVAL_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                with contextlib.suppress(OSError):  # named by a load that waits too long for it
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, str(os.getpid()).encode(), 0)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    logger.info("Readers kept %s busy: old versions stay until a later save", path)
                    yield False
                    return
                time.sleep(0.005)
        yield True
    finally:
        close_lock_fd(fd)


def _remove_unpinned(path: Path, current: str) -> list[Path]:
    """Rename aside the versions no reader holds; returns the folders to delete (those and what killed saves left)."""
    try:
        entries = list(os.scandir(path))
    except OSError as e:
        logger.warning("Could not list %s to remove old versions: %s", path, e)
        return []
    doomed: list[Path] = []
    for entry in entries:
        try:
            if entry.name == current or entry.is_symlink():
                continue
            if VERSION_NAME_RE.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
                trash = _remove_version(path, entry.name)
                if trash is not None:
                    doomed.append(trash)
            elif entry.name.startswith((PARTIAL, TRASH)) and entry.is_dir(follow_symlinks=False):
                doomed.append(Path(entry.path))
            elif entry.name.startswith(f"{POINTER}.") and entry.name.endswith(".tmp") and entry.is_file():
                os.unlink(entry.path)
        except OSError as e:
            logger.warning("Could not remove %s (a later save retries): %s", entry.path, e)
    return doomed


def _remove_version(path: Path, name: str) -> Path | None:
    """Rename version ``name`` aside unless a reader holds it; returns where it went (``None``: it stays)."""
    try:
        fd = open_lock_fd(path / name / LOCK, os.O_RDWR)
    except FileNotFoundError:
        fd = None  # no lock file: no reader can hold this folder
    try:
        if fd is not None:
            try:
                fcntl = fcntl_module()
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return None  # a reader holds it; a later save removes it
        trash = path / f"{TRASH}{name[2:]}"
        os.rename(path / name, trash)  # new readers no longer find it
        if fd is not None:
            os.unlink(trash / LOCK)  # readers waiting on its lock see it unlinked and retry
    finally:
        if fd is not None:
            close_lock_fd(fd)
    return trash
