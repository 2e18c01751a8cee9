"""A store in a SQLite file: durable, and shared by every process on one machine."""

import fcntl
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from functools import partial
from urllib.parse import quote

from plantstore.core.events import Event, plant_created, plant_deleted, plant_updated
from plantstore.core.plants import Condition, ConditionFailed, Page, Put, fill_page, same_plant
from plantstore.core.stores import Delivery, StoreUnavailable, StoreUnusable
from plantstore.stores.group_commit import Change, GroupCommit, make_each
from plantstore.stores.sql import (
    Commits,
    claim_statement,
    deliveries,
    keys_of_urls,
    outbox_rows,
    outbox_statements,
    page_query,
    steps_to_take,
    tag_key,
)
from plantstore.stores.sqlite_file import FileGuard, FileIdentity

#: Seconds between attempts to switch a new database to its write-ahead log.
_SWITCH_RETRY_SECONDS = 0.005
#: Seconds a write waits for another's lock before the store is reported unavailable.
BUSY_TIMEOUT_SECONDS = 5.0
#: Seconds readiness waits for the write lock, at most: a balancer's probe wants an answer soon.
READY_SECONDS = 0.5
#: Seconds after a change of this store's committed during which a write is known to succeed.
WROTE_RECENTLY_SECONDS = 1.0

#: The plant as the store reads it into a page: the bytes of its UTF-8 text.
PLANT_BYTES = "CAST(plant AS BLOB)"

logger = logging.getLogger(__name__)


def _set_up(connection: sqlite3.Connection, busy_timeout: float) -> None:
    """Make the database write ahead to a log and the connection sync every commit."""
    # Readers never wait for the writer, and a commit appends to the log instead of rewriting.
    # Switching a new database needs an exclusive lock, and to processes that try at the same
    # moment SQLite answers busy at once, without waiting: so wait here.
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            break
        except sqlite3.OperationalError as ex:
            if ex.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(_SWITCH_RETRY_SECONDS)
    # In WAL mode FULL syncs the log at every commit: a plant answered with 200 is on disk.
    # NORMAL would keep the file consistent but could lose the last commits to a power cut.
    connection.execute("PRAGMA synchronous = FULL")


def _damaged_or_out_of_reach(ex: sqlite3.Error) -> bool:
    """Whether `ex` says the database cannot serve (its file or disk), rather than a bug.

    `OperationalError`: locked, full, unwritable; `DatabaseError` itself: damaged ("database disk
    image is malformed", "file is not a database"). Its other kinds (a constraint, a misused
    statement) are the code's mistakes.
    """
    return type(ex) in (sqlite3.OperationalError, sqlite3.DatabaseError)


