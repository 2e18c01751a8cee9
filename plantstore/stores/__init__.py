"""Where plants are kept: the interface every store implements, and the choice of one.

A plant is kept as its JSON document (UTF-8 bytes): the very body the service answers for it.
That form is compact and is served as it is, with no parse and no dump.
"""

import time
from collections.abc import Callable, Iterable, Sequence
from enum import Enum
from typing import NamedTuple, Protocol

import orjson


class StoreUnavailable(Exception):
    """The store cannot serve now (its database is unreachable, locked or failing); try later.

    The message says why, for the log; it never holds a password.
    """


class StoreUnusable(Exception):
    """The configured store can never serve as it is (its SQLite file is not a database, or
    cannot be opened at all; its PostgreSQL database is not UTF8): unlike `StoreUnavailable`,
    waiting does not help, so a start stops.
    """


class SchemaTooNew(Exception):
    """The database was brought to a schema newer than this code knows: it must not touch it."""


class ConditionFailed(Exception):
    """A change's condition did not hold for what the id held: nothing was changed."""


#: A change's condition: given what the id holds (None for nothing), whether the change may
#: go ahead. The store asks it in the same atomic step as the change.
Condition = Callable[[bytes | None], bool]


class Put(Enum):
    """What a `PlantStore.put` did."""

    #: The id held nothing: the plant is kept under it.
    CREATED = "created"
    #: The id held another plant: the new one replaced it.
    REPLACED = "replaced"
    #: The id held the same plant (`same_plant`): it is kept as it was, untouched.
    UNCHANGED = "unchanged"


def same_plant(kept: bytes, plant: bytes) -> bool:
    """Whether two plant documents hold the same plant: as JSON values, not as text.

    A plant kept by an earlier version, or by another JSON library, may be spelled otherwise
    (key order, escapes) and still be the same plant.
    """
    return kept == plant or orjson.loads(kept) == orjson.loads(plant)


class Page(NamedTuple):
    """A page of plants, as `PlantStore.page` gives it."""

    #: (id, plant) pairs, in ascending id order.
    plants: list[tuple[int, bytes]]
    #: Whether the page ended at its `limit`, or before a plant that did not fit in its bytes:
    #: then plants may follow it (none, at times); if not, none followed it when it was read.
    full: bool


class PlantStore(Protocol):
    """Where plants are kept. Every method but `close` raises `StoreUnavailable` when it cannot
    serve now; every store gives the same answers to the same sequence of calls.
    """

    def add(self, plant_id: int, plant: bytes) -> bytes:
        """Keep `plant` under `plant_id` unless the id is taken; return what the id now holds.

        Check and insert are one atomic step: of concurrent calls for a new id, exactly one keeps
        its plant and every call returns that plant. An id freed by a concurrent `delete` is
        taken again, never reported as holding a plant that no order of the calls explains.
        """
        ...

    def get(self, plant_id: int) -> bytes | None:
        """The plant kept under `plant_id`, or None."""
        ...

    def put(
        self, plant_id: int, plant: bytes, condition: Condition | None = None
    ) -> tuple[Put, bytes]:
        """Keep `plant` under `plant_id`, whatever the id held, if `condition` holds for that;
        tell what was done, and what the id now holds.

        The check and the change are one atomic step: of concurrent calls whose condition
        holds for the same plant, one changes it, and the others' conditions are asked of
        the plant it made. A plant the same as the one kept (`same_plant`) leaves it untouched.

        Raises:
            ConditionFailed: `condition` did not hold for what the id held; nothing changed.
        """
        ...

    def delete(self, plant_id: int, condition: Condition | None = None) -> bool:
        """Forget the plant under `plant_id` if `condition` holds for it; tell whether there
        was one. Check and delete are one atomic step, as for `put`.

        Raises:
            ConditionFailed: `condition` did not hold for what the id held; nothing changed.
        """
        ...

    def page(self, after: int | None, limit: int, tag: str | None, max_bytes: int) -> Page:
        """Up to `limit` (id, plant) pairs in ascending id order, from an index, that fit in
        `max_bytes` as `fill_page` counts them.

        Only ids above `after` (every id when None), and only plants whose `tag` is exactly
        `tag` when it is given. Its cost grows with `limit`, not with what the store holds,
        and its memory with `max_bytes`: plants that do not fit are not read.
        """
        ...

    def check_ready(self) -> None:
        """Return if a write can succeed now; else raise `StoreUnavailable` saying why not.

        It answers within a second whatever the database does: a balancer's probe waits on it.
        """
        ...

    def close(self) -> None:
        """Let go of every connection; the store is not used afterwards."""
        ...


class Delivery(NamedTuple):
    """One event on its way to one subscriber, as a claim hands it out."""

    id: int
    webhook_id: str
    #: The subscriber's key (`plantstore.webhooks.subscribers.subscriber_key`), not its URL,
    #: which may hold a password and so is never written to the database.
    subscriber: str
    body: bytes
    created_at: float
    attempts: int


