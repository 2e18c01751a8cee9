"""A store in PostgreSQL: durable, and shared by every process on every machine."""

import time
from collections.abc import Callable, Sequence
from contextlib import closing, suppress
from functools import partial
from typing import TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from plantstore.core.plants import Condition, Page, Put, fill_page
from plantstore.core.stores import Delivery, StoreUnavailable
from plantstore.stores.changes import Add, Change, Remove, Replace
from plantstore.stores.deadlines import Deadlines
from plantstore.stores.group_commit import GroupCommit
from plantstore.stores.postgres_batch import NothingWritten, RowHeld, make_batch
from plantstore.stores.postgres_schema import CONNECT, migrate, prepare, require_utf8
from plantstore.stores.sql import claim_statement, deliveries, outbox_statements, page_query

#: Connections a worker may hold: the batch writer's, and the reads' (each holds one for the
#: few hundred microseconds of its statement).
POOL_SIZE = 8
#: Seconds a request may spend on the database in all, waiting for a connection and then
#: running its statement, before the store is reported unavailable.
REQUEST_SECONDS = 3.0
#: Seconds the server lets a statement run (`statement_timeout`), waiting on a lock included;
#: a batch's may wait longer for its rows, within its bound (`PostgresStore._write`).
STATEMENT_SECONDS = 0.5
#: Seconds a call holds its thread while the database is out of reach: the pool goes on
#: connecting in the background, so a short wait finds the database when it is back, and
#: gunicorn's threads, freed quickly, stay free for /healthz and /readyz.
OUTAGE_WAIT_SECONDS = 0.25
#: Seconds readiness waits for a connection: with its statement, and a wait for one of the
#: worker's store slots (`plantstore.stores.gate`), it answers within a second.
READY_WAIT_SECONDS = 0.3
#: Seconds the pool keeps retrying a lost connection in the background, backing off; after
#: that it gives up and the next request that needs a connection starts a fresh attempt, so
#: the store is never more than a few seconds late in noticing that the server is back.
RECONNECT_SECONDS = 10.0

_T = TypeVar("_T")

#: Errors of a database that cannot serve now: down, unreachable, out of time or of disk, or
#: read-only (a standby, or `default_transaction_read_only`).
_CANNOT_SERVE = (psycopg.OperationalError, psycopg.errors.ReadOnlySqlTransaction)
_OUTBOX = outbox_statements("%s")
#: Leases what is due, skipping rows another claim has locked and not yet committed: without
#: SKIP LOCKED, a claim waiting on one would lease the rows the other just leased.
_CLAIM = claim_statement("%s", " FOR UPDATE SKIP LOCKED")
_GET = "SELECT plant::text FROM plants WHERE id = %s"


def _configure(connection: psycopg.Connection) -> None:
    """Make a new pooled connection ready: to a UTF8 database, with the schema up to date,
    then its statements bounded.

    Not before: a migration may take long, or wait long for another worker's. A database that
    is not UTF8 fails the connection: the pool logs why and tries again later, and meanwhile
    no connection comes, so requests are answered 503.
    """
    require_utf8(connection)
    migrate(connection)
    connection.execute(f"SET statement_timeout = {round(STATEMENT_SECONDS * 1000)}")


