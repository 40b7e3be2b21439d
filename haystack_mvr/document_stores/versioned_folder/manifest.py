"""A version's ``manifest.json``: the caller's metadata, each file's size and the checksum of each of its blocks,
and the manifest's own CRC-32 (over its canonical JSON), so any damage to it is refused, never a different load.

Files are checksummed with XXH3-64 (``xxhash``, several times faster than zlib's CRC-32, so verifying a file costs
little beside FAISS reading it; ``benchmarks/results/versioned_directory_speed.md``): format version 2. Format 1
(CRC-32 blocks, haystack-mvr before XXH3) is still read; a haystack-mvr that reads only format 1 refuses format 2
asking for an upgrade. Both checksums guard against damage, not against tampering.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import xxhash
from haystack.document_stores.errors import DocumentStoreError

from haystack_mvr.document_stores.versioned_folder.locking import fail

FORMAT = "haystack-mvr.versioned-directory"
FORMAT_VERSION = 2  # of new saves
CHECKSUM = "xxh3_64"  # of new saves
_CHECKSUM_OF_VERSION = {1: "crc32", 2: "xxh3_64"}  # the format versions read
MANIFEST = "manifest.json"
BLOCK_DIGESTS: dict[str, Callable[[Any], str]] = {
    "xxh3_64": xxhash.xxh3_64_hexdigest,
    "crc32": lambda block: f"{zlib.crc32(block):08x}",
}
_DIGEST_RE = {"xxh3_64": re.compile(r"[0-9a-f]{16}"), "crc32": re.compile(r"[0-9a-f]{8}")}
FILE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class UnsupportedFormatError(DocumentStoreError):
    """A version's manifest is of another format (an older haystack-mvr layout, a newer format version) or damaged."""


def check_file_name(name: str) -> None:
    if not isinstance(name, str) or not FILE_NAME_RE.fullmatch(name) or name == MANIFEST:
        msg = (
            f"Invalid file name {name!r} for a saved version: use 1-128 letters, digits, '.', '_' or '-', "
            f"starting with a letter or digit, other than {MANIFEST!r}."
        )
        raise ValueError(msg)


def _canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def _crc_hex(data: bytes) -> str:
    return f"{zlib.crc32(data):08x}"


def manifest_bytes(files: dict[str, dict[str, Any]], meta: dict[str, Any]) -> bytes:
    """The manifest of a version holding ``files`` (name -> ``file_entry``) with the caller's ``meta``."""
    body = {"format": FORMAT, "format_version": FORMAT_VERSION, "checksum": CHECKSUM, "files": files, "meta": meta}
    try:
        crc = _crc_hex(_canonical(body))
    except (TypeError, ValueError) as e:
        msg = f"The manifest metadata must be JSON-serialisable (str keys, no NaN): {e}"
        raise ValueError(msg) from e
    return json.dumps({**body, "manifest_crc32": crc}, sort_keys=True, indent=1, ensure_ascii=True).encode() + b"\n"


def file_entry(size: int, block_bytes: int, digests: list[str]) -> dict[str, Any]:
    return {"bytes": size, "block_bytes": block_bytes, CHECKSUM: digests}


def _reject_constant(name: str) -> None:
    raise ValueError(name)


def parse_manifest(data: bytes, where: Path) -> dict[str, Any]:
    """The manifest in ``data`` (read from ``where``), checked against its own checksum and its expected shape."""
    damaged = f"The saved version's manifest {where} is damaged"
    fix = "; restore the folder from a backup, or save the store again"
    try:
        manifest = json.loads(data.decode("ascii"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        msg = f"{damaged}: it is not valid JSON ({e.__class__.__name__}){fix}."
        raise fail(msg, None) from None
    if not isinstance(manifest, dict):
        msg = f"{damaged}: it is not a JSON object{fix}."
        raise fail(msg)
    if manifest.get("format") != FORMAT:
        msg = (
            f"{where} is not a manifest of format {FORMAT!r}: it is damaged, or was written by an older haystack-mvr "
            f"(load it with that version and save it again){fix}."
        )
        raise UnsupportedFormatError(msg)
    version = manifest.get("format_version")
    if type(version) is not int or version not in _CHECKSUM_OF_VERSION:
        msg = (
            f"{where} has another manifest format version than the one this haystack-mvr reads ({FORMAT_VERSION}), "
            f"or is damaged: upgrade haystack-mvr, or save the store again."
        )
        raise UnsupportedFormatError(msg)
    crc = manifest.pop("manifest_crc32", None)
    if set(manifest) != {"format", "format_version", "checksum", "files", "meta"} or not isinstance(crc, str):
        msg = f"{damaged}: its fields are not the expected ones{fix}."
        raise fail(msg)
    try:
        actual = _crc_hex(_canonical(manifest))
    except (TypeError, ValueError):
        actual = None
    if actual != crc:
        msg = f"{damaged}: it does not match its own checksum{fix}."
        raise fail(msg)
    files, meta, checksum = manifest["files"], manifest["meta"], manifest["checksum"]
    if checksum != _CHECKSUM_OF_VERSION[manifest["format_version"]] or not (
        isinstance(files, dict) and isinstance(meta, dict)
    ):
        msg = f"{damaged}: its fields are not the expected ones{fix}."
        raise fail(msg)
    for name, entry in files.items():
        ok = (
            FILE_NAME_RE.fullmatch(name) is not None
            and name != MANIFEST
            and isinstance(entry, dict)
            and set(entry) == {"bytes", "block_bytes", checksum}
            and type(entry["bytes"]) is int
            and entry["bytes"] >= 0
            and type(entry["block_bytes"]) is int
            and 4096 <= entry["block_bytes"] <= 1 << 30
            and isinstance(entry[checksum], list)
            and len(entry[checksum]) == -(-entry["bytes"] // entry["block_bytes"])
            and all(isinstance(c, str) and _DIGEST_RE[checksum].fullmatch(c) for c in entry[checksum])
        )
        if not ok:
            msg = f"{damaged}: its entry for a file is malformed{fix}."
            raise fail(msg)
    return manifest
