"""A store in PostgreSQL: durable, and shared by every process on every machine."""

import time
from collections.abc import Callable, Sequence
from contextlib import closing, suppress
from functools import partial
from typing import TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from plantstore.core.events import Event, plant_created, plant_deleted, plant_updated
from plantstore.core.plants import Condition, ConditionFailed, Page, Put, fill_page, same_plant
from plantstore.core.stores import Delivery, StoreUnavailable, StoreUnusable
from plantstore.stores.deadlines import Deadlines
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

#: Connections a worker may hold: one per thread of the default `GUNICORN_THREADS`.
POOL_SIZE = 8
#: Seconds a request may spend on the database in all, waiting for a connection and then
#: running its statement, before the store is reported unavailable.
REQUEST_SECONDS = 3.0
#: Seconds the server lets a statement run (`statement_timeout`), waiting on a lock included.
STATEMENT_SECONDS = 0.5
#: Seconds a request waits for a connection while the database is out of reach: the pool
#: goes on connecting in the background, so a short wait finds the database when it is back,
#: and gunicorn's threads, freed quickly, stay free for /healthz and /readyz.
OUTAGE_WAIT_SECONDS = 0.25
#: Seconds readiness waits for a connection: with its statement, and a wait for one of the
#: worker's store slots (`plantstore.stores.gate`), it answers within a second.
READY_WAIT_SECONDS = 0.3
#: Seconds the pool keeps retrying a lost connection in the background, backing off; after
#: that it gives up and the next request that needs a connection starts a fresh attempt, so
#: the store is never more than a few seconds late in noticing that the server is back.
RECONNECT_SECONDS = 10.0

_T = TypeVar("_T")

#: What every connection is opened with, besides the URL; 2 s is libpq's shortest timeout.
#: Text goes both ways in UTF-8 whatever `PGCLIENTENCODING` or the URL ask: a plant's name
#: may hold any character.
_CONNECT = {"autocommit": True, "connect_timeout": 2, "client_encoding": "UTF8"}
#: Errors of a database that cannot serve now: down, unreachable, out of time or of disk, or
#: read-only (a standby, or `default_transaction_read_only`).
_CANNOT_SERVE = (psycopg.OperationalError, psycopg.errors.ReadOnlySqlTransaction)
#: Held while the schema changes, so that workers starting together change it once.
_SCHEMA_LOCK = 0x706C616E7473


def _create_plants(connection: psycopg.Connection) -> None:
    """Make the table as 1.0.0 made it.

    `json` keeps the document's exact text (`jsonb` would reorder it and refuse `\\u0000`), so
    what comes back compares byte for byte with what a repeat sends.
    """
    connection.execute(
        "CREATE TABLE IF NOT EXISTS plants (id bigint PRIMARY KEY, plant json NOT NULL)"
    )


def _index_tags(connection: psycopg.Connection) -> None:
    """Keep each plant's tag (`tag_key`) beside it, in an index ordered by tag, then id."""
    connection.execute("ALTER TABLE plants ADD COLUMN IF NOT EXISTS tag bytea")
    # Read on the server's side, a batch at a time: the table may be larger than this memory.
    with connection.cursor(name="plantstore_tags") as plants, connection.cursor() as update:
        plants.execute("SELECT id, plant::text FROM plants")
        while rows := plants.fetchmany(1000):
            update.executemany(
                "UPDATE plants SET tag = %s WHERE id = %s",
                [
                    (tag, plant_id)
                    for plant_id, plant in rows
                    if (tag := tag_key(plant)) is not None
                ],
            )
    connection.execute("CREATE INDEX IF NOT EXISTS plants_by_tag ON plants (tag, id)")


def _create_outbox(connection: psycopg.Connection) -> None:
    """Keep each event for each subscriber's URL until it is delivered or given up."""
    connection.execute(
        "CREATE TABLE IF NOT EXISTS outbox (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
        "webhook_id text NOT NULL, url text NOT NULL, body bytea NOT NULL, "
        "created_at double precision NOT NULL, next_attempt_at double precision NOT NULL, "
        "attempts integer NOT NULL DEFAULT 0)"
    )
    connection.execute("CREATE INDEX IF NOT EXISTS outbox_due ON outbox (url, next_attempt_at, id)")


def _key_subscribers(connection: psycopg.Connection) -> None:
    """Name each delivery's subscriber by its key, not by its URL, which may hold a password.

    The column is renamed to say so; its index follows.
    """
    urls = connection.execute("SELECT DISTINCT url FROM outbox").fetchall()
    with connection.cursor() as cursor:
        cursor.executemany("UPDATE outbox SET url = %s WHERE url = %s", keys_of_urls(urls))
    connection.execute("ALTER TABLE outbox RENAME COLUMN url TO subscriber")


