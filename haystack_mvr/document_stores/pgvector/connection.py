"""A store's connections to PostgreSQL: opened on first use, the ``vector`` extension checked, and lost ones replaced.

One synchronous connection (autocommit; every write runs in an explicit transaction) serves the store's calls, one
at a time under its lock; the asynchronous search has its own ``AsyncConnection`` per event loop. Errors name the
server as ``user@host:port/database`` and never the password. A connection that breaks (the server restarted, a
network cut, an administrator ended the session) fails its call with a one-line ``DocumentStoreError`` and is
dropped; the next call connects again. A connection inherited through ``fork()`` is never used or closed by the
child (closing it would end the parent's session): the child opens its own.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from haystack.document_stores.errors import DocumentStoreError
from haystack.utils import Secret
from pgvector.psycopg import register_vector, register_vector_async
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict

#: Seconds to wait for the server when connecting (a dead host fails fast, not after the OS's TCP timeout).
CONNECT_TIMEOUT_S = 10


class ConnectionLostError(DocumentStoreError, ConnectionError):
    """The connection to PostgreSQL broke during a call; the next call connects again."""


def server_name(conninfo: str) -> str:
    """``user@host:port/database`` of a connection string, without its password (``?`` for what it leaves out)."""
    try:
        parts = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "an unparsable connection string"
    host = parts.get("host") or parts.get("hostaddr") or os.environ.get("PGHOST") or "localhost"
    port = parts.get("port") or os.environ.get("PGPORT") or "5432"
    user = parts.get("user") or os.environ.get("PGUSER") or "?"
    dbname = parts.get("dbname") or os.environ.get("PGDATABASE") or user
    return f"{user}@{host}:{port}/{dbname}"


def _password(conninfo: str) -> str | None:
    try:
        return conninfo_to_dict(conninfo).get("password") or None
    except psycopg.ProgrammingError:
        return None


def one_line(error: BaseException, conninfo: str) -> str:
    """The first line of a driver error, with the password (should the driver ever echo it) blanked out."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    password = _password(conninfo)
    return text.replace(password, "***") if password else text


def _extension_message(where: str, error: BaseException | None) -> str:
    reason = "" if error is None else f" ({error})"
    return (
        f"The pgvector extension 'vector' is not installed in {where} and this user may not create it{reason}: ask "
        "the database owner to run CREATE EXTENSION vector (on a managed PostgreSQL, enable pgvector), or connect "
        "as a user allowed to create it."
    )


def _check_extension(conn: psycopg.Connection, create: bool, where: str) -> None:
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
        return
    if not create:
        msg = (
            f"The pgvector extension 'vector' is not installed in {where}: run CREATE EXTENSION vector, or pass "
            "create_extension=True to let the store create it."
        )
        raise DocumentStoreError(msg)
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except pg_errors.InsufficientPrivilege as e:
        raise DocumentStoreError(_extension_message(where, one_line(e, ""))) from e
    except (pg_errors.UniqueViolation, pg_errors.DuplicateObject):  # another client created it at the same moment
        pass
    except pg_errors.FeatureNotSupported as e:  # not available on the server at all
        raise DocumentStoreError(_extension_message(where, one_line(e, ""))) from e


async def _check_extension_async(conn: psycopg.AsyncConnection, where: str) -> None:
    cursor = await conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
    if not await cursor.fetchone():
        msg = f"The pgvector extension 'vector' is not installed in {where}: run CREATE EXTENSION vector."
        raise DocumentStoreError(msg)


