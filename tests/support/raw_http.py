"""HTTP/1.1 spoken by hand over a plain socket, for clients that break the rules on purpose."""

import json
import socket
from dataclasses import dataclass


@dataclass
class Answer:
    status_line: str
    headers: dict[str, str]
    body: bytes

    @property
    def status(self) -> int:
        return int(self.status_line.split()[1])

    def json(self):
        assert self.headers["content-type"] == "application/json"
        return json.loads(self.body)


def request_head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: plants.example"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def exchange(port: int, raw: bytes, timeout: float = 10) -> bytes:
    """Send `raw` to 127.0.0.1:`port`, stop sending, and read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as client:
        client.sendall(raw)
        client.shutdown(socket.SHUT_WR)
        return read_until_closed(client)


def answer_then_close(port: int, raw: bytes, timeout: float = 10) -> Answer:
    """Send `raw` to 127.0.0.1:`port` and read the one answer the server sends before it
    closes: to a request it refuses, or one that asks for `Connection: close`."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as client:
        client.sendall(raw)
        (answer,) = parse_answers(read_until_closed(client))
    return answer


def read_until_closed(client: socket.socket) -> bytes:
    """Everything the server sends until it closes; the socket's timeout bounds the wait."""
    chunks = []
    while chunk := client.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def read_answer(stream) -> Answer:
    """Read one answer (with Content-Length) from `stream`, a socket's `makefile("rb")`.

    One stream reads answers pipelined on one connection, one after the other.
    """
    status_line = stream.readline().decode("latin-1").rstrip("\r\n")
    assert status_line, "the connection closed before an answer"
    headers = {}
    while line := stream.readline().decode("latin-1").rstrip("\r\n"):
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(status_line, headers, stream.read(int(headers.get("content-length", 0))))


def parse_answers(data: bytes) -> list[Answer]:
    """Split what a server sent on one connection into its answers (each with Content-Length)."""
    answers = []
    while data:
        head, separator, rest = data.partition(b"\r\n\r\n")
        assert separator, f"an answer cut short: {data[:200]!r}"
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers["content-length"])
        assert len(rest) >= length, f"a body cut short: {data[:200]!r}"
        answers.append(Answer(status_line, headers, rest[:length]))
        data = rest[length:]
    return answers
