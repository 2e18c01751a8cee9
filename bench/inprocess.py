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
    Replayer,
    invalid_body,
    plant_body,
    replay,
)
from bench.floor import create_floor_app
from plantstore.app import create_app
from plantstore.stores.memory import MemoryStore


@dataclass
class Case:
    """One kind of request: which app answers it, how each is built, and the status it must get."""

    name: str
    app: Callable
    replayer: Replayer
    body: Callable[[int], bytes]
    expected: int

    def environs(self, ids: Iterator[int], size: int) -> list[dict]:
        return [self.replayer.environ(self.body(next(ids))) for _ in range(size)]


def cases() -> list[Case]:
    """The floor first, then `POST /plants`: created (200), refused body (400), no token (401)."""
    app = create_app(CONFIG, MemoryStore())
    authorized, anonymous = Replayer(AUTHORIZED), Replayer(JSON_HEADERS)
    return [
        Case("floor", create_floor_app(), authorized, plant_body, 200),
        Case("success", app, authorized, plant_body, 200),
        Case("400", app, authorized, invalid_body, 400),
        Case("401", app, anonymous, plant_body, 401),
    ]


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
            start = time.perf_counter_ns()
            replay(case.app, environs, case.expected)
            elapsed = time.perf_counter_ns() - start
            timings.setdefault(case.name, []).append(elapsed / batch / 1000)
    return {name: statistics.median(values) for name, values in timings.items()}