#: The schema, step by step; the one row of `plantstore_schema` counts the steps taken.
_STEPS = (_create_plants, _index_tags, _create_outbox, _key_subscribers)
_OUTBOX = outbox_statements("%s")
#: Leases what is due, skipping rows another claim has locked and not yet committed: without
#: SKIP LOCKED, a claim waiting on one would lease the rows the other just leased.
_CLAIM = claim_statement("%s", " FOR UPDATE SKIP LOCKED")


def _version(connection: psycopg.Connection) -> int:
    """Read the schema version: 0 for an empty database or one that 1.0.0 made."""
    if connection.execute("SELECT to_regclass('plantstore_schema')").fetchone()[0] is None:
        return 0
    row = connection.execute("SELECT version FROM plantstore_schema").fetchone()
    return 0 if row is None else row[0]


def _migrate(connection: psycopg.Connection) -> None:
    """Take the schema steps the database lacks, once, whoever else starts at the same time.

    The version is read first without the lock: each new connection of the pool comes here,
    and for an up-to-date database that costs two short queries.
    """
    database = f"PostgreSQL database {connection.info.dbname}"
    if not steps_to_take(_STEPS, _version(connection), database):
        return
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        # Not `to_regclass` here: it looks in the catalog cache, which waiting for the lock
        # left as it was, and may not see the table that another worker's migration made.
        connection.execute(
            "CREATE TABLE IF NOT EXISTS plantstore_schema (version integer NOT NULL)"
        )
        row = connection.execute("SELECT version FROM plantstore_schema").fetchone()
        steps = steps_to_take(_STEPS, 0 if row is None else row[0], database)
        for step in steps:
            step(connection)
        if steps:
            connection.execute("DELETE FROM plantstore_schema")
            connection.execute(
                "INSERT INTO plantstore_schema (version) VALUES (%s)", (len(_STEPS),)
            )


def _require_utf8(connection: psycopg.Connection) -> None:
    """Refuse a database that cannot keep every character: one that is not UTF8.

    Another encoding (SQL_ASCII, what initdb makes under the C locale; LATIN1) would take a
    plant and fail to give it back, or refuse a name in another script: every such request
    would be a 500. The server tells the database's encoding as the connection opens.

    Raises:
        StoreUnusable: the database's encoding is not UTF8.
    """
    encoding = connection.info.parameter_status("server_encoding")
    if encoding != "UTF8":
        raise StoreUnusable(
            f"PostgreSQL database {connection.info.dbname} has encoding {encoding}, but "
            "plantstore needs UTF8: create the database with ENCODING 'UTF8'"
        )


def prepare(url: str) -> None:
    """Connect once, refuse a database that is not UTF8, and bring its schema up to date.

    Raises:
        StoreUnavailable: the server cannot be reached, or refused the connection: libpq's
            reason (`Connection refused`, an unknown host, a failed authentication, a database
            that does not exist), which names no password.
        StoreUnusable: the database is not UTF8.
        SchemaTooNew: a newer plantstore brought the database to a schema this one does not know.
    """
    try:
        with psycopg.connect(url, **_CONNECT) as connection:
            _require_utf8(connection)
            _migrate(connection)
    except psycopg.OperationalError as ex:
        # libpq's first line says why; the next ones only hint ("Is the server running...").
        reason = " ".join(str(ex).partition("\n")[0].split())
        raise StoreUnavailable(f"PostgreSQL: {reason}") from None


def _configure(connection: psycopg.Connection) -> None:
    """Make a new pooled connection ready: to a UTF8 database, with the schema up to date,
    then its statements bounded.

    Not before: a migration may take long, or wait long for another worker's. A database that
    is not UTF8 fails the connection: the pool logs why and tries again later, and meanwhile
    no connection comes, so requests are answered 503.
    """
    _require_utf8(connection)
    _migrate(connection)
    connection.execute(f"SET statement_timeout = {round(STATEMENT_SECONDS * 1000)}")


