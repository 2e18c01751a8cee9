"""`/healthz` and `/readyz`: what a balancer or an orchestrator asks of each worker."""

import logging
import threading

from plantstore.api.errors import store_unavailable
from plantstore.stores import PlantStore, StoreUnavailable

logger = logging.getLogger(__name__)


class Health:
    """`/healthz`: the process is up and answering; it asks nothing of the store."""

    auth_required = False

    def on_get(self, req, resp):
        resp.media = {"status": "ok"}

    on_head = on_get


class Readiness:
    """`/readyz`: whether a write can succeed now, so a balancer sends traffic only then.

    A balancer asks every few seconds: the log hears of a change, with its cause, not of
    every answer; of the end of a trouble as loudly as of its start, so that whoever reads
    the one finds the other.
    """

    auth_required = False

    def __init__(self, store: PlantStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._ready = True

    def on_get(self, req, resp):
        try:
            self._store.check_ready()
        except StoreUnavailable as ex:
            self._note(False, f"not ready: {ex}")
            raise store_unavailable() from ex
        self._note(True, "ready again")
        resp.media = {"status": "ready"}

    on_head = on_get

    def _note(self, ready: bool, why: str) -> None:
        with self._lock:
            changed, self._ready = ready != self._ready, ready
        if changed:
            logger.warning("%s", why)
