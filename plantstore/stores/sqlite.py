"""A store in a SQLite file: durable, and shared by every process on one machine."""

import fcntl
import math
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager

from plantstore.core.plants import Condition, Page, Put, fill_page
from plantstore.core.stores import Delivery, EventPage, StoreUnavailable, StoreUnusable
from plantstore.stores import sqlite_feed
from plantstore.stores.changes import CHANGES, Add, Change, Remove, Replace
from plantstore.stores.feed_waits import FeedWaits
from plantstore.stores.group_commit import GroupCommit
from plantstore.stores.sql import claim_statement, deliveries, outbox_statements, page_query
from plantstore.stores.sqlite_batch import PLANT_BYTES, plan_batch, write_batch
from plantstore.stores.sqlite_file import FileIdentity, SqliteFile
from plantstore.stores.sqlite_schema import migrate, transient

#: Seconds a write waits for another's lock before the store is reported unavailable.
BUSY_TIMEOUT_SECONDS = 5.0
#: Seconds readiness waits for the write lock, at most: a balancer's probe wants an answer soon.
READY_SECONDS = 0.5
#: Seconds after a change of this store's committed during which a write is known to succeed.
WROTE_RECENTLY_SECONDS = 1.0

_GET = f"SELECT {PLANT_BYTES} FROM plants WHERE id = ?"
_OUTBOX = outbox_statements("?")
_CLAIM = claim_statement("?")

#: Work on the outbox that the writer makes beside the batch's changes, under the same lock.
OutboxWork = Callable[[sqlite3.Connection], object]


