"""`/healthz` and `/readyz`: what a balancer or an orchestrator asks of each worker."""

import logging
import threading
import time
from collections.abc import Callable

from plantstore.api.errors import store_unavailable
from plantstore.api.openapi.operation import Operation, PathItem, answer
from plantstore.core.stores import PlantStore, StoreUnavailable

logger = logging.getLogger(__name__)

#: Seconds an answer of the store's is reused: however often probes come, each worker asks the
#: store at most once in this time.
READY_ANSWER_SECONDS = 1.0


def _status_body(value: str) -> dict:
    """The schema of the body `{"status": value}`, as `/healthz` and `/readyz` answer."""
    return {
        "type": "object",
        "properties": {"status": {"type": "string", "const": value}},
        "required": ["status"],
    }


class Health:
    """`/healthz`: the process is up and answering; it asks nothing of the store."""

    auth_required = False
    openapi = PathItem("/healthz")

    @Operation(
        "getHealth",
        "Tell whether the service is up",
        {200: answer("The service is up.", _status_body("ok"))},
    )
    def on_get(self, req, resp):
        resp.media = {"status": "ok"}

    on_head = on_get


class ReadinessCheck:
    """Whether a write can succeed now, as the store last said: asked at most once every
    `READY_ANSWER_SECONDS` (a durable store's check writes), whoever asks, so that many
    balancers polling often, and Prometheus scraping, cost the store no more than one.

    A balancer asks every few seconds: the log hears of a change, with its cause, not of
    every answer; of the end of a trouble as loudly as of its start, so that whoever reads
    the one finds the other.
    """

    def __init__(self, store: PlantStore, clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._clock = clock
        self._lock = threading.Lock()
        self._asked_at = float("-inf")
        self._failure: StoreUnavailable | None = None

    def failure(self) -> StoreUnavailable | None:
        """Why the store could not take a write when last asked; None when it could."""
        with self._lock:
            if self._clock() - self._asked_at >= READY_ANSWER_SECONDS:
                was_ready = self._failure is None
                try:
                    self._store.check_ready()
                    self._failure = None
                except StoreUnavailable as ex:
                    self._failure = ex
                self._asked_at = self._clock()
                if self._failure is not None and was_ready:
                    logger.warning("not ready: %s", self._failure)
                elif self._failure is None and not was_ready:
                    logger.warning("ready again")
            return self._failure


class Readiness:
    """`/readyz`: whether a write can succeed now, so a balancer sends traffic only then."""

    auth_required = False
    openapi = PathItem("/readyz", needs_store=True)

    def __init__(self, check: ReadinessCheck) -> None:
        self._check = check

    @Operation(
        "getReadiness",
        "Tell whether the service can serve plants now",
        {200: answer("The store can serve.", _status_body("ready"))},
    )
    def on_get(self, req, resp):
        failure = self._check.failure()
        if failure is not None:
            raise store_unavailable() from failure
        resp.media = {"status": "ready"}

    on_head = on_get
