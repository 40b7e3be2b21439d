"""Saving a version: its files written through a ``VersionWriter`` into ``.partial-<hex>``, checksummed and fsynced,
the folder renamed ``v-<hex>``, then ``CURRENT`` swapped to it atomically; old versions removed after
(``cleanup``)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from haystack_mvr.document_stores.versioned_folder.cleanup import remove_unused
from haystack_mvr.document_stores.versioned_folder.file_digests import file_digests
from haystack_mvr.document_stores.versioned_folder.locking import os_error as _os_error
from haystack_mvr.document_stores.versioned_folder.locking import saving_lock
from haystack_mvr.document_stores.versioned_folder.manifest import (
    CHECKSUM,
    MANIFEST,
    check_file_name,
    file_entry,
    manifest_bytes,
)
from haystack_mvr.document_stores.versioned_folder.pointer import LOCK, PARTIAL, POINTER, current_version, read_pointer

BLOCK = 4 << 20  # each 4 MiB block of a file has its own checksum


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
            digests = file_digests(fd, size, BLOCK, CHECKSUM)
            if self._fsync:
                os.fsync(fd)
        except OSError as e:
            raise _os_error("write", self.folder / name, e) from e
        self._open.pop(name, None)
        self._files[name] = file_entry(size, BLOCK, digests)

    def _abort(self) -> None:
        for file in list(self._open.values()):
            file._discard()


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
        remove_unused(path, name)
    return name


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_version(
    path: Path, writer_type: type[VersionWriter], write: Callable[[Any], None], meta: dict[str, Any], fsync: bool
) -> str:
    token = uuid.uuid4().hex
    name, folder = f"v-{token}", path / f"{PARTIAL}{token}"
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
            committed = read_pointer(path) == name  # failed after the swap (fsync of the folder): keep it
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
