"""Prometheus metrics: what an operator watches, counted in every gunicorn worker.

Under gunicorn, `plantstore/gunicorn_settings.py` (`when_ready`) names a fresh directory in
`PROMETHEUS_MULTIPROC_DIR` before the first worker forks. prometheus_client reads that variable
when it is first imported, and then keeps each worker's values in files there; a scrape,
whichever worker answers it, adds up every worker's files, those of workers since replaced
included. `RequestMetrics` writes each request there as it is answered, with the fewest
writes that tell everything: counts kept in the worker and folded into its files later would
be missed by a scrape that another worker answers meanwhile, and lost with a killed worker.
Without it (a single process: falcon.testing, `python -m bench`, a preloaded app) the values
live in a registry of the app's own, and every scrape is answered by the process that
counted: `ThreadTallies` counts in plain per-thread tallies, without a lock, that the scrape
adds up. Either way each answer is kept once, by (route, method, status), and the scrape
derives the requests, the latency, plants created and deleted and the 503s from it.

Labels are bounded, so a client cannot make series without end: the route's template
(`/plants/{plant_id}`, never the path, its id or its query), `unmatched` where no route
matched, the methods Falcon knows (`other` for the rest) and the status.
"""

import os
import threading
import time
from bisect import bisect_left
from contextlib import suppress
from importlib.metadata import version
from itertools import accumulate
from time import perf_counter

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
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.utils import floatToGoString

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
_STORE_UNAVAILABLE = "503"

#: The service answers in well under a millisecond from memory, and a request waits up to
#: 3 s for a PostgreSQL connection: the buckets span both.
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
_BOUNDS = (*_LATENCY_BUCKETS, float("inf"))

# Counters get a `_created` series only in a single process: without them both modes expose the
# same series, and `plantstore_plants_created_total` is not followed by a `..._created_created`.
disable_created_metrics()


#: The metrics derived from the answers, name and help: the same series in either mode.
_REQUESTS = (
    "plantstore_http_requests",
    "Requests answered by the app, by route template, method and status.",
)
_LATENCY = (
    "plantstore_http_request_duration_seconds",
    "Time from the app's first middleware to its answer, by route template.",
)
_PLANTS_CREATED = (
    "plantstore_plants_created",
    "Answers 200 to POST /plants (an identical repeat is answered, and counted, again).",
)
_PLANTS_DELETED = ("plantstore_plants_deleted", "Plants deleted (204 to a DELETE).")
_UNAVAILABLE = (
    "plantstore_store_unavailable",
    "Answers 503 because the store could not serve, by route template.",
)
_IN_FLIGHT = (
    "plantstore_http_requests_in_flight",
    "Requests the app is answering now, in all workers.",
)

#: What a worker keeps in its files in multiprocess mode, never exposed as such: the timed
#: answers' latencies by (route, method, status), and the answers that were not timed.
_STORED_ANSWERS = "plantstore_answers"
_STORED_UNTIMED = "plantstore_untimed_answers"
_ANSWER_LABELS = ("route", "method", "status")


class Metrics:
    """The collectors, the middleware that counts requests, and the text a scrape gets."""

    def __init__(self, store: PlantStore, store_kind: str, outbox: Outbox | None = None) -> None:
        self._store = store
        self._outbox = outbox
        self._registry = registry = CollectorRegistry()
        if _MULTIPROCESS:
            self.request_metrics = RequestMetrics(registry)
        else:
            self.request_metrics = ThreadTallies()
            registry.register(self.request_metrics)
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
        if self._outbox is None:
            # Set, not left at its default, so that each mode exposes it: a worker's gauge is
            # in its files only once set.
            self._oldest_pending.set(0)
        else:
            # Left as it was when the store cannot say: `plantstore_store_ready` tells why.
            with suppress(StoreUnavailable):
                oldest = self._outbox.oldest()
                self._oldest_pending.set(0 if oldest is None else max(0, time.time() - oldest))
        if not _MULTIPROCESS:
            return generate_latest(self._registry)
        registry = CollectorRegistry()
        registry.register(_EveryWorker())
        return generate_latest(registry)


#: A row of the answers of one (route, method, status): a count per latency bucket (+Inf
#: last), the latencies' sum, and the answers that were not timed: Falcon refuses a few
#: methods before any middleware's process_request, but still calls process_response, so
#: such a request was never in flight, and has no latency.
_SUM = len(_BOUNDS)
_UNTIMED = _SUM + 1


def _new_row() -> list:
    return [0] * (_UNTIMED + 1)


def _add_row(total: list, row: list) -> None:
    for index, value in enumerate(row):
        total[index] += value


