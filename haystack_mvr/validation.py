"""The argument check every layer shares: one meaning of "a positive integer" (no ``bool``; numpy integers accepted)."""

from __future__ import annotations

import numbers
from typing import Any


def check_positive_int(name: str, value: Any, *, optional: bool = False) -> int | None:
    """
    ``value`` as an ``int`` if it is a positive integer (``None`` too when ``optional``), else a ``ValueError``
    naming ``name``: ``check_positive_int("top_k", 0)`` raises "top_k must be a positive integer, got 0.".
    ``True`` is refused: it is a flag, not a count.
    """
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        msg = f"{name} must be a positive integer{' or None' if optional else ''}, got {value!r}."
        raise ValueError(msg)
    return int(value)
