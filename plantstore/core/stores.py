"""What every store promises, whichever keeps the plants: the `PlantStore` and `Outbox`
protocols, and the errors a store raises."""

from typing import NamedTuple, Protocol

from plantstore.core.plants import Condition, Page, Put


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


class CursorGone(Exception):
    """Events after the cursor asked for are no longer kept: whoever follows must list the
    plants again, rather than miss changes."""


class EventPage(NamedTuple):
    """A page of the feed, as `PlantStore.events` gives it."""

    #: Each event's `Event` document (`plantstore.core.events.documents_of`), in the feed's
    #: order: for each plant, the order its changes were committed in.
    documents: list[bytes]
    #: The cursor to go on from: the last event's position, or, when the page holds every event
    #: there is after the cursor, as far as the feed was read.
    after: int
    #: Whether the page ended at its limit: more events may follow.
    full: bool

    @classmethod
    def of(
        cls, documents: list[bytes], last: int, limit: int, after: int, head: int
    ) -> "EventPage":
        """The page of `documents`, the last of them at position `last`, read after `after`,
        up to `limit`, from a feed whose every event up to `head` is there to read: a full page
        goes on from its last event, another from where the feed was read to."""
        if len(documents) == limit:
            return cls(documents, last, full=True)
        return cls(documents, max(after, head), full=False)


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

    def events(self, after: int | None, limit: int) -> EventPage:
        """Up to `limit` events committed after the cursor `after` (from the oldest kept, when
        None), in the feed's order.

        Following `EventPage.after` from any cursor gives each change committed after it once,
        in the order of its plant's commits, whatever the number of writers and hosts.

        Raises:
            CursorGone: events after `after` were pruned.
        """
        ...

    def head(self) -> int:
        """A cursor from which `events` gives every change not committed before this call.

        So a client that lists the plants after taking it, then follows the events after it,
        ends with what the store holds, whatever changed meanwhile.
        """
        ...

    def prune(self, before: float, limit: int) -> int:
        """Forget up to `limit` of the oldest events, those made before `before` (seconds since
        the epoch); give how many. It holds up no change for longer than one small write."""
        ...

    def wait_for_events(self, timeout: float) -> bool:
        """Sleep until this process commits a change, or `timeout` seconds pass, or less when
        other processes write too (look again then); False once `stop_waiting` was called."""
        ...

    def stop_waiting(self) -> None:
        """End every wait for events, at once and from now on: the process is stopping."""
        ...

    def check_ready(self) -> None:
        """Return if a write can succeed now; else raise `StoreUnavailable` saying why not.

        It answers within a second whatever the database does: a balancer's probe waits on it.
        """
        ...

    def oldest(self) -> float | None:
        """When the oldest delivery still pending in its outbox was made; None when none is
        (always, for a store opened without subscribers). An operator watches it."""
        ...

    def close(self) -> None:
        """Let go of every connection; the store is not used afterwards."""
        ...


class Delivery(NamedTuple):
    """One event on its way to one subscriber, as a claim hands it out."""

    id: int
    webhook_id: str
    #: The subscriber's key (`plantstore.core.events.subscriber_key`), not its URL,
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
