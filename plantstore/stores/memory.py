"""A store in the process's memory: gone with the process, its undelivered events with it."""

import threading
from collections.abc import Callable, Sequence
from itertools import count, islice

import orjson
from sortedcontainers import SortedList

from plantstore.core.events import Event, plant_created, plant_deleted, plant_updated
from plantstore.core.plants import Condition, ConditionFailed, Page, Put, fill_page, same_plant
from plantstore.core.stores import Delivery


class MemoryStore:
    """Plants in sorted structures, for one process; its threads share it safely.

    `_plants` maps each id to its plant, `_ids` holds every id in order and `_ids_by_tag` each
    tag's ids in order, so a page is found in O(log n + limit) however many plants there are.
    Ids and plants are ints and bytes, which the garbage collector does not track, so millions
    of plants add little to collection pauses.

    With subscribers it keeps its outbox in the same way: `_deliveries` by id, and for each
    subscriber `_due`, its deliveries' ids ordered by the time each is due, so a claim costs
    O(log n) however many wait.
    """

    def __init__(
        self, subscribers: Sequence[str] = (), on_event: Callable[[], None] | None = None
    ) -> None:
        self._plants: dict[int, bytes] = {}
        self._ids: SortedList[int] = SortedList()
        self._ids_by_tag: dict[str, SortedList[int]] = {}
        self._lock = threading.Lock()
        self._subscribers = tuple(subscribers)
        self._on_event = on_event
        self._deliveries: dict[int, tuple[float, Delivery]] = {}
        self._due: dict[str, SortedList[tuple[float, int]]] = {
            subscriber: SortedList() for subscriber in self._subscribers
        }
        self._next_id = count(1)

    def add(self, plant_id: int, plant: bytes) -> bytes:
        compact = _compact(plant)
        with self._lock:
            kept = self._plants.get(plant_id)
            if kept is not None:
                return kept
            self._keep(plant_id, compact)
            self._record(plant_created, plant_id, compact)
        self._notify()
        return compact

    def put(
        self, plant_id: int, plant: bytes, condition: Condition | None = None
    ) -> tuple[Put, bytes]:
        compact = _compact(plant)
        with self._lock:
            kept = self._plants.get(plant_id)
            if condition is not None and not condition(kept):
                raise ConditionFailed
            if kept is None:
                self._keep(plant_id, compact)
                self._record(plant_created, plant_id, compact)
                done = Put.CREATED
            elif same_plant(kept, compact):
                return Put.UNCHANGED, kept
            else:
                self._replace(plant_id, kept, compact)
                self._record(plant_updated, plant_id, compact)
                done = Put.REPLACED
        self._notify()
        return done, compact

    def get(self, plant_id: int) -> bytes | None:
        return self._plants.get(plant_id)

    def delete(self, plant_id: int, condition: Condition | None = None) -> bool:
        with self._lock:
            kept = self._plants.get(plant_id)
            if condition is not None and not condition(kept):
                raise ConditionFailed
            if kept is None:
                return False
            self._forget(plant_id, kept)
            self._record(plant_deleted, plant_id)
        self._notify()
        return True

    def page(self, after: int | None, limit: int, tag: str | None, max_bytes: int) -> Page:
        with self._lock:
            ids = self._ids if tag is None else self._ids_by_tag.get(tag, ())
            if after is not None and ids:
                ids = ids.irange(minimum=after, inclusive=(False, True))
            pairs = ((plant_id, self._plants[plant_id]) for plant_id in islice(ids, limit))
            return fill_page(pairs, limit, max_bytes)

    def check_ready(self) -> None:
        """Memory takes a write whenever the process runs."""

    def close(self) -> None:
        """Nothing to let go of: the plants go with the process."""

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

    def _keep(self, plant_id: int, plant: bytes) -> None:
        """Keep `plant` under the free `plant_id`, in every index; called holding the lock."""
        self._plants[plant_id] = plant
        self._ids.add(plant_id)
        self._add_to_tag(plant_id, _tag(plant))

    def _replace(self, plant_id: int, kept: bytes, plant: bytes) -> None:
        """Put `plant` in the place of `kept` under `plant_id`, in every index; called holding
        the lock. The id never leaves `_plants`: `get` reads it without the lock, and must find
        one plant or the other, never none, which would be a plant deleted."""
        self._plants[plant_id] = plant
        old, new = _tag(kept), _tag(plant)
        if old != new:
            self._remove_from_tag(plant_id, old)
            self._add_to_tag(plant_id, new)

    def _forget(self, plant_id: int, plant: bytes) -> None:
        """Take `plant`, kept under `plant_id`, out of every index; called holding the lock."""
        del self._plants[plant_id]
        self._ids.remove(plant_id)
        self._remove_from_tag(plant_id, _tag(plant))

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

    def _record(self, make: Callable[..., Event], *args: object) -> None:
        """Keep a delivery of the event `make(*args)` for each subscriber, due now; called
        holding the lock. Without subscribers no event is made."""
        if not self._subscribers:
            return
        event = make(*args)
        for subscriber in self._subscribers:
            n = next(self._next_id)
            delivery = Delivery(n, event.webhook_id, subscriber, event.body, event.created_at, 0)
            self._deliveries[n] = (event.created_at, delivery)
            self._due[subscriber].add((event.created_at, n))

    def _reschedule(self, n: int, at: float, attempts: int = 0) -> None:
        due, delivery = self._deliveries[n]
        self._due[delivery.subscriber].remove((due, n))
        if attempts:
            delivery = delivery._replace(attempts=delivery.attempts + attempts)
        self._deliveries[n] = (at, delivery)
        self._due[delivery.subscriber].add((at, n))

    def _notify(self) -> None:
        if self._subscribers and self._on_event is not None:
            self._on_event()


def _compact(plant: bytes) -> bytes:
    """A right-sized copy of `plant`: bytes made by orjson hold on to its whole 4 KiB buffer."""
    return bytes(memoryview(plant))


def _tag(plant: bytes) -> str | None:
    return orjson.loads(plant).get("tag")
