"""Read JSON-lines files record by record, naming the file and line of anything malformed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def read_jsonl(path: str | Path, *, missing_hint: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """
    Yield ``(where, record)`` for every non-blank line; ``where`` is ``"<file>:<line>"`` for error messages.

    :raises FileNotFoundError: if ``path`` does not exist (``missing_hint`` is appended to the message).
    :raises ValueError: on a line that is not a JSON object, naming file and line.
    """
    path = Path(path)
    if not path.is_file():
        msg = f"{path} does not exist{f' ({missing_hint})' if missing_hint else ''}."
        raise FileNotFoundError(msg)
    with path.open("rb") as f:  # decoded a line at a time, so a byte that is not UTF-8 is named by its line
        for line_no, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")  # a byte order mark is read as none
            except UnicodeDecodeError as e:
                msg = f"{path}:{line_no}: not UTF-8 text (byte {raw[e.start : e.start + 1]!r} at column {e.start + 1})."
                raise ValueError(msg) from None
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                msg = f"{where}: not valid JSON ({e.msg.removesuffix(' at')} at column {e.colno})."
                raise ValueError(msg) from e
            if not isinstance(record, dict):
                msg = f"{where}: expected a JSON object."
                raise ValueError(msg)
            yield where, record
