"""In-process: µs per request through the WSGI callable, the app's paths against the floor."""

import atexit
import dataclasses
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import count

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
)
from bench.floor import create_floor_app
from plantstore.app import create_app
from plantstore.runtime import Runtime
from plantstore.stores.memory import MemoryStore
from tests.webhook_receiver import SECRET, WebhookReceiver

#: Plants kept ahead (ids -1 to -1,000) for `GET /plants/{id}` to read, one after another.
READABLE = 1_000

#: The cases measured beside the floor. Their ratios are diagnostics, not targets: what users
#: feel is measured over loopback, with the real gunicorn (bench/loopback.py).
CASES = ("success", "webhooks", "get", "401", "400")
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
        Case("get", app, lambda i: get.environ(path=f"/plants/{-1 - i % READABLE}"), 200),
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
    """Give the median µs per request of each case over `rounds` batches of `batch` requests.

    Cases take turns within each round, in reversed order every other round, so that whatever
    else the machine does falls on all of them alike. Every id is fresh: a success is a create.
    """
    ids = count()
    timings: dict[str, list[float]] = {}
    all_cases = cases()
    for round_number in range(rounds):
        ordered = all_cases if round_number % 2 == 0 else all_cases[::-1]
        for case in ordered:
            environs = case.environs(ids, batch)
            timings.setdefault(case.name, []).append(timed(case.app, environs, case.expected))
    return {name: statistics.median(values) for name, values in timings.items()}
