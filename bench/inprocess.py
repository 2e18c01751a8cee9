"""In-process: µs per request through the WSGI callable, the app's paths against the floor."""

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
from plantstore.stores.memory import MemoryStore

#: Plants kept ahead (ids -1 to -1,000) for `GET /plants/{id}` to read, one after another.
READABLE = 1_000

#: The most each case may cost, as a multiple of the floor's µs per request.
TARGETS = {"success": 2.5, "get": 2.0, "401": 1.5, "400": 4.0}


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

    `POST /plants` created (200, a fresh id each), refused body (400) and no token (401);
    `GET /plants/{id}` of a plant the store holds (200).
    """
    app = create_app(CONFIG, MemoryStore())
    create(app, -READABLE, READABLE)
    post, anonymous, get = Replayer(AUTHORIZED), Replayer(JSON_HEADERS), Replayer(READER, "GET")
    return [
        Case("floor", create_floor_app(), lambda i: post.environ(plant_body(i)), 200),
        Case("success", app, lambda i: post.environ(plant_body(i)), 200),
        Case("get", app, lambda i: get.environ(path=f"/plants/{-1 - i % READABLE}"), 200),
        Case("400", app, lambda i: post.environ(invalid_body(i)), 400),
        Case("401", app, lambda i: anonymous.environ(plant_body(i)), 401),
    ]


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
