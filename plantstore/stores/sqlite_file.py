"""Which SQLite file a store answers for: the one it opened, never one put at its path since.

SQLite names a database by its path, and checks nothing more. A file removed or replaced while
the service runs stays open in the connections that have it, which go on taking writes that
nobody will read again. A connection opened afterwards finds whatever is at the path now (or
makes an empty database there), and beside it, named by the path too, the write-ahead log of
the file it replaced, which it reads and writes as one database with the new file: plants it
never acknowledged, or "database disk image is malformed". tests/test_unavailable.py shows
sqlite3 alone opening a replaced file without a word.

So a store names its file by device and inode, checks after each call that the path still
names it, and once it does not, refuses every call until the service restarts: reopening the
path would quietly serve whatever is there now, and only its operator knows whether that is
right. gunicorn's master remembers the file the service started with (`remember_started_file`);
the workers it forks, those started after a SIGHUP or in place of one that died too, inherit
that, and refuse another file without opening it.
"""

import logging
import os
import threading

from plantstore.core.stores import StoreUnavailable

logger = logging.getLogger("plantstore.stores.sqlite")

FileIdentity = tuple[int, int]

#: The file the service started with, once gunicorn's master remembered it.
_started_with: FileIdentity | None = None


def identity(path: str) -> FileIdentity | None:
    """Name the file at `path` by its device and inode, or None when there is none."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


def remember_started_file(path: str) -> None:
    """Make the file at `path` the one every store this process opens, or forks, answers for."""
    global _started_with
    _started_with = identity(path)


def started_file() -> FileIdentity | None:
    """The file the service started with, if one was remembered."""
    return _started_with


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
