"""Group commit led by a request: concurrent changes share one transaction, one commit, one sync.

A durable commit waits for the disk; a store that committed each change on its own would be as
fast as the disk syncs. So the changes of requests that arrive while a commit syncs queue up,
and the next commit holds them all. There is no writer thread: as in LevelDB's
`DBImpl::Write`, the request at the front of the queue leads, takes every change queued behind
it into one batch, writes it (`plantstore.stores.changes.plan`), and then wakes each request
of the batch with its answer and the next request in the queue to lead the next batch. No
change is answered before the commit that holds it returned, and no change is handed from
thread to thread on its way to the database.

A change refused (`ConditionFailed`) is that change's answer, and the others go on; any other
failure fails the whole batch, as a failed commit does, and none of it is then visible.
"""

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from enum import Enum
from operator import attrgetter
from typing import Generic, TypeVar

from plantstore.core.stores import StoreUnavailable

#: What a request hands in: a change, as the store's `write` takes it.
_Change = TypeVar("_Change")

logger = logging.getLogger(__name__)


class Turn(Enum):
    """Where a queued change stands."""

    QUEUED = "queued"
    #: At the front of the queue, its request woken to lead the next batch.
    LEADS = "leads"
    #: In a batch being written.
    TAKEN = "taken"
    DONE = "done"


class Waiter:
    """A change in the queue, and the lock its request's thread sleeps on until it is woken:
    to lead a batch, or with its answer."""

    __slots__ = ("_woken", "answer", "change", "handed_in", "order", "turn")

    def __init__(self, change: object, order: int) -> None:
        self.change = change
        self.order = order
        self.handed_in = time.monotonic()
        self.turn = Turn.QUEUED
        self.answer: object = None
        self._woken = threading.Lock()
        self._woken.acquire()

    def sleep(self, timeout: float = -1) -> bool:
        """Sleep until woken, or `timeout` seconds (-1: for ever); tell whether it was woken."""
        return self._woken.acquire(timeout=timeout)

    def wake(self) -> None:
        self._woken.release()

    def result(self) -> object:
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


class GroupCommit(Generic[_Change]):
    """The queue of a store's changes, made in batches by the requests that hand them in.

    Args:
        write: makes a batch of changes in one transaction, in the order given, by the
            `time.monotonic()` deadline given (its oldest change's `wait` ends then). It gives
            each change's outcome in order, its answer or its refusal (an exception, raised to
            its request alone), and raises `StoreUnavailable` when the batch as a whole fails.
        wait: seconds a request waits for its batch to begin before it is answered unavailable
            (its change is then never made): the bound on a write lock another holds.
        lock: the lock writers of other processes take too, held from before a batch is
            taken to after its commit; changes that come while it is waited for join the batch.
    """

    def __init__(
        self,
        write: Callable[[Sequence[_Change], float], list[object]],
        wait: float,
        lock: Callable[[], AbstractContextManager] = nullcontext,
    ) -> None:
        self._write = write
        self._wait = wait
        self._lock = lock
        self._mutex = threading.Lock()
        self._drained = threading.Condition(self._mutex)
        #: Every change not yet answered, in the order handed in; a batch under way at its front.
        self._queue: deque[Waiter] = deque()
        self._closed = False

    def make(self, change: _Change, order: int = 0) -> object:
        """Make `change` in the next batch; give its answer once that batch is committed.

        A batch makes its changes by `order`, then as they came: writers in other processes
        that lock rows in the same order (their ids) never wait for each other in a circle.

        Raises:
            StoreUnavailable: its batch could not begin within `wait` (the change is not
                made), or failed (no change of it is visible), or the store is closed.
            ConditionFailed: the change refused; nothing of it was made.
        """
        waiter = Waiter(change, order)
        with self._mutex:
            if self._closed:
                raise StoreUnavailable("the store is closed: no change is made")
            self._queue.append(waiter)
            if len(self._queue) == 1:
                waiter.turn = Turn.LEADS
        if waiter.turn is not Turn.LEADS:
            self._await_turn(waiter)
        if waiter.turn is Turn.LEADS:
            self._lead(waiter)
        return waiter.result()

    def close(self) -> None:
        """Refuse new changes, and return once every change queued is made and answered."""
        with self._mutex:
            self._closed = True
            self._drained.wait_for(lambda: not self._queue)

    def _await_turn(self, waiter: Waiter) -> None:
        """Sleep until woken to lead or with an answer; give up a change whose batch did not
        begin within `wait`."""
        if waiter.sleep(self._wait):
            return
        with self._mutex:
            if waiter.turn is Turn.DONE:  # answered, or given up by the batch that came
                return
            if waiter.turn is not Turn.TAKEN:
                self._queue.remove(waiter)
                if waiter.turn is Turn.LEADS:
                    self._hand_on()
                raise StoreUnavailable(
                    f"no write could begin within {self._wait} s: another holds the write lock"
                )
        waiter.sleep()  # taken into a batch, which answers soon

    def _lead(self, leader: Waiter) -> None:
        """Write a batch of every change queued; answer each, and wake the next to lead."""
        batch: list[Waiter] = []
        try:
            with self._lock():
                batch = self._take()
                outcomes = self._outcomes(batch)
        except BaseException as ex:
            if not batch:  # the lock could not be had
                batch = self._take()
            if not isinstance(ex, StoreUnavailable):  # a bug: said once, heard by every request
                logger.exception("plantstore: a batch of changes failed")
            outcomes = [ex] * len(batch)
        with self._mutex:
            for waiter, outcome in zip(batch, outcomes, strict=True):
                waiter.answer, waiter.turn = outcome, Turn.DONE
            while self._queue and self._queue[0].turn is Turn.DONE:
                self._queue.popleft()
            self._hand_on()
        for waiter in batch:
            if waiter is not leader:
                waiter.wake()

    def _take(self) -> list[Waiter]:
        """Take every change queued, by `order`, then as handed in; those whose `wait` is over
        are answered unavailable instead, and count for nothing in the batch's deadline."""
        now = time.monotonic()
        taken = []
        with self._mutex:
            for waiter in self._queue:
                if waiter.handed_in + self._wait <= now:
                    waiter.answer = StoreUnavailable(f"no write could begin within {self._wait} s")
                    waiter.turn = Turn.DONE
                else:
                    waiter.turn = Turn.TAKEN
                    taken.append(waiter)
        taken.sort(key=attrgetter("order"))
        return taken

    def _outcomes(self, batch: list[Waiter]) -> list[object]:
        if not batch:
            return []
        deadline = min(waiter.handed_in for waiter in batch) + self._wait
        return self._write([waiter.change for waiter in batch], deadline)

    def _hand_on(self) -> None:
        """Wake the change at the front of the queue to lead the next batch, or tell `close`
        that none is left; under the mutex."""
        if not self._queue:
            self._drained.notify_all()
            return
        front = self._queue[0]
        front.turn = Turn.LEADS
        front.wake()
