"""A bound on how many of a worker's threads its store may hold, so that one is always free."""

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from plantstore.core.plants import Condition, ConditionFailed, Page, Put
from plantstore.core.stores import CursorGone, EventPage, PlantStore, StoreUnavailable

_T = TypeVar("_T")

#: Seconds with every slot taken and no call answered, after which the store is taken to answer
#: no more and a call that finds no free slot is refused rather than kept waiting: longer than
#: a loaded database goes between two answers, far shorter than a probe waits.
STALLED_SECONDS = 0.25


class GatedStore:
    """A store that at most `slots` calls use at once: the worker's threads but one.

    A store that stops answering would otherwise hold every thread of the gthread worker, and
    /healthz, which asks nothing of it, would wait for one. A call that finds every slot taken
    waits while the store still answers (some call came back answered, or the oldest in it
    began, less than `STALLED_SECONDS` ago), so a loaded but healthy store queues rather than
    refuses; once it answers no more, the call is `StoreUnavailable` (a 503). Readiness takes a
    slot too.
    """

    def __init__(self, store: PlantStore, slots: int) -> None:
        self._store = store
        self._slots = slots
        self._slot_freed = threading.Condition(threading.Lock())
        #: Calls waiting for a slot: a call that leaves wakes one only if there is one.
        self._waiting = 0
        #: When each call now in the store began, oldest first.
        self._began: list[float] = []
        #: When a call last came back with an answer: the last sign that the store answers. A
        #: call that fails (the database down, locked) is no such sign.
        self._answered = float("-inf")

    def add(self, plant_id: int, plant: bytes) -> bytes:
        return self._call(self._store.add, plant_id, plant)

    def get(self, plant_id: int) -> bytes | None:
        return self._call(self._store.get, plant_id)

    def put(
        self, plant_id: int, plant: bytes, condition: Condition | None = None
    ) -> tuple[Put, bytes]:
        return self._call(self._store.put, plant_id, plant, condition)

    def delete(self, plant_id: int, condition: Condition | None = None) -> bool:
        return self._call(self._store.delete, plant_id, condition)

    def page(self, after: int | None, limit: int, tag: str | None, max_bytes: int) -> Page:
        return self._call(self._store.page, after, limit, tag, max_bytes)

    def events(self, after: int | None, limit: int) -> EventPage:
        return self._call(self._store.events, after, limit)

    def head(self) -> int:
        return self._call(self._store.head)

    def prune(self, before: float, limit: int) -> int:
        return self._call(self._store.prune, before, limit)

    def wait_for_events(self, timeout: float) -> bool:
        """Wait outside the slots: a request that waits asks nothing of the store meanwhile."""
        return self._store.wait_for_events(timeout)

    def stop_waiting(self) -> None:
        self._store.stop_waiting()

    def check_ready(self) -> None:
        self._call(self._store.check_ready)

    def oldest(self) -> float | None:
        return self._call(self._store.oldest)

    def close(self) -> None:
        self._store.close()

    def _call(self, method: Callable[..., _T], *args: object) -> _T:
        """Call `method` of the store in a slot, once one is free; refuse it while the store
        answers no more."""
        began = self._enter()
        try:
            answer = method(*args)
        except (ConditionFailed, CursorGone):
            self._leave(began, answered=True)  # the store answered: no, for this call
            raise
        except BaseException:
            self._leave(began, answered=False)
            raise
        self._leave(began, answered=True)
        return answer

    def _enter(self) -> float:
        with self._slot_freed:
            while len(self._began) >= self._slots:
                stalled_at = max(self._began[0], self._answered) + STALLED_SECONDS
                now = time.monotonic()
                if now >= stalled_at:
                    raise StoreUnavailable(
                        f"the store holds all {self._slots} of this worker's slots, and none "
                        f"has been answered for over {STALLED_SECONDS} s: it answers no more"
                    )
                self._waiting += 1
                try:
                    self._slot_freed.wait(stalled_at - now)
                finally:
                    self._waiting -= 1
            began = time.monotonic()
            self._began.append(began)
        return began

    def _leave(self, began: float, answered: bool) -> None:
        with self._slot_freed:
            self._began.remove(began)
            if answered:
                self._answered = time.monotonic()
            if self._waiting:
                self._slot_freed.notify()
