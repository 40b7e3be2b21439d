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
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                msg = f"{where}: not valid JSON ({e.msg})."
                raise ValueError(msg) from e
            if not isinstance(record, dict):
                msg = f"{where}: expected a JSON object."
                raise ValueError(msg)
            yield where, record
