"""What the SQLite and PostgreSQL stores share: the tag they index, schema steps, a page query,
the feed's rows and pages, and the statements of the outbox.
"""

from collections.abc import Iterable, Sequence
from typing import TypeVar

import orjson

from plantstore.core.events import Event, documents_of, subscriber_key
from plantstore.core.stores import Delivery, EventPage, SchemaTooNew

_Step = TypeVar("_Step")


def tag_key(plant: bytes | str) -> bytes | None:
    """Name the plant's tag as the SQL stores index it: its UTF-8 bytes, or None for no tag.

    Read here as the memory store reads it, not by the databases' JSON functions: PostgreSQL's
    refuse a document holding `\\u0000` anywhere, and SQLite's `json_extract` ends a text at it.
    """
    tag = orjson.loads(plant).get("tag")
    return None if tag is None else tag.encode()


def steps_to_take(steps: Sequence[_Step], version: int, database: str) -> Sequence[_Step]:
    """Name the schema steps a database at `version` (the first `version` steps taken) lacks.

    Raises:
        SchemaTooNew: a newer plantstore took steps this one does not know.
    """
    if version > len(steps):
        raise SchemaTooNew(
            f"{database} has schema version {version}, but this plantstore knows versions up to "
            f"{len(steps)}: run a newer plantstore on it"
        )
    return steps[version:]


def page_query(
    after: int | None, limit: int, tag: str | None, *, plant: str, marker: str
) -> tuple[str, tuple]:
    """Write the query of a page and its values, selecting `plant` and binding with `marker`.

    Only the conditions asked for, so that it is answered from the primary key (or
    `plants_by_tag`) in id order, with no sort: ids are int64, so no bound stands in for a
    missing `after`.
    """
    conditions, values = [], []
    if tag is not None:
        conditions.append(f"tag = {marker}")
        values.append(tag.encode())
    if after is not None:
        conditions.append(f"id > {marker}")
        values.append(after)
    where = f"WHERE {' AND '.join(conditions)} " if conditions else ""
    return f"SELECT id, {plant} FROM plants {where}ORDER BY id LIMIT {marker}", (*values, limit)


#: The outbox's columns, as a `Delivery` holds them.
DELIVERY_COLUMNS = "id, webhook_id, subscriber, body, created_at, attempts"


def outbox_statements(marker: str) -> dict[str, str]:
    """The outbox's statements, binding with `marker`.

    `next_attempt_at` is when a delivery may next be claimed: when a retry is due, or when the
    lease of a claim runs out. One column serves both, so one index (`outbox_due`: subscriber, then
    that time) finds what is due to a subscriber.
    """
    return {
        "retry": f"UPDATE outbox SET next_attempt_at = {marker}, attempts = attempts + 1 "
        f"WHERE id = {marker}",
        "forget": f"DELETE FROM outbox WHERE id = {marker}",
        "oldest": "SELECT created_at FROM outbox ORDER BY id LIMIT 1",
    }


def outbox_rows(events: Sequence[Event], subscribers: Sequence[str]) -> list[tuple]:
    """A delivery of each event to each subscriber, due now: (webhook id, subscriber, body,
    made at), the webhook id the event's own."""
    rows = []
    for event in events:
        body = event.webhook_body()
        rows += [(event.id, subscriber, body, event.at) for subscriber in subscribers]
    return rows


def event_rows(events: Sequence[Event]) -> list[tuple]:
    """The feed's rows of `events`: (position, plant id, made at, `Event` document).

    Each document is made here, once, and kept whole: a page of the feed is then its rows'
    documents, joined. Kept as bytes (BLOB, bytea), so that they go to PostgreSQL in hex,
    with nothing to escape in them, and come back as they went.
    """
    return [
        (event.position, event.plant_id, event.at, document)
        for event, document in zip(events, documents_of(events), strict=True)
    ]


def page_of(rows: Sequence[tuple[int, bytes]], limit: int, after: int, head: int) -> EventPage:
    """The page of the feed's rows (position, document) read after `after`, up to `limit`, up
    to `head`."""
    documents = [document for _, document in rows]
    return EventPage.of(documents, rows[-1][0] if rows else after, limit, after, head)


def pruned_through(oldest: Iterable[tuple[int, float]], before: float) -> int:
    """How far a prune of the feed goes, given its oldest events' (position, made at) in order:
    the position of the last of those made before `before`, in a run from the first; 0 when
    the first was made since."""
    through = 0
    for position, at in oldest:
        if at >= before:
            break
        through = position
    return through


def keys_of_urls(urls: Iterable[tuple[str]]) -> list[tuple[str, str]]:
    """For the outbox's `url` column (rows of one URL each), before its schema step that names
    subscribers by key: the values of `UPDATE outbox SET url = <key> WHERE url = <url>`.

    Computed here, not by SQL: the key is `subscriber_key`, which the deliverer computes from
    the URL it is configured with, so a delivery that waited through the upgrade finds it.
    """
    return [(subscriber_key(url), url) for (url,) in urls]


def claim_statement(marker: str, skip_locked: str = "") -> str:
    """Lease what is due to a subscriber: (subscriber, now, limit, lease_until), giving
    `DELIVERY_COLUMNS`.

    One statement, so one transaction: the rows it picks are leased before anyone else looks.
    They are picked once, in a materialized query: written as `id IN (SELECT ... LIMIT n)`, a
    plan that runs the picking again for each row of the outbox (PostgreSQL's generic plan of
    a statement prepared while the outbox was empty) leases the whole backlog.
    """
    returned = ", ".join(f"outbox.{column}" for column in DELIVERY_COLUMNS.split(", "))
    return (
        f"WITH due AS MATERIALIZED (SELECT id FROM outbox WHERE subscriber = {marker} "
        f"AND next_attempt_at <= {marker} ORDER BY next_attempt_at, id LIMIT {marker}"
        f"{skip_locked}) UPDATE outbox SET next_attempt_at = {marker} FROM due "
        f"WHERE outbox.id = due.id RETURNING {returned}"
    )


def deliveries(rows: Sequence[tuple]) -> list[Delivery]:
    """Claimed rows of `DELIVERY_COLUMNS` as deliveries, in id order (RETURNING has none)."""
    return sorted((Delivery(*row) for row in rows), key=lambda delivery: delivery.id)
