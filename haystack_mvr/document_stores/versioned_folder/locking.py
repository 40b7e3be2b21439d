"""The locks of a versioned folder: ``fcntl.flock`` on lock files, one thread lock per folder, and the after-fork
hook that lets a forked child drop its copies of the parent's locks.

A flock belongs to an open file description, which a forked child shares: a child keeping a copy of a lock fd would
hold the lock until it exits (and block every later save, or keep an old version). Lock fds are therefore registered,
and a forked child lets go of its copies. Importing this module has no effect: ``fcntl`` is imported, and the hook
registered, at the first lock (a platform without ``fcntl`` gets a ``DocumentStoreError`` then).

File-locking libraries (``filelock``, ``portalocker``) wrap the same ``flock`` call but handle neither shared locks
on a file a save may unlink nor lock fds inherited by a forked child, which is what this module is for.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from haystack.document_stores.errors import DocumentStoreError

_folder_thread_locks: dict[str, threading.Lock] = {}  # one per folder: threads of a process save in turn
_folder_thread_locks_guard = threading.Lock()
_lock_fds: dict[int, int] = {}  # open lock fd -> ident of the thread holding it
_fork_guard = threading.Lock()  # held across opening/closing a lock fd and its (de)registration, and across fork
_fcntl: ModuleType | None = None  # set by fcntl_module() at the first lock
_fcntl_guard = threading.Lock()  # held only while the after-fork hook is registered


def fail(msg: str, cause: BaseException | None = None) -> DocumentStoreError:
    error = DocumentStoreError(msg)
    error.__cause__ = cause
    return error


def os_error(what: str, where: Path | str, e: OSError) -> DocumentStoreError:
    return fail(f"Could not {what} {where}: {e.strerror or e.__class__.__name__} (errno {e.errno}).", e)


def fcntl_module() -> ModuleType:
    """The ``fcntl`` module, imported at the first call, which also registers the after-fork hook (once, whichever
    thread gets here first). Every path that takes a lock calls it first, so no lock exists before the hook does.

    :raises DocumentStoreError: the platform has no ``fcntl`` (Windows), naming what still works.
    """
    global _fcntl
    if _fcntl is not None:
        return _fcntl
    try:
        import fcntl
    except ImportError as e:
        msg = (
            f"Saving and loading a multi-view store needs fcntl.flock, which this platform ({sys.platform}) lacks; "
            "use the store in memory (no index_path, no save or load), or run on Linux."
        )
        raise fail(msg, e) from e
    with _fcntl_guard:
        if _fcntl is None:
            os.register_at_fork(
                before=_fork_guard.acquire, after_in_parent=_fork_guard.release, after_in_child=_after_fork_in_child
            )
            _fcntl = fcntl
    return _fcntl


def open_lock_fd(path: str | Path, flags: int, dir_fd: int | None = None) -> int:
    fcntl_module()  # the after-fork hook exists before any lock fd does
    with _fork_guard:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
        _lock_fds[fd] = threading.get_ident()
    return fd


def close_lock_fd(fd: int) -> None:
    with _fork_guard:
        del _lock_fds[fd]
        os.close(fd)  # releases the flock (unless a forked child still shares it: see _after_fork_in_child)


def _after_fork_in_child() -> None:
    """Let go of the parent's locks: the child does not inherit them (a reader's block goes on, unlocked)."""
    global _folder_thread_locks, _folder_thread_locks_guard
    _folder_thread_locks, _folder_thread_locks_guard = {}, threading.Lock()  # their holders did not survive the fork
    me = threading.get_ident()
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:
            for fd, owner in list(_lock_fds.items()):
                if owner == me:  # this thread closes it later: keep the number taken, on /dev/null
                    os.dup2(null, fd)
                else:  # no thread of the child will close it
                    del _lock_fds[fd]
                    os.close(fd)
        finally:
            os.close(null)
    _fork_guard.release()


@contextlib.contextmanager
def saving_lock(folder: Path, lock_file: str, timeout: float | None) -> Iterator[None]:
    """Hold ``folder``'s save lock: its thread lock, then an exclusive flock on ``folder/lock_file`` (which records
    the holder's pid, for the message of a save that times out)."""
    fcntl_module()  # the after-fork hook exists before the thread lock is taken
    lock_path = folder / lock_file
    deadline = None if timeout is None else time.monotonic() + timeout
    with _folder_thread_locks_guard:
        thread_lock = _folder_thread_locks.setdefault(os.path.realpath(folder), threading.Lock())
    if not thread_lock.acquire(timeout=-1 if timeout is None else timeout):
        msg = f"Another thread of this process kept saving into {folder} for more than {timeout} s; try again later."
        raise DocumentStoreError(msg)
    try:
        try:
            fd = open_lock_fd(lock_path, os.O_RDWR | os.O_CREAT)
        except OSError as e:
            raise os_error("open the store lock", lock_path, e) from e
        try:
            try:
                _flock_exclusive(fd, lock_path, deadline)
            except OSError as e:
                raise os_error("lock", lock_path, e) from e
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
            yield
        finally:
            close_lock_fd(fd)
    finally:
        thread_lock.release()


def _flock_exclusive(fd: int, lock_path: Path, deadline: float | None) -> None:
    fcntl = fcntl_module()
    if deadline is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                with contextlib.suppress(OSError, ValueError):
                    holder = int(os.pread(fd, 16, 0))
                    msg = (
                        f"Process {holder} is saving into {lock_path.parent} (it holds {lock_path}) and did not "
                        f"finish in time; try again later, or stop that process if it hangs."
                    )
                    raise DocumentStoreError(msg) from None
                msg = f"Another process holds {lock_path} and did not finish saving in time; try again later."
                raise DocumentStoreError(msg) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.1)
