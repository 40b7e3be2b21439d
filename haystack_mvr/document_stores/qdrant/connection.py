"""A store's connection to Qdrant: its clients, opened on first use, and the lock serializing its calls.

Stores opened on the same local folder in one process share one client and one call lock (:class:`LocalClients`);
a ``:memory:`` store has its own in-process engine; a server store its own ``QdrantClient`` and, for the
asynchronous search, ``AsyncQdrantClient``. Clients belong to the process that opened them
(:meth:`Connection.check_process`).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

from haystack.document_stores.errors import DocumentStoreError
from haystack.utils import Secret
from qdrant_client import AsyncQdrantClient, QdrantClient


def do_nothing(*args: Any, **kwargs: Any) -> None:
    """Stands in for ``close`` on a client this process must neither use nor close (a fork's copy)."""
    return None


class LocalClients:
    """
    One ``QdrantClient`` per local storage folder in this process, shared by every store opened on it.

    Local mode locks its folder against a second client, so two stores on the same ``path`` (a pipeline loaded
    back from YAML next to the one that wrote it) share one client, and one call lock serializing calls to it.
    The call lock of a folder exists from the first store constructed on it and is never replaced, so two
    threads are never inside the engine at once. The client is closed when the last store using it is closed or
    garbage-collected.

    After ``fork()`` the child holds copies of the parent's clients and of their folder locks: the child never
    uses them (stores refuse, see ``QdrantMultiViewDocumentStore._check_process``) and never closes them, since
    closing a copy would release the parent's folder lock and let a third process open the folder.
    """

    def __init__(self) -> None:
        # Re-entrant: a store's finalizer (``release``) may run from garbage collection inside ``acquire``.
        self._lock = threading.RLock()
        self._open: dict[str, list[Any]] = {}  # realpath -> [client, users]
        self._call_locks: dict[str, threading.RLock] = {}
        self._inherited: list[QdrantClient] = []  # a fork's copies of the parent's clients: kept, never closed
        self._watching_forks = False

    @staticmethod
    def key(path: str) -> str:
        return os.path.realpath(path)

    def call_lock(self, key: str) -> threading.RLock:
        """The lock serializing every call on the folder ``key`` in this process (one per folder, never replaced)."""
        with self._lock:
            return self._call_locks.setdefault(key, threading.RLock())

    def acquire(self, key: str) -> QdrantClient:
        with self._lock:
            self._watch_forks()
            entry = self._open.get(key)
            if entry is None:
                # Calls come from worker threads too (the async methods); the call lock serializes them.
                entry = self._open[key] = [QdrantClient(path=key, force_disable_check_same_thread=True), 0]
            entry[1] += 1
            return entry[0]

    def release(self, key: str, client: QdrantClient) -> None:
        with self._lock:
            entry = self._open.get(key)
            if entry is None or entry[0] is not client:  # closed already, or a fork's copy of the parent's
                return
            entry[1] -= 1
            if entry[1] <= 0:  # no store uses the client any more, so no call is in flight
                del self._open[key]
                entry[0].close()

    def _watch_forks(self) -> None:
        # Registered on first use, not at import: importing the store has no process-wide effect.
        if not self._watching_forks and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork_in_child)
            self._watching_forks = True

    def _after_fork_in_child(self) -> None:
        self._lock = threading.RLock()  # a parent thread may have held it during the fork
        for client, _users in self._open.values():
            client.close = do_nothing  # shadows the method for this copy, and for its __del__
            self._inherited.append(client)
        self._open = {}
        self._call_locks = {}


#: The process's registry, shared by every store opened on a ``path``.
LOCAL_CLIENTS = LocalClients()


def check_connection_options(location: str | None, url: str | None, path: str | None, api_key: Any) -> None:
    """Where the data lives: at most one of ``location``, ``url`` and ``path``; an ``api_key`` given as a Secret."""
    if sum(x is not None for x in (location, url, path)) > 1:
        msg = "Pass at most one of location, url and path."
        raise ValueError(msg)
    if api_key is not None and not isinstance(api_key, Secret):
        msg = "api_key must be a haystack.utils.Secret, e.g. Secret.from_env_var('QDRANT_API_KEY')."
        raise ValueError(msg)


