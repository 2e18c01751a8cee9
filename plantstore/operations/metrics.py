"""Prometheus metrics: what an operator watches, counted in every gunicorn worker.

The requests (by route, method and status), their latency and how many are under way; the
plants created (by POST or PUT) and deleted; the 503s of a store that could not serve; whether
the store is ready; the durable stores' commits; the feed's events written and pruned, and the
requests waiting for the next; and the webhooks sent, failed and given up, and how long the
oldest pending has waited.

These are prometheus_client's metrics, in its default registry, made once in each process by
the first call of `process_metrics` (from `create_app` or `Runtime`), never at import. Under
gunicorn with a shared store they follow the rules of its multiprocess mode: `when_ready`
(plantstore/serving/hooks.py) names a fresh directory in PROMETHEUS_MULTIPROC_DIR before the
first fork, prometheus_client reads it when it is first imported, in each worker, and keeps the
worker's values in files there. A scrape, whichever worker answers it, reads every worker's
files, dead workers' too, through a registry made for it. Each gauge says how the workers'
values add up (`multiprocess_mode`), and `child_exit` drops a dead worker's live gauges. The
memory store runs one worker, whose own registry answers, with no files to write.

Labels are bounded, so a client cannot make series without end: the route's template
(`/plants/{plant_id}`, never the path, its id or its query), `unmatched` where no route
matched, the methods Falcon knows (`other` for the rest) and the status.
"""

import os
import threading
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

from plantstore.api.openapi.operation import Operation, PathItem, answer
from plantstore.core.stores import PlantStore, StoreUnavailable
from plantstore.operations.health import ReadinessCheck
from plantstore.webhooks.deliverer import Outcome

#: The answers of a create: a POST's (an identical repeat's too), and a PUT's that made the plant,
#: which its `plant.created` event tells subscribers of too.
_CREATED = frozenset({("/plants", "POST", "200"), ("/plants/{plant_id}", "PUT", "201")})
_DELETED = ("/plants/{plant_id}", "DELETE", "204")


class Metrics:
    """Every metric of the service, registered in `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, documentation: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, documentation, labels, registry=registry)

        def gauge(name: str, documentation: str, mode: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(name, documentation, labels, multiprocess_mode=mode, registry=registry)

        self.requests = counter(
            "plantstore_http_requests",
            "Requests answered by the app, by route template, method and status.",
            ("route", "method", "status"),
        )
        #: The service answers in well under a millisecond from memory, and a request waits up
        #: to 3 s for a PostgreSQL connection: the buckets span both.
        self.latency = Histogram(
            "plantstore_http_request_duration_seconds",
            "Time from the app's first middleware to its answer, by route template.",
            ("route",),
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=registry,
        )
        self.in_flight = gauge(
            "plantstore_http_requests_in_flight",
            "Requests the app is answering now, in all workers.",
            "livesum",
        )
        self.plants_created = counter(
            "plantstore_plants_created",
            "Answers 200 to POST /plants (an identical repeat is answered, and counted, again) "
            "and 201 to PUT /plants/{id}.",
        )
        self.plants_deleted = counter(
            "plantstore_plants_deleted", "Plants deleted (204 to a DELETE)."
        )
        self.store_commits = counter(
            "plantstore_store_commits",
            "Transactions a durable store committed holding requests' changes (group commit).",
        )
        self.store_changes = counter(
            "plantstore_store_changes",
            "Requests' changes a durable store committed: over plantstore_store_commits, how "
            "many changes a commit holds.",
        )
        self.store_unavailable = counter(
            "plantstore_store_unavailable",
            "Answers 503 because the store could not serve, by route template.",
            ("route",),
        )
        self.events_written = counter(
            "plantstore_events_written",
            "Events the stores wrote to the feed with their changes (GET /events).",
        )
        self.events_pruned = counter(
            "plantstore_events_pruned",
            "Events forgotten by the feed, older than PLANTSTORE_EVENTS_RETENTION.",
        )
        self.feed_waiting = gauge(
            "plantstore_feed_waiting_requests",
            "Requests waiting for the feed's next event (GET /events with wait), in all workers.",
            "livesum",
        )
        self.webhook_events_sent = counter(
            "plantstore_webhook_events_sent",
            "Webhook deliveries a subscriber acknowledged (answered 2xx).",
        )
        self.webhook_events_failed = counter(
            "plantstore_webhook_events_failed",
            "Webhook delivery attempts that failed: not 2xx, timed out or not connected.",
        )
        self.webhook_events_given_up = counter(
            "plantstore_webhook_events_given_up",
            "Webhook deliveries given up, still failing PLANTSTORE_WEBHOOK_GIVE_UP_AFTER seconds "
            "after their event.",
        )
        # Set at each scrape, by the worker that answers it, from the store all workers share:
        # the latest is right.
        self.store_ready = gauge(
            "plantstore_store_ready",
            "1 when the store could take a write when last asked (at most once a second), else 0.",
            "livemostrecent",
        )
        self.webhook_oldest_pending = gauge(
            "plantstore_webhook_oldest_pending_seconds",
            "Age of the oldest webhook delivery not yet sent or given up, at the last scrape; "
            "0 when none is pending.",
            "livemostrecent",
        )
        self.build_info = gauge(
            "plantstore_build_info",
            "The running version and the kind of store (memory, sqlite or postgresql).",
            "livemax",
            ("version", "store"),
        )

    def count_commit(self, changes: int) -> None:
        """Count a durable store's commit of `changes` changes (its `on_commit`)."""
        self.store_commits.inc()
        self.store_changes.inc(changes)

    def count_delivery(self, outcome: Outcome) -> None:
        """Count what became of a webhook delivery's attempt (the deliverer's `on_outcome`)."""
        if outcome is Outcome.SENT:
            self.webhook_events_sent.inc()
            return
        self.webhook_events_failed.inc()
        if outcome is Outcome.GIVEN_UP:
            self.webhook_events_given_up.inc()


