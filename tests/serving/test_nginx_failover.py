"""The shipped site in front of hosts that fail: which requests nginx sends on to another
host, to how many, and how soon. Each failing host is one of the test's own on a loopback
address; the host that is up is the real gunicorn, with the unit's settings."""

import contextlib
import http.client
import http.server
import json
import socket
import threading
import time
from pathlib import Path

import pytest

from plantstore.testing.gunicorn_server import GunicornServer, send, server_environ
from tests.support.nginx_proxy import NginxProxy, unit_gunicorn_flags

pytestmark = pytest.mark.slow

TOKEN = "failover-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
#: The host that is up, and the address of those that fail.
UP, FAILING = "127.0.0.2", "127.0.0.3"
#: What nginx answers when no host could: its own 503 page, not the service's.
NGINX_UNAVAILABLE = {
    "error": 503,
    "message": "The service is unavailable right now; try again shortly.",
}


def request(nginx: NginxProxy, method: str, path: str, body=None, headers=None):
    """One request through nginx, on a connection of its own: status, headers, body."""
    connection = http.client.HTTPConnection("127.0.0.1", nginx.port, timeout=30)
    return send(connection, method, path, body, {**AUTH, **(headers or {})})


@contextlib.contextmanager
def site(directory: Path, upstream: list[str]):
    """nginx with the shipped site in front of `upstream`, stopped when the block ends; give
    back what it logged as errors then."""
    directory.mkdir()
    nginx = NginxProxy(directory, upstream)
    errors = []
    try:
        yield nginx, errors
    finally:
        errors.extend(line for line in nginx.stop().splitlines() if "[error]" in line)


def refusing_address() -> tuple[socket.socket, str]:
    """A port bound but not listening, which refuses connections until closed."""
    bound = socket.socket()
    bound.bind((FAILING, 0))
    return bound, f"{FAILING}:{bound.getsockname()[1]}"


def test_a_request_goes_to_two_hosts_at_most(tmp_path):
    """However many hosts fail, one request costs at most two of them an attempt: one that
    kills the worker serving it (the OOM killer, a crash) takes down no more than two."""
    refusing = [refusing_address() for _ in range(3)]
    try:
        with site(tmp_path / "nginx", [address for _, address in refusing]) as (nginx, errors):
            status, headers, body = request(nginx, "GET", "/plants/1")
    finally:
        for bound, _ in refusing:
            bound.close()
    assert (status, json.loads(body)) == (503, NGINX_UNAVAILABLE)
    assert headers["Retry-After"] == "1"
    assert len([line for line in errors if "(111: Connection refused)" in line]) == 2


@pytest.fixture
def live_host(tmp_path):
    """gunicorn with the unit's settings and the memory store, on TCP as on a host of its own."""
    (tmp_path / "gunicorn").mkdir()
    server = GunicornServer(
        server_environ(PLANTSTORE_TOKENS=TOKEN),
        *unit_gunicorn_flags(),
        host=UP,
        log_dir=tmp_path / "gunicorn",
    )
    yield server
    _, error_log = server.stop()
    assert "Traceback" not in error_log


def test_a_host_that_answers_no_connection_is_passed_over_within_two_seconds(live_host, tmp_path):
    """A host gone answers no SYN: here, a port whose queue of connections is full (its one
    place taken, and never accepted), where the kernel drops every SYN, as nothing answers a
    host powered off. The request goes on to the host that is up (the `backup`, tried only
    when the other failed) once the connect timeout has passed."""
    gone = socket.create_server((FAILING, 0), backlog=0)
    queued = socket.create_connection(gone.getsockname(), timeout=10)
    upstream = [f"{FAILING}:{gone.getsockname()[1]}", f"{UP}:{live_host.port} backup"]
    try:
        with site(tmp_path / "nginx", upstream) as (nginx, errors):
            began = time.monotonic()
            status, _, body = request(nginx, "GET", "/plants/1")
            waited = time.monotonic() - began
    finally:
        queued.close()
        gone.close()
    assert (status, json.loads(body)["error"]) == (404, 404)
    assert 2 <= waited < 5
    (timed_out,) = errors
    assert "upstream timed out (110: Connection timed out) while connecting to upstream" in (
        timed_out
    )


class AnswerLost(http.server.ThreadingHTTPServer):
    """A host that makes each change and fails before it answers, as a host killed then would:
    it passes each request on to `host` as it came, waits for the answer, and closes nginx's
    connection without a word. `made` lists each request's method and the status it got."""

    def __init__(self, host: GunicornServer) -> None:
        self.made: list[tuple[str, int]] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def make_and_lose(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, _, _ = host.request(self.command, self.path, body, dict(self.headers))
                self.server.made.append((self.command, status))
                self.close_connection = True

            do_POST = do_PUT = do_DELETE = make_and_lose

            def log_message(self, format, *args):
                """Quiet: the test asserts what it made."""

        super().__init__((FAILING, 0), Handler)
        self.daemon_threads = True
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()


def test_a_change_whose_answer_was_lost_is_sent_on_and_answered_as_its_repeat(live_host, tmp_path):
    """The site's comment, for real: each change is made by a host that then fails, and is
    sent on to another host (here the `backup`, tried only when the first failed), which
    answers what the API answers a repeat: a `POST` 200, a `PUT` with `If-Match` 412, a
    `DELETE` 404; and the change is there."""
    failing = AnswerLost(live_host)
    upstream = [
        f"{FAILING}:{failing.server_address[1]} max_fails=0",
        f"{UP}:{live_host.port} backup",
    ]
    try:
        with site(tmp_path / "nginx", upstream) as (nginx, errors):
            created = request(nginx, "POST", "/plants", json.dumps({"id": 1, "name": "fern"}))
            etag = live_host.request("GET", "/plants/1", None, AUTH)[1]["etag"]
            ivy = json.dumps({"name": "ivy"})
            replaced = request(nginx, "PUT", "/plants/1", ivy, {"If-Match": etag})
            held = live_host.request("GET", "/plants/1", None, AUTH)
            deleted = request(nginx, "DELETE", "/plants/1")
    finally:
        failing.close()
    assert created[::2] == (200, b'{"name":"fern"}')
    assert (replaced[0], json.loads(replaced[2])["error"]) == (412, 412)
    assert held[::2] == (200, b'{"name":"ivy"}')
    assert (deleted[0], json.loads(deleted[2])["error"]) == (404, 404)
    assert live_host.request("GET", "/plants/1", None, AUTH)[0] == 404
    assert failing.made == [("POST", 200), ("PUT", 200), ("DELETE", 204)]
    assert len(errors) == 3
    assert all("upstream prematurely closed connection" in line for line in errors)
