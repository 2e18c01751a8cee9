"""Delivering the outbox's events to subscribers, signed, off the requests' threads.

Each worker runs one `Deliverer`: a thread that claims due deliveries from the store's outbox
and, for each subscriber's URL, a few sender threads that post them. A commit in this worker
wakes it at once; otherwise it looks every `POLL_SECONDS`, for retries coming due and for
deliveries whose claim a dead worker left behind. Delivery is at least once: a delivery
leaves the outbox only once a subscriber answered 2xx, or it was given up.
"""

import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Sequence
from enum import Enum

from standardwebhooks import Webhook

from plantstore.core.stores import Delivery, Outbox, StoreUnavailable
from plantstore.webhooks.attempts import SENDERS, Attempts
from plantstore.webhooks.subscribers import Subscriber, subscriber

logger = logging.getLogger(__name__)

#: Seconds between looks at the outbox when nothing wakes the deliverer.
POLL_SECONDS = 1.0
#: The first retry comes up to this many seconds after the first failure; each one after
#: waits up to twice as long as the one before, to at most `MAX_RETRY_SECONDS`.
FIRST_RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 3600.0
#: Seconds a claim outlives the longest attempt (twice its timeout, see `Attempts.post`):
#: time to record its outcome.
LEASE_MARGIN_SECONDS = 5.0


class Outcome(Enum):
    """What became of one attempt to deliver, as the deliverer tells its `on_outcome`."""

    #: The subscriber acknowledged it (2xx): the delivery leaves the outbox.
    SENT = "sent"
    #: It failed, and the delivery is due again later.
    FAILED = "failed"
    #: It failed past `give_up_after`: the delivery leaves the outbox, undelivered.
    GIVEN_UP = "given up"


def backoff(attempts: int) -> float:
    """The longest wait before the next attempt, after `attempts` failed: 1 s, 2 s, 4 s, ..."""
    return min(MAX_RETRY_SECONDS, FIRST_RETRY_SECONDS * 2 ** min(attempts - 1, 32))


def full_jitter(ceiling: float) -> float:
    """Wait a random time up to `ceiling` ("full jitter"), so that retries spread out."""
    return random.uniform(0, ceiling)