_made: Metrics | None = None
_making = threading.Lock()


def process_metrics() -> Metrics:
    """This process's metrics, made in prometheus_client's default registry at the first call.

    A scrape gives the same series however the app is served: multiprocess mode has neither the
    process's own collectors nor counters' `_created` series, so a single process does without.
    """
    global _made
    with _making:
        if _made is None:
            for collector in (GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR):
                REGISTRY.unregister(collector)
            disable_created_metrics()
            _made = Metrics(REGISTRY)
    return _made


class RequestMetrics:
    """Count, time and track every request: the app's first middleware, so it sees all.

    The labelled children of each kind of answer are kept once made, as prometheus_client's
    documentation suggests for a hot path: `labels()` takes a lock and builds a key each time.
    """

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._children: dict[tuple[str, str, str], tuple] = {}

    def process_request(self, req, resp):
        req.context.metrics_start = time.perf_counter()
        self._metrics.in_flight.inc()

    def process_response(self, req, resp, resource, req_succeeded):
        metrics = self._metrics
        route = req.uri_template or "unmatched"
        method = req.method if req.method in falcon.COMBINED_METHODS else "other"
        status = str(resp.status_code)
        labels = (route, method, status)
        children = self._children.get(labels)
        if children is None:
            children = self._children[labels] = (
                metrics.requests.labels(*labels),
                metrics.latency.labels(route),
            )
        requests, latency = children
        requests.inc()
        # Falcon refuses a few methods before any process_request, yet calls process_response:
        # such a request was never in flight, and took no time the app could measure.
        start = getattr(req.context, "metrics_start", None)
        if start is not None:
            latency.observe(time.perf_counter() - start)
            metrics.in_flight.dec()
        # Every 503 the app answers is a store that could not serve.
        if status == "503":
            metrics.store_unavailable.labels(route).inc()
        elif labels in _CREATED:
            metrics.plants_created.inc()
        elif labels == _DELETED:
            metrics.plants_deleted.inc()


class MetricsEndpoint:
    """`/metrics`: every worker's metrics, for Prometheus; behind the token unless made public.

    Made with the app, it names the app's kind of store in `plantstore_build_info`. Each
    scrape tells whether the store is ready, as `/readyz` last found it, and, with webhooks,
    asks the store how old its oldest pending delivery is.
    """

    openapi = PathItem("/metrics")

    def __init__(
        self,
        metrics: Metrics,
        readiness: ReadinessCheck,
        store: PlantStore,
        *,
        store_kind: str,
        webhooks: bool,
        public: bool,
    ) -> None:
        self._metrics = metrics
        self._readiness = readiness
        self._store = store
        self._webhooks = webhooks
        self.auth_required = not public
        # Decided as prometheus_client decided it, when it was first imported: the two agree.
        self._multiprocess = "PROMETHEUS_MULTIPROC_DIR" in os.environ
        metrics.build_info.labels(version("plantstore"), store_kind).set(1)

    @Operation(
        "getMetrics",
        "Metrics in Prometheus' text format",
        {200: answer("Every worker's metrics.", {"type": "string"}, media_type="text/plain")},
        description="Needs no token when `PLANTSTORE_METRICS_PUBLIC=1`.",
        scope="metrics",
    )
    def on_get(self, req, resp):
        metrics = self._metrics
        metrics.store_ready.set(self._readiness.failure() is None)
        if not self._webhooks:
            metrics.webhook_oldest_pending.set(0)  # nothing is pending without webhooks
        else:
            # Left as it was when the store cannot say: `plantstore_store_ready` tells why.
            with suppress(StoreUnavailable):
                oldest = self._store.oldest()
                age = 0 if oldest is None else max(0, time.time() - oldest)
                metrics.webhook_oldest_pending.set(age)
        if self._multiprocess:
            registry = CollectorRegistry()
            MultiProcessCollector(registry)
        else:
            registry = REGISTRY
        resp.content_type = CONTENT_TYPE_LATEST
        resp.data = generate_latest(registry)

    on_head = on_get
