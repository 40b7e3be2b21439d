"""Crash-safe, concurrent, checksummed versions of a set of files in a folder (Linux only: uses ``fcntl.flock``);
backend-neutral (a store passes its index's reader and writer in as callbacks).

A folder holds versions, one of them current::

    path/.lock                  locked exclusively by a save: savers (processes and threads) take turns
    path/.readers               locked shared by a reader from reading CURRENT until it holds that version's lock,
                                exclusively by a save while it renames old versions aside: a reader's version is
                                never removed under it, however slow the file system, so a load never has to retry
                                (a load waits ``reading.PIN_WAIT`` seconds at most for a save holding it, then
                                names that process: one stopped or hung mid-removal does not block loads forever)
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

The jobs live in modules of their own: ``pointer`` reads ``CURRENT`` (and holds the folder's names), ``saving`` writes
and commits a version, ``cleanup`` removes old ones, ``reading`` opens and verifies one; ``manifest`` holds the
manifest format and checksums, ``file_digests`` a file's block checksums, ``locking`` the flocks and the after-fork
hook. This package gathers their public names.
"""

from haystack_mvr.document_stores.versioned_folder.manifest import MANIFEST, UnsupportedFormatError
from haystack_mvr.document_stores.versioned_folder.pointer import LOCK, POINTER, current_version
from haystack_mvr.document_stores.versioned_folder.reading import VersionReader, open_version
from haystack_mvr.document_stores.versioned_folder.saving import VersionFile, VersionWriter, save_version

__all__ = [
    "LOCK",
    "MANIFEST",
    "POINTER",
    "UnsupportedFormatError",
    "VersionFile",
    "VersionReader",
    "VersionWriter",
    "current_version",
    "open_version",
    "save_version",
]
