"""Plants put in a store ahead of a measurement, the feed of their creation, and the fast ways
to put them there.

A million plants created through HTTP would take far too long, so each store is filled
directly with the very documents the service keeps (`Plant` bodies, as orjson writes them).
SQLite and PostgreSQL are first opened through `open_store`, so their schema and indexes are
the service's own. The plants then go in in one transaction: on SQLite through the store's own
batch writer (`write_batch`), on PostgreSQL by COPY, in the rows the store's batch writes (the
document and its `tag_key`): its statement takes a batch's arrays, made for a few requests, not
a million rows. ANALYZE then lets the planner know the table as it is.
The feed, when asked for, is one `created` event a plant, in id order, at consecutive
positions: what the service keeps after creating each, in the rows its batches write
(`event_rows`), documents and all. bench/tests/test_bench.py checks that the service answers
the same for them as for plants it made.
"""

import sqlite3
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice

from bench.environs import tag_of
from plantstore.core.events import Event, EventKind
from plantstore.core.stores import PlantStore
from plantstore.stores import open_store
from plantstore.stores.changes import Plan
from plantstore.stores.sql import event_rows, tag_key
from plantstore.stores.sqlite_batch import write_batch


def document(plant_id: int, tag: str) -> bytes:
    """The document the service keeps for `plant_body(plant_id, tag)`."""
    return b'{"name":"plant-%d","tag":"%s"}' % (plant_id, tag.encode())


@dataclass(frozen=True)
class Stock:
    """Plants 0 to `count` - 1, plant N named `plant-N` and tagged `tag_of(N)` (`t0` to `t99`).

    A tag's plants are spread evenly over the ids, as they would be if clients chose tags at
    random; so the plants of one tag's page lie as far apart in a store of any size.
    """

    count: int

    def documents(self) -> Iterator[tuple[int, bytes]]:
        return ((plant_id, document(plant_id, tag_of(plant_id))) for plant_id in self.ids())

    def rows(self) -> Iterator[tuple[int, str, bytes | None]]:
        """The rows of PostgreSQL's `plants` table, as its store writes them: id, document, tag."""
        return ((plant_id, plant.decode(), tag_key(plant)) for plant_id, plant in self.documents())

    def ids(self, tag: str | None = None) -> Sequence[int]:
        """The ids in ascending order, of every plant or of those tagged `tag`."""
        if tag is None:
            return range(self.count)
        return [plant_id for plant_id in range(self.count) if tag_of(plant_id) == tag]


#: The transaction whose positions PostgreSQL's feed put in ahead starts at: the first one a
#: cluster gives (`FirstNormalTransactionId`), long ended once initdb has run.
FIRST_TRANSACTION = 3


def fill_memory(store: PlantStore, stock: Stock) -> None:
    """Put the plants in through the store's `add`, which makes each one's event, as a create."""
    for plant_id, plant in stock.documents():
        store.add(plant_id, plant)


def _open_and_close(url: str) -> None:
    """Let the service's store make (or migrate) its schema, then let go of it."""
    store = open_store(url)
    try:
        store.check_ready()
    finally:
        store.close()


#: Plants (or events) the stores are handed at a time: a million at once would be held in
#: memory, twice over.
FILL_BATCH = 10_000


def creation_events(stock: Stock, first: int) -> Iterator[list[Event]]:
    """The `created` event of each of the stock's plants, in id order at consecutive positions
    from `first`, `FILL_BATCH` at a time."""
    made = time.time()
    documents = stock.documents()
    position = first
    while batch := list(islice(documents, FILL_BATCH)):
        yield [
            Event(position + rank, EventKind.CREATED, plant_id, plant, made)
            for rank, (plant_id, plant) in enumerate(batch)
        ]
        position += len(batch)


def fill_sqlite(path: str, stock: Stock) -> None:
    _open_and_close(f"sqlite:///{path}")
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("BEGIN")
        documents = stock.documents()
        while inserts := dict(islice(documents, FILL_BATCH)):
            planned = Plan(outcomes=[], inserts=inserts, updates={}, deletes=[], events=[])
            write_batch(connection, planned, subscribers=())
        connection.execute("COMMIT")
        connection.execute("ANALYZE")
    finally:
        connection.close()


def fill_sqlite_feed(path: str, stock: Stock) -> None:
    """Put in the feed the creation of the stock's plants, at positions 1 to N, through the
    store's own batch writer, as AUTOINCREMENT gives them: inserted, they move its count
    (`sqlite_sequence`) on to N."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("BEGIN")
        for events in creation_events(stock, 1):
            planned = Plan(outcomes=[], inserts={}, updates={}, deletes=[], events=events)
            write_batch(connection, planned, subscribers=())
        connection.execute("COMMIT")
        connection.execute("ANALYZE events")
    finally:
        connection.close()


def fill_postgres(url: str, stock: Stock) -> None:
    # Imported here, as plantstore.stores does: the base install has no psycopg.
    import psycopg

    _open_and_close(url)
    with psycopg.connect(url) as connection:
        with connection.cursor().copy("COPY plants (id, plant, tag) FROM STDIN") as copy:
            for row in stock.rows():
                copy.write_row(row)
        connection.commit()
        # VACUUM too, so that no autovacuum of the fresh rows runs while pages are measured.
        connection.autocommit = True
        connection.execute("VACUUM (ANALYZE) plants")


def fill_postgres_feed(url: str, stock: Stock) -> None:
    """Put in the feed the creation of the stock's plants, by COPY in the rows the store's
    batch writes, at consecutive positions from the first of `FIRST_TRANSACTION`'s: as if ended
    transactions had made them, 2**16 apiece.

    The feed is read below the oldest transaction still running (`pg_snapshot_xmin`): the
    positions are checked to be below it, as they are unless the feed outgrows the transactions
    the cluster has run.
    """
    import psycopg

    from plantstore.stores.postgres_batch import POSITIONS_PER_TRANSACTION

    first = FIRST_TRANSACTION * POSITIONS_PER_TRANSACTION
    with psycopg.connect(url) as connection:
        columns = "position, plant_id, at, document"
        with connection.cursor().copy(f"COPY events ({columns}) FROM STDIN") as copy:
            for events in creation_events(stock, first):
                for row in event_rows(events):
                    copy.write_row(row)
        connection.commit()
        (readable,) = connection.execute(
            "SELECT coalesce(max(position), 0) < "
            "pg_snapshot_xmin(pg_current_snapshot())::text::bigint * %s FROM events",
            (POSITIONS_PER_TRANSACTION,),
        ).fetchone()
        if not readable:
            raise RuntimeError("the feed put in reaches past the transactions the cluster ran")
        connection.commit()
        connection.autocommit = True
        connection.execute("VACUUM (ANALYZE) events")
