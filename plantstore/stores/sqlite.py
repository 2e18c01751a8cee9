"""A store in a SQLite file: durable, and shared by every process on one machine."""

import sqlite3
import threading

from plantstore.stores import StoreUnavailable

_SETUP = (
    # Readers never wait for the writer, and a commit appends to the log instead of rewriting.
    "PRAGMA journal_mode = WAL",
    # In WAL mode FULL syncs the log at every commit: a plant answered with 200 is on disk.
    # NORMAL would keep the file consistent but could lose the last commits to a power cut.
    "PRAGMA synchronous = FULL",
    # The plant is its JSON document as text, which SQLite's JSON functions can read.
    "CREATE TABLE IF NOT EXISTS plants (id INTEGER PRIMARY KEY, plant TEXT NOT NULL)",
)


class SqliteStore:
    """Plants in a SQLite database file, one connection per thread.

    The database's primary key decides who wins an id, in one statement, so the duplicate rule
    holds across threads and processes. A plant is never changed once kept, so what the id
    holds after `INSERT ... ON CONFLICT DO NOTHING` is what it will always hold.

    Args:
        path: the database file; made, with its table, on first start.
        busy_timeout: seconds a write waits for another process's write before giving up.
    """

    def __init__(self, path: str, busy_timeout: float = 5.0) -> None:
        self._path = path
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._connection()

    def add(self, plant_id: int, plant: bytes) -> bytes:
        try:
            connection = self._connection()
            inserted = connection.execute(
                "INSERT INTO plants (id, plant) VALUES (?, ?) ON CONFLICT (id) DO NOTHING",
                (plant_id, plant.decode()),
            ).rowcount
            if inserted:
                return plant
            (kept,) = connection.execute(
                "SELECT plant FROM plants WHERE id = ?", (plant_id,)
            ).fetchone()
        except sqlite3.OperationalError as ex:
            raise StoreUnavailable(f"SQLite {self._path}: {ex}") from ex
        return kept.encode()

    def ready(self) -> bool:
        """Take the write lock and let it go: the service only ever writes."""
        try:
            connection = self._connection()
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("ROLLBACK")
        except (sqlite3.OperationalError, StoreUnavailable):
            return False
        return True

    def close(self) -> None:
        """Close every thread's connection; the last one to close folds the log into the file."""
        with self._lock:
            for connection in self._connections:
                connection.close()
            self._connections.clear()

    def _connection(self) -> sqlite3.Connection:
        """The calling thread's connection, opened (and the table made) on its first use."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._connect()
            self._local.connection = connection
        return connection

    def _connect(self) -> sqlite3.Connection:
        try:
            # Autocommit: each statement is its own transaction. `check_same_thread` is off only
            # so that `close` may close every thread's connection; each is used by its own.
            connection = sqlite3.connect(
                self._path,
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                for statement in _SETUP:
                    connection.execute(statement)
            except sqlite3.Error:
                connection.close()
                raise
        except sqlite3.OperationalError as ex:
            raise StoreUnavailable(f"SQLite {self._path}: {ex}") from ex
        with self._lock:
            self._connections.append(connection)
        return connection
