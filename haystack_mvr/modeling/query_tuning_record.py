"""What a query encoder tuned against a frozen index records (``query_tuning.json``) and the identity it takes: the
identity of the document encoder it was tuned against, so that the stores built with that encoder accept it (and
every other store refuses it, naming both fingerprints), plus its own fingerprint under ``query_fingerprint``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

QUERY_TUNING_FILE = "query_tuning.json"
FORMAT = 1


def tuned_record(document_encoder: dict[str, Any], *, query_fingerprint: str, kind: str) -> dict[str, Any]:
    """The record a tuned folder saves: the document encoder's identity, the tuned weights' fingerprint, the kind."""
    return {
        "format": FORMAT,
        "document_encoder": dict(document_encoder),
        "query_fingerprint": query_fingerprint,
        "kind": kind,
    }


def read_tuned_record(folder: str | Path) -> dict[str, Any] | None:
    """A tuned folder's record, or ``None`` for a folder that is none.

    :raises ValueError: a record that is not valid JSON, of an unknown format, or without a document encoder.
    """
    path = Path(folder) / QUERY_TUNING_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        msg = f"{path}: not a valid query-tuning record ({e})."
        raise ValueError(msg) from e
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        msg = f"{path}: a query-tuning record of an unknown format (this haystack-mvr reads format {FORMAT})."
        raise ValueError(msg)
    if not isinstance(record.get("document_encoder"), dict) or "fingerprint" not in record["document_encoder"]:
        msg = f"{path}: the record names no document encoder (its 'document_encoder' identity)."
        raise ValueError(msg)
    return record


def tuned_identity(document_encoder: dict[str, Any], query_fingerprint: str) -> dict[str, Any]:
    """The identity of a tuned query encoder, without its ``model``: the document encoder's, and the fingerprint of
    the tuned weights as ``query_fingerprint``."""
    identity = {k: v for k, v in document_encoder.items() if k != "model"}
    return {**identity, "query_fingerprint": query_fingerprint}