class PostgresStore:
    """Plants in a PostgreSQL table, through a pool of connections opened in this process.

    Open it after gunicorn forks (the app is not preloaded, so `create_app` runs in each
    worker): a connection inherited across a fork would be shared by accident. The pool
    connects in the background, so a worker starts even while the database is down (its
    methods then raise `StoreUnavailable`), and it checks each connection before handing it
    out: one the server dropped while idle (it restarted) is replaced, and costs no request.

    No call waits on the database longer than `REQUEST_SECONDS` (readiness, under a second),
    even when the server stops answering (`Deadlines`), and while the database is out of reach
    a call waits only `OUTAGE_WAIT_SECONDS` for a connection: a thread held by the store is one
    that /healthz and other requests cannot have.

    The database's primary key decides who wins an id, in one statement, so the duplicate rule
    holds across processes and machines. Changes are made by one writer thread, in batches
    (plantstore/stores/group_commit.py), each batch one transaction on a pooled connection; with
    the server's defaults `fsync = on` and `synchronous_commit = on`, a change answered is on
    disk, and its events with it. A batch makes its changes in id order, so batches of several
    workers lock rows in one order and never deadlock. A change that waits longer than
    `STATEMENT_SECONDS` for a row another transaction holds fails its whole batch, as any
    failure of the database does. Reads take a connection of their own, never behind a batch.

    A client's repeat of an `add` whose commit went through, its answer lost with the
    connection, finds the plant kept, and writes no second event.

    Args:
        url: a libpq URL; what it leaves out comes from the usual `PG*` variables.
        subscribers: the keys (`subscriber_key`) of the subscribers events go to; with none,
            nothing is written to the outbox.
        on_event: called once a change and its events are committed.

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
        self._commits = Commits(on_commit, on_event)
        self._writer = GroupCommit(
            "plantstore-postgres-writer",
            self._write,
            wait=REQUEST_SECONDS,
            committed=self._commits,
        )
        # Migrate now when the server is up, so that a schema too new or a database not in UTF8
        # is refused at once; when it is down, the pool checks and migrates as it connects.
        self._out_of_reach = True
        with suppress(StoreUnavailable):
            prepare(url)
            self._out_of_reach = False
        self._deadlines = Deadlines()
        self._pool = ConnectionPool(
            url,
            kwargs=_CONNECT,
            min_size=1,
            max_size=POOL_SIZE,
            configure=_configure,
            check=self._check,
            reconnect_timeout=RECONNECT_SECONDS,
            name="plantstore",
            open=True,
        )

    def add(self, plant_id: int, plant: bytes) -> bytes:
        return self._writer.make(
            partial(_add, plant_id=plant_id, plant=plant, events=self._events), order=plant_id
        )

    def put(
        self, plant_id: int, plant: bytes, condition: Condition | None = None
    ) -> tuple[Put, bytes]:
        return self._writer.make(
            partial(_put, plant_id=plant_id, plant=plant, condition=condition, events=self._events),
            order=plant_id,
        )

    def get(self, plant_id: int) -> bytes | None:
        return self._on_a_connection(partial(_get, plant_id=plant_id))

    def delete(self, plant_id: int, condition: Condition | None = None) -> bool:
        return self._writer.make(
            partial(_delete, plant_id=plant_id, condition=condition, events=self._events),
            order=plant_id,
        )

    def page(self, after: int | None, limit: int, tag: str | None, max_bytes: int) -> Page:
        query = page_query(after, limit, tag, plant="plant::text", marker="%s")
        return self._on_a_connection(partial(_page, query=query, limit=limit, max_bytes=max_bytes))

    def check_ready(self) -> None:
        """Run a write that changes nothing: it fails where a plant's would, and as soon.

        A read-only server or session, a standby, or a lock on the table that outlasts
        `STATEMENT_SECONDS` refuse it, as they refuse an insert.
        """
        self._on_a_connection(_write_nothing, wait=READY_WAIT_SECONDS)

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
            lambda connection: connection.execute(_OUTBOX["oldest"]).fetchone()
        )
        return None if row is None else row[0]

    def close(self) -> None:
        """Make the changes queued, then close every connection."""
        self._writer.close()
        self._pool.close()
        self._deadlines.close()

    def _write(self, changes: Sequence[Change]) -> list[object]:
        """Make a batch in one transaction; on the writer thread."""
        self._commits.recorded = False
        return self._on_a_connection(partial(_in_one_transaction, changes=changes))

    def _events(self, connection: psycopg.Connection, make: Callable[..., Event], *args) -> None:
        """Record the event `make(*args)` for every subscriber, in the change's transaction."""
        if self._subscribers:
            with connection.cursor() as cursor:
                cursor.executemany(_OUTBOX["record"], outbox_rows(make(*args), self._subscribers))
            self._commits.recorded = True

    def _check(self, connection: psycopg.Connection) -> None:
        """The pool's own check of a connection, held to `STATEMENT_SECONDS`: a frozen server
        would never answer it."""
        with self._deadlines.bound(connection, time.monotonic() + STATEMENT_SECONDS):
            ConnectionPool.check_connection(connection)

    def _on_a_connection(
        self,
        work: Callable[[psycopg.Connection], _T],
        wait: float = REQUEST_SECONDS - STATEMENT_SECONDS,
    ) -> _T:
        """Do `work` on a pooled connection.

        Waits for a connection (its check included) at most `wait` seconds, or
        `OUTAGE_WAIT_SECONDS` while the database is out of reach; each statement of `work`
        runs at most `STATEMENT_SECONDS`, and `STATEMENT_SECONDS` after `wait` the connection
        is shut, whatever the server does.
        """
        deadline = time.monotonic() + wait + STATEMENT_SECONDS
        if self._out_of_reach:
            wait = min(wait, OUTAGE_WAIT_SECONDS)
        connection = None
        try:
            with (
                self._pool.connection(timeout=wait) as connection,
                self._deadlines.bound(connection, deadline),
            ):
                done = work(connection)
        except _CANNOT_SERVE as ex:
            # No connection came in time, or the one that did was lost or shut.
            if connection is None or connection.closed:
                self._out_of_reach = True
            raise StoreUnavailable(f"PostgreSQL: {ex}") from ex
        self._out_of_reach = False
        return done


