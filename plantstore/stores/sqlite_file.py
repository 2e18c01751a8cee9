"""Which SQLite file a store answers for: the one it opened, never one put at its path since.

SQLite names a database by its path, and checks nothing more. A file removed or replaced while
the service runs stays open in the connections that have it, which go on taking writes that
nobody will read again. A connection opened afterwards finds whatever is at the path now (or
makes an empty database there), and beside it, named by the path too, the write-ahead log of
the file it replaced, which it reads and writes as one database with the new file: plants it
never acknowledged, or "database disk image is malformed". tests/stores/test_unavailable.py shows
sqlite3 alone opening a replaced file without a word.

So a store names its file by device and inode, checks after each call that the path still
names it, and once it does not, refuses every call until the service restarts: reopening the
path would quietly serve whatever is there now, and only its operator knows whether that is
right. The service's start names the file it started with (`plantstore.stores.prepare_store`
gives it), and every store opened for it, in workers started after a SIGHUP or in place of
one that died too, refuses another file without opening it.

Here too are the store's connections to its file, one a thread, each checked as it opens.
"""

import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

from plantstore.core.stores import StoreUnavailable
from plantstore.stores.sqlite_schema import damaged_or_out_of_reach, set_up

logger = logging.getLogger(__name__)

FileIdentity = tuple[int, int]


def identity(path: str) -> FileIdentity | None:
    """Name the file at `path` by its device and inode, or None when there is none."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


class FileGuard:
    """Refuse, from the first time it is seen and for good, a file other than the store's.

    Args:
        path: the database's path.
        file: the file the store must answer for, checked at once; None to take the one its
            first connection opens or makes (`settle`).
    """

    def __init__(self, path: str, file: FileIdentity | None) -> None:
        self._path = path
        self._file = file
        self._lock = threading.Lock()
        self._lost: str | None = None
        if file is not None:
            self._look()

    @property
    def lost(self) -> bool:
        """Whether the path named another file, or none, at some check."""
        return self._lost is not None

    def settle(self) -> None:
        """Answer for the file at the path now, unless the store was given one."""
        self._file = self._file or identity(self._path)

    def check(self) -> None:
        """Raise `StoreUnavailable` if the path names another file now, or did once."""
        self._look()
        if self._lost is not None:
            raise StoreUnavailable(self._lost)

    def _look(self) -> None:
        """Tell the log, once, that the path names another file than the store's."""
        if self._lost is None and identity(self._path) != self._file:
            with self._lock:
                if self._lost is None:
                    self._lost = (
                        f"SQLite {self._path} was removed or replaced while in use: every request "
                        "is refused until the service restarts (a SIGHUP is not enough), since "
                        "the plants it acknowledged are in the file it started with"
                    )
                    logger.error("%s", self._lost)


class SqliteFile:
    """The file a store answers for (`FileGuard`), and each thread's connection to it.

    Args:
        path: the database's path.
        busy_timeout: seconds a connection waits for another's lock.
        started_with: the file the service started with; None to take the one the first
            connection opens or makes.
    """

    def __init__(self, path: str, busy_timeout: float, started_with: FileIdentity | None) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self.guard = FileGuard(path, started_with)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def first_connection(self, create: bool) -> sqlite3.Connection:
        """Open this thread's connection, the store's first, answering for the file it opens."""
        connection = self.open(create)
        self.guard.settle()
        self._local.connection = self._register(connection)
        return connection

    def connection(self) -> sqlite3.Connection:
        """The calling thread's connection, opened on its first use."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._register(self.open(create=False))
            self._local.connection = connection
            # Opened on whatever is at the path now: write nothing to another file.
            self.guard.check()
        return connection

    def open(self, create: bool, busy_timeout: float | None = None) -> sqlite3.Connection:
        """Connect to the file; only the store's first connection may make it.

        A later one that made the file would make an empty database where the store's was
        removed, which the next process to start would take for the store's own.
        """
        busy_timeout = self.busy_timeout if busy_timeout is None else busy_timeout
        # Autocommit: each statement is its own transaction. `check_same_thread` is off only
        # so that `close` may close every thread's connection; each is used by its own.
        connection = sqlite3.connect(
            f"file:{quote(self.path)}?mode={'rwc' if create else 'rw'}",
            uri=True,
            timeout=busy_timeout,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            set_up(connection, busy_timeout)
        except sqlite3.Error:
            connection.close()
            raise
        return connection

    @contextmanager
    def served(self) -> Iterator[None]:
        """Answer for the database only while it is the file opened; its failures are unavailable.

        The file is checked once the work is done, so that nothing done to a file that was
        replaced meanwhile is answered as done; and when the work failed, since a file replaced
        is then the cause to tell.
        """
        if self.guard.lost:
            self.guard.check()
        try:
            yield
        except sqlite3.Error as ex:
            if not damaged_or_out_of_reach(ex):
                raise
            self.guard.check()
            raise StoreUnavailable(f"SQLite {self.path}: {ex}") from ex
        self.guard.check()

    def close(self) -> None:
        """Close every thread's connection; the last one to close folds the log into the file."""
        with self._lock:
            for connection in self._connections:
                connection.close()
            self._connections.clear()

    def _register(self, connection: sqlite3.Connection) -> sqlite3.Connection:
        """Keep `connection` for `close`."""
        with self._lock:
            self._connections.append(connection)
        return connection
