"""Load over loopback: what a run measured, and a Python generator for machines without wrk."""

import re
import selectors
import socket
import statistics
import time
from dataclasses import dataclass

from bench.environs import AUTHORIZED, plant_body


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
        """A run where any answer was not 200, or a connection failed, measured something else."""
        return self.unexpected == 0 and self.socket_errors == 0 and self.requests > 0


_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length: *(\d+)", re.IGNORECASE)


def _request(port: int, plant_id: int) -> bytes:
    body = plant_body(plant_id)
    headers = "".join(f"{name}: {value}\r\n" for name, value in AUTHORIZED.items())
    return (
        f"POST /plants HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def python_load(port: int, first_id: int, seconds: float, connections: int) -> LoadResult:
    """Keep `connections` keep-alive connections busy for `seconds`, one request in flight each.

    One thread and a selector: the generator's own cost stays low and it needs nothing beyond
    Python. Each answer is read whole (by its Content-Length) and its status checked.
    """
    selector = selectors.DefaultSelector()
    next_id = first_id
    latencies: list[int] = []
    unexpected = socket_errors = 0
    state: dict[socket.socket, list] = {}

    def send(sock: socket.socket) -> None:
        nonlocal next_id
        state[sock] = [time.perf_counter_ns(), b""]
        sock.sendall(_request(port, next_id))
        next_id += 1

    for _ in range(connections):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        selector.register(sock, selectors.EVENT_READ)
        send(sock)
    start = time.perf_counter()
    deadline = start + seconds
    while state and time.perf_counter() < deadline:
        for key, _ in selector.select(timeout=1):
            sock = key.fileobj
            try:
                chunk = sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                socket_errors += 1
                selector.unregister(sock)
                sock.close()
                del state[sock]
                continue
            sent_at, received = state[sock]
            received += chunk
            head_end = received.find(b"\r\n\r\n")
            length = _CONTENT_LENGTH.search(received, 0, head_end) if head_end >= 0 else None
            if length is None or len(received) < head_end + 4 + int(length[1]):
                state[sock][1] = received
                continue
            latencies.append(time.perf_counter_ns() - sent_at)
            if received[9:12] != b"200":
                unexpected += 1
            send(sock)
    elapsed = time.perf_counter() - start
    for sock in state:
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
