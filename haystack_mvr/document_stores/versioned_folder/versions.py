"""Crash-safe, concurrent, checksummed versions of a set of files in a folder (Linux only: uses ``fcntl.flock``).

A folder holds versions, one of them current::

    path/.lock                  locked exclusively by a save: savers (processes and threads) take turns
    path/.readers               locked shared by a reader from reading CURRENT until it holds that version's lock,
                                exclusively by a save while it removes old versions: a reader's version is never
                                removed under it, however slow the file system, so a load never has to retry
    path/CURRENT                the current version's name, ``v-`` + 32 hex digits (replaced atomically, last)
    path/v-<hex>/.lock          locked shared by every reader of that version, for as long as it reads
    path/v-<hex>/manifest.json  the caller's metadata and each file's size and block checksums (see ``manifest``)
    path/v-<hex>/<files>        the caller's files

``save_version`` writes a new version into ``path/.partial-<hex>`` (each file is checksummed from the page cache
once written, and fsynced), fsyncs the folder, renames it to ``v-<hex>`` and swaps ``CURRENT`` (write a temporary
file, fsync, ``os.replace``, fsync the folder). It then removes every other version that no reader holds (a held one
is removed by a later save) and whatever a killed save left behind. A crash at any moment leaves the previous version
loadable. A folder with versions but no valid ``CURRENT`` is never saved into: a save refuses rather than delete data
it cannot account for.

``open_version`` validates ``CURRENT`` strictly (a regular file naming a real folder directly inside ``path``), holds
a shared lock on that version while the caller reads, and verifies a whole file against the manifest before handing
it over (so a file's parser never sees unverified bytes). Every failure is a ``DocumentStoreError`` naming the file
(file content is never echoed).

Nothing here knows a file format beyond numpy's ``.npy``: a caller with its own reader and writer (a FAISS index)
passes them in as callbacks, given the file's path: ``VersionWriter.write_file`` / ``VersionReader.read_file``.

Example::

    def write(w: VersionWriter) -> None:
        w.write_bytes("documents.jsonl", payload)
        w.write_array("rows.npy", rows)
        w.write_file("index.faiss", lambda file: faiss.write_index(index, file))

    save_version(path, write, {"embedding_dim": 384})
    with open_version(path) as version:
        dim = version.meta["embedding_dim"]
        index = version.read_file("index.faiss", faiss.read_index)

The lock files only coordinate processes on one machine with a local file system (flock is not reliable on every
network file system).
"""

from __future__ import annotations

import contextlib
import io
import logging
import mmap
import os
import re
import shutil
import stat
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from haystack.document_stores.errors import DocumentStoreError

from haystack_mvr.document_stores.versioned_folder.locking import (
    close_lock_fd,
    fcntl_module,
    open_lock_fd,
    saving_lock,
)
from haystack_mvr.document_stores.versioned_folder.locking import fail as _fail
from haystack_mvr.document_stores.versioned_folder.locking import os_error as _os_error
from haystack_mvr.document_stores.versioned_folder.manifest import (
    BLOCK_DIGESTS,
    CHECKSUM,
    MANIFEST,
    UnsupportedFormatError,
    check_file_name,
    file_entry,
    manifest_bytes,
    parse_manifest,
)

logger = logging.getLogger(__name__)

__all__ = [
    "MANIFEST",
    "UnsupportedFormatError",
    "VersionFile",
    "VersionReader",
    "VersionWriter",
    "current_version",
    "open_version",
    "save_version",
]

POINTER = "CURRENT"
LOCK = ".lock"
READERS = ".readers"
_REMOVAL_WAIT = 2.0  # seconds a save waits for readers to pin their versions before it leaves old ones for later
BLOCK = 4 << 20  # each 4 MiB block of a file has its own checksum
_PARTIAL = ".partial-"
_TRASH = ".trash-"
_VERSION_RE = re.compile(rb"v-[0-9a-f]{32}\n?")
_VERSION_NAME_RE = re.compile(r"v-[0-9a-f]{32}")
_MAX_POINTER = 64
_MAX_MANIFEST = 16 << 20
_OPEN_RETRIES = 100
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


def _file_digests(fd: int, size: int, block: int, checksum: str) -> list[str]:
    """The checksum of each ``block``-byte block of the ``size``-byte file at ``fd``, hashed from a read-only map of
    it (no copy: from the page cache, just written or about to be read; a file shorter than ``size`` raises
    ``ValueError``). Files of a version are never modified once written."""
    if not size:
        return []
    digest = BLOCK_DIGESTS[checksum]
    with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mapped, memoryview(mapped) as view:
        return [digest(view[start : start + block]) for start in range(0, size, block)]


# --------------------------------------------------------------------------------------------------- writing