def server_options(
    *, url: str | None, path: str | None, location: str | None, timeout: int | None, api_key: Secret | None
) -> dict[str, Any]:
    """The keyword arguments of a server's ``QdrantClient`` / ``AsyncQdrantClient`` (the API key resolved now)."""
    options: dict[str, Any] = {"timeout": timeout}
    if url is not None:
        options["url"] = url
    elif path is not None:
        options["path"] = path
    else:
        options["location"] = location
    if api_key is not None:
        options["api_key"] = api_key.resolve_value()
    return options


class Connection:
    """
    A store's clients, opened on first use, and the lock serializing its calls.

    A ``path`` folder's client comes from :data:`LOCAL_CLIENTS` and is released when the store owning the connection
    is closed or garbage-collected; otherwise the client is the store's own (``local``: an in-process ``:memory:``
    engine; else a server's client, made from ``server_options``).
    """

    def __init__(self, path: str | None) -> None:
        # Nothing is opened before the first call. A folder's call lock exists from here on, shared with every
        # store on the folder in this process, and is never replaced.
        self.path = path
        self.local_key: str | None = LOCAL_CLIENTS.key(path) if path is not None else None
        self.lock: threading.RLock = (
            LOCAL_CLIENTS.call_lock(self.local_key) if self.local_key is not None else threading.RLock()
        )
        self.client: QdrantClient | None = None
        self.async_client: AsyncQdrantClient | None = None
        self.pid: int | None = None  # the process that opened the clients
        self.finalizer: weakref.finalize | None = None

    def open(self, owner: object, *, local: bool, options: Callable[[], dict[str, Any]]) -> QdrantClient:
        """The client, opened on first use (a folder's is released when ``owner`` is garbage-collected)."""
        if self.client is None:
            with self.lock:
                if self.client is None:
                    self.client = self._new_client(owner, local, options)
                    self.pid = os.getpid()
        return self.client

    def _new_client(self, owner: object, local: bool, options: Callable[[], dict[str, Any]]) -> QdrantClient:
        if self.local_key is not None:
            key = self.local_key
            client = LOCAL_CLIENTS.acquire(key)
            self.finalizer = weakref.finalize(owner, LOCAL_CLIENTS.release, key, client)
            return client
        if local:
            return QdrantClient(location=":memory:")
        return QdrantClient(**options())

    def open_async(self, options: Callable[[], dict[str, Any]]) -> AsyncQdrantClient:
        """The server's ``AsyncQdrantClient``, opened on first use."""
        if self.async_client is None:
            self.async_client = AsyncQdrantClient(**options())
            self.pid = os.getpid()
        return self.async_client

    def check_process(self, *, local: bool) -> bool:
        """
        Refuse a ``path`` store in a ``fork()`` child of the process that opened it; reconnect a server store.

        The child holds a copy of the folder's engine: its writes would never reach the parent (which would go on
        serving what it holds) and could be overwritten by it. A ``:memory:`` store is a private copy in the child,
        as any Python object. A server store drops the parent's connections (closing them could disturb the
        parent's) and opens its own on the next call.

        :returns: Whether a server's clients inherited from the parent were dropped (the store's description of the
            collection goes with them).
        """
        pid = self.pid
        if pid is None or pid == os.getpid():
            return False
        if self.path is not None:
            msg = (
                f"This store opened the local Qdrant folder {self.path!r} in process {pid}; this process "
                f"({os.getpid()}) is a fork of it, and a folder is held by one process (a fork's writes never reach "
                "the parent, which would serve stale reads). Create the store after forking, in the process that "
                "uses it, or use a Qdrant server for several processes."
            )
            raise DocumentStoreError(msg)
        dropped = not local
        if dropped:
            if self.client is not None:
                self.client.close = do_nothing  # the parent's connections: neither used nor closed here
            self.client = None
            self.async_client = None
        self.pid = os.getpid()
        return dropped

    def close(self) -> None:
        """Close the clients (a local folder is released when no other store in this process uses it)."""
        with self.lock:
            if self.finalizer is not None:
                self.finalizer()
                self.finalizer = None
            elif self.client is not None and self.pid == os.getpid():
                self.client.close()
            self.client = None
            self.async_client = None
            self.pid = None

    async def close_async_client(self) -> None:
        """Await the ``AsyncQdrantClient``'s own close, when this process opened one."""
        if self.async_client is not None and self.pid == os.getpid():
            await self.async_client.close()


__all__ = [
    "LOCAL_CLIENTS",
    "Connection",
    "LocalClients",
    "check_connection_options",
    "do_nothing",
    "server_options",
]