class Connection:
    """The store's connections, opened on first use (see the module docs)."""

    def __init__(self, secret: Secret, create_extension: bool) -> None:
        self.secret = secret
        self.create_extension = create_extension
        self.lock = threading.RLock()
        self.conn: psycopg.Connection | None = None
        self.pid: int | None = None
        self._async: dict[int, tuple[asyncio.AbstractEventLoop, psycopg.AsyncConnection]] = {}
        self._async_locks: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Lock]] = {}
        self._inherited: list[Any] = []  # a fork's copies of the parent's connections: kept, never closed

    def conninfo(self) -> str:
        value = self.secret.resolve_value()
        if not value:
            msg = (
                "No PostgreSQL connection string: set the environment variable PG_CONN_STR (e.g. "
                "postgresql://user:password@host:5432/db) or pass connection_string=Secret.from_token(...)."
            )
            raise DocumentStoreError(msg)
        return value

    @property
    def where(self) -> str:
        try:
            return server_name(self.conninfo())
        except DocumentStoreError:
            return "PostgreSQL"

    def _check_process(self) -> None:
        if self.pid is not None and self.pid != os.getpid():
            self._inherited.extend([self.conn, *(c for _, c in self._async.values())])
            self.conn, self._async, self.pid = None, {}, None

    def get(self) -> psycopg.Connection:
        """The open connection (call under :attr:`lock`), connecting first when there is none."""
        self._check_process()
        conn = self.conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        conninfo = self.conninfo()
        where = server_name(conninfo)
        try:
            conn = psycopg.connect(conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.OperationalError as e:
            msg = f"Cannot connect to PostgreSQL at {where}: {one_line(e, conninfo)}"
            raise DocumentStoreError(msg) from None
        try:
            _check_extension(conn, self.create_extension, where)
            register_vector(conn)
        except BaseException:
            conn.close()
            raise
        self.conn, self.pid = conn, os.getpid()
        return conn

    async def get_async(self) -> psycopg.AsyncConnection:
        """This event loop's open ``AsyncConnection``, connecting first when there is none."""
        self._check_process()
        loop = asyncio.get_running_loop()
        held = self._async.get(id(loop))
        if held is not None and held[0] is loop and not held[1].closed and not held[1].broken:
            return held[1]
        conninfo = self.conninfo()
        where = server_name(conninfo)
        await asyncio.to_thread(self._ensure_extension)  # created, if allowed, by the synchronous connection
        try:
            conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.OperationalError as e:
            msg = f"Cannot connect to PostgreSQL at {where}: {one_line(e, conninfo)}"
            raise DocumentStoreError(msg) from None
        try:
            await _check_extension_async(conn, where)
            await register_vector_async(conn)
        except BaseException:
            await conn.close()
            raise
        for key, (old_loop, old) in list(self._async.items()):
            if old_loop.is_closed():  # a finished event loop's connection: its socket is closed here
                del self._async[key]
                old.pgconn.finish()
        self._async[id(loop)] = (loop, conn)
        self.pid = os.getpid()
        return conn

    def async_lock(self) -> asyncio.Lock:
        """The lock serializing this event loop's calls on its ``AsyncConnection`` (one transaction at a time)."""
        loop = asyncio.get_running_loop()
        held = self._async_locks.get(id(loop))
        if held is None or held[0] is not loop:
            self._async_locks = {k: v for k, v in self._async_locks.items() if not v[0].is_closed()}
            held = self._async_locks[id(loop)] = (loop, asyncio.Lock())
        return held[1]

    def _ensure_extension(self) -> None:
        with self.lock:
            self.get()

    @contextmanager
    def lost_as_error(self, what: str) -> Iterator[None]:
        """Turn a broken connection during ``what`` into a :class:`ConnectionLostError` (and drop the connection)."""
        try:
            yield
        except (psycopg.OperationalError, psycopg.InterfaceError) as e:
            if not self.is_lost():
                raise
            self.drop()
            msg = (
                f"Lost the connection to PostgreSQL at {self.where} during {what} ({one_line(e, '')}); the server "
                "rolled back what was not committed (a break during the commit itself may have let a write complete: "
                "write it again with DuplicatePolicy.OVERWRITE to be sure). The next call connects again."
            )
            raise ConnectionLostError(msg) from None

    def is_lost(self) -> bool:
        conn = self.conn
        if conn is not None and (conn.closed or conn.broken):
            return True
        return any(c.closed or c.broken for _, c in self._async.values())

    def drop(self) -> None:
        """Forget broken connections (closing what is left of them)."""
        conn = self.conn
        if conn is not None and (conn.closed or conn.broken):
            self.conn = None
            conn.close()
        for key, (_, c) in list(self._async.items()):
            if c.closed or c.broken:
                del self._async[key]
                c.pgconn.finish()

    def close(self) -> None:
        self._check_process()
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        for _, c in self._async.values():
            c.pgconn.finish()
        self._async = {}

    async def close_async(self) -> None:
        self._check_process()
        loop = asyncio.get_running_loop()
        held = self._async.pop(id(loop), None)
        if held is not None:
            await held[1].close()
        with self.lock:
            self.close()


__all__ = ["CONNECT_TIMEOUT_S", "Connection", "ConnectionLostError", "one_line", "server_name"]
