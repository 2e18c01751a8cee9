"""The feed on PostgreSQL: a page of it, where it ends, and its pruning.

Each batch's events are at positions taken from its transaction's id (postgres_batch.py): the
feed is read only below the oldest transaction still running anywhere on the server
(`pg_snapshot_xmin`), where every transaction has ended and no event can come any more. A
long transaction holds the feed back (a batch's is bounded by its requests' bound), never
lets it skip an event.
"""

import psycopg

from plantstore.core.stores import CursorGone, EventPage
from plantstore.stores.postgres_batch import POSITIONS_PER_TRANSACTION
from plantstore.stores.sql import page_of, pruned_through

#: The last position that can be read: just below the first of the oldest running transaction.
_HEAD = f"(pg_snapshot_xmin(pg_current_snapshot())::text::bigint * {POSITIONS_PER_TRANSACTION}) - 1"
#: In one statement, so one snapshot: the feed's head, how far it was pruned, and the page.
_READ = (
    f"WITH feed_now AS MATERIALIZED (SELECT {_HEAD} AS head, pruned_through FROM feed) "
    "SELECT feed_now.head, feed_now.pruned_through, page.position, page.document "
    "FROM feed_now LEFT JOIN LATERAL (SELECT position, document FROM events "
    "WHERE position > coalesce(%(after)s::bigint, "
    "feed_now.pruned_through) AND position <= feed_now.head ORDER BY position "
    "LIMIT %(limit)s) AS page ON true ORDER BY page.position"
)
_OLDEST = f"SELECT position, at FROM events WHERE position <= {_HEAD} ORDER BY position LIMIT %s"
#: In one statement, so one transaction: no reader finds the events gone and the feed not
#: saying so.
_PRUNE = (
    "WITH gone AS (DELETE FROM events WHERE position <= %(through)s RETURNING 1) "
    "UPDATE feed SET pruned_through = greatest(pruned_through, %(through)s) "
    "RETURNING (SELECT count(*) FROM gone)"
)


def read_events(connection: psycopg.Connection, after: int | None, limit: int) -> EventPage:
    """A page of the feed after `after` (from the oldest kept, when None).

    Its rows come in binary: each document as its bytes, where text would send it in hex, twice
    as long, for the client to decode.
    """
    rows = connection.execute(_READ, {"after": after, "limit": limit}, binary=True).fetchall()
    head, pruned = rows[0][:2]
    if after is not None and after < pruned:
        raise CursorGone
    page = [row[2:] for row in rows if row[2] is not None]
    return page_of(page, limit, pruned if after is None else after, head)


def head(connection: psycopg.Connection) -> int:
    return connection.execute(f"SELECT {_HEAD}").fetchone()[0]


def prune(connection: psycopg.Connection, before: float, limit: int) -> int:
    """Forget up to `limit` of the oldest events made before `before`, below the head only."""
    through = pruned_through(connection.execute(_OLDEST, (limit,)).fetchall(), before)
    if not through:
        return 0
    return connection.execute(_PRUNE, {"through": through}).fetchone()[0]
