"""FAISS indexes in a versioned folder: ``versioned_folder``'s writer and reader with ``faiss.write_index`` /
``faiss.read_index`` passed in as the callbacks, so FAISS writes and reads the file itself at its own speed (the
folder checksums the file after FAISS wrote it, and verifies it whole before FAISS reads it).

Example::

    def write(w: FaissVersionWriter) -> None:
        w.write_array("rows.npy", rows)
        w.write_faiss_index("index.faiss", index)

    save_version(path, write, {"embedding_dim": 384})
    with open_version(path) as version:
        index = version.read_faiss_index("index.faiss")
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from haystack.document_stores.errors import DocumentStoreError

from haystack_mvr.document_stores import versioned_folder
from haystack_mvr.document_stores.faiss.faiss_import import faiss


class FaissVersionWriter(versioned_folder.VersionWriter):
    def write_faiss_index(self, name: str, index: Any) -> None:
        """Write a FAISS index as file ``name`` with ``faiss.write_index``."""

        def write(file: str) -> None:
            try:
                faiss.write_index(index, file)
            except RuntimeError as e:  # a full disk, an index FAISS cannot serialise
                msg = f"FAISS could not write {self.folder / name}: {e}"
                raise DocumentStoreError(msg) from e

        self.write_file(name, write)


class FaissVersionReader(versioned_folder.VersionReader):
    def read_faiss_index(self, name: str, io_flags: int = 0) -> Any:
        """The FAISS index in file ``name``, read by ``faiss.read_index`` (with ``io_flags``, such as
        ``faiss.IO_FLAG_MMAP``) once the whole file is verified."""

        def read(file: str) -> Any:
            try:
                return faiss.read_index(file, io_flags)
            except RuntimeError as e:
                msg = f"FAISS could not read {self.folder / name} (it matched its checksums): {e}"
                raise DocumentStoreError(msg) from e

        return self.read_file(name, read)


def save_version(path: str | Path, write: Callable[[FaissVersionWriter], None], meta: dict[str, Any], **kwargs) -> str:
    """``versioned_folder.save_version`` with a writer that also writes FAISS indexes."""
    return versioned_folder.save_version(path, write, meta, writer_type=FaissVersionWriter, **kwargs)


@contextlib.contextmanager
def open_version(path: str | Path) -> Iterator[FaissVersionReader]:
    """``versioned_folder.open_version`` with a reader that also reads FAISS indexes."""
    with versioned_folder.open_version(path, FaissVersionReader) as reader:
        yield reader
