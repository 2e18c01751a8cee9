"""A store in PostgreSQL: durable, and shared by every process on every machine."""

import time
from collections.abc import Callable, Sequence
from contextlib import closing
from functools import partial

import psycopg

from plantstore.core.plants import Condition, Page, Put, fill_page
from plantstore.core.stores import Delivery, EventPage
from plantstore.stores.changes import Add, Change, Remove, Replace
from plantstore.stores.feed_waits import FeedWaits
from plantstore.stores.group_commit import GroupCommit
from plantstore.stores.postgres_batch import RowHeld, make_batch
from plantstore.stores.postgres_connections import (
    REQUEST_SECONDS,
    STATEMENT_SECONDS,
    Connections,
)
from plantstore.stores.postgres_feed import head, prune, read_events
from plantstore.stores.sql import claim_statement, deliveries, outbox_statements, page_query

#: Seconds readiness waits for a connection: with its statement, and a wait for one of the
#: worker's store slots (`plantstore.stores.gate`), it answers within a second.
READY_WAIT_SECONDS = 0.3

_OUTBOX = outbox_statements("%s")
#: Leases what is due, skipping rows another claim has locked and not yet committed: without
#: SKIP LOCKED, a claim waiting on one would lease the rows the other just leased.
_CLAIM = claim_statement("%s", " FOR UPDATE SKIP LOCKED")
_GET = "SELECT plant::text FROM plants WHERE id = %s"


class PostgresStore:
    """Plants in PostgreSQL, through a pool of connections opened in this process, after
    gunicorn's fork: one inherited across it would be shared by accident.

    A worker starts while the database is down (503s meanwhile), and no call waits on it longer
    than `REQUEST_SECONDS`: a thread held by the store is one that /healthz cannot have.
    Changes are made in batches led by their requests (group_commit.py), each one transaction
    of two round trips (postgres_batch.py); reads never wait behind a batch.

    Args:
        url: a libpq URL; what it leaves out comes from the usual `PG*` variables.
        subscribers: the keys (`subscriber_key`) of the subscribers events go to.
        on_commit: called after each commit, with the numbers of changes and events it held.

    Raises:
        SchemaTooNew: a newer plantstore brought the database to a schema this one does not know.
        StoreUnusable: the database is not UTF8 (it is left as it is).
    """

    def __init__(
        self,
        url: str,
        subscribers: Sequence[str] = (),
        on_commit: Callable[[int, int], None] | None = None,
    ) -> None:
        self._subscribers = tuple(subscribers)
        self._on_commit = on_commit
        self._waits = FeedWaits()
        self._writer = GroupCommit(self._write, wait=REQUEST_SECONDS)
        self._database = Connections(url)

    def add(self, plant_id: int, plant: bytes) -> bytes:
        return self._make(Add(plant_id, plant))

    def put(
        self, plant_id: int, plant: bytes, condition: Condition | None = None
    ) -> tuple[Put, bytes]:
        return self._make(Replace(plant_id, plant, condition))

    def get(self, plant_id: int) -> bytes | None:
        row = self._database.run(
            lambda connection: connection.execute(_GET, (plant_id,)).fetchone(), again=True
        )
        return None if row is None else row[0].encode()

    def delete(self, plant_id: int, condition: Condition | None = None) -> bool:
        return self._make(Remove(plant_id, condition))

    def page(self, after: int | None, limit: int, tag: str | None, max_bytes: int) -> Page:
        query = page_query(after, limit, tag, plant="plant::text", marker="%s")
        return self._database.run(
            partial(_page, query=query, limit=limit, max_bytes=max_bytes), again=True
        )

    def events(self, after: int | None, limit: int) -> EventPage:
        return self._database.run(partial(read_events, after=after, limit=limit), again=True)

    def head(self) -> int:
        return self._database.run(head, again=True)

    def prune(self, before: float, limit: int) -> int:
        return self._database.run(partial(prune, before=before, limit=limit))

    def wait_for_events(self, timeout: float) -> bool:
        return self._waits.wait(timeout)

    def stop_waiting(self) -> None:
        self._waits.stop()

    def check_ready(self) -> None:
        """Run a write that changes nothing: it fails where a plant's would, and as soon.

        A read-only server or session, a standby, or a lock on the table that outlasts
        `STATEMENT_SECONDS` refuse it, as they refuse an insert.
        """
        self._database.run(
            lambda connection: connection.execute("DELETE FROM plants WHERE false"),
            wait=READY_WAIT_SECONDS,
            again=True,
        )

    def claim(self, subscriber: str, now: float, lease_until: float, limit: int) -> list[Delivery]:
        return self._database.run(
            lambda connection: deliveries(
                connection.execute(_CLAIM, (subscriber, now, limit, lease_until)).fetchall()
            )
        )

    def retry(self, delivery: Delivery, at: float) -> None:
        self._database.run(
            lambda connection: connection.execute(_OUTBOX["retry"], (at, delivery.id))
        )

    def forget(self, delivery: Delivery) -> None:
        self._database.run(lambda connection: connection.execute(_OUTBOX["forget"], (delivery.id,)))

    def oldest(self) -> float | None:
        row = self._database.run(
            lambda connection: connection.execute(_OUTBOX["oldest"]).fetchone(), again=True
        )
        return None if row is None else row[0]

    def close(self) -> None:
        """End the waits for events, make the changes queued, then close every connection."""
        self._waits.stop()
        self._writer.close()
        self._database.close()

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
        planned = self._database.run(
            lambda connection: make_batch(
                connection,
                changes,
                self._subscribers,
                statement_seconds=max(STATEMENT_SECONDS, rows_until - time.monotonic()),
                wait_for_rows=wait_for_rows,
            ),
            wait=rows_until - time.monotonic(),
        )
        if planned.events:
            self._waits.committed()
        made = sum(not isinstance(outcome, RowHeld) for outcome in planned.outcomes)
        if made and self._on_commit is not None:
            self._on_commit(made, len(planned.events))
        return planned.outcomes


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
