"""A batch of changes on PostgreSQL: two round trips and one transaction, however many changes.

The first round trip begins the transaction and locks the rows of the batch's ids, reading
what they hold. A change waits only for the rows it touches: the batch skips a row another
transaction holds (`SKIP LOCKED`; a batch of another host slowed by its disk, an operator's
session) and leaves the changes of that id to their requests (`RowHeld`), each of which then
makes its change alone, waiting for the row within its own bound. The changes are made on what
was read (`plantstore.stores.changes.plan`), and the second round trip writes what they
changed, one statement a kind of write over arrays (`unnest`), the events with them, and
commits. The statements of a round trip go as one message, one send: psycopg's `ClientCursor`
binds their parameters (`mogrify`) and sends them as one simple query, whose statements the
server runs in turn, skipping the rest once one fails.

The feed must give every change committed after a cursor, on whatever host, and each plant's
changes in the order they were committed. Positions taken from a sequence would do neither: a
sequence's value is taken before its transaction commits, so a reader can pass position 12
while 11 is still to be committed. So a batch's events take positions from its transaction's
id (`pg_current_xact_id()`, taken as it begins: `POSITIONS_PER_TRANSACTION` apiece), and the
feed is read only below the oldest transaction still running (postgres_feed.py), where nothing
more can come. A transaction's id is older than those of transactions that began after it,
which may change a plant and commit before it changes that plant too: before its commit, the
batch asks `plantstore_events_in_order` whether any of its plants has an event at a later
position, and if one has, it is made again in a new transaction, with a newer id. So each
plant's events are in the order of its commits, as its row's lock ordered them.

An id that held nothing has no row to lock: another transaction may make it meanwhile. The
insert then fails on the primary key, the transaction with it, and nothing of the batch is
made: it is read and made again, and the other's plant is now what it reads. New ids are
inserted in id order, so batches that insert the same ids never wait for each other in a
circle.
"""

from collections.abc import Sequence

import psycopg
from psycopg.pq import TransactionStatus

from plantstore.stores.changes import Change, Plan, plan
from plantstore.stores.postgres_connections import NothingWritten
from plantstore.stores.sql import event_rows, outbox_rows, tag_key

#: A connection outside any transaction.
IDLE = TransactionStatus.IDLE
#: Positions in the feed a transaction has for its events: more than a batch has changes (one
#: a request its worker answers), and few enough that positions fit a bigint for the first
#: 2**47 transactions.
POSITIONS_PER_TRANSACTION = 1 << 16
#: The transaction's id, and each of its statements' bound (`statement_timeout`, for this
#: transaction alone).
_BEGUN = "SELECT pg_current_xact_id()::text::bigint, set_config('statement_timeout', %s, true)"
#: The events, inserted once `plantstore_events_in_order` (of the batch's plants and its first
#: position) passes: a condition on no row, which PostgreSQL tests once, before any insert.
_EVENTS = (
    "INSERT INTO events (position, plant_id, at, document) "
    "SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::float8[], %s::bytea[]) "
    "WHERE plantstore_events_in_order(%s::bigint[], %s::bigint)"
)
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
    locking = _LOCK_ROWS if wait_for_rows else _LOCK_FREE_ROWS
    cursor = psycopg.ClientCursor(connection)
    while True:
        try:
            try:
                _send(cursor, ("BEGIN", None), (_BEGUN, (timeout,)), (locking, {"ids": ids}))
            except psycopg.OperationalError as ex:
                if connection.broken:
                    raise NothingWritten from ex
                raise
            cursor.nextset()
            transaction_id, _ = cursor.fetchone()
            cursor.nextset()
            rows = cursor.fetchall()
            first_position = transaction_id * POSITIONS_PER_TRANSACTION
            planned = _plan(changes, rows, first_position)
            _send(cursor, *_writes(planned, first_position, subscribers), ("COMMIT", None))
            return planned
        except BaseException as ex:
            if not connection.closed and connection.info.transaction_status != IDLE:
                connection.execute("ROLLBACK")
            if not isinstance(
                ex, psycopg.errors.UniqueViolation | psycopg.errors.SerializationFailure
            ):
                raise
            # An id made by another transaction since the read, or a plant changed by a newer
            # one: read again, in a new transaction.


def _plan(changes: Sequence[Change], rows: list[tuple], first_position: int) -> Plan:
    """Make the changes whose rows are locked or free on what the rows hold; the others are
    `RowHeld`, in their places among the outcomes."""
    held = {plant_id for plant_id, plant in rows if plant is None}
    kept = {plant_id: plant.encode() for plant_id, plant in rows if plant is not None}
    planned = plan(
        [change for change in changes if change.plant_id not in held], kept, first_position
    )
    if not held:
        return planned
    made = iter(planned.outcomes)
    outcomes = [RowHeld() if change.plant_id in held else next(made) for change in changes]
    return planned._replace(outcomes=outcomes)


def _writes(planned: Plan, first_position: int, subscribers: Sequence[str]) -> list[tuple]:
    """The statements, with their parameters, that write what the batch changed, check the
    order of its events, and write them, to the feed and the outbox."""
    writes = []
    if planned.inserts:
        writes.append((_INSERT, _columns(planned.inserts)))
    if planned.updates:
        writes.append((_UPDATE, _columns(planned.updates)))
    if planned.deletes:
        writes.append((_DELETE, (planned.deletes,)))
    if not planned.events:
        return writes
    plant_ids = sorted({event.plant_id for event in planned.events})
    events = _transposed(event_rows(planned.events))
    writes.append((_EVENTS, (*events, plant_ids, first_position)))
    if subscribers:
        writes.append((_RECORD, _transposed(outbox_rows(planned.events, subscribers))))
    return writes


def _send(cursor: psycopg.ClientCursor, *statements: tuple[str, object]) -> None:
    """Run `statements` in one round trip: bound here, sent as one query, one send."""
    cursor.execute("; ".join(cursor.mogrify(query, params) for query, params in statements))


def _columns(plants: dict[int, bytes]) -> tuple[list, list, list]:
    """The ids, plants and tags, as three arrays, in id order."""
    ids = sorted(plants)
    texts = [plants[plant_id].decode() for plant_id in ids]
    tags = [tag_key(plants[plant_id]) for plant_id in ids]
    return ids, texts, tags


def _transposed(rows: list[tuple]) -> list[list]:
    """Rows (one at least) as one array a column, as `unnest` takes them."""
    return [list(column) for column in zip(*rows, strict=True)]