class Deliverer:
    """Sends the outbox's deliveries, retrying with exponential backoff until a time bound.

    Args:
        outbox: where the events are, written by the store with the changes, for the
            subscribers' keys (`subscriber_key`).
        urls: the subscribers' URLs, as configured: credentials included.
        wake: set after a commit that wrote events, so they go at once.
        webhook: signs each attempt (Standard Webhooks).
        timeout: seconds an attempt gets to connect, and to be answered (see `Attempts.post`).
        give_up_after: seconds after an event was made when a failing delivery is given up.
        clock: the time, as `time.time()` gives it; tests move it on instead of waiting.
        jitter: how long to wait before a retry, given the longest wait backoff allows.
        on_outcome: told what became of each attempt, once the outbox recorded it (the
            metrics count it).
    """

    def __init__(
        self,
        outbox: Outbox,
        urls: Sequence[str],
        wake: threading.Event,
        webhook: Webhook,
        timeout: float,
        give_up_after: float,
        clock: Callable[[], float] = time.time,
        jitter: Callable[[float], float] = full_jitter,
        on_outcome: Callable[[Outcome], None] = lambda outcome: None,
    ) -> None:
        self._outbox = outbox
        self._wake = wake
        self._lease = 2 * timeout + LEASE_MARGIN_SECONDS
        self._give_up_after = give_up_after
        self._clock = clock
        self._jitter = jitter
        self._on_outcome = on_outcome
        self._stopping = threading.Event()
        #: Set when a sender is done with a delivery.
        self._sender_freed = threading.Event()
        self._unavailable = False
        self._lanes = [_Lane(subscriber(url)) for url in urls]
        self._lock = threading.Lock()
        self._attempts = Attempts(webhook, timeout, len(self._lanes), clock)
        # Daemon threads: a process that exits without `stop` (SIGKILL aside) must not hang
        # on them; what they had claimed is due again when its lease runs out.
        self._threads = [
            threading.Thread(target=self._claim_loop, name="plantstore-webhooks", daemon=True)
        ] + [
            threading.Thread(
                target=self._send_loop,
                args=(lane,),
                name=f"plantstore-webhooks-{number}-{n}",
                daemon=True,
            )
            for number, lane in enumerate(self._lanes)
            for n in range(SENDERS)
        ]

    def start(self) -> None:
        """Start claiming and sending, in this process: threads do not cross a fork, so start
        it in the process that delivers (a gunicorn worker), once."""
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Claim nothing more; let attempts under way end (see `Attempts.post` for how soon).

        What was not delivered stays in the outbox for the next start (or another worker).
        """
        self._stopping.set()
        self._wake.set()
        self._sender_freed.set()
        claimer, *senders = self._threads
        # Its last claim, if it was making one, is queued before the senders are told to end.
        claimer.join()
        for lane in self._lanes:
            for _ in range(SENDERS):
                lane.queue.put(None)
        for thread in senders:
            thread.join()
        self._attempts.close()

    def _claim_loop(self) -> None:
        """Claim for each URL as many deliveries as it has idle senders, until none is due.

        With every sender busy, a commit's events could not be sent now anyway: the loop then
        waits for a sender to be freed, not for `wake`, which each commit sets. Woken, this
        thread would take the interpreter from the request that committed, for nothing.
        """
        while not self._stopping.is_set():
            # Cleared before claiming: a commit or a freed sender from now on wakes the next round.
            self._wake.clear()
            self._sender_freed.clear()
            more = idle_anywhere = False
            for lane in self._lanes:
                with self._lock:
                    idle = lane.idle
                claimed = self._claim(lane.subscriber.key, idle) if idle else []
                with self._lock:
                    lane.idle -= len(claimed)
                    idle_anywhere |= lane.idle > 0
                for delivery in claimed:
                    lane.queue.put(delivery)
                more |= bool(claimed) and len(claimed) == idle
            if not more:
                (self._wake if idle_anywhere else self._sender_freed).wait(POLL_SECONDS)

    def _claim(self, key: str, limit: int) -> list[Delivery]:
        """Claim what is due; while the store cannot serve, nothing (said once in the log).

        Any other failure is said once too, with its traceback, and the thread goes on: it
        is the only one that claims, and its end would end every delivery of the worker.
        """
        now = self._clock()
        try:
            claimed = self._outbox.claim(key, now, now + self._lease, limit)
        except StoreUnavailable as ex:
            if not self._unavailable:
                logger.warning("webhooks: the outbox cannot be read now: %s", ex)
            self._unavailable = True
            return []
        except Exception:
            if not self._unavailable:
                logger.exception("webhooks: the outbox cannot be read")
            self._unavailable = True
            return []
        if self._unavailable:
            logger.warning("webhooks: the outbox can be read again")
        self._unavailable = False
        return claimed

    def _send_loop(self, lane: "_Lane") -> None:
        while (delivery := lane.queue.get()) is not None:
            try:
                self._deliver(lane.subscriber, delivery)
            except StoreUnavailable as ex:
                # Its claim runs out, and it is due again.
                logger.warning(
                    "webhooks: the outcome of event %s could not be recorded: %s",
                    delivery.webhook_id,
                    ex,
                )
            except Exception:
                logger.exception("webhooks: delivering event %s failed", delivery.webhook_id)
            finally:
                with self._lock:
                    lane.idle += 1
                self._sender_freed.set()
                self._wake.set()

    def _deliver(self, subscriber: Subscriber, delivery: Delivery) -> None:
        """Attempt the delivery, and record its outcome in the outbox, then in the metrics."""
        failure = self._attempts.post(subscriber, delivery)
        if failure is None:
            self._outbox.forget(delivery)
            self._on_outcome(Outcome.SENT)
            return
        now = self._clock()
        attempts = delivery.attempts + 1
        give_up_at = delivery.created_at + self._give_up_after
        if now >= give_up_at:
            self._outbox.forget(delivery)
            logger.error(
                "webhooks: gave up event %s to %s after %d attempts in %.0f s: %s",
                delivery.webhook_id,
                subscriber.name,
                attempts,
                now - delivery.created_at,
                failure,
            )
            self._on_outcome(Outcome.GIVEN_UP)
            return
        at = min(now + self._jitter(backoff(attempts)), give_up_at)
        self._outbox.retry(delivery, at)
        logger.warning(
            "webhooks: event %s to %s failed (%s), attempt %d; next in %.1f s",
            delivery.webhook_id,
            subscriber.name,
            failure,
            attempts,
            at - now,
        )
        self._on_outcome(Outcome.FAILED)


class _Lane:
    """One subscriber, the queue of its senders and how many of them are idle."""

    def __init__(self, subscriber: Subscriber) -> None:
        self.subscriber = subscriber
        self.queue: queue.SimpleQueue[Delivery | None] = queue.SimpleQueue()
        self.idle = SENDERS
