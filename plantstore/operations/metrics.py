"""Prometheus metrics: what an operator watches, counted in every gunicorn worker.

The requests (by route, method and status), their latency and how many are under way; the
plants created (by POST or PUT) and deleted; the 503s of a store that could not serve; whether
the store is ready; and the webhooks sent, failed and given up, and how long the oldest pending
has waited.

These are prometheus_client's metrics, in its default registry. Under gunicorn they follow the
rules of its multiprocess mode. `when_ready` (plantstore/serving/settings.py) names a fresh
directory in PROMETHEUS_MULTIPROC_DIR before the first fork; prometheus_client reads it when it
is first imported, in each worker (the hook refuses --preload with several workers), and keeps
the worker's values in files there. A scrape, whichever worker answers it, reads every worker's
files, dead workers' too, through a registry made for it. Each gauge says how the workers'
values add up (`multiprocess_mode`), and `child_exit` drops a dead worker's live gauges. Without
the variable (falcon.testing, the bench, a preloaded app) the process's own registry answers.

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
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    REGISTRY,
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

# A scrape gives the same series however the app is served: multiprocess mode has neither the
# process' own collectors nor counters' `_created` series, so a single process does without.
for _collector in (GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR):
    REGISTRY.unregister(_collector)
disable_created_metrics()

REQUESTS = Counter(
    "plantstore_http_requests",
    "Requests answered by the app, by route template, method and status.",
    ("route", "method", "status"),
)
#: The service answers in well under a millisecond from memory, and a request waits up to
#: 3 s for a PostgreSQL connection: the buckets span both.
LATENCY = Histogram(
    "plantstore_http_request_duration_seconds",
    "Time from the app's first middleware to its answer, by route template.",
    ("route",),
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
IN_FLIGHT = Gauge(
    "plantstore_http_requests_in_flight",
    "Requests the app is answering now, in all workers.",
    multiprocess_mode="livesum",
)
PLANTS_CREATED = Counter(
    "plantstore_plants_created",
    "Answers 200 to POST /plants (an identical repeat is answered, and counted, again) and "
    "201 to PUT /plants/{id}.",
)
#: The answers of a create: a POST's (an identical repeat's too), and a PUT's that made the plant,
#: which its `plant.created` event tells subscribers of too.
_CREATED = frozenset({("/plants", "POST", "200"), ("/plants/{plant_id}", "PUT", "201")})
PLANTS_DELETED = Counter("plantstore_plants_deleted", "Plants deleted (204 to a DELETE).")
STORE_COMMITS = Counter(
    "plantstore_store_commits",
    "Transactions a durable store committed holding requests' changes (group commit).",
)
STORE_CHANGES = Counter(
    "plantstore_store_changes",
    "Requests' changes a durable store committed: over plantstore_store_commits, how many "
    "changes a commit holds.",
)


def count_commit(changes: int) -> None:
    """Count a durable store's commit of `changes` changes (its `on_commit`)."""
    STORE_COMMITS.inc()
    STORE_CHANGES.inc(changes)


STORE_UNAVAILABLE = Counter(
    "plantstore_store_unavailable",
    "Answers 503 because the store could not serve, by route template.",
    ("route",),
)
WEBHOOK_EVENTS_SENT = Counter(
    "plantstore_webhook_events_sent",
    "Webhook deliveries a subscriber acknowledged (answered 2xx).",
)
WEBHOOK_EVENTS_FAILED = Counter(
    "plantstore_webhook_events_failed",
    "Webhook delivery attempts that failed: not 2xx, timed out or not connected.",
)
WEBHOOK_EVENTS_GIVEN_UP = Counter(
    "plantstore_webhook_events_given_up",
    "Webhook deliveries given up, still failing PLANTSTORE_WEBHOOK_GIVE_UP_AFTER seconds "
    "after their event.",
)
# Set at each scrape, by the worker that answers it, from the store all workers share: the
# latest is right.
STORE_READY = Gauge(
    "plantstore_store_ready",
    "1 when the store could serve at the last scrape, else 0.",
    multiprocess_mode="livemostrecent",
)
WEBHOOK_OLDEST_PENDING = Gauge(
    "plantstore_webhook_oldest_pending_seconds",
    "Age of the oldest webhook delivery not yet sent or given up, at the last scrape; "
    "0 when none is pending.",
    multiprocess_mode="livemostrecent",
)
BUILD_INFO = Gauge(
    "plantstore_build_info",
    "The running version and the kind of store (memory, sqlite or postgresql).",
    ("version", "store"),
    multiprocess_mode="livemax",
)


class RequestMetrics:
    """Count, time and track every request: the app's first middleware, so it sees all.

    The labelled children of each kind of answer are kept once made, as prometheus_client's
    documentation suggests for a hot path: `labels()` takes a lock and builds a key each time.
    """

    def __init__(self) -> None:
        self._children: dict[tuple[str, str, str], tuple] = {}

    def process_request(self, req, resp):
        req.context.metrics_start = time.perf_counter()
        IN_FLIGHT.inc()

    def process_response(self, req, resp, resource, req_succeeded):
        route = req.uri_template or "unmatched"
        method = req.method if req.method in falcon.COMBINED_METHODS else "other"
        status = str(resp.status_code)
        labels = (route, method, status)
        children = self._children.get(labels)
        if children is None:
            children = self._children[labels] = (REQUESTS.labels(*labels), LATENCY.labels(route))
        requests, latency = children
        requests.inc()
        # Falcon refuses a few methods before any process_request, yet calls process_response:
        # such a request was never in flight, and took no time the app could measure.
        start = getattr(req.context, "metrics_start", None)
        if start is not None:
            latency.observe(time.perf_counter() - start)
            IN_FLIGHT.dec()
        # Every 503 the app answers is a store that could not serve.
        if status == "503":
            STORE_UNAVAILABLE.labels(route).inc()
        elif labels in _CREATED:
            PLANTS_CREATED.inc()
        elif labels == ("/plants/{plant_id}", "DELETE", "204"):
            PLANTS_DELETED.inc()


class MetricsEndpoint:
    """`/metrics`: every worker's metrics, for Prometheus; behind the token unless made public.

    Made with the app, it names the app's kind of store in `plantstore_build_info`. Each
    scrape first asks the store whether it is ready, and the outbox (None without webhooks)
    how old its oldest pending delivery is.
    """

    def __init__(
        self, store: PlantStore, outbox: Outbox | None, *, store_kind: str, public: bool
    ) -> None:
        self._store = store
        self._outbox = outbox
        self.auth_required = not public
        BUILD_INFO.labels(version("plantstore"), store_kind).set(1)

    def on_get(self, req, resp):
        try:
            self._store.check_ready()
        except StoreUnavailable:
            STORE_READY.set(0)
        else:
            STORE_READY.set(1)
        if self._outbox is None:
            WEBHOOK_OLDEST_PENDING.set(0)  # nothing is pending without webhooks
        else:
            # Left as it was when the store cannot say: `plantstore_store_ready` tells why.
            with suppress(StoreUnavailable):
                oldest = self._outbox.oldest()
                WEBHOOK_OLDEST_PENDING.set(0 if oldest is None else max(0, time.time() - oldest))
        if _MULTIPROCESS:
            registry = CollectorRegistry()
            MultiProcessCollector(registry)
        else:
            registry = REGISTRY
        resp.content_type = CONTENT_TYPE_LATEST
        resp.data = generate_latest(registry)

    on_head = on_get
