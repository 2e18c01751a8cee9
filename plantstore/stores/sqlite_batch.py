"""A batch of changes on SQLite, in one transaction under the write lock: one statement reads
what its ids hold, and one statement a kind of write writes what it changed, its events in the
feed and in the outbox with them.

SQLite has one writer at a time, whatever the number of processes: the feed's positions are
taken under the write lock, after those of every commit before, so the feed's order is the
order of the commits, and an event a reader sees has none still to come before it.
"""

import sqlite3
from collections.abc import Sequence

import orjson

from plantstore.stores.changes import Change, Plan, plan
from plantstore.stores.sql import event_rows, outbox_rows, tag_key

#: The plant as the store reads it: the bytes of its UTF-8 text.
PLANT_BYTES = "CAST(plant AS BLOB)"
#: What the ids of a batch hold, the ids given as one JSON array: one statement for any number.
_KEPT = f"SELECT id, {PLANT_BYTES} FROM plants WHERE id IN (SELECT value FROM json_each(?))"
#: The last position the feed gave, pruned or not (AUTOINCREMENT's own count).
LAST_POSITION = "SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'events'"


def plan_batch(connection: sqlite3.Connection, changes: Sequence[Change]) -> Plan:
    """Read what the batch's ids hold, and make its changes on that; in the batch's transaction."""
    if not changes:
        return plan(changes, {}, first_position=0)
    ids = orjson.dumps(sorted({change.plant_id for change in changes})).decode()
    kept = dict(connection.execute(_KEPT, (ids,)).fetchall())
    (last,) = connection.execute(LAST_POSITION).fetchone()
    return plan(changes, kept, first_position=last + 1)


def write_batch(connection: sqlite3.Connection, planned: Plan, subscribers: Sequence[str]) -> None:
    """Write what a batch changed, a statement a kind of write, and its events."""
    if planned.inserts:
        connection.executemany(
            "INSERT INTO plants (id, plant, tag) VALUES (?, ?, ?)",
            [(i, plant.decode(), tag_key(plant)) for i, plant in planned.inserts.items()],
        )
    if planned.updates:
        connection.executemany(
            "UPDATE plants SET plant = ?, tag = ? WHERE id = ?",
            [(plant.decode(), tag_key(plant), i) for i, plant in planned.updates.items()],
        )
    if planned.deletes:
        connection.executemany("DELETE FROM plants WHERE id = ?", [(i,) for i in planned.deletes])
    if planned.events:
        connection.executemany(
            "INSERT INTO events (position, plant_id, at, document) VALUES (?, ?, ?, ?)",
            event_rows(planned.events),
        )
    if planned.events and subscribers:
        connection.executemany(
            "INSERT INTO outbox (webhook_id, subscriber, body, created_at, next_attempt_at) "
            "VALUES (?1, ?2, ?3, ?4, ?4)",
            outbox_rows(planned.events, subscribers),
        )
