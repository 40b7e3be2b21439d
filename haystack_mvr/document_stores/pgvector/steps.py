"""Reads written once for both connections: a read is a generator of SQL steps, run by a sync or async driver.

A step is a :class:`~haystack_mvr.document_stores.pgvector.sql_fragments.Fragment` the generator yields; the driver
executes it and sends back its rows (a list of tuples). The generator's return value is the read's result. So the
search, the filter resolution and the reads of documents have one implementation, run by :func:`run` on the
store's ``psycopg.Connection`` and by :func:`run_async` on its ``AsyncConnection``, each inside one read-only
``REPEATABLE READ`` transaction: every step reads the same snapshot, so a document and its views always come from
the same committed write, and search settings such as ``hnsw.ef_search`` are set for that transaction only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import Any, TypeVar

import psycopg

from haystack_mvr.document_stores.pgvector.sql_fragments import Fragment

_T = TypeVar("_T")
Steps = Generator[Fragment, list[tuple[Any, ...]], _T]
#: How a read's transaction begins: one snapshot for all its steps, no writes.
_BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


def drive(steps: Steps[_T], conn: psycopg.Connection) -> _T:
    """Run ``steps`` on ``conn`` in whatever transaction it is in; their result."""
    try:
        step = next(steps)
        while True:
            cursor = conn.execute(step.text, step.params, binary=True)
            rows = cursor.fetchall() if cursor.description is not None else []
            step = steps.send(rows)
    except StopIteration as stop:
        return stop.value


def run(steps: Steps[_T], conn: psycopg.Connection) -> _T:
    """Run ``steps`` on ``conn`` (in autocommit mode) in one read-only snapshot transaction; their result."""
    conn.execute(_BEGIN)
    try:
        result = drive(steps, conn)
    except BaseException:
        _rollback(conn)
        raise
    conn.execute("COMMIT")
    return result


def _rollback(conn: psycopg.Connection) -> None:
    if not conn.closed and not conn.broken:
        with contextlib.suppress(psycopg.Error):  # the connection broke meanwhile: the caller's error says so
            conn.execute("ROLLBACK")


async def run_async(steps: Steps[_T], conn: psycopg.AsyncConnection) -> _T:
    """:func:`run` on an ``AsyncConnection``."""
    await conn.execute(_BEGIN)
    try:
        try:
            step = next(steps)
            while True:
                cursor = await conn.execute(step.text, step.params, binary=True)
                rows = await cursor.fetchall() if cursor.description is not None else []
                step = steps.send(rows)
        except StopIteration as stop:
            result = stop.value
    except BaseException:
        if not conn.closed and not conn.broken:
            with contextlib.suppress(psycopg.Error):
                await conn.execute("ROLLBACK")
        raise
    await conn.execute("COMMIT")
    return result


__all__ = ["Steps", "drive", "run", "run_async"]
