"""A bound on how many of a worker's threads its store may hold, so that one is always free."""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from plantstore.stores import PlantStore, StoreUnavailable

#: Seconds the oldest call in the store may last before a call that finds no free slot is
#: refused rather than kept waiting for one: far more than a store that answers takes, and far
#: less than a probe waits.
STALLED_SECONDS = 0.1


class GatedStore:
    """A store that at most `slots` calls use at once: the worker's threads but one.

    gunicorn's gthread worker serves requests on a fixed number of threads. A store that stops
    answering, or stays locked, would hold every one of them for as long as each call may wait
    (seconds), and /healthz, which asks nothing of the store, would wait that long for a
    thread. So at most `slots` calls are in the store at a time, and the thread left over
    serves /healthz, the refusals and everything else at once.

    A call that finds every slot taken waits for one while the store answers (its oldest call
    began less than `STALLED_SECONDS` ago), so a burst of requests on a healthy store is served,
    not refused; once the store answers no more, it is refused at once (`StoreUnavailable`, a
    503 with `Retry-After`). Readiness takes a slot too: a flood of probes holds no more threads
    than requests may.
    """

    def __init__(self, store: PlantStore, slots: int) -> None:
        self._store = store
        self._slots = slots
        self._slot_freed = threading.Condition()
        #: When each call now in the store began, oldest first.
        self._began: list[float] = []

    def add(self, plant_id: int, plant: bytes) -> bytes:
        with self._slot():
            return self._store.add(plant_id, plant)

    def get(self, plant_id: int) -> bytes | None:
        with self._slot():
            return self._store.get(plant_id)

    def delete(self, plant_id: int) -> bool:
        with self._slot():
            return self._store.delete(plant_id)

    def page(self, after: int | None, limit: int, tag: str | None) -> list[tuple[int, bytes]]:
        with self._slot():
            return self._store.page(after, limit, tag)

    def check_ready(self) -> None:
        with self._slot():
            self._store.check_ready()

    def close(self) -> None:
        self._store.close()

    @contextmanager
    def _slot(self) -> Iterator[None]:
        with self._slot_freed:
            while len(self._began) >= self._slots:
                stalled_at = self._began[0] + STALLED_SECONDS
                now = time.monotonic()
                if now >= stalled_at:
                    raise StoreUnavailable(
                        f"the store holds all {self._slots} of this worker's slots, the oldest "
                        f"for over {STALLED_SECONDS} s: it answers slowly or not at all"
                    )
                self._slot_freed.wait(stalled_at - now)
            began = time.monotonic()
            self._began.append(began)
        try:
            yield
        finally:
            with self._slot_freed:
                self._began.remove(began)
                self._slot_freed.notify()
