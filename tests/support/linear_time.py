"""Time bounds on reading what a client sends, tried with values built to make a parser backtrack.

A reading that takes time super-linear in a value's length holds the GIL throughout, and with
it every thread of the worker. The bounds are on the order of growth, not on speed: a value ten
times as long may take ten times as long, never a hundred, and no value more than `BOUND`.
"""

import contextlib
import signal
import time
from collections.abc import Callable

import pytest

#: The most pieces of a value the bounds are tried with: longer than gunicorn lets a field be.
LONGEST = 10_000
#: Seconds one reading of a value may take: a hundred times what a linear one takes of the
#: longest, where a pattern that backtracks takes minutes at twenty pieces.
BOUND = 0.5
#: What the shared machine may add to any time measured here.
NOISE = 0.001


@contextlib.contextmanager
def at_most(seconds: float):
    """Fail the test once what runs inside has taken `seconds`, rather than wait hours for it:
    `re` looks for signals as it backtracks, so the timer's handler stops even a match."""

    def overran(signum, frame):
        pytest.fail(f"took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, overran)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def fastest(call: Callable[[str], object], value: str) -> float:
    """The least of a few times `call(value)` takes, each within `BOUND`: this thread's CPU
    time, which other processes do not lengthen, and the least of it, which holds the least of
    what the machine's caches and interrupts add."""
    times = []
    for _ in range(5):
        with at_most(BOUND):
            started = time.thread_time()
            call(value)
            times.append(time.thread_time() - started)
    return min(times)


def assert_linear(call: Callable[[str], object], family: Callable[[int], str]) -> None:
    """`call` takes a value of `family(n)` ten times as long in about ten times as long (30 at
    most, where quadratic time is a hundred), and each within `BOUND`, up to `LONGEST`."""
    shorter, longer = (fastest(call, family(n)) for n in (LONGEST // 10, LONGEST))
    assert longer < 30 * shorter + NOISE, (
        f"{shorter:.6f} s at n = {LONGEST // 10}, {longer:.6f} s at n = {LONGEST}"
    )
