"""The feed on SQLite: a page of it, where it ends, and its pruning."""

import sqlite3

from plantstore.core.stores import CursorGone, EventPage
from plantstore.stores.sql import page_of, pruned_through
from plantstore.stores.sqlite_batch import LAST_POSITION

_PRUNED_THROUGH = "SELECT pruned_through FROM feed"
_EVENTS = (
    "SELECT position, document FROM events "
    "WHERE position > ? AND position <= ? ORDER BY position LIMIT ?"
)
_OLDEST = "SELECT position, at FROM events ORDER BY position LIMIT ?"


def read_events(connection: sqlite3.Connection, after: int | None, limit: int) -> EventPage:
    """A page of the feed after `after`, read in one transaction: a prune that comes meanwhile
    cannot take events from under a cursor it found kept."""
    connection.execute("BEGIN")
    try:
        (pruned,) = connection.execute(_PRUNED_THROUGH).fetchone()
        if after is None:
            after = pruned
        elif after < pruned:
            raise CursorGone
        (last,) = connection.execute(LAST_POSITION).fetchone()
        rows = connection.execute(_EVENTS, (after, last, limit)).fetchall()
    finally:
        connection.execute("COMMIT")
    return page_of(rows, limit, after, last)


def head(connection: sqlite3.Connection) -> int:
    """The last position given: every event at or before it is committed."""
    return connection.execute(LAST_POSITION).fetchone()[0]


def prune(connection: sqlite3.Connection, before: float, limit: int) -> int:
    """Forget up to `limit` of the oldest events made before `before`, under the write lock."""
    gone = pruned_through(connection.execute(_OLDEST, (limit,)).fetchall(), before)
    if not gone:
        return 0
    pruned = connection.execute("DELETE FROM events WHERE position <= ?", (gone,)).rowcount
    connection.execute("UPDATE feed SET pruned_through = max(pruned_through, ?)", (gone,))
    return pruned
