"""Reading a version: ``open_version`` pins the current version (a shared lock no save removes it under) and
``VersionReader`` hands over each file verified whole against its manifest."""

from __future__ import annotations

import contextlib
import io
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from haystack.document_stores.errors import DocumentStoreError

from haystack_mvr.document_stores.versioned_folder.file_digests import file_digests
from haystack_mvr.document_stores.versioned_folder.locking import close_lock_fd, fcntl_module, open_lock_fd
from haystack_mvr.document_stores.versioned_folder.locking import fail as _fail
from haystack_mvr.document_stores.versioned_folder.locking import os_error as _os_error
from haystack_mvr.document_stores.versioned_folder.manifest import BLOCK_DIGESTS, MANIFEST, parse_manifest
from haystack_mvr.document_stores.versioned_folder.pointer import (
    LOCK,
    POINTER,
    READERS,
    check_version_dir,
    follow_current,
)

_MAX_MANIFEST = 16 << 20
PIN_WAIT = 10.0  # seconds a load waits for a save that is removing old versions (it holds .readers for a moment)
_T = TypeVar("_T")


def _read_into(fd: int, view: memoryview) -> int:
    """Fill ``view`` from ``fd``'s position; returns the bytes read (fewer only at the end of the file)."""
    done = 0
    while done < len(view):
        got = os.readv(fd, [view[done:]])
        if not got:
            break
        done += got
    return done


class VersionReader:
    """Reads the files of one saved version, each verified whole against its size and checksums before it is
    returned (or handed to a callback).

    Obtained from ``open_version``; valid inside its ``with`` block, during which the version cannot be removed.
    ``meta`` is the metadata passed to ``save_version``; ``files`` maps each file name to its size in bytes.
    """

    def __init__(self, path: Path, name: str, dir_fd: int, manifest: dict[str, Any]) -> None:
        self.path = path
        self.name = name
        self.folder = path / name
        self.meta: dict[str, Any] = manifest["meta"]
        self.files: dict[str, int] = {n: e["bytes"] for n, e in manifest["files"].items()}
        self._entries: dict[str, dict[str, Any]] = manifest["files"]
        self._checksum: str = manifest["checksum"]
        self._dir_fd: int | None = dir_fd

    def read_bytes(self, name: str) -> bytes:
        """The content of file ``name``, verified."""
        with self._opened(name) as (fd, entry):
            data = bytearray(entry["bytes"])
            self._read_verified(name, fd, memoryview(data))
        return bytes(data)

    def read_array(self, name: str) -> np.ndarray:
        """The numpy array written by ``VersionWriter.write_array`` as ``name``, verified (a writable array)."""
        with self._opened(name) as (fd, entry):
            flat = np.empty(entry["bytes"], dtype=np.uint8)
            self._read_verified(name, fd, memoryview(flat))
        stream = io.BytesIO(flat[: 1 << 16].tobytes())
        try:
            major, _ = np.lib.format.read_magic(stream)
            read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(stream)
            count = int(np.prod(shape, dtype=np.int64))
        except Exception as e:  # numpy parses the header with tokenize and ast: a bad one raises anything
            raise self._damaged(name) from e
        offset = stream.tell()
        if dtype.hasobject or offset + count * dtype.itemsize != len(flat):
            raise self._damaged(name)
        return flat[offset:].view(dtype).reshape(shape, order="F" if fortran else "C")

    def read_file(self, name: str, read: Callable[[str], _T]) -> _T:
        """``read(file)`` of file ``name`` once the whole file is verified, given a path to that very file (such as
        ``faiss.read_index``, which then reads the verified bytes from the page cache)."""
        with self._opened(name) as (fd, entry):
            try:
                digests = file_digests(fd, entry["bytes"], entry["block_bytes"], self._checksum)
            except ValueError:  # shorter than its size a moment ago
                raise self._damaged(name) from None
            if digests != entry[self._checksum]:
                raise self._damaged(name)
            return read(f"/proc/self/fd/{fd}" if os.path.isdir("/proc/self/fd") else str(self.folder / name))

    @contextlib.contextmanager
    def _opened(self, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
        """File ``name`` open for reading, checked to be a regular file of the size its manifest says."""
        if self._dir_fd is None:
            msg = f"The version {self.folder} was closed; read its files inside the `with open_version(...)` block."
            raise DocumentStoreError(msg)
        entry = self._entries.get(name)
        if entry is None:
            msg = f"The saved version {self.folder} has no file {name!r} (it has {sorted(self._entries)})."
            raise DocumentStoreError(msg)
        file = self.folder / name
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self._dir_fd)
        except OSError as e:
            msg = (
                f"The saved store file {file} cannot be opened ({e.strerror}); restore the folder from a backup, "
                f"or save the store again."
            )
            raise _fail(msg) from e
        try:
            try:
                info = os.fstat(fd)
            except OSError as e:
                raise _os_error("inspect", file, e) from e
            if not stat.S_ISREG(info.st_mode) or info.st_size != entry["bytes"]:
                msg = (
                    f"The saved store file {file} is damaged: it holds {info.st_size} bytes, its manifest says "
                    f"{entry['bytes']}; restore the folder from a backup, or save the store again."
                )
                raise DocumentStoreError(msg)
            try:
                yield fd, entry
            except OSError as e:
                raise _os_error("read", file, e) from e
        finally:
            os.close(fd)

    def _read_verified(self, name: str, fd: int, view: memoryview) -> None:
        """Fill ``view`` with the whole file ``name`` and check it against its checksums."""
        entry = self._entries[name]
        block, digest = entry["block_bytes"], BLOCK_DIGESTS[self._checksum]
        if _read_into(fd, view) != len(view) or os.read(fd, 1):
            raise self._damaged(name)
        for start, expected in zip(range(0, len(view), block), entry[self._checksum], strict=True):
            if digest(view[start : start + block]) != expected:
                raise self._damaged(name)

    def _damaged(self, name: str) -> DocumentStoreError:
        msg = (
            f"The saved store file {self.folder / name} is damaged: it does not match its checksum; restore the "
            f"folder from a backup, or save the store again."
        )
        return DocumentStoreError(msg)


