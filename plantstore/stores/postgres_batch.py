"""A batch of changes on PostgreSQL: two round trips and one transaction, however many changes.

The first round trip begins the transaction and locks the rows of the batch's ids, reading
what they hold. A change waits only for the rows it touches: the batch skips a row another
transaction holds (`SKIP LOCKED`; a batch of another host slowed by its disk, an operator's
session) and leaves the changes of that id to their requests (`RowHeld`), each of which then
makes its change alone, waiting for the row within its own bound. The changes are made on what
was read (`plantstore.stores.changes.plan`), and the second round trip writes what they
changed, one statement a kind of write over arrays (`unnest`), the events with them, and
commits: psycopg's pipeline mode sends them together and waits once.

An id that held nothing has no row to lock: another transaction may make it meanwhile. The
insert then fails on the primary key, the transaction with it, and nothing of the batch is
made: it is read and made again, and the other's plant is now what it reads. New ids are
inserted in id order, so batches that insert the same ids never wait for each other in a
circle.
"""

from collections.abc import Sequence

import psycopg
from psycopg.pq import TransactionStatus

from plantstore.core.events import Event
from plantstore.stores.changes import Change, Plan, plan
from plantstore.stores.sql import tag_key

#: A connection outside any transaction.
IDLE = TransactionStatus.IDLE
_STATEMENT_TIMEOUT = "SELECT set_config('statement_timeout', %s, true)"
#: The rows of the ids that no other transaction holds, locked, with what they hold; the ids
#: held by others come with no plant.
_LOCK_FREE_ROWS = (
    "WITH locked AS MATERIALIZED (SELECT id, plant::text AS plant FROM plants "
    "WHERE id = ANY(%(ids)s::bigint[]) ORDER BY id FOR UPDATE SKIP LOCKED) "
    "SELECT plants.id, locked.plant FROM plants LEFT JOIN locked ON locked.id = plants.id "
    "WHERE plants.id = ANY(%(ids)s::bigint[])"
)
#: The rows of the ids, locked in id order, waiting for those another transaction holds.
_LOCK_ROWS = (
    "SELECT id, plant::text FROM plants WHERE id = ANY(%(ids)s::bigint[]) ORDER BY id FOR UPDATE"
)
_INSERT = (
    "INSERT INTO plants (id, plant, tag) "
    "SELECT id, plant::json, tag FROM unnest(%s::bigint[], %s::text[], %s::bytea[]) "
    "AS new (id, plant, tag)"
)
_UPDATE = (
    "UPDATE plants SET plant = new.plant::json, tag = new.tag "
    "FROM unnest(%s::bigint[], %s::text[], %s::bytea[]) AS new (id, plant, tag) "
    "WHERE plants.id = new.id"
)
_DELETE = "DELETE FROM plants WHERE id = ANY(%s::bigint[])"
_RECORD = (
    "INSERT INTO outbox (webhook_id, subscriber, body, created_at, next_attempt_at) "
    "SELECT webhook_id, subscriber, body, created_at, created_at "
    "FROM unnest(%s::text[], %s::text[], %s::bytea[], %s::float8[]) "
    "AS event (webhook_id, subscriber, body, created_at)"
)


class NothingWritten(Exception):
    """The connection failed before the batch wrote anything: it may be made again elsewhere."""


class RowHeld(Exception):
    """Another transaction holds the row of the change's id: the batch went on without it, and
    its request is to make it alone, waiting for the row."""


def make_batch(
    connection: psycopg.Connection,
    changes: Sequence[Change],
    subscribers: Sequence[str],
    statement_seconds: float,
    wait_for_rows: bool = False,
) -> Plan:
    """Make `changes` in one transaction on `connection`, each of its statements allowed
    `statement_seconds`, waiting for rows included; give what they did, with a `RowHeld` for
    each change the batch left out (unless `wait_for_rows`: then it waits for them).

    Raises:
        NothingWritten: the connection was lost at the first round trip (the database
            restarted since it was last used, say).
        psycopg.OperationalError: it failed after that: whether the commit went through is
            not known.
    """
    ids = sorted({change.plant_id for change in changes})
    timeout = str(round(statement_seconds * 1000))
    while True:
        try:
            with connection.pipeline():
                try:
                    connection.execute("BEGIN")
                    connection.execute(_STATEMENT_TIMEOUT, (timeout,))
                    locking = _LOCK_ROWS if wait_for_rows else _LOCK_FREE_ROWS
                    rows = connection.execute(locking, {"ids": ids}).fetchall()
                except psycopg.OperationalError as ex:
                    if connection.broken:
                        raise NothingWritten from ex
                    raise
                planned = _plan(changes, rows, bool(subscribers))
                _write(connection, planned, subscribers)
                connection.execute("COMMIT", prepare=False)
            return planned
        except BaseException as ex:
            if not connection.closed and connection.info.transaction_status != IDLE:
                connection.execute("ROLLBACK")
            if not isinstance(ex, psycopg.errors.UniqueViolation):
                raise
            # An id made by another transaction since the read: read it again.


def _plan(changes: Sequence[Change], rows: list[tuple], events: bool) -> Plan:
    """Make the changes whose rows are locked or free on what the rows hold; the others are
    `RowHeld`, in their places among the outcomes."""
    held = {plant_id for plant_id, plant in rows if plant is None}
    kept = {plant_id: plant.encode() for plant_id, plant in rows if plant is not None}
    planned = plan([change for change in changes if change.plant_id not in held], kept, events)
    if not held:
        return planned
    made = iter(planned.outcomes)
    outcomes = [RowHeld() if change.plant_id in held else next(made) for change in changes]
    return planned._replace(outcomes=outcomes)


def _write(connection: psycopg.Connection, planned: Plan, subscribers: Sequence[str]) -> None:
    """Queue the statements that write what the batch changed, and its events.

    None of them is prepared: when one fails, the server skips the others of the pipeline,
    the preparation of any of them included, which psycopg would take as made.
    """
    if planned.inserts:
        connection.execute(_INSERT, _columns(planned.inserts), prepare=False)
    if planned.updates:
        connection.execute(_UPDATE, _columns(planned.updates), prepare=False)
    if planned.deletes:
        connection.execute(_DELETE, (planned.deletes,), prepare=False)
    if planned.events:
        connection.execute(_RECORD, _outbox_columns(planned.events, subscribers), prepare=False)


def _columns(plants: dict[int, bytes]) -> tuple[list, list, list]:
    """The ids, plants and tags, as three arrays, in id order."""
    ids = sorted(plants)
    texts = [plants[plant_id].decode() for plant_id in ids]
    tags = [tag_key(plants[plant_id]) for plant_id in ids]
    return ids, texts, tags


def _outbox_columns(events: list[Event], subscribers: Sequence[str]) -> tuple[list, ...]:
    """A delivery of each event to each subscriber, due now, as four arrays."""
    deliveries = [(event, subscriber) for event in events for subscriber in subscribers]
    return (
        [event.webhook_id for event, _ in deliveries],
        [subscriber for _, subscriber in deliveries],
        [event.body for event, _ in deliveries],
        [event.created_at for event, _ in deliveries],
    )
