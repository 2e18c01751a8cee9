"""A batch of changes on PostgreSQL: two round trips and one transaction, however many changes.

The first round trip begins the transaction and reads what the batch's ids hold, their rows
locked (`FOR UPDATE`, in id order: batches of several workers, or hosts, lock rows in one
order and never wait for each other in a circle). It waits for a row another transaction
holds as long as the batch's statements may run, which it sets for its transaction alone
(`set_config(..., true)`, as `SET LOCAL`): a holder held up by its disk or its machine
delays the batch rather than failing it. The changes are made on that
(`plantstore.stores.changes.plan`), and the second round trip writes what they changed, one
statement a kind of write over arrays (`unnest`), the events with them, and commits: psycopg's
pipeline mode sends them together and waits once.

An id that held nothing has no row to lock: another transaction may make it meanwhile. The
insert then fails on the primary key, the transaction with it, and nothing of the batch is
made: it is read and made again, and the other's plant is now what it reads.
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
_LOCK_KEPT = (
    "SELECT id, plant::text FROM plants WHERE id = ANY(%s::bigint[]) ORDER BY id FOR UPDATE"
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


def make_batch(
    connection: psycopg.Connection,
    changes: Sequence[Change],
    subscribers: Sequence[str],
    statement_seconds: float,
) -> Plan:
    """Make `changes` in one transaction on `connection`, each of its statements allowed
    `statement_seconds`, waiting for rows included; give what they did.

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
                    rows = connection.execute(_LOCK_KEPT, (ids,)).fetchall()
                except psycopg.OperationalError as ex:
                    if connection.broken:
                        raise NothingWritten from ex
                    raise
                planned = plan(changes, {i: p.encode() for i, p in rows}, bool(subscribers))
                _write(connection, planned, subscribers)
                connection.execute("COMMIT", prepare=False)
            return planned
        except BaseException as ex:
            if not connection.closed and connection.info.transaction_status != IDLE:
                connection.execute("ROLLBACK")
            if not isinstance(ex, psycopg.errors.UniqueViolation):
                raise
            # An id made by another transaction since the read: read it again.


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
    """The ids, plants and tags, as three arrays."""
    ids = list(plants)
    texts = [plant.decode() for plant in plants.values()]
    tags = [tag_key(plant) for plant in plants.values()]
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
