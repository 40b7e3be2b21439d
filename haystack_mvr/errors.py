"""Errors that are the caller's fault, told apart from a deployment's own failures.

Haystack's own components raise ``ValueError`` for a bad argument and ``haystack.errors.FilterError`` for a malformed
filter, and ``Pipeline.run`` wraps whatever a component raises in a ``PipelineRuntimeError``. A server (Hayhooks,
FastAPI) sees one exception type for a caller's empty query and for its own broken index. haystack-mvr raises
:class:`InvalidRequestError` (a ``ValueError``, so ``except ValueError`` still catches it) for the inputs of a run that
only the caller can fix, and :func:`client_error` finds such an error behind a ``PipelineRuntimeError``; a serving
layer answers it as a client error (HTTP 422), everything else as its own (500). See ``examples/hayhooks/``.
"""

from __future__ import annotations

from haystack.errors import FilterError

__all__ = ["InvalidFilterError", "InvalidRequestError", "client_error"]


class InvalidRequestError(ValueError):
    """A run input the caller got wrong: an empty query, ``top_k`` below 1 (a client error, HTTP 4xx when served)."""


class InvalidFilterError(InvalidRequestError, FilterError):
    """A malformed filter (a missing operator, a Haystack 1.x filter, a field that is not a string): Haystack's
    ``FilterError`` as stores raise it, and the caller's mistake."""


def client_error(error: BaseException) -> BaseException | None:
    """
    The caller's mistake that caused ``error``, or ``None`` when ``error`` is not the caller's fault.

    Follows ``error`` and its ``__cause__`` / ``__context__`` chain (``Pipeline.run`` raises ``PipelineRuntimeError``
    *from* the component's error) to the first :class:`InvalidRequestError` or Haystack ``FilterError`` (a filter
    with an unknown operator, a missing key, a comparison the values cannot make).
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, (InvalidRequestError, FilterError)):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