class PostgresStore:
    """Plants in a PostgreSQL table, through a pool of connections opened in this process.

    Open it after gunicorn forks (the app is not preloaded, so `create_app` runs in each
    worker): a connection inherited across a fork would be shared by accident. The pool
    connects in the background, so a worker starts even while the database is down (its
    methods then raise `StoreUnavailable`). It hands out a connection without a round trip to
    check it: a read, or a batch, whose connection the server dropped while it was idle (it
    restarted) finds out at its first round trip, before anything was written, and is made
    again on a connection of those the pool checks then; so a restart costs no request.

    No call waits on the database longer than `REQUEST_SECONDS` (readiness, under a second),
    even when the server stops answering (`Deadlines`), and while the database is out of reach
    a call holds its thread only `OUTAGE_WAIT_SECONDS`: a thread held by the store is one that
    /healthz and other requests cannot have.

    Changes are made in batches, each led by one of its requests
    (plantstore/stores/group_commit.py), each batch one transaction of two round trips on a
    pooled connection (plantstore/stores/postgres_batch.py); with the server's defaults
    `fsync = on` and `synchronous_commit = on`, a change answered is on disk, and its events
    with it. A change whose row another transaction holds (another host's batch, slowed by its
    disk) is left out of its batch and made alone by its request, which waits for the row what
    is left of its bound: it holds up no other change. Reads take a connection of their own,
    never behind a batch.

    A client's repeat of an `add` whose commit went through, its answer lost with the
    connection, finds the plant kept, and writes no second event.

    Args:
        url: a libpq URL; what it leaves out comes from the usual `PG*` variables.
        subscribers: the keys (`subscriber_key`) of the subscribers events go to; with none,
            nothing is written to the outbox.
        on_event: called once a batch that wrote events is committed.
        on_commit: called after each commit of a batch, with the number of changes it held.

    Raises:
        SchemaTooNew: a newer plantstore brought the database to a schema this one does not know.
        StoreUnusable: the database is not UTF8 (it is left as it is).
    """

    def __init__(
        self,
        url: str,
        subscribers: Sequence[str] = (),
        on_event: Callable[[], None] | None = None,
        on_commit: Callable[[int], None] | None = None,
    ) -> None:
        self._subscribers = tuple(subscribers)
        self._on_event = on_event
        self._on_commit = on_commit
        self._writer = GroupCommit(self._write, wait=REQUEST_SECONDS)
        # Migrate now when the server is up, so that a schema too new or a database not in UTF8
        # is refused at once; when it is down, the pool checks and migrates as it connects.
        self._out_of_reach = True
        with suppress(StoreUnavailable):
            prepare(url)
            self._out_of_reach = False
        self._deadlines = Deadlines()
        self._pool = ConnectionPool(
            url,
            kwargs=CONNECT,
            min_size=1,
            max_size=POOL_SIZE,
            configure=_configure,
            reconnect_timeout=RECONNECT_SECONDS,
            name="plantstore",
            open=True,
        )

    def add(self, plant_id: int, plant: bytes) -> bytes:
        return self._make(Add(plant_id, plant))

    def put(
        self, plant_id: int, plant: bytes, condition: Condition | None = None
    ) -> tuple[Put, bytes]:
        return self._make(Replace(plant_id, plant, condition))

    def get(self, plant_id: int) -> bytes | None:
        row = self._on_a_connection(
            lambda connection: connection.execute(_GET, (plant_id,)).fetchone(), again=True
        )
        return None if row is None else row[0].encode()

    def delete(self, plant_id: int, condition: Condition | None = None) -> bool:
        return self._make(Remove(plant_id, condition))

    def page(self, after: int | None, limit: int, tag: str | None, max_bytes: int) -> Page:
        query = page_query(after, limit, tag, plant="plant::text", marker="%s")
        return self._on_a_connection(
            partial(_page, query=query, limit=limit, max_bytes=max_bytes), again=True
        )

    def check_ready(self) -> None:
        """Run a write that changes nothing: it fails where a plant's would, and as soon.

        A read-only server or session, a standby, or a lock on the table that outlasts
        `STATEMENT_SECONDS` refuse it, as they refuse an insert.
        """
        self._on_a_connection(
            lambda connection: connection.execute("DELETE FROM plants WHERE false"),
            wait=READY_WAIT_SECONDS,
            again=True,
        )

    def claim(self, subscriber: str, now: float, lease_until: float, limit: int) -> list[Delivery]:
        return self._on_a_connection(
            lambda connection: deliveries(
                connection.execute(_CLAIM, (subscriber, now, limit, lease_until)).fetchall()
            )
        )

    def retry(self, delivery: Delivery, at: float) -> None:
        self._on_a_connection(
            lambda connection: connection.execute(_OUTBOX["retry"], (at, delivery.id))
        )

    def forget(self, delivery: Delivery) -> None:
        self._on_a_connection(
            lambda connection: connection.execute(_OUTBOX["forget"], (delivery.id,))
        )

    def oldest(self) -> float | None:
        row = self._on_a_connection(
            lambda connection: connection.execute(_OUTBOX["oldest"]).fetchone(), again=True
        )
        return None if row is None else row[0]

    def close(self) -> None:
        """Make the changes queued, then close every connection."""
        self._writer.close()
        self._pool.close()
        self._deadlines.close()

    def _make(self, change: Change) -> object:
        """Make `change` in the next batch, or alone when its row is held by another
        transaction, within `REQUEST_SECONDS` of now in all."""
        deadline = time.monotonic() + REQUEST_SECONDS
        try:
            return self._writer.make(change, order=change.plant_id)
        except RowHeld:
            (outcome,) = self._write([change], deadline, wait_for_rows=True)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _write(
        self, changes: Sequence[Change], deadline: float, wait_for_rows: bool = False
    ) -> list[object]:
        """Make changes in one transaction by `deadline` (`time.monotonic()`), when the
        bound of the oldest of their requests ends (it may have waited for the batch before).

        The batch may wait for a connection, then (`wait_for_rows`) for the rows it changes,
        until `STATEMENT_SECONDS` before that bound, which leaves its writes and commit their
        usual time; its statements never get less than that either.
        """
        rows_until = deadline - STATEMENT_SECONDS
        planned = self._on_a_connection(
            lambda connection: make_batch(
                connection,
                changes,
                self._subscribers,
                statement_seconds=max(STATEMENT_SECONDS, rows_until - time.monotonic()),
                wait_for_rows=wait_for_rows,
            ),
            wait=rows_until - time.monotonic(),
        )
        made = sum(not isinstance(outcome, RowHeld) for outcome in planned.outcomes)
        if made and self._on_commit is not None:
            self._on_commit(made)
        if planned.events and self._on_event is not None:
            self._on_event()
        return planned.outcomes

    def _on_a_connection(
        self,
        work: Callable[[psycopg.Connection], _T],
        wait: float = REQUEST_SECONDS - STATEMENT_SECONDS,
        again: bool = False,
    ) -> _T:
        """Do `work` on a pooled connection.

        Waits for a connection at most `wait` seconds; each statement of `work` runs at most
        `STATEMENT_SECONDS` (a batch sets its own, up to `wait`), and `STATEMENT_SECONDS` after
        `wait` the connection is shut, whatever the server does. While the database is out of
        reach, the whole call, its wait and its statements, is shut after
        `OUTAGE_WAIT_SECONDS`: a connection the pool kept from before may lead to a server that
        no longer answers.

        Work that finds its connection lost before it wrote anything (work that writes nothing,
        with `again`; a batch whose first round trip failed, which says so: `NothingWritten`)
        is done again, once, within the same bound, on a connection of those the pool checks
        then: the server restarted since the pool last used them, and each may be lost.
        """
        deadline = time.monotonic() + wait + STATEMENT_SECONDS
        if self._out_of_reach:
            wait = min(wait, OUTAGE_WAIT_SECONDS)
            deadline = min(deadline, time.monotonic() + OUTAGE_WAIT_SECONDS)
        if wait <= 0:
            raise StoreUnavailable("PostgreSQL: no time was left to wait for a connection")
        try:
            return self._attempt(work, wait, deadline, again)
        except _LostIdle as lost:
            wait = deadline - STATEMENT_SECONDS - time.monotonic()
            if wait <= 0:
                raise StoreUnavailable(f"PostgreSQL: {lost.__cause__}") from lost
        self._pool.check()
        try:
            return self._attempt(work, wait, deadline, again=False)
        except _LostIdle as lost:
            raise StoreUnavailable(f"PostgreSQL: {lost.__cause__}") from lost

    def _attempt(
        self, work: Callable[[psycopg.Connection], _T], wait: float, deadline: float, again: bool
    ) -> _T:
        """Do `work` once; `_LostIdle` when its connection was lost before it wrote anything."""
        connection = None
        try:
            with (
                self._pool.connection(timeout=wait) as connection,
                self._deadlines.bound(connection, deadline),
            ):
                done = work(connection)
        except (NothingWritten, *_CANNOT_SERVE) as ex:
            failure = ex.__cause__ if isinstance(ex, NothingWritten) else ex
            repeatable = isinstance(ex, NothingWritten) or again
            if repeatable and connection is not None and connection.broken:
                raise _LostIdle from failure
            # No connection came in time, or the one that did was lost or shut.
            if connection is None or connection.closed:
                self._out_of_reach = True
            raise StoreUnavailable(f"PostgreSQL: {failure}") from failure
        self._out_of_reach = False
        return done


class _LostIdle(Exception):
    """The connection was lost before the work wrote anything: it may be done again."""


#: Rows of a page that libpq holds at a time: 16 of the largest plants the default
#: `PLANTSTORE_MAX_BODY_BYTES` lets in are 1 MiB, the most a page of the service holds. In
#: chunks, since a row at a time (`size=1`) makes each row a result of its own, which a page
#: of small plants pays for; chunks need libpq 17, in psycopg's binary package from 3.2.3.
_PAGE_CHUNK_ROWS = 16


def _page(
    connection: psycopg.Connection, query: tuple[str, tuple], limit: int, max_bytes: int
) -> Page:
    """Read the page's rows as `fill_page` asks for them, `_PAGE_CHUNK_ROWS` at a time.

    Stopped early, the stream cancels the rest of the query and drops what already came, as
    psycopg's documentation has `closing` do it.
    """
    with (
        connection.cursor() as cursor,
        closing(cursor.stream(*query, size=_PAGE_CHUNK_ROWS)) as rows,
    ):
        return fill_page(((plant_id, plant.encode()) for plant_id, plant in rows), limit, max_bytes)