def _transient(ex: sqlite3.Error) -> bool:
    """Whether `ex` is a lock another connection holds, which waiting may free."""
    # The primary result code, the low byte of an extended one (SQLITE_BUSY_RECOVERY, ...).
    return (ex.sqlite_errorcode & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _create_plants(connection: sqlite3.Connection) -> None:
    """Make the table as 1.0.0 made it: the plant is its JSON document as text."""
    connection.execute(
        "CREATE TABLE IF NOT EXISTS plants (id INTEGER PRIMARY KEY, plant TEXT NOT NULL)"
    )


def _index_tags(connection: sqlite3.Connection) -> None:
    """Keep each plant's tag (`tag_key`) beside it, in an index ordered by tag, then id."""
    connection.execute("ALTER TABLE plants ADD COLUMN tag BLOB")
    plants = connection.execute("SELECT id, plant FROM plants")
    connection.executemany(
        "UPDATE plants SET tag = ? WHERE id = ?",
        ((tag, plant_id) for plant_id, plant in plants if (tag := tag_key(plant)) is not None),
    )
    connection.execute("CREATE INDEX IF NOT EXISTS plants_by_tag ON plants (tag, id)")


def _create_outbox(connection: sqlite3.Connection) -> None:
    """Keep each event for each subscriber's URL until it is delivered or given up."""
    connection.execute(
        "CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY, webhook_id TEXT NOT NULL, "
        "url TEXT NOT NULL, body BLOB NOT NULL, created_at REAL NOT NULL, "
        "next_attempt_at REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0)"
    )
    connection.execute("CREATE INDEX IF NOT EXISTS outbox_due ON outbox (url, next_attempt_at, id)")


def _key_subscribers(connection: sqlite3.Connection) -> None:
    """Name each delivery's subscriber by its key, not by its URL, which may hold a password.

    The column is renamed to say so; its index follows.
    """
    urls = connection.execute("SELECT DISTINCT url FROM outbox").fetchall()
    connection.executemany("UPDATE outbox SET url = ? WHERE url = ?", keys_of_urls(urls))
    connection.execute("ALTER TABLE outbox RENAME COLUMN url TO subscriber")


#: The schema, step by step; `PRAGMA user_version` counts the steps a database has taken.
_STEPS = (_create_plants, _index_tags, _create_outbox, _key_subscribers)
_OUTBOX = outbox_statements("?")
_CLAIM = claim_statement("?")


def _kept(connection: sqlite3.Connection, plant_id: int) -> bytes | None:
    """The plant kept under `plant_id`, or None."""
    kept = connection.execute("SELECT plant FROM plants WHERE id = ?", (plant_id,)).fetchone()
    return None if kept is None else kept[0].encode()


#: How a change records its event: `events(connection, make, *args)`.
Events = Callable[..., None]


def _add(connection: sqlite3.Connection, plant_id: int, plant: bytes, events: Events) -> bytes:
    inserted = connection.execute(
        "INSERT INTO plants (id, plant, tag) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING",
        (plant_id, plant.decode(), tag_key(plant)),
    ).rowcount
    if not inserted:
        return _kept(connection, plant_id)
    events(connection, plant_created, plant_id, plant)
    return plant


def _put(
    connection: sqlite3.Connection,
    plant_id: int,
    plant: bytes,
    condition: Condition | None,
    events: Events,
) -> tuple[Put, bytes]:
    kept = _kept(connection, plant_id)
    if condition is not None and not condition(kept):
        raise ConditionFailed
    if kept is not None and same_plant(kept, plant):
        return Put.UNCHANGED, kept
    row = (plant.decode(), tag_key(plant), plant_id)
    if kept is None:
        connection.execute("INSERT INTO plants (plant, tag, id) VALUES (?, ?, ?)", row)
        events(connection, plant_created, plant_id, plant)
        return Put.CREATED, plant
    connection.execute("UPDATE plants SET plant = ?, tag = ? WHERE id = ?", row)
    events(connection, plant_updated, plant_id, plant)
    return Put.REPLACED, plant


def _delete(
    connection: sqlite3.Connection, plant_id: int, condition: Condition | None, events: Events
) -> bool:
    if condition is not None and not condition(_kept(connection, plant_id)):
        raise ConditionFailed
    if not connection.execute("DELETE FROM plants WHERE id = ?", (plant_id,)).rowcount:
        return False
    events(connection, plant_deleted, plant_id)
    return True


class SqliteStore:
    """Plants in a SQLite database file, one connection per thread.

    The database's primary key decides who wins an id, in one statement, so the duplicate rule
    holds across threads and processes.

    It answers only for the file it opened, or for `started_with`, and refuses every call once
    the path names another (plantstore/stores/sqlite_file.py).

    Changes are made by one writer thread, in batches (plantstore/stores/group_commit.py): a
    batch is one transaction, taken with the write lock (`BEGIN IMMEDIATE`) so that it never
    fails half-way for a lock another process holds, and synced once. A change and its events
    are in the same batch. The writers of every process on the file first queue on a lock of
    their own (`flock` of the file beside it, `<path>-writers`), which wakes the next as soon as
    it is free, where SQLite's busy handler would sleep up to 100 ms between tries. Reads are
    made on each thread's own connection, never behind a batch: the write-ahead log lets them
    read while the writer writes.

    Args:
        path: the database file; made, with its table, on first start.
        subscribers: the keys (`subscriber_key`) of the subscribers events go to; with none,
            nothing is written to the outbox.
        on_event: called once a change and its events are committed.
        busy_timeout: seconds a write waits for other processes' writes before giving up.
        started_with: the file (device, inode) the service started with: another one at the path
            is refused without being opened, and a missing one is not made.
        on_commit: called after each commit of a batch, with the number of changes it held.

    Raises:
        SchemaTooNew: a newer plantstore brought the database to a schema this one does not know.
        StoreUnavailable: the database stays locked.
        StoreUnusable: the file cannot be opened, or is not a database.
    """

    def __init__(
        self,
        path: str,
        subscribers: Sequence[str] = (),
        on_event: Callable[[], None] | None = None,
        busy_timeout: float = BUSY_TIMEOUT_SECONDS,
        started_with: FileIdentity | None = None,
        on_commit: Callable[[int], None] | None = None,
    ) -> None:
        self._path = path
        self._subscribers = tuple(subscribers)
        self._commits = Commits(on_commit, on_event)
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        #: When a change of this store's was last committed (`time.monotonic()`).
        self._wrote_at = float("-inf")
        self._writers: int | None = None
        self._writer = GroupCommit(
            "plantstore-sqlite-writer",
            self._write,
            wait=busy_timeout,
            lock=self._first_writer,
            committed=self._commits,
        )
        # The file this store answers for: the one the service started with, else the one
        # opened, or made, below.
        self._file = FileGuard(path, started_with)
        if self._file.lost:
            return  # refused at every call, without opening what is at the path now
        try:
            connection = self._open(create=started_with is None)
        except sqlite3.Error as ex:
            if _transient(ex):
                raise StoreUnavailable(f"SQLite {path}: {ex}") from ex
            raise StoreUnusable(
                "PLANTSTORE_STORE must name a SQLite database file that this user can read and "
                f"write, or make: {path}: {ex}"
            ) from ex
        self._file.settle()
        self._local.connection = self._register(connection)
        with self._served():
            self._migrate(connection)

    def add(self, plant_id: int, plant: bytes) -> bytes:
        return self._writer.make(partial(_add, plant_id=plant_id, plant=plant, events=self._events))

    def put(
        self, plant_id: int, plant: bytes, condition: Condition | None = None
    ) -> tuple[Put, bytes]:
        return self._writer.make(
            partial(_put, plant_id=plant_id, plant=plant, condition=condition, events=self._events)
        )

    def get(self, plant_id: int) -> bytes | None:
        with self._served():
            return _kept(self._connection(), plant_id)

    def delete(self, plant_id: int, condition: Condition | None = None) -> bool:
        return self._writer.make(
            partial(_delete, plant_id=plant_id, condition=condition, events=self._events)
        )

    def page(self, after: int | None, limit: int, tag: str | None, max_bytes: int) -> Page:
        # Rows are read as `fill_page` asks for them; the statement is done with when it stops.
        query, values = page_query(after, limit, tag, plant=PLANT_BYTES, marker="?")
        with self._served(), closing(self._connection().execute(query, values)) as rows:
            return fill_page(rows, limit, max_bytes)

    def check_ready(self) -> None:
        """Commit a write, on a connection opened for it, to the file this store opened.

        The write sets the schema version to what it is, so it changes nothing, yet it takes
        the path every plant takes: the write lock, the log and its sync, which fail when the
        disk is full or the file can no longer be written. A fresh connection also meets what a
        thread opening its first one would: a file that can no longer be opened for writing,
        which connections opened before go on writing to for a while. Reading the last plant
        walks the table from its root, as an insert does, so a damaged table is not ready either.
        The path is checked before it is opened, as it may name another file by now.

        Under load the write lock is always somebody's, and may not come free within the
        probe's time: a lock not had in time is no sign of trouble while changes of this
        store's go through (one committed within `WROTE_RECENTLY_SECONDS`), so readiness does
        not flap on a busy store.
        """
        with self._served():
            self._file.check()
            try:
                self._write_nothing()
            except sqlite3.OperationalError as ex:
                if (
                    not _transient(ex)
                    or time.monotonic() - self._wrote_at >= WROTE_RECENTLY_SECONDS
                ):
                    raise

    def _write_nothing(self) -> None:
        """Commit a write that changes nothing, on a connection opened for it."""
        connection = self._open(create=False, busy_timeout=min(self._busy_timeout, READY_SECONDS))
        try:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("SELECT max(id) FROM plants").fetchone()
            (version,) = connection.execute("PRAGMA user_version").fetchone()
            connection.execute(f"PRAGMA user_version = {version}")
            connection.execute("COMMIT")
        finally:
            connection.close()

    def claim(self, subscriber: str, now: float, lease_until: float, limit: int) -> list[Delivery]:
        """Lease what is due in one statement, which is one transaction under the write lock."""
        return self._writer.make(
            lambda connection: deliveries(
                connection.execute(_CLAIM, (subscriber, now, limit, lease_until)).fetchall()
            )
        )

    def retry(self, delivery: Delivery, at: float) -> None:
        self._writer.make(
            lambda connection: connection.execute(_OUTBOX["retry"], (at, delivery.id))
        )

    def forget(self, delivery: Delivery) -> None:
        self._writer.make(lambda connection: connection.execute(_OUTBOX["forget"], (delivery.id,)))

    def oldest(self) -> float | None:
        with self._served():
            row = self._connection().execute(_OUTBOX["oldest"]).fetchone()
        return None if row is None else row[0]

    def close(self) -> None:
        """Make the changes queued, then close every thread's connection; the last one to close
        folds the log into the file."""
        self._writer.close()
        with self._lock:
            for connection in self._connections:
                connection.close()
            self._connections.clear()
        if self._writers is not None:
            os.close(self._writers)
            self._writers = None

    def _migrate(self, connection: sqlite3.Connection) -> None:
        """Take the schema steps the database lacks, once, whoever else starts at the same time.

        The version is read first without a lock, so an up-to-date database is not written to.
        """
        database = f"SQLite {self._path}"
        (version,) = connection.execute("PRAGMA user_version").fetchone()
        if not steps_to_take(_STEPS, version, database):
            return
        # The write lock, held to the commit: another process migrating makes this one wait.
        connection.execute("BEGIN IMMEDIATE")
        with connection:
            (version,) = connection.execute("PRAGMA user_version").fetchone()
            steps = steps_to_take(_STEPS, version, database)
            for step in steps:
                step(connection)
            if steps:
                connection.execute(f"PRAGMA user_version = {len(_STEPS)}")

    def _write(self, changes: Sequence[Change]) -> list[object]:
        """Make a batch in one transaction; on the writer thread.

        It answers for the file as a read does (`_served`), once for the whole batch: a file
        lost or replaced fails every change of it.
        """
        self._commits.recorded = False
        with self._served():
            connection = self._connection()
            connection.execute("BEGIN IMMEDIATE")
            try:
                outcomes = make_each(connection, changes)
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
        self._wrote_at = time.monotonic()
        return outcomes

    @contextmanager
    def _first_writer(self) -> Iterator[None]:
        """Wait for the writers of other processes on the file, then write."""
        if self._writers is None:
            try:
                self._writers = os.open(f"{self._path}-writers", os.O_RDWR | os.O_CREAT, 0o666)
            except OSError as ex:
                raise StoreUnavailable(f"SQLite {self._path}: the writers' lock: {ex}") from ex
        fcntl.flock(self._writers, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._writers, fcntl.LOCK_UN)

    def _events(self, connection: sqlite3.Connection, make: Callable[..., Event], *args) -> None:
        """Record the event `make(*args)` for every subscriber, in the change's transaction."""
        if self._subscribers:
            connection.executemany(_OUTBOX["record"], outbox_rows(make(*args), self._subscribers))
            self._commits.recorded = True

    @contextmanager
    def _served(self) -> Iterator[None]:
        """Answer for the database only while it is the file opened; its failures are unavailable.

        The file is checked once the work is done, so that nothing done to a file that was
        replaced meanwhile is answered as done; and when the work failed, since a file replaced
        is then the cause to tell.
        """
        if self._file.lost:
            self._file.check()
        try:
            yield
        except sqlite3.Error as ex:
            if not _damaged_or_out_of_reach(ex):
                raise
            self._file.check()
            raise StoreUnavailable(f"SQLite {self._path}: {ex}") from ex
        self._file.check()

    def _connection(self) -> sqlite3.Connection:
        """The calling thread's connection, opened on its first use."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._register(self._open(create=False))
            self._local.connection = connection
            # Opened on whatever is at the path now: write nothing to another file.
            self._file.check()
        return connection

    def _register(self, connection: sqlite3.Connection) -> sqlite3.Connection:
        """Keep `connection` for `close`."""
        with self._lock:
            self._connections.append(connection)
        return connection

    def _open(self, create: bool, busy_timeout: float | None = None) -> sqlite3.Connection:
        """Connect to the file; only the store's first connection may make it.

        A later one that made the file would make an empty database where the store's was
        removed, which the next process to start would take for the store's own.
        """
        busy_timeout = self._busy_timeout if busy_timeout is None else busy_timeout
        # Autocommit: each statement is its own transaction. `check_same_thread` is off only
        # so that `close` may close every thread's connection; each is used by its own.
        connection = sqlite3.connect(
            f"file:{quote(self._path)}?mode={'rwc' if create else 'rw'}",
            uri=True,
            timeout=busy_timeout,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            _set_up(connection, busy_timeout)
        except sqlite3.Error:
            connection.close()
            raise
        return connection
