"""Run calls at once, so a race in the code under test shows up."""

import sys
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def at_once(count: int, call: Callable[[int], T]) -> list[T]:
    """Call `call(n)` for n in range(count) on as many threads released together; its answers.

    The interpreter switches threads every 5 ms by default, long enough for most of the
    contenders to run their whole check-then-act alone; switching every microsecond meanwhile
    interleaves them, so that a missing lock loses the race in this run, not in a rare one.
    """
    start = threading.Barrier(count)
    answers: list = [None] * count
    errors: list[BaseException] = []

    def contend(n: int) -> None:
        try:
            start.wait()
            answers[n] = call(n)
        except BaseException as ex:  # handed to the test's thread below
            errors.append(ex)

    threads = [threading.Thread(target=contend, args=(n,)) for n in range(count)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    if errors:
        raise errors[0]
    return answers