class SqliteStore:
    """Plants in a SQLite database file, one connection per thread.

    The primary key decides who wins an id, across threads and processes. Changes are made in
    batches led by their requests (group_commit.py), each one transaction begun with the write
    lock, so that it never fails half-way, and synced once. Writers first queue on a lock file
    beside the database (`<path>-writers`), which wakes the next at once where SQLite's busy
    handler sleeps up to 100 ms; reads never wait behind a batch (the write-ahead log). It
    answers only for the file it opened, or `started_with` (sqlite_file.py).

    Args:
        path: the database file; made, with its table, on first start.
        subscribers: the keys (`subscriber_key`) of the subscribers events go to; with none,
            nothing is written to the outbox.
        on_commit: called after each commit of a batch, with the numbers of changes it held
            and of events it wrote.
        busy_timeout: seconds a write waits for other processes' writes before giving up.
        started_with: the file (device, inode) the service started with: another one at the path
            is refused without being opened, and a missing one is not made.

    Raises:
        SchemaTooNew: a newer plantstore brought the database to a schema this one does not know.
        StoreUnavailable: the database stays locked.
        StoreUnusable: the file cannot be opened, or is not a database.
    """

    def __init__(
        self,
        path: str,
        subscribers: Sequence[str] = (),
        on_commit: Callable[[int, int], None] | None = None,
        busy_timeout: float = BUSY_TIMEOUT_SECONDS,
        started_with: FileIdentity | None = None,
    ) -> None:
        self._path = path
        self._subscribers = tuple(subscribers)
        self._on_commit = on_commit
        self._waits = FeedWaits()
        #: When a change of this store's was last committed (`time.monotonic()`).
        self._wrote_at = float("-inf")
        self._writers: int | None = None
        self._writer = GroupCommit(self._write, wait=busy_timeout, lock=self._first_writer)
        # The file this store answers for: the one the service started with, else the one
        # opened, or made, below.
        self._file = SqliteFile(path, busy_timeout, started_with)
        if self._file.guard.lost:
            return  # refused at every call, without opening what is at the path now
        try:
            connection = self._file.first_connection(create=started_with is None)
        except sqlite3.Error as ex:
            if transient(ex):
                raise StoreUnavailable(f"SQLite {path}: {ex}") from ex
            raise StoreUnusable(
                "PLANTSTORE_STORE must name a SQLite database file that this user can read and "
                f"write, or make: {path}: {ex}"
            ) from ex
        with self._file.served():
            migrate(connection, path)

    def add(self, plant_id: int, plant: bytes) -> bytes:
        return self._writer.make(Add(plant_id, plant))

    def put(
        self, plant_id: int, plant: bytes, condition: Condition | None = None
    ) -> tuple[Put, bytes]:
        return self._writer.make(Replace(plant_id, plant, condition))

    def get(self, plant_id: int) -> bytes | None:
        with self._file.served():
            kept = self._file.connection().execute(_GET, (plant_id,)).fetchone()
        return None if kept is None else kept[0]

    def delete(self, plant_id: int, condition: Condition | None = None) -> bool:
        return self._writer.make(Remove(plant_id, condition))

    def page(self, after: int | None, limit: int, tag: str | None, max_bytes: int) -> Page:
        # Rows are read as `fill_page` asks for them; the statement is done with when it stops.
        query, values = page_query(after, limit, tag, plant=PLANT_BYTES, marker="?")
        with self._file.served(), closing(self._file.connection().execute(query, values)) as rows:
            return fill_page(rows, limit, max_bytes)

    def events(self, after: int | None, limit: int) -> EventPage:
        with self._file.served():
            return sqlite_feed.read_events(self._file.connection(), after, limit)

    def head(self) -> int:
        with self._file.served():
            return sqlite_feed.head(self._file.connection())

    def prune(self, before: float, limit: int) -> int:
        return self._writer.make(lambda connection: sqlite_feed.prune(connection, before, limit))

    def wait_for_events(self, timeout: float) -> bool:
        return self._waits.wait(timeout)

    def stop_waiting(self) -> None:
        self._waits.stop()

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
        with self._file.served():
            self._file.guard.check()
            try:
                self._write_nothing()
            except sqlite3.OperationalError as ex:
                if not transient(ex) or time.monotonic() - self._wrote_at >= WROTE_RECENTLY_SECONDS:
                    raise

    def _write_nothing(self) -> None:
        """Commit a write that changes nothing, on a connection opened for it."""
        busy_timeout = min(self._file.busy_timeout, READY_SECONDS)
        connection = self._file.open(create=False, busy_timeout=busy_timeout)
        try:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("SELECT max(id) FROM plants").fetchone()
            (version,) = connection.execute("PRAGMA user_version").fetchone()
            connection.execute(f"PRAGMA user_version = {version}")
            connection.execute("COMMIT")
        finally:
            connection.close()

    def claim(self, subscriber: str, now: float, lease_until: float, limit: int) -> list[Delivery]:
        """Lease what is due in one statement, under the write lock, beside a batch."""
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
        with self._file.served():
            row = self._file.connection().execute(_OUTBOX["oldest"]).fetchone()
        return None if row is None else row[0]

    def close(self) -> None:
        """End the waits for events, make the changes queued, then close every thread's
        connection; the last one to close folds the log into the file."""
        self._waits.stop()
        self._writer.close()
        self._file.close()
        if self._writers is not None:
            os.close(self._writers)
            self._writers = None

    def _write(self, work: Sequence[Change | OutboxWork], deadline: float) -> list[object]:
        """Make a batch in one transaction, on the thread of the request that leads it.

        It answers for the file as a read does (`_served`), once for the whole batch: a file
        lost or replaced fails every change of it. It waits for the write lock only until
        `deadline`, when its oldest request's `busy_timeout` ends (that request may have waited
        for the batch before).
        """
        changes = [item for item in work if isinstance(item, CHANGES)]
        left = deadline - time.monotonic()
        if left <= 0:
            raise StoreUnavailable(f"SQLite {self._path}: no time was left to wait for the lock")
        with self._file.served():
            connection = self._file.connection()
            connection.execute(f"PRAGMA busy_timeout = {math.ceil(left * 1000)}")
            connection.execute("BEGIN IMMEDIATE")
            try:
                planned = plan_batch(connection, changes)
                write_batch(connection, planned, self._subscribers)
                outcomes = iter(planned.outcomes)
                answers = [
                    next(outcomes) if isinstance(item, CHANGES) else item(connection)
                    for item in work
                ]
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
        self._wrote_at = time.monotonic()
        if planned.events:
            self._waits.committed()
        if changes and self._on_commit is not None:
            self._on_commit(len(changes), len(planned.events))
        return answers

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
