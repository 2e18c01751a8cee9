"""HTTP/1.1 spoken by hand over a plain socket, for clients that break the rules on purpose."""

import json
import socket
from dataclasses import dataclass


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        assert self.headers["content-type"] == "application/json"
        return json.loads(self.body)


def request_head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: plants.example"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_until_closed(client: socket.socket) -> bytes:
    """Everything the server sends until it closes; the socket's timeout bounds the wait."""
    chunks = []
    while chunk := client.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


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
        answers.append(Answer(int(status_line.split()[1]), headers, rest[:length]))
        data = rest[length:]
    return answers
