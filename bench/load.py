"""Load over loopback: what is sent, what a run measured, a Python generator for want of wrk."""

import re
import selectors
import socket
import statistics
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count, cycle
from typing import ClassVar

from bench.environs import AUTHORIZED, READER, plant_body, replacement_body

#: One request: method, path (with its query), body (None: no body) and headers.
Request = tuple[str, str, bytes | None, dict[str, str]]


@dataclass(frozen=True)
class Creates:
    """`POST /plants`, a fresh id each request from `first_id` on: every request creates."""

    first_id: int
    expected: ClassVar[int] = 200

    def requests(self) -> Iterator[Request]:
        return (
            ("POST", "/plants", plant_body(plant_id), AUTHORIZED)
            for plant_id in count(self.first_id)
        )


@dataclass(frozen=True)
class Reads:
    """`GET` of each of `paths` in turn, over and over."""

    paths: tuple[str, ...]
    expected: ClassVar[int] = 200

    def requests(self) -> Iterator[Request]:
        return (("GET", path, None, READER) for path in cycle(self.paths))


@dataclass(frozen=True)
class Revalidations:
    """`GET` of each of `paths` in turn, over and over, with `If-None-Match` naming the `ETag`
    of its plant (`tags`, one a path), as a cache asks whether what it holds is still current:
    the plants do not change, so each answers 304.
    """

    paths: tuple[str, ...]
    tags: tuple[str, ...]
    expected: ClassVar[int] = 304

    def requests(self) -> Iterator[Request]:
        return (
            ("GET", path, None, {**READER, "If-None-Match": f'"{tag}"'})
            for path, tag in cycle(zip(self.paths, self.tags, strict=True))
        )


@dataclass(frozen=True)
class Replaces:
    """`PUT /plants/{id}` of each of `ids` in turn, over and over, renaming its plant each time
    (`replacement_body`, versions from `first_version` on, one a request): every request
    replaces a stored plant with another, so each answers 200 and changes what is kept.
    """

    ids: tuple[int, ...]
    first_version: int
    expected: ClassVar[int] = 200

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f"/plants/{plant_id}" for plant_id in self.ids)

    def requests(self) -> Iterator[Request]:
        return (
            ("PUT", f"/plants/{plant_id}", replacement_body(plant_id, version), AUTHORIZED)
            for plant_id, version in zip(cycle(self.ids), count(self.first_version))
        )


@dataclass(frozen=True)
class Deletes:
    """`DELETE /plants/{id}` of each of `ids` in turn: each plant once, while the ids last.

    Sent again once they ran out, an id answers 404, another status than the one expected.
    """

    ids: tuple[int, ...]
    expected: ClassVar[int] = 204

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f"/plants/{plant_id}" for plant_id in self.ids)

    def requests(self) -> Iterator[Request]:
        return (("DELETE", path, None, READER) for path in cycle(self.paths))


Workload = Creates | Reads | Revalidations | Replaces | Deletes


@dataclass(frozen=True)
class LoadResult:
    requests: int
    seconds: float
    p50_us: float
    p99_us: float
    unexpected: int
    socket_errors: int

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds

    @property
    def valid(self) -> bool:
        """A run where any answer had another status than the one expected, or a connection
        failed, measured something else.
        """
        return self.unexpected == 0 and self.socket_errors == 0 and self.requests > 0


_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length: *(\d+)", re.IGNORECASE)


def _raw(port: int, request: Request) -> bytes:
    method, path, body, headers = request
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    if body is None:
        return f"{head}\r\n".encode()
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


def python_load(
    port: int, workload: Workload, seconds: float, connections: int, rate: float | None = None
) -> LoadResult:
    """Keep `connections` keep-alive connections busy for `seconds`, one request in flight each.

    With `rate`, requests go out on a schedule instead, the n-th at n / `rate` seconds, on
    whichever connection is free then, taken in turn: a load that does not follow the server's
    speed, which wrk cannot send. One thread and a selector: the generator's own cost stays low
    and it needs nothing beyond Python. Each answer is read whole (by its Content-Length) and
    its status checked against the workload's.
    """
    selector = selectors.DefaultSelector()
    requests = workload.requests()
    latencies: list[int] = []
    unexpected = socket_errors = sent = 0
    expected = b"%d" % workload.expected
    state: dict[socket.socket, list] = {}
    idle: deque[socket.socket] = deque()

    def send(sock: socket.socket) -> None:
        state[sock] = [time.perf_counter_ns(), b""]
        sock.sendall(_raw(port, next(requests)))

    for _ in range(connections):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        selector.register(sock, selectors.EVENT_READ)
        idle.append(sock)
    start = time.perf_counter()
    deadline = start + seconds
    while (state or idle) and (now := time.perf_counter()) < deadline:
        due = start + sent / rate if rate else now
        while idle and now >= due:
            send(idle.popleft())
            sent += 1
            due = start + sent / rate if rate else now
        wait = min(due - now, deadline - now) if idle else 1
        for key, _ in selector.select(timeout=wait):
            sock = key.fileobj
            try:
                chunk = sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                socket_errors += 1
                selector.unregister(sock)
                sock.close()
                if state.pop(sock, None) is None:
                    idle.remove(sock)
                continue
            sent_at, received = state[sock]
            received += chunk
            head_end = received.find(b"\r\n\r\n")
            if head_end < 0:
                state[sock][1] = received
                continue
            # The service sends a Content-Length with every body: an answer without one (a
            # 204, a 304) has none.
            length = _CONTENT_LENGTH.search(received, 0, head_end)
            if len(received) < head_end + 4 + (int(length[1]) if length else 0):
                state[sock][1] = received
                continue
            latencies.append(time.perf_counter_ns() - sent_at)
            if received[9:12] != expected:
                unexpected += 1
            del state[sock]
            idle.append(sock)
    elapsed = time.perf_counter() - start
    for sock in [*state, *idle]:
        sock.close()
    selector.close()
    percentiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0] * 99
    return LoadResult(
        requests=len(latencies),
        seconds=elapsed,
        p50_us=percentiles[49] / 1000,
        p99_us=percentiles[98] / 1000,
        unexpected=unexpected,
        socket_errors=socket_errors,
    )
