"""Crash-safe, concurrent, checksummed versions of a set of files in a folder; backend-neutral (a store passes its
index's reader and writer in as callbacks). ``versions`` describes the folder and gathers the public names;
``pointer`` reads ``CURRENT``, ``saving`` writes and commits a version, ``cleanup`` removes old ones, ``reading``
opens and verifies one; ``manifest`` holds the manifest format and checksums, ``file_digests`` a file's block
checksums, ``locking`` the flocks and the after-fork hook."""

from haystack_mvr.document_stores.versioned_folder.manifest import MANIFEST, UnsupportedFormatError
from haystack_mvr.document_stores.versioned_folder.pointer import POINTER, current_version
from haystack_mvr.document_stores.versioned_folder.reading import VersionReader, open_version
from haystack_mvr.document_stores.versioned_folder.saving import VersionFile, VersionWriter, save_version

__all__ = [
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
