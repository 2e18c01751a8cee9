"""Forgetting the feed's old events: a thread of each worker, a small write at a time."""

import logging
import threading
import time
from collections.abc import Callable

from plantstore.core.stores import PlantStore, StoreUnavailable

#: Seconds between two prunings of a worker: each finds little to do, a minute's events.
PRUNE_SECONDS = 60.0
#: Events one write forgets at most: a write that holds up the store's changes only briefly.
PRUNE_CHUNK = 1000

logger = logging.getLogger(__name__)


class Pruner:
    """Forgets the events made more than `keep_for` seconds ago, every `PRUNE_SECONDS`.

    Every worker of every host prunes: whoever comes first does the work, and the others find
    it done. Each write forgets at most `PRUNE_CHUNK` events, so the changes that queue behind
    it (SQLite's one writer) wait little; a store that cannot serve is tried at the next turn.
    """

    def __init__(
        self,
        store: PlantStore,
        keep_for: float,
        on_pruned: Callable[[int], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._keep_for = keep_for
        self._on_pruned = on_pruned
        self._clock = clock
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="plantstore-pruner", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()

    def prune(self) -> int:
        """Forget every event older than `keep_for`, a chunk at a time; give how many."""
        before = self._clock() - self._keep_for
        pruned = 0
        while not self._stopping.is_set():
            gone = self._store.prune(before, PRUNE_CHUNK)
            if gone:
                pruned += gone
                self._on_pruned(gone)
            if gone < PRUNE_CHUNK:
                break
        return pruned

    def _run(self) -> None:
        while not self._stopping.wait(PRUNE_SECONDS):
            try:
                self.prune()
            except StoreUnavailable as ex:
                logger.info("plantstore: the feed was not pruned, to be tried again: %s", ex)
