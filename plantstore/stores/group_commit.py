"""Group commit: the changes of a worker's requests share one transaction, one commit, one sync.

A durable commit waits for the disk, and a store that commits each change on its own is as
fast as the disk syncs, with its writers queued for the write lock.
Databases solve this by letting the transactions that wait for one sync share it; the stores
do the same above them. Each request hands its change to the store's one writer thread and
waits. The writer takes every change that arrived while the last commit was syncing, makes
them in one transaction (`plantstore.stores.changes.plan`), commits once, and only then answers
each request: nothing is answered before the commit that holds it returned.

A change refused (`ConditionFailed`) is that change's answer, and the others go on; any other
failure fails the whole batch, as a failed commit does, and none of it is then visible.
"""

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager, nullcontext
from typing import Generic, TypeVar

from plantstore.core.stores import StoreUnavailable

#: What a request hands the writer: a change, as the store's `write` takes it.
_Work = TypeVar("_Work")
#: A change queued: its order, when it was handed in, the change, and its request's answer.
_Queued = tuple[int, float, _Work, Future]

logger = logging.getLogger(__name__)


class GroupCommit(Generic[_Work]):
    """One writer thread, and the queue of changes it makes in batches.

    Args:
        name: names the thread, for a stack dump.
        write: makes a batch of changes in one transaction, on the writer thread, in the order
            given. It gives each change's outcome in order, its answer or its refusal (an
            exception, raised to its request alone), and raises `StoreUnavailable` when the
            batch as a whole fails (no connection, the commit).
        wait: seconds a request waits for its batch to begin before it is answered unavailable
            (its change is then never made): the bound on a write lock another holds.
        lock: the lock writers of other processes take too, held from before a batch is
            taken to after its commit; changes that come while it is waited for join the batch.
        committed: called after each commit, once the lock is let go, with the number of
            changes it held.

    While `write` runs, `time_left()` says what is left of `wait` to the batch's oldest change:
    a store that bounds how long a request waits holds the batch to it.
    """

    def __init__(
        self,
        name: str,
        write: Callable[[Sequence[_Work]], list[object | BaseException]],
        wait: float,
        lock: Callable[[], AbstractContextManager] = nullcontext,
        committed: Callable[[int], None] | None = None,
    ) -> None:
        self._write = write
        self._wait = wait
        self._lock = lock
        self._committed = committed
        self._queue: queue.SimpleQueue[_Queued | None] = queue.SimpleQueue()
        self._handed_in = 0.0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._starting = threading.Lock()
        self._started = False

    def make(self, change: _Work, order: int = 0) -> object:
        """Make `change` in the next batch; give its answer once that batch is committed.

        A batch makes its changes by `order`, then as they came: writers in other processes
        that lock rows in the same order (their ids) never wait for each other in a circle.

        Raises:
            StoreUnavailable: its batch could not begin within `wait` (the change is not
                made), or failed (no change of it is visible).
            ConditionFailed: the change refused; nothing of it was made.
        """
        if not self._started:
            self._start()
        future: Future = Future()
        self._queue.put((order, time.monotonic(), change, future))
        try:
            return future.result(timeout=self._wait)
        except TimeoutError:
            # Not begun: it never will be. Begun: it is being committed, and answers soon.
            if future.cancel():
                raise StoreUnavailable(
                    f"no write could begin within {self._wait} s: another holds the write lock"
                ) from None
            return future.result()

    def time_left(self) -> float:
        """Seconds left of `wait` to the oldest change of the batch being written, counted from
        when it was handed to `make`; on the writer thread, while `write` runs."""
        return self._wait - (time.monotonic() - self._handed_in)

    def close(self) -> None:
        """Make what is queued, then stop the writer."""
        with self._starting:
            if self._started:
                self._queue.put(None)
                self._thread.join()

    def _start(self) -> None:
        """Start the writer at the first change: not in the process that opened the store
        only to check it, nor before a fork."""
        with self._starting:
            if not self._started:
                self._thread.start()
                self._started = True

    def _run(self) -> None:
        closing = False
        while not closing:
            first = self._queue.get()
            if first is None:
                return
            try:
                with self._lock():
                    batch, closing = self._take(first)
                    outcomes = self._make(batch)
            except StoreUnavailable as ex:  # the lock could not be had
                batch, closing = self._take(first)
                for _, future in batch:
                    future.set_exception(ex)
                continue
            if outcomes is None:
                continue
            for (_, future), outcome in zip(batch, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)
            if self._committed is not None:
                self._committed(len(batch))

    def _take(self, first: _Queued) -> tuple[list[tuple[_Work, Future]], bool]:
        """The batch, in order: `first` and every change queued since, but those whose
        requests gave up waiting; and whether `close` came after them."""
        pending, closing = [first], False
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                closing = True
                break
            pending.append(item)
        pending.sort(key=lambda item: item[0])
        taken = [item for item in pending if item[3].set_running_or_notify_cancel()]
        self._handed_in = min((handed_in for _, handed_in, _, _ in taken), default=time.monotonic())
        return [(change, future) for _, _, change, future in taken], closing

    def _make(self, batch: list[tuple[_Work, Future]]) -> list[object | BaseException] | None:
        """Write the batch; give its outcomes once committed, or fail every request of it."""
        if not batch:
            return None
        try:
            outcomes = self._write([change for change, _ in batch])
        except BaseException as ex:
            if not isinstance(ex, StoreUnavailable):  # a bug: said once, heard by every request
                logger.exception("plantstore: a batch of changes failed")
            for _, future in batch:
                future.set_exception(ex)
            return None
        return outcomes
