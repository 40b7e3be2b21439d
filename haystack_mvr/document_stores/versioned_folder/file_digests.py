"""A file's block checksums, as a version's manifest records them and a reader verifies them."""

from __future__ import annotations

import mmap

from haystack_mvr.document_stores.versioned_folder.manifest import BLOCK_DIGESTS


def file_digests(fd: int, size: int, block: int, checksum: str) -> list[str]:
    """The checksum of each ``block``-byte block of the ``size``-byte file at ``fd``, hashed from a read-only map of
    it (no copy: from the page cache, just written or about to be read; a file shorter than ``size`` raises
    ``ValueError``). Files of a version are never modified once written."""
    if not size:
        return []
    digest = BLOCK_DIGESTS[checksum]
    with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mapped, memoryview(mapped) as view:
        return [digest(view[start : start + block]) for start in range(0, size, block)]