#: How a change records its event: `events(connection, make, *args)`.
Events = Callable[..., None]


def _in_one_transaction(connection: psycopg.Connection, changes: Sequence[Change]) -> list[object]:
    with connection.transaction():
        return make_each(connection, changes)


def _add(connection: psycopg.Connection, plant_id: int, plant: bytes, events: Events) -> bytes:
    """Keep the plant unless the id is taken; give what the id holds."""
    row = (plant_id, plant.decode(), tag_key(plant))
    # Another worker's transaction may free the id between the two statements, each of which
    # sees what committed before it began: then take it again.
    while True:
        inserted = connection.execute(
            "INSERT INTO plants (id, plant, tag) VALUES (%s, %s::json, %s) "
            "ON CONFLICT (id) DO NOTHING",
            row,
        ).rowcount
        if inserted:
            events(connection, plant_created, plant_id, plant)
            return plant
        kept = _get(connection, plant_id)
        if kept is not None:
            return kept


_READ_PLANT = "SELECT plant::text FROM plants WHERE id = %s"
_LOCK_PLANT = f"{_READ_PLANT} FOR UPDATE"


def _put(
    connection: psycopg.Connection,
    plant_id: int,
    plant: bytes,
    condition: Condition | None,
    events: Events,
) -> tuple[Put, bytes]:
    """Change what the id holds, its row locked from the read to the write.

    A free id has no row to lock: an insert racing another worker's for it finds the id taken,
    and reads the plant the other kept.
    """
    row = (plant.decode(), tag_key(plant), plant_id)
    while True:
        kept = _get(connection, plant_id, lock=True)
        if condition is not None and not condition(kept):
            raise ConditionFailed
        if kept is not None:
            break
        inserted = connection.execute(
            "INSERT INTO plants (plant, tag, id) VALUES (%s::json, %s, %s) "
            "ON CONFLICT (id) DO NOTHING",
            row,
        ).rowcount
        if inserted:
            events(connection, plant_created, plant_id, plant)
            return Put.CREATED, plant
    if same_plant(kept, plant):
        return Put.UNCHANGED, kept
    connection.execute("UPDATE plants SET plant = %s::json, tag = %s WHERE id = %s", row)
    events(connection, plant_updated, plant_id, plant)
    return Put.REPLACED, plant


def _get(connection: psycopg.Connection, plant_id: int, lock: bool = False) -> bytes | None:
    """The plant under `plant_id`, or None; with `lock`, its row locked to the transaction's end."""
    kept = connection.execute(_LOCK_PLANT if lock else _READ_PLANT, (plant_id,)).fetchone()
    return None if kept is None else kept[0].encode()


def _delete(
    connection: psycopg.Connection, plant_id: int, condition: Condition | None, events: Events
) -> bool:
    # With a condition, the row is locked from the read it is asked of to the delete.
    if condition is not None and not condition(_get(connection, plant_id, lock=True)):
        raise ConditionFailed
    if not connection.execute("DELETE FROM plants WHERE id = %s", (plant_id,)).rowcount:
        return False
    events(connection, plant_deleted, plant_id)
    return True


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


def _write_nothing(connection: psycopg.Connection) -> None:
    connection.execute("DELETE FROM plants WHERE false")