class VersionFile:
    """A write-only binary file of a version being saved, from ``VersionWriter.open``; use it as a context manager.

    ``write`` accepts any C-contiguous buffer (bytes, bytearray, memoryview, numpy array). Closing it checksums it
    and fsyncs it (unless the save was asked not to).
    """

    def __init__(self, writer: VersionWriter, name: str, fd: int) -> None:
        self.name = name
        self._writer = writer
        self._fd: int | None = fd

    def write(self, data: Any) -> int:
        if self._fd is None:
            msg = f"{self.name} is closed; write to a file of a saved version inside its `with` block."
            raise ValueError(msg)
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        n = len(view)
        while view:
            view = view[os.write(self._fd, view) :]
        return n

    def close(self) -> None:
        """Checksum the file, fsync it (unless the save was asked not to) and record it in the manifest."""
        if self._fd is None:
            return
        try:
            self._writer._record(self.name, self._fd)
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> VersionFile:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self._discard()

    def _discard(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._writer._open.pop(self.name, None)


class VersionWriter:
    """Writes the files of a version being saved; passed to the ``write`` callable of ``save_version``.

    Each file is written once, through this object. File names are 1-128 letters, digits, '.', '_' or '-',
    starting with a letter or digit.
    """

    def __init__(self, folder: Path, dir_fd: int, fsync: bool) -> None:
        self.folder = folder
        self._dir_fd = dir_fd
        self._fsync = fsync
        self._files: dict[str, dict[str, Any]] = {}
        self._open: dict[str, VersionFile] = {}

    def open(self, name: str) -> VersionFile:
        """Create file ``name`` and return it open for binary writing; close it (or use ``with``) when done."""
        check_file_name(name)
        if name in self._files or name in self._open:
            msg = f"{name} was already written to this version; write each file once."
            raise ValueError(msg)
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, 0o644, dir_fd=self._dir_fd)
        except OSError as e:
            raise _os_error("create", self.folder / name, e) from e
        self._open[name] = file = VersionFile(self, name, fd)
        return file

    def write_bytes(self, name: str, data: Any) -> None:
        """Write a bytes-like object (bytes, bytearray, memoryview, C-contiguous numpy array) as file ``name``."""
        with self.open(name) as f:
            f.write(data)

    def write_array(self, name: str, array: np.ndarray) -> None:
        """Write a numpy array as ``.npy`` file ``name`` (no pickled objects); read it back with ``read_array``."""
        array = np.asanyarray(array)
        if array.dtype.hasobject:
            msg = f"Cannot save {name}: arrays of Python objects are not supported (dtype {array.dtype})."
            raise ValueError(msg)
        if not (array.flags.c_contiguous or array.flags.f_contiguous):
            array = np.ascontiguousarray(array)
        header = io.BytesIO()
        np.lib.format.write_array_header_2_0(header, np.lib.format.header_data_from_array_1_0(array))
        with self.open(name) as f:
            f.write(header.getvalue())
            if array.size:
                f.write(array.reshape(-1, order="F" if not array.flags.c_contiguous else "C").view(np.uint8))

    def write_file(self, name: str, write: Callable[[str], object]) -> None:
        """Let ``write(file)`` write file ``name`` itself, given its path (such as ``faiss.write_index``'s own fast
        writer); the file is checksummed from the page cache afterwards."""
        with self.open(name):
            write(str(self.folder / name))

    def _record(self, name: str, fd: int) -> None:
        try:
            size = os.fstat(fd).st_size
            digests = _file_digests(fd, size, BLOCK, CHECKSUM)
            if self._fsync:
                os.fsync(fd)
        except OSError as e:
            raise _os_error("write", self.folder / name, e) from e
        self._open.pop(name, None)
        self._files[name] = file_entry(size, BLOCK, digests)

    def _abort(self) -> None:
        for file in list(self._open.values()):
            file._discard()


# --------------------------------------------------------------------------------------------- the current version


def _read_pointer(path: Path) -> str | None:
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
                if _VERSION_NAME_RE.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
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
    return _follow_current(
        path, lambda name, again: name if _check_version_dir(path, name, missing_ok=not again) else None
    )


def _follow_current(path: Path, attempt: Callable[[str, bool], _T | None]) -> _T | None:
    """Read ``CURRENT`` and call ``attempt(name, again)`` on the version it names, until an attempt returns a value.

    A save may replace the current version (and remove the old one) between reading ``CURRENT`` and using the
    version it names: an attempt returns ``None`` when the version (or its lock file) vanished, and ``CURRENT`` is
    read again. ``again`` is true when ``CURRENT`` named the same version at the previous try, so what is missing is
    missing for good: the attempt raises then, naming what to restore. ``None`` when there is no store at ``path``
    (neither ``CURRENT`` nor version folders); version folders without ``CURRENT`` raise.
    """
    last = None
    for _ in range(_OPEN_RETRIES):
        name = _read_pointer(path)
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


def _check_version_dir(path: Path, name: str, missing_ok: bool = False) -> bool:
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


# --------------------------------------------------------------------------------------------------- saving