class Outbox(Protocol):
    """The events a store wrote with its changes (one delivery per event and subscriber), until
    sent.

    A store opened with subscribers writes a `plant.created` event in the transaction of an
    `add` or a `put` that kept a plant under a free id, a `plant.updated` one in that of a
    `put` that replaced one, and a `plant.deleted` one in that of a `delete` that found one:
    the change and its event commit, or neither does. Times are seconds since the epoch, as
    `time.time()` gives.
    """

    def claim(self, subscriber: str, now: float, lease_until: float, limit: int) -> list[Delivery]:
        """Take up to `limit` deliveries to `subscriber` due at `now`, for this caller alone.

        The earliest due are taken first, and handed out in id order. One subscriber at a
        time, so that one that fails or answers slowly holds up only its own deliveries.

        They are not due again before `lease_until`: a caller that dies with them leaves them
        to whoever claims after that. Of concurrent callers, in this process or others on the
        same database, no two are handed the same delivery.
        """
        ...

    def retry(self, delivery: Delivery, at: float) -> None:
        """Count a failed attempt of `delivery`, and make it due again at `at`."""
        ...

    def forget(self, delivery: Delivery) -> None:
        """Drop `delivery`: delivered, or given up."""
        ...

    def oldest(self) -> float | None:
        """When the oldest delivery still pending was made; None when none is."""
        ...


def stored_plant(plant_id: int, plant: bytes) -> bytes:
    """Give the `StoredPlant` document of a kept `Plant` document: its id first, then its fields.

    The kept bytes are already `PlantSchema`'s dump of the plant, a JSON object with at least a
    name, so the id goes in after its `{`: loading and dumping the plant again would give the
    same fields in the same order. tests/test_schemas.py checks it against `StoredPlantSchema`.
    """
    return b'{"id":%d,%s' % (plant_id, plant[1:])


#: The most `stored_plant` adds to a plant: `"id":-9223372036854775808,`.
ID_BYTES = 26


def fill_page(pairs: Iterable[tuple[int, bytes]], limit: int, max_bytes: int) -> Page:
    """Take a page from `pairs` (at most `limit`, in ascending id order) that fits in `max_bytes`.

    Each pair counts as its plant and `ID_BYTES`, so that the page's `stored_plant` documents
    hold `max_bytes` at most; but the first pair is taken however large, so that every plant
    can be listed. A bound on the count alone would let a page of large plants grow `limit`
    times as large as one plant.

    It reads `pairs` no further than the first pair that does not fit: a store reading rows
    lazily from its database reads one row more than it answers, not every row up to `limit`.
    Otherwise it reads `pairs` to their end, so that a query's answer is read whole, as it ends.
    """
    plants: list[tuple[int, bytes]] = []
    for pair in pairs:
        max_bytes -= len(pair[1]) + ID_BYTES
        if max_bytes < 0 and plants:
            return Page(plants, full=True)
        plants.append(pair)
    return Page(plants, full=len(plants) == limit)


#: The URL of the memory store, `PLANTSTORE_STORE`'s default.
MEMORY_URL = "memory://"


def store_kind(url: str) -> str | None:
    """Name the store a `PLANTSTORE_STORE` URL chooses (memory, sqlite, postgresql), or None."""
    if url == MEMORY_URL:
        return "memory"
    if url.startswith("sqlite:///") and url.removeprefix("sqlite:///") not in ("", "/", ":memory:"):
        return "sqlite"
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql"
    return None


def open_store(
    url: str,
    subscribers: Sequence[str] = (),
    on_event: Callable[[], None] | None = None,
    on_commit: Callable[[int], None] | None = None,
) -> PlantStore:
    """Open the store a `PLANTSTORE_STORE` URL names (checked by `plantstore.config`).

    A SQLite store answers only for the file the service started with, once one is remembered
    (`remember_started_store`).

    With `subscribers` (their keys), it is an `Outbox` too, which writes an event for each of
    them with every change, and calls `on_event` once the change and its events are committed.
    A durable store calls `on_commit` after each commit, with the number of changes it held.

    The SQLite and PostgreSQL modules are imported only when chosen, so the base install
    needs neither psycopg nor anything else beyond the standard library.
    """
    kind = store_kind(url)
    if kind == "memory":
        from plantstore.stores.memory import MemoryStore

        return MemoryStore(subscribers, on_event)
    if kind == "sqlite":
        from plantstore.stores.sqlite import SqliteStore
        from plantstore.stores.sqlite_file import started_file

        return SqliteStore(
            url.removeprefix("sqlite:///"),
            subscribers,
            on_event,
            started_with=started_file(),
            on_commit=on_commit,
        )
    if kind == "postgresql":
        from plantstore.stores.postgres import PostgresStore

        return PostgresStore(url, subscribers, on_event, on_commit)
    # Not the URL itself: a mistyped PostgreSQL URL may hold a password.
    raise ValueError("PLANTSTORE_STORE names no store")


#: Seconds between a start's attempts to reach a store that cannot serve yet.
PREPARE_RETRY_SECONDS = 0.5


def prepare_store(url: str, wait: float) -> None:
    """Reach the store a start names and bring its schema up to date, once, for every worker.

    A store that cannot serve yet (a database starting, a lock held) is tried again until
    `wait` seconds have passed.

    Raises:
        StoreUnavailable: it still could not serve after `wait` seconds; the message says why.
        StoreUnusable: it can never serve as it is.
        SchemaTooNew: a newer plantstore brought it to a schema this one does not know.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            if store_kind(url) == "postgresql":
                from plantstore.stores.postgres import prepare

                prepare(url)
            else:
                open_store(url).close()
            return
        except StoreUnavailable:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise
            time.sleep(min(PREPARE_RETRY_SECONDS, remaining))


def remember_started_store(url: str) -> None:
    """Make every store opened from now on, here or in a process forked from here, answer only
    for the database the URL names now: for SQLite, the file at its path (the others have none).
    """
    if store_kind(url) == "sqlite":
        from plantstore.stores.sqlite_file import remember_started_file

        remember_started_file(url.removeprefix("sqlite:///"))
