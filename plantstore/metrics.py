"""Prometheus metrics: what an operator watches, counted in every gunicorn worker.

Under gunicorn, `plantstore/gunicorn_settings.py` (`when_ready`) names a fresh directory in
`PROMETHEUS_MULTIPROC_DIR` before the first worker forks. prometheus_client reads that variable
when it is first imported, and then keeps each worker's values in files there; a scrape,
whichever worker answers it, adds up every worker's files, those of workers since replaced
included. Without it (falcon.testing, `python -m bench`) the values live in a registry of the
app's own.

Labels are bounded, so a client cannot make series without end: the route's template
(`/plants/{plant_id}`, never the path, its id or its query), `unmatched` where no route
matched, the methods Falcon knows (`other` for the rest) and the status.
"""

import os
import time
from contextlib import suppress
from importlib.metadata import version

import falcon
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector

from plantstore.stores import Outbox, PlantStore, StoreUnavailable

#: Decided as prometheus_client decides it, when it is first imported: the two must agree.
_MULTIPROCESS = "PROMETHEUS_MULTIPROC_DIR" in os.environ

#: The label of a request no route matched: not a template, which starts with `/`.
UNMATCHED = "unmatched"
#: The label of a method Falcon does not route.
OTHER_METHOD = "other"
_METHODS = {method: method for method in falcon.constants.COMBINED_METHODS}

#: The labels of answers that mean a plant was created or deleted: (route, method, status).
_CREATED = ("/plants", "POST", "200")
_DELETED = ("/plants/{plant_id}", "DELETE", "204")
#: Every 503 the app answers is a store that could not serve.
_STORE_UNAVAILABLE = 503

#: The service answers in well under a millisecond from memory, and a request waits up to
#: 3 s for a PostgreSQL connection: the buckets span both.
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)

# Counters get a `_created` series only in a single process: without them both modes expose the
# same series, and `plantstore_plants_created_total` is not followed by a `..._created_created`.
disable_created_metrics()


class Metrics:
    """The collectors, and the text a scrape gets."""

    def __init__(self, store: PlantStore, store_kind: str, outbox: Outbox | None = None) -> None:
        self._store = store
        self._outbox = outbox
        self._registry = registry = CollectorRegistry()
        self.requests = Counter(
            "plantstore_http_requests",
            "Requests answered by the app, by route template, method and status.",
            ("route", "method", "status"),
            registry=registry,
        )
        self.latency = Histogram(
            "plantstore_http_request_duration_seconds",
            "Time from the app's first middleware to its answer, by route template.",
            ("route",),
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.in_flight = Gauge(
            "plantstore_http_requests_in_flight",
            "Requests the app is answering now, in all workers.",
            multiprocess_mode="livesum",
            registry=registry,
        )
        self.created = Counter(
            "plantstore_plants_created",
            "Answers 200 to POST /plants (an identical repeat is answered, and counted, again).",
            registry=registry,
        )
        self.deleted = Counter(
            "plantstore_plants_deleted", "Plants deleted (204 to a DELETE).", registry=registry
        )
        self.unavailable = Counter(
            "plantstore_store_unavailable",
            "Answers 503 because the store could not serve, by route template.",
            ("route",),
            registry=registry,
        )
        self._ready = Gauge(
            "plantstore_store_ready",
            "1 when the store could serve at the last scrape, else 0.",
            multiprocess_mode="livemostrecent",
            registry=registry,
        )
        self.webhook_sent = Counter(
            "plantstore_webhook_events_sent",
            "Webhook deliveries a subscriber acknowledged (answered 2xx).",
            registry=registry,
        )
        self.webhook_failed = Counter(
            "plantstore_webhook_events_failed",
            "Webhook delivery attempts that failed: not 2xx, timed out or not connected.",
            registry=registry,
        )
        self.webhook_given_up = Counter(
            "plantstore_webhook_events_given_up",
            "Webhook deliveries given up, still failing PLANTSTORE_WEBHOOK_GIVE_UP_AFTER seconds "
            "after their event.",
            registry=registry,
        )
        # Each worker sees the one outbox of a shared store: the latest scrape's answer is right.
        self._oldest_pending = Gauge(
            "plantstore_webhook_oldest_pending_seconds",
            "Age of the oldest webhook delivery not yet sent or given up, at the last scrape; "
            "0 when none is pending.",
            multiprocess_mode="livemostrecent",
            registry=registry,
        )
        Gauge(
            "plantstore_build_info",
            "The running version and the kind of store (memory, sqlite or postgresql).",
            ("version", "store"),
            multiprocess_mode="livemax",
            registry=registry,
        ).labels(version("plantstore"), store_kind).set(1)

    def exposition(self) -> bytes:
        """Ask the store whether it is ready and how old its oldest pending event is, then give
        every metric in Prometheus' text format.
        """
        try:
            self._store.check_ready()
        except StoreUnavailable:
            self._ready.set(0)
        else:
            self._ready.set(1)
        if self._outbox is not None:
            # Left as it was when the store cannot say: `plantstore_store_ready` tells why.
            with suppress(StoreUnavailable):
                oldest = self._outbox.oldest()
                self._oldest_pending.set(0 if oldest is None else max(0, time.time() - oldest))
        if not _MULTIPROCESS:
            return generate_latest(self._registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        return generate_latest(registry)


class RequestMetrics:
    """Count, time and track every request the app answers; the first middleware, so it sees all.

    It runs twice per request, so it does little: the children of each (route, method,
    status) are looked up once and kept, and no label is checked again.
    """

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._in_flight_inc = metrics.in_flight.inc
        self._in_flight_dec = metrics.in_flight.dec
        self._children: dict[tuple, tuple] = {}

    def process_request(self, req, resp):
        req.context.metrics_start = time.perf_counter()
        self._in_flight_inc()

    def process_response(self, req, resp, resource, req_succeeded):
        # Falcon refuses a few methods before any middleware's process_request, but still calls
        # process_response: such a request was never in flight.
        start = getattr(req.context, "metrics_start", None)
        key = (req.uri_template, req.method, resp.status)
        children = self._children.get(key) or self._add_children(key, resp.status_code)
        if start is not None:
            children[1](time.perf_counter() - start)
            self._in_flight_dec()
        children[0]()
        if children[2] is not None:
            children[2]()

    def _add_children(self, key: tuple, status: int) -> tuple:
        """The bound methods that count an answer of this kind: requests, latency, and more."""
        template, method, _ = key
        route = template or UNMATCHED
        labels = (route, _METHODS.get(method, OTHER_METHOD), str(status))
        metrics = self._metrics
        also = None
        if labels == _CREATED:
            also = metrics.created.inc
        elif labels == _DELETED:
            also = metrics.deleted.inc
        elif status == _STORE_UNAVAILABLE:
            also = metrics.unavailable.labels(route).inc
        children = (
            metrics.requests.labels(*labels).inc,
            metrics.latency.labels(route).observe,
            also,
        )
        if method in _METHODS:
            self._children[key] = children
        return children


class MetricsEndpoint:
    """`/metrics`: every worker's metrics, for Prometheus; behind the token unless made public."""

    def __init__(self, metrics: Metrics, public: bool) -> None:
        self._metrics = metrics
        self.auth_required = not public

    def on_get(self, req, resp):
        resp.content_type = CONTENT_TYPE_LATEST
        resp.data = self._metrics.exposition()

    on_head = on_get
