"""Crash-safe, concurrent, checksummed versions of a set of files in a folder; backend-neutral (a store passes its
index's reader and writer in as callbacks). ``versions`` holds the folder logic, ``manifest`` the manifest format and
checksums, ``locking`` the flocks and the after-fork hook."""

from haystack_mvr.document_stores.versioned_folder.manifest import MANIFEST, UnsupportedFormatError
from haystack_mvr.document_stores.versioned_folder.versions import (
    POINTER,
    VersionFile,
    VersionReader,
    VersionWriter,
    current_version,
    open_version,
    save_version,
)

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
