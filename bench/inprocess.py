"""In-process: µs per request through the WSGI callable, the app's paths against the floor."""

import atexit
import dataclasses
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import count

import falcon

from bench.environs import (
    AUTHORIZED,
    CONFIG,
    JSON_HEADERS,
    READER,
    Replayer,
    create,
    invalid_body,
    plant_body,
    replay,
    tag_of,
)
from bench.floor import create_floor_app
from bench.stock import document
from plantstore.api.conditions import Conditions, etag_of
from plantstore.app import create_app
from plantstore.runtime import Runtime
from plantstore.stores.memory import MemoryStore
from plantstore.testing.webhook_receiver import SECRET, WebhookReceiver

#: Plants kept ahead (ids -1 to -1,000) for `GET /plants/{id}` to read, one after another.
READABLE = 1_000

#: The cases measured beside the floor. Their ratios are diagnostics, not targets: what users
#: feel is measured over loopback, with the real gunicorn (bench/loopback.py).
CASES = ("success", "webhooks", "get", "401", "400")
#: The name of the ETag's work in a `GET /plants/{id}`, measured beside the cases.
ETAG = "etag"
#: Seconds a delivery attempt may take in `subscribed_app`: longer than any run, so that its
#: subscriber's silence costs no retry, and no warning in the log, while the bench runs.
ATTEMPT_SECONDS = 3600


@dataclass
class Case:
    """One kind of request: which app answers it, how the n-th is built, the status it must get."""

    name: str
    app: Callable
    environ: Callable[[int], dict]
    expected: int

    def environs(self, ids: Iterator[int], size: int) -> list[dict]:
        return [self.environ(next(ids)) for _ in range(size)]

    def timed(self, ids: Iterator[int], size: int) -> float:
        """µs per request, over `size` of them."""
        return timed(self.app, self.environs(ids, size), self.expected)


class EtagWork:
    """What a `GET /plants/{id}` of the `get` case does for its `ETag`, alone: the `If-Match`
    and `If-None-Match` checks of a request that has neither, the plant's digest, and the
    header set on the response (`Plant.on_get`, with the functions it calls).

    The service always sends the `ETag`, and has no switch to leave it out; so what it adds to
    a read is measured this way, against the whole read (`get`). Each request and response is
    made ahead, as Falcon makes them before the resource is called.
    """

    name = ETAG

    def timed(self, ids: Iterator[int], size: int) -> float:
        """µs per read, over `size` reads of the `get` case's plants."""
        reader = Replayer(READER, "GET")
        # Made once, as an app makes them: made anew for each request, they cost more than it.
        request_options, response_options = falcon.RequestOptions(), falcon.ResponseOptions()
        reads = []
        for _ in range(size):
            plant_id = readable(next(ids))
            req = falcon.Request(reader.environ(path=f"/plants/{plant_id}"), request_options)
            plant = document(plant_id, tag_of(plant_id))
            reads.append((req, falcon.Response(response_options), plant))
        start = time.perf_counter_ns()
        for req, resp, plant in reads:
            conditions = Conditions.of(req)
            if conditions.matches(plant) and not conditions.none_matches(plant):
                resp.etag = etag_of(plant)
        return (time.perf_counter_ns() - start) / size / 1000


def readable(i: int) -> int:
    """The id of the `i`-th plant the `get` case reads: those kept ahead, one after another."""
    return -1 - i % READABLE


def cases() -> list[Case]:
    """The floor first, then the app's paths, all on one memory store.

    `POST /plants` created (200, a fresh id each), also with webhooks configured (see
    `subscribed_app`), refused body (400) and no token (401); `GET /plants/{id}` of a plant the
    store holds (200).
    """
    app = create_app(CONFIG, MemoryStore())
    subscribed = subscribed_app()
    create(app, -READABLE, READABLE)
    post, anonymous, get = Replayer(AUTHORIZED), Replayer(JSON_HEADERS), Replayer(READER, "GET")
    return [
        Case("floor", create_floor_app(), lambda i: post.environ(plant_body(i)), 200),
        Case("success", app, lambda i: post.environ(plant_body(i)), 200),
        Case("webhooks", subscribed, lambda i: post.environ(plant_body(i)), 200),
        Case("get", app, lambda i: get.environ(path=f"/plants/{readable(i)}"), 200),
        Case("400", app, lambda i: post.environ(invalid_body(i)), 400),
        Case("401", app, lambda i: anonymous.environ(plant_body(i)), 401),
    ]


def subscribed_app() -> Callable:
    """The app as a worker builds it with webhooks configured, to a subscriber that never answers.

    `create_app` opens the memory store itself, so each commit wakes the delivery thread, as
    in a worker; the subscriber takes every delivery and holds it, so the senders wait and
    the outbox grows with each create. At exit it answers what it holds before the deliverer
    stops (atexit calls the last registered first), since stopping waits for the attempts
    under way, and closes once the deliverer has stopped.
    """
    silent = WebhookReceiver()
    silent.hold()
    atexit.register(silent.close)
    config = dataclasses.replace(
        CONFIG, webhook_urls=(silent.url,), webhook_secret=SECRET, webhook_timeout=ATTEMPT_SECONDS
    )
    runtime = Runtime(config)
    runtime.start()
    atexit.register(runtime.close)
    atexit.register(silent.release)
    return create_app(config, runtime.store)


def timed(app: Callable, environs: list[dict], expected: int) -> float:
    """Answer the requests; give the µs each took on average."""
    start = time.perf_counter_ns()
    replay(app, environs, expected)
    return (time.perf_counter_ns() - start) / len(environs) / 1000


def measure(rounds: int, batch: int) -> dict[str, float]:
    """Give the median µs per request of each case, and of the ETag's work (`ETAG`), over
    `rounds` batches of `batch` requests.

    Cases take turns within each round, in reversed order every other round, so that whatever
    else the machine does falls on all of them alike. Every id is fresh: a success is a create.
    """
    ids = count()
    timings: dict[str, list[float]] = {}
    measured = [*cases(), EtagWork()]
    for round_number in range(rounds):
        ordered = measured if round_number % 2 == 0 else measured[::-1]
        for case in ordered:
            timings.setdefault(case.name, []).append(case.timed(ids, batch))
    return {name: statistics.median(values) for name, values in timings.items()}