def _answers(row: list | None) -> float:
    """How many answers a row counts, timed or not."""
    return 0 if row is None else sum(row[:_SUM]) + row[_UNTIMED]


def _answer_metrics(rows: dict[tuple, list]):
    """The metrics of the answers, from their rows by (route, method, status).

    Requests, latency, plants created and deleted, and 503s are all counts of answers: kept
    once, as one row per kind of answer, and told apart only here, at the scrape.
    """
    requests = CounterMetricFamily(*_REQUESTS, labels=_ANSWER_LABELS)
    latency = HistogramMetricFamily(*_LATENCY, labels=("route",))
    unavailable = CounterMetricFamily(*_UNAVAILABLE, labels=("route",))
    by_route: dict[str, list] = {}
    for labels, row in rows.items():
        route, _, status = labels
        requests.add_metric(labels, _answers(row))
        _add_row(by_route.setdefault(route, _new_row()), row)
        if status == _STORE_UNAVAILABLE:
            unavailable.add_metric((route,), _answers(row))
    for route, row in by_route.items():
        counts = accumulate(row[:_SUM])
        buckets = [(floatToGoString(bound), n) for bound, n in zip(_BOUNDS, counts, strict=True)]
        latency.add_metric((route,), buckets, row[_SUM])
    yield requests
    yield latency
    yield CounterMetricFamily(*_PLANTS_CREATED, value=_answers(rows.get(_CREATED)))
    yield CounterMetricFamily(*_PLANTS_DELETED, value=_answers(rows.get(_DELETED)))
    yield unavailable


def _labels(key: tuple) -> tuple[str, str, str]:
    """The labels of an answer from what the middleware keys it by: route, method, status."""
    template, method, status = key
    return template or UNMATCHED, method, str(falcon.http_status_to_code(status))


def _answer_key(req, resp) -> tuple:
    """What the middleware keys an answer by: bounded, and cheap to make."""
    return req.uri_template, _METHODS.get(req.method, OTHER_METHOD), resp.status


class RequestMetrics:
    """Count, time and track every request in prometheus_client's files: multiprocess mode.

    The first middleware, so it sees all. Each request is written to this worker's files as
    it is answered, so a scrape answered by any worker sees every request answered before it,
    those of a worker killed since included (what Prometheus' test checks). That costs a lock
    and a write to a memory-mapped file per update, so a request makes the fewest that tell
    everything: in flight, up and down, and one histogram by (route, method, status), whose
    buckets and sum are two updates. The requests, the latency by route, plants created and
    deleted and the 503s are all derived from it at the scrape (`_EveryWorker`). It runs
    twice per request, so it does little else: the updates of each kind of answer are looked
    up once and kept.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._stored = Histogram(
            _STORED_ANSWERS,
            "Timed answers.",
            _ANSWER_LABELS,
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self._untimed = Counter(
            _STORED_UNTIMED, "Untimed answers.", _ANSWER_LABELS, registry=registry
        )
        in_flight = Gauge(*_IN_FLIGHT, multiprocess_mode="livesum", registry=registry)
        self._in_flight_inc = in_flight.inc
        self._in_flight_dec = in_flight.dec
        self._children: dict[tuple, tuple] = {}

    def process_request(self, req, resp):
        req.context.metrics_start = perf_counter()
        self._in_flight_inc()

    def process_response(self, req, resp, resource, req_succeeded):
        start = getattr(req.context, "metrics_start", None)
        key = _answer_key(req, resp)
        children = self._children.get(key) or self._add_children(key)
        if start is None:
            children[1]()
        else:
            children[0](perf_counter() - start)
            self._in_flight_dec()

    def _add_children(self, key: tuple) -> tuple:
        """The bound methods that count an answer of this kind: timed, and not."""
        labels = _labels(key)
        children = self._stored.labels(*labels).observe, self._untimed.labels(*labels).inc
        self._children[key] = children
        return children


class _EveryWorker:
    """What a scrape gives in multiprocess mode: every worker's files, answers derived."""

    def collect(self):
        rows: dict[tuple, list] = {}
        for family in MultiProcessCollector(None).collect():
            if family.name == _STORED_ANSWERS:
                _add_histogram(rows, family.samples)
            elif family.name == _STORED_UNTIMED:
                for sample in family.samples:
                    if sample.name.endswith("_total"):
                        row = rows.setdefault(_sample_labels(sample), _new_row())
                        row[_UNTIMED] += sample.value
            else:
                yield family
        yield from _answer_metrics(rows)


#: The index in a row of each bucket's `le` label.
_BUCKET_INDEX = {floatToGoString(bound): index for index, bound in enumerate(_BOUNDS)}


def _sample_labels(sample) -> tuple[str, str, str]:
    return tuple(sample.labels[name] for name in _ANSWER_LABELS)


