"""A store in the process's memory: gone with the process, its feed and undelivered events too."""

import threading
import time
from collections.abc import Callable, Sequence
from itertools import count, islice

import orjson
from sortedcontainers import SortedList

from plantstore.core.events import Event
from plantstore.core.plants import Condition, Page, Put, fill_page
from plantstore.core.stores import CursorGone, Delivery, EventPage
from plantstore.stores.changes import Add, Change, Plan, Remove, Replace, plan
from plantstore.stores.feed_waits import FeedWaits
from plantstore.stores.memory_feed import MemoryFeed

#: The most events the feed keeps, whatever their age: each holds memory until pruned.
FEED_LIMIT = 1_000_000


class MemoryStore:
    """Plants in sorted structures, for one process; its threads share it safely.

    Ids, each tag's ids and each subscriber's deliveries are kept in order, so a page costs
    O(log n + limit) and a claim O(log n) however many there are; ids and plants are ints and
    bytes, which the garbage collector does not track. Each change follows the rules every
    store follows (`plantstore.stores.changes.plan`), one at a time under the lock. The feed's
    positions count nanoseconds from the store's making: an earlier run's cursor is `CursorGone`.

    Args:
        subscribers: the keys (`subscriber_key`) of the subscribers events go to.
        on_commit: called after each change made, with the number of changes (1) and events.
    """

    def __init__(
        self,
        subscribers: Sequence[str] = (),
        on_commit: Callable[[int, int], None] | None = None,
    ) -> None:
        self._plants: dict[int, bytes] = {}
        self._ids: SortedList[int] = SortedList()
        self._ids_by_tag: dict[str, SortedList[int]] = {}
        self._lock = threading.Lock()
        self._subscribers = tuple(subscribers)
        self._on_commit = on_commit
        self._feed = MemoryFeed(first_position=time.time_ns())
        self._waits = FeedWaits()
        self._deliveries: dict[int, tuple[float, Delivery]] = {}
        self._due: dict[str, SortedList[tuple[float, int]]] = {
            subscriber: SortedList() for subscriber in self._subscribers
        }
        self._next_id = count(1)

    def add(self, plant_id: int, plant: bytes) -> bytes:
        return self._make(Add(plant_id, _compact(plant)))

    def put(
        self, plant_id: int, plant: bytes, condition: Condition | None = None
    ) -> tuple[Put, bytes]:
        return self._make(Replace(plant_id, _compact(plant), condition))

    def get(self, plant_id: int) -> bytes | None:
        return self._plants.get(plant_id)

    def delete(self, plant_id: int, condition: Condition | None = None) -> bool:
        return self._make(Remove(plant_id, condition))

    def page(self, after: int | None, limit: int, tag: str | None, max_bytes: int) -> Page:
        with self._lock:
            ids = self._ids if tag is None else self._ids_by_tag.get(tag, ())
            if after is not None and ids:
                ids = ids.irange(minimum=after, inclusive=(False, True))
            pairs = ((plant_id, self._plants[plant_id]) for plant_id in islice(ids, limit))
            return fill_page(pairs, limit, max_bytes)

    def events(self, after: int | None, limit: int) -> EventPage:
        with self._lock:
            if after is None:
                after = self._feed.pruned_through
            elif after < self._feed.pruned_through:
                raise CursorGone
            made = self._feed.after(after, limit)
            head = self._feed.head
        documents = list(made)
        return EventPage.of(documents, after + len(documents), limit, after, head)

    def head(self) -> int:
        with self._lock:
            return self._feed.head

    def prune(self, before: float, limit: int) -> int:
        with self._lock:
            return self._feed.prune(before, limit)

    def wait_for_events(self, timeout: float) -> bool:
        return self._waits.wait(timeout)

    def stop_waiting(self) -> None:
        self._waits.stop()

    def check_ready(self) -> None:
        """Memory takes a write whenever the process runs."""

    def close(self) -> None:
        """Nothing to let go of: the plants go with the process; its waits end."""
        self._waits.stop()

    def claim(self, subscriber: str, now: float, lease_until: float, limit: int) -> list[Delivery]:
        with self._lock:
            if subscriber not in self._due:
                return []
            due = list(islice(self._due[subscriber].irange(maximum=(now, float("inf"))), limit))
            for _, n in due:
                self._reschedule(n, lease_until)
            return sorted((self._deliveries[n][1] for _, n in due), key=lambda d: d.id)

    def retry(self, delivery: Delivery, at: float) -> None:
        with self._lock:
            if delivery.id in self._deliveries:
                self._reschedule(delivery.id, at, attempts=1)

    def forget(self, delivery: Delivery) -> None:
        with self._lock:
            found = self._deliveries.pop(delivery.id, None)
            if found is not None:
                self._due[delivery.subscriber].remove((found[0], delivery.id))

    def oldest(self) -> float | None:
        with self._lock:
            if not self._deliveries:
                return None
            return self._deliveries[next(iter(self._deliveries))][1].created_at

    def _make(self, change: Change) -> object:
        """Make `change` by the rules of every store, under the lock; give its answer."""
        with self._lock:
            held = self._plants.get(change.plant_id)
            kept = {} if held is None else {change.plant_id: held}
            planned = plan([change], kept, self._feed.head + 1)
            self._write(planned, held)
        if planned.events:
            self._waits.committed()
            if self._on_commit is not None:
                self._on_commit(1, len(planned.events))
        (outcome,) = planned.outcomes
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _write(self, planned: Plan, held: bytes | None) -> None:
        """Keep what a change planned, in every index, the feed and the outbox; called holding
        the lock. A plant replaced never leaves `_plants`: `get` reads it without the lock,
        and must find one plant or the other, never none, which would be a plant deleted."""
        for plant_id, plant in planned.inserts.items():
            self._plants[plant_id] = plant
            self._ids.add(plant_id)
            self._add_to_tag(plant_id, _tag(plant))
        for plant_id, plant in planned.updates.items():
            self._plants[plant_id] = plant
            old, new = _tag(held), _tag(plant)
            if old != new:
                self._remove_from_tag(plant_id, old)
                self._add_to_tag(plant_id, new)
        for plant_id in planned.deletes:
            del self._plants[plant_id]
            self._ids.remove(plant_id)
            self._remove_from_tag(plant_id, _tag(held))
        self._feed.append(planned.events)
        if len(self._feed) > FEED_LIMIT:
            self._feed.prune(float("inf"), len(self._feed) - FEED_LIMIT)
        for event in planned.events:
            self._record(event)

    def _add_to_tag(self, plant_id: int, tag: str | None) -> None:
        if tag is not None:
            ids = self._ids_by_tag.get(tag)
            if ids is None:  # not setdefault: that would make a list at every add
                ids = self._ids_by_tag[tag] = SortedList()
            ids.add(plant_id)

    def _remove_from_tag(self, plant_id: int, tag: str | None) -> None:
        if tag is not None:
            ids = self._ids_by_tag[tag]
            ids.remove(plant_id)
            if not ids:
                del self._ids_by_tag[tag]

    def _record(self, event: Event) -> None:
        """Keep a delivery of `event` for each subscriber, due now; called holding the lock."""
        if not self._subscribers:
            return
        body = event.webhook_body()
        for subscriber in self._subscribers:
            n = next(self._next_id)
            delivery = Delivery(n, event.id, subscriber, body, event.at, 0)
            self._deliveries[n] = (event.at, delivery)
            self._due[subscriber].add((event.at, n))

    def _reschedule(self, n: int, at: float, attempts: int = 0) -> None:
        due, delivery = self._deliveries[n]
        self._due[delivery.subscriber].remove((due, n))
        if attempts:
            delivery = delivery._replace(attempts=delivery.attempts + attempts)
        self._deliveries[n] = (at, delivery)
        self._due[delivery.subscriber].add((at, n))


def _compact(plant: bytes) -> bytes:
    """A right-sized copy of `plant`: bytes made by orjson hold on to its whole 4 KiB buffer."""
    return bytes(memoryview(plant))


def _tag(plant: bytes | None) -> str | None:
    return None if plant is None else orjson.loads(plant).get("tag")