def save_version(
    path: str | Path,
    write: Callable[[Any], None],
    meta: dict[str, Any],
    *,
    fsync: bool = True,
    lock_timeout: float | None = None,
    writer_type: type[VersionWriter] = VersionWriter,
) -> str:
    """Save a new version of the files at ``path`` and make it current; returns its name (``v-<hex>``).

    :param path: The store folder; created if missing.
    :param write: Called once with a ``writer_type`` (a ``VersionWriter``); writes every file of the version
        through it.
    :param meta: JSON-serialisable metadata kept in the manifest; read back as ``VersionReader.meta``.
    :param fsync: Flush files and folders to disk before the version becomes current (turn off only for
        throw-away stores: without it a power loss can leave no loadable version).
    :param lock_timeout: Seconds to wait for another save into ``path`` to finish; ``None`` waits as long as it takes.
    :raises DocumentStoreError: ``path`` holds versions but no valid ``CURRENT`` (nothing is deleted), or an OS error.
    """
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _os_error("create the store folder", path, e) from e
    with saving_lock(path, LOCK, lock_timeout):
        current_version(path)  # refuses to save over versions it cannot account for
        name = _write_version(path, writer_type, write, meta, fsync)
        _remove_unused(path, name)
    return name


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_version(
    path: Path, writer_type: type[VersionWriter], write: Callable[[Any], None], meta: dict[str, Any], fsync: bool
) -> str:
    token = uuid.uuid4().hex
    name, folder = f"v-{token}", path / f"{_PARTIAL}{token}"
    try:
        os.mkdir(folder, 0o755)
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.close(os.open(LOCK, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644, dir_fd=dir_fd))
            writer = writer_type(folder, dir_fd, fsync)
            try:
                write(writer)
                if writer._open:
                    msg = f"Files {sorted(writer._open)} of the version being saved were left open; close them."
                    raise ValueError(msg)
            finally:
                writer._abort()
            data = manifest_bytes(writer._files, meta)
            fd = os.open(MANIFEST, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
            try:
                _write_all(fd, data)
                if fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            if fsync:
                os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        os.rename(folder, path / name)
        folder = path / name
        _swap_pointer(path, name, fsync)
    except BaseException as e:
        committed = False
        with contextlib.suppress(Exception):
            committed = _read_pointer(path) == name  # failed after the swap (fsync of the folder): keep it
        if not committed:
            shutil.rmtree(folder, ignore_errors=True)
        if isinstance(e, OSError):
            raise _os_error("save a version into", path, e) from e
        raise
    return name


def _swap_pointer(path: Path, name: str, fsync: bool) -> None:
    tmp = f"{POINTER}.{uuid.uuid4().hex}.tmp"
    dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
        try:
            _write_all(fd, name.encode("ascii"))
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if fsync:
            os.fsync(dir_fd)  # the renamed version folder
        try:
            os.replace(tmp, POINTER, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
        if fsync:
            os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _remove_unused(path: Path, current: str) -> None:
    """Remove the versions no reader holds and what killed saves left; the caller holds the store lock. Readers
    between reading ``CURRENT`` and locking their version hold ``.readers`` shared: the removal waits for them
    (:data:`_REMOVAL_WAIT` at most; after that, a later save removes what is left)."""
    with _readers_excluded(path) as excluded:
        if excluded:
            _remove_unpinned(path, current)


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


def _remove_unpinned(path: Path, current: str) -> None:
    try:
        entries = list(os.scandir(path))
    except OSError as e:
        logger.warning("Could not list %s to remove old versions: %s", path, e)
        return
    for entry in entries:
        try:
            if entry.name == current or entry.is_symlink():
                continue
            if _VERSION_NAME_RE.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
                _remove_version(path, entry.name)
            elif entry.name.startswith((_PARTIAL, _TRASH)) and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            elif entry.name.startswith(f"{POINTER}.") and entry.name.endswith(".tmp") and entry.is_file():
                os.unlink(entry.path)
        except OSError as e:
            logger.warning("Could not remove %s (a later save retries): %s", entry.path, e)


def _remove_version(path: Path, name: str) -> None:
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
                return  # a reader holds it; a later save removes it
        trash = path / f"{_TRASH}{name[2:]}"
        os.rename(path / name, trash)  # new readers no longer find it
        if fd is not None:
            os.unlink(trash / LOCK)  # readers waiting on its lock see it unlinked and retry
    finally:
        if fd is not None:
            close_lock_fd(fd)
    shutil.rmtree(trash)


# --------------------------------------------------------------------------------------------------- reading


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
                digests = _file_digests(fd, entry["bytes"], entry["block_bytes"], self._checksum)
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
    fcntl = fcntl_module()
    fd = None
    for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
        try:
            fd = open_lock_fd(path / READERS, flags)
            break
        except OSError:
            continue
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        if fd is not None:
            close_lock_fd(fd)


def _lock_current(path: Path) -> tuple[str, int, int]:
    """Find the current version and lock it shared; returns its name, a folder fd and the lock fd."""
    fcntl = fcntl_module()

    def lock(name: str, again: bool) -> tuple[str, int, int] | None:
        try:
            dir_fd = os.open(path / name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            if again:
                _check_version_dir(path, name)  # still missing: raises
            return None
        except OSError as e:
            _check_version_dir(path, name)  # a symbolic link or not a folder: raises
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
        found = _follow_current(path, lock)
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