def _add_histogram(rows: dict[tuple, list], samples) -> None:
    """Add the stored histogram's samples into rows: its buckets are cumulative, a row's not."""
    cumulative: dict[tuple, list] = {}
    for sample in samples:
        labels = _sample_labels(sample)
        if sample.name.endswith("_bucket"):
            counts = cumulative.setdefault(labels, [0] * len(_BOUNDS))
            counts[_BUCKET_INDEX[sample.labels["le"]]] = sample.value
        elif sample.name.endswith("_sum"):
            rows.setdefault(labels, _new_row())[_SUM] += sample.value
    for labels, counts in cumulative.items():
        row = rows.setdefault(labels, _new_row())
        for index, (below, up_to) in enumerate(zip([0, *counts], counts, strict=False)):
            row[index] += up_to - below


class _Tally:
    """One thread's counts: only that thread writes them, so they need no lock."""

    __slots__ = ("answers", "started", "thread")

    def __init__(self) -> None:
        self.thread = threading.current_thread()
        #: When the request this thread serves began; None between requests.
        self.started: float | None = None
        #: The row of each kind of answer, by `_answer_key`.
        self.answers: dict[tuple, list] = {}


class ThreadTallies:
    """Count, time and track every request in plain per-thread tallies: a single process.

    The first middleware, so it sees all. prometheus_client's values take a lock at each
    update, and the few updates a request needs cost as much as a third of a whole cheap
    request. Here each thread counts in a tally of its own (a dict of lists), which no other
    thread writes: under the GIL, that needs no lock, and a scrape that reads it while the
    thread counts on sees each count either before or after, never half. The scrape adds up
    every tally then (`collect`, a prometheus_client custom collector): nothing is folded
    ahead and nothing can be lost, since the counts live in the process that answers the
    scrape. The tallies of threads that ended are added into one when a thread starts and at
    each scrape, so there are never more than the threads alive.

    Under gunicorn, whichever worker answers a scrape must report every worker's counts, so
    there `RequestMetrics` writes them to prometheus_client's files instead.
    """

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._tallies: list[_Tally] = []
        #: The rows of the threads that ended, by labels.
        self._ended: dict[tuple, list] = {}

    def process_request(self, req, resp):
        try:
            tally = self._local.tally
        except AttributeError:
            tally = self._add_tally()
        tally.started = perf_counter()

    def process_response(self, req, resp, resource, req_succeeded):
        try:
            tally = self._local.tally
        except AttributeError:
            tally = self._add_tally()
        # The raw method, not `_answer_key`'s: the commonest answers are found in one step.
        row = tally.answers.get((req.uri_template, req.method, resp.status))
        if row is None:
            row = tally.answers.setdefault(_answer_key(req, resp), _new_row())
        started = tally.started
        if started is None:
            row[_UNTIMED] += 1
        else:
            tally.started = None
            elapsed = perf_counter() - started
            row[bisect_left(_LATENCY_BUCKETS, elapsed)] += 1
            row[_SUM] += elapsed

    def _add_tally(self) -> _Tally:
        tally = self._local.tally = _Tally()
        with self._lock:
            self._end_tallies()
            self._tallies.append(tally)
        return tally

    def _end_tallies(self) -> None:
        """Add the rows of threads that ended to `_ended`: they will not count again."""
        for tally in [tally for tally in self._tallies if not tally.thread.is_alive()]:
            self._tallies.remove(tally)
            _add_rows(self._ended, tally.answers)

    def collect(self):
        """Every request counted, as the metrics prometheus_client's values would give."""
        with self._lock:
            self._end_tallies()
            rows = {labels: list(row) for labels, row in self._ended.items()}
            in_flight = 0
            for tally in self._tallies:
                in_flight += tally.started is not None
                _add_rows(rows, tally.answers)
        yield from _answer_metrics(rows)
        yield GaugeMetricFamily(*_IN_FLIGHT, value=in_flight)


def _add_rows(total: dict, answers: dict) -> None:
    """Add a tally's rows, by `_answer_key`, to `total`, by labels.

    The dict is copied first (in one step, under the GIL): its thread may add a key meanwhile.
    """
    for key, row in list(answers.items()):
        _add_row(total.setdefault(_labels(key), _new_row()), row)


class MetricsEndpoint:
    """`/metrics`: every worker's metrics, for Prometheus; behind the token unless made public."""

    def __init__(self, metrics: Metrics, public: bool) -> None:
        self._metrics = metrics
        self.auth_required = not public

    def on_get(self, req, resp):
        resp.content_type = CONTENT_TYPE_LATEST
        resp.data = self._metrics.exposition()

    on_head = on_get
