"""How the PostgreSQL store reaches its database: a pool of this process's connections, and a
bound on every call, whatever the server does."""

import time
from collections.abc import Callable
from contextlib import suppress
from typing import TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from plantstore.core.stores import StoreUnavailable
from plantstore.stores.deadlines import Deadlines
from plantstore.stores.postgres_schema import CONNECT, migrate, prepare, require_utf8

#: Connections a worker may hold: a batch's, and the reads' (each holds one for the few
#: hundred microseconds of its statement).
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
#: Seconds the pool keeps retrying a lost connection in the background, backing off; after
#: that it gives up and the next request that needs a connection starts a fresh attempt, so
#: the store is never more than a few seconds late in noticing that the server is back.
RECONNECT_SECONDS = 10.0

_T = TypeVar("_T")

#: Errors of a database that cannot serve now: down, unreachable, out of time or of disk, or
#: read-only (a standby, or `default_transaction_read_only`).
_CANNOT_SERVE = (psycopg.OperationalError, psycopg.errors.ReadOnlySqlTransaction)


class NothingWritten(Exception):
    """The connection failed before the work wrote anything: it may be done again elsewhere."""


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


class Connections:
    """The pool of a store's connections to `url`, opened in this process.

    It connects in the background, so a worker starts even while the database is down. It
    hands out a connection without a round trip to check it: work whose connection the server
    dropped while idle (it restarted) finds out at its first round trip, before anything was
    written, and is done again on one the pool checks then; so a restart costs no request.

    Raises:
        SchemaTooNew: a newer plantstore brought the database to a schema this one does not know.
        StoreUnusable: the database is not UTF8 (it is left as it is).
    """

    def __init__(self, url: str) -> None:
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

    def run(
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

    def close(self) -> None:
        self._pool.close()
        self._deadlines.close()

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