@contextlib.contextmanager
def _version_pinned(path: Path) -> Iterator[None]:
    """``.readers`` held shared while the caller reads ``CURRENT`` and locks the version it names, so that no save
    removes that version in between. A folder where the file cannot be opened or created (read-only, an older
    layout) is read without it: a load then retries when a save replaced its version."""
    fcntl_module()  # raises where the platform has no fcntl
    fd = None
    for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
        try:
            fd = open_lock_fd(path / READERS, flags)
            break
        except OSError:
            continue
    try:
        if fd is not None:
            _flock_shared(fd, path / READERS)
        yield
    finally:
        if fd is not None:
            close_lock_fd(fd)


def _flock_shared(fd: int, readers: Path) -> None:
    """``.readers`` locked shared, waiting :data:`PIN_WAIT` seconds at most for a save removing old versions (which
    holds it exclusively for a moment: renames, no file contents)."""
    fcntl = fcntl_module()
    deadline = time.monotonic() + PIN_WAIT
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                break
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        except OSError as e:
            raise _os_error("lock", readers, e) from e
    holder = "Another process"
    with contextlib.suppress(OSError, ValueError):
        holder = f"Process {int(os.pread(fd, 16, 0))}"
    msg = (
        f"{holder} holds {readers} (a save removing old versions of {readers.parent}) and did not let go within "
        f"{PIN_WAIT:g} s: it may be stopped or hung. Resume or stop that process, then load again."
    )
    raise DocumentStoreError(msg)


def _lock_current(path: Path) -> tuple[str, int, int]:
    """Find the current version and lock it shared; returns its name, a folder fd and the lock fd."""
    fcntl = fcntl_module()

    def lock(name: str, again: bool) -> tuple[str, int, int] | None:
        try:
            dir_fd = os.open(path / name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            if again:
                check_version_dir(path, name)  # still missing: raises
            return None
        except OSError as e:
            check_version_dir(path, name)  # a symbolic link or not a folder: raises
            raise _os_error("open", path / name, e) from e
        try:
            lock_fd = open_lock_fd(LOCK, os.O_RDONLY, dir_fd=dir_fd)
        except FileNotFoundError:
            if again:
                try:
                    _read_manifest(path, name, dir_fd)  # a store of an older layout (no lock files) says so
                finally:
                    os.close(dir_fd)
                msg = (
                    f"The saved version {path / name} has no {LOCK} file; create it (`touch {path / name / LOCK}`) "
                    f"and open the store again."
                )
                raise DocumentStoreError(msg) from None
            os.close(dir_fd)
            return None
        except OSError as e:
            os.close(dir_fd)
            raise _os_error("open", path / name / LOCK, e) from e
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_SH)
            if os.fstat(lock_fd).st_nlink > 0:
                return name, dir_fd, lock_fd
        except BaseException as e:
            close_lock_fd(lock_fd)
            os.close(dir_fd)
            if isinstance(e, OSError):
                raise _os_error("lock", path / name / LOCK, e) from e
            raise
        close_lock_fd(lock_fd)  # a save removed this version while we waited: read CURRENT again
        os.close(dir_fd)
        return None

    with _version_pinned(path):
        found = follow_current(path, lock)
    if found is None:
        msg = f"No saved store at {path}: it has no {POINTER} file."
        raise DocumentStoreError(msg)
    return found


@contextlib.contextmanager
def open_version(path: str | Path, reader_type: type[VersionReader] | None = None) -> Iterator[Any]:
    """Open the current version saved at ``path`` for reading; it cannot be removed until the block ends.

    :param reader_type: The ``VersionReader`` class to read with (a subclass adds readers of its own formats).
    :raises DocumentStoreError: no store at ``path``, a damaged ``CURRENT`` or manifest (the file is named).
    """
    path = Path(path)
    name, dir_fd, lock_fd = _lock_current(path)
    try:
        reader = (reader_type or VersionReader)(path, name, dir_fd, _read_manifest(path, name, dir_fd))
        try:
            yield reader
        finally:
            reader._dir_fd = None
    finally:
        close_lock_fd(lock_fd)
        os.close(dir_fd)


def _read_manifest(path: Path, name: str, dir_fd: int) -> dict[str, Any]:
    where = path / name / MANIFEST
    try:
        fd = os.open(MANIFEST, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError as e:
        msg = (
            f"The saved version's manifest {where} cannot be opened ({e.strerror}); restore the folder from a "
            f"backup, or save the store again."
        )
        raise _fail(msg) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_MANIFEST:
            msg = f"The saved version's manifest {where} is damaged (not a regular file of at most 16 MiB)."
            raise DocumentStoreError(msg)
        data = os.read(fd, _MAX_MANIFEST + 1)
    except OSError as e:
        raise _os_error("read", where, e) from e
    finally:
        os.close(fd)
    return parse_manifest(data, where)
