"""What runs beside the app in one process: the store it serves, and the webhook deliverer."""

import threading

from standardwebhooks import Webhook

from plantstore.config import DEFAULT_THREADS, Config
from plantstore.core.events import subscriber_key
from plantstore.core.stores import PlantStore
from plantstore.operations.metrics import process_metrics
from plantstore.stores import Started, open_store
from plantstore.stores.gate import GatedStore
from plantstore.stores.pruner import Pruner
from plantstore.webhooks.deliverer import Deliverer


class Runtime:
    """The store a process serves, its feed's pruner and the deliverer of its events, opened
    and closed together.

    gunicorn makes one in each worker, after the fork, so that no connection is shared across
    processes: the app is built on it, `start` runs from the `post_worker_init` hook and
    `close` from `worker_exit` (plantstore/serving/hooks.py). Tests use it as a context
    manager. Nothing here starts a thread before `start`.

    A shared store (SQLite, PostgreSQL) is served through a `GatedStore`, which keeps one of the
    worker's `threads` out of it for /healthz and the refusals; the memory store never waits.
    A SQLite store answers only for the file the service `started_with`.
    With webhook URLs, the store keeps an outbox, for the subscribers' keys (never their URLs,
    which may hold a password), and each commit that wrote events wakes the deliverer. Commits
    and deliveries are counted in the process's metrics.
    """

    def __init__(
        self, config: Config, threads: int = DEFAULT_THREADS, started_with: Started = None
    ) -> None:
        #: What the app is built with.
        self.config = config
        self._metrics = process_metrics()
        self._events_to_send = threading.Event()
        self._opened = open_store(
            config.store_url,
            [subscriber_key(url) for url in config.webhook_urls],
            self._committed,
            started_with,
        )
        #: What the app serves requests from.
        self.store: PlantStore = (
            self._opened if config.memory else GatedStore(self._opened, slots=max(threads - 1, 1))
        )
        self._pruner = Pruner(
            self._opened, config.events_retention, self._metrics.events_pruned.inc
        )
        self._deliverer = None
        if config.webhook_urls:
            self._deliverer = Deliverer(
                self._opened,
                config.webhook_urls,
                self._events_to_send,
                Webhook(config.webhook_secret),
                config.webhook_timeout,
                config.webhook_give_up_after,
                on_outcome=self._metrics.count_delivery,
            )

    def start(self) -> None:
        """Start pruning the feed, and delivering events if there are subscribers."""
        self._pruner.start()
        if self._deliverer is not None:
            self._deliverer.start()

    def stop_waiting(self) -> None:
        """End the requests that wait for the feed's next event: the worker is stopping."""
        self._opened.stop_waiting()

    def close(self) -> None:
        """Stop pruning and delivering (attempts under way end within their timeout), then
        close the store."""
        self._pruner.stop()
        if self._deliverer is not None:
            self._deliverer.stop()
        self._opened.close()

    def _committed(self, changes: int, events: int) -> None:
        """Count what a commit made, and send its events."""
        if not self.config.memory:
            self._metrics.count_commit(changes)
        self._metrics.events_written.inc(events)
        if events:
            self._events_to_send.set()

    def __enter__(self) -> "Runtime":
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
