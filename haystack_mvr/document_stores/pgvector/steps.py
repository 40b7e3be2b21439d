"""Reads written once for both connections: a read is a generator of SQL steps, run by a sync or async driver.

A step is a :class:`~haystack_mvr.document_stores.pgvector.sql_fragments.Fragment` the generator yields; the driver
executes it and sends back its rows (a list of tuples). The generator's return value is the read's result. So the
search, the filter resolution and the reads of documents have one implementation, run by :func:`run` on the
store's ``psycopg.Connection`` and by :func:`run_async` on its ``AsyncConnection``, each inside one read-only
``REPEATABLE READ`` transaction: every step reads the same snapshot, so a document and its views always come from
the same committed write, and search settings such as ``hnsw.ef_search`` are set for that transaction only.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

import psycopg

from haystack_mvr.document_stores.pgvector.sql_fragments import Fragment

_T = TypeVar("_T")
Steps = Generator[Fragment, list[tuple[Any, ...]], _T]
#: The first statement of a read's transaction: one snapshot for all its steps, no writes.
_SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"


def drive(steps: Steps[_T], conn: psycopg.Connection) -> _T:
    """Run ``steps`` on ``conn`` in whatever transaction it is in; their result."""
    try:
        step = next(steps)
        while True:
            cursor = conn.execute(step.text, step.params)
            rows = cursor.fetchall() if cursor.description is not None else []
            step = steps.send(rows)
    except StopIteration as stop:
        return stop.value


def run(steps: Steps[_T], conn: psycopg.Connection) -> _T:
    """Run ``steps`` on ``conn`` in one read-only snapshot transaction; their result."""
    with conn.transaction():
        conn.execute(_SNAPSHOT)
        return drive(steps, conn)


async def run_async(steps: Steps[_T], conn: psycopg.AsyncConnection) -> _T:
    """:func:`run` on an ``AsyncConnection``."""
    async with conn.transaction():
        await conn.execute(_SNAPSHOT)
        try:
            step = next(steps)
            while True:
                cursor = await conn.execute(step.text, step.params)
                rows = await cursor.fetchall() if cursor.description is not None else []
                step = steps.send(rows)
        except StopIteration as stop:
            return stop.value


__all__ = ["Steps", "drive", "run", "run_async"]
