"""Hostile clients over a real socket: each gets a clear answer or a clean close, and the one
worker lives through them all and serves the next normal request."""

import http.client
import json
import socket
import time

import pytest

from tests import raw_http
from tests.gunicorn_server import GunicornServer, server_environ
from tests.raw_http import parse_answers, read_until_closed, request_head

pytestmark = pytest.mark.slow

TOKEN = "hostile-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
PLANT = b'{"id": 1, "name": "fern"}'
OVER_THE_LIMIT = b'{"id": 2, "name": "' + b"x" * 70_000 + b'"}'
#: How long a client waits for an answer or a close before the test fails.
PATIENCE = 10
#: Seconds the server gives a request's body to arrive.
BODY_TIMEOUT = 2
#: The server's threads (gunicorn's default GUNICORN_THREADS).
THREADS = 8

tried = []


@pytest.fixture(scope="module")
def server(tmp_path_factory, note_figure):
    running = GunicornServer(
        server_environ(
            PLANTSTORE_TOKENS=TOKEN,
            GUNICORN_KEEPALIVE="2",
            GUNICORN_TIMEOUT="5",
            GUNICORN_BODY_TIMEOUT=str(BODY_TIMEOUT),
        ),
        log_dir=tmp_path_factory.mktemp("logs"),
    )
    assert running.request("GET", "/healthz")[0] == 200
    (worker,) = running.worker_pids()
    yield running
    _, stderr = running.stop()
    assert stderr.count("Booting worker") == 1
    for trouble in ("WORKER TIMEOUT", "Traceback", "[ERROR]", "[CRITICAL]"):
        assert trouble not in stderr
    note_figure(f"hostile clients: {len(tried)} cases tried; worker {worker} served them all")


@pytest.fixture(autouse=True)
def the_worker_lives_on(server, request):
    workers = server.worker_pids()
    yield
    status, _, body = server.request("POST", "/plants", b'{"id": 0, "name": "calm"}', HEADERS)
    assert (status, json.loads(body)) == (200, {"name": "calm"})
    assert server.worker_pids() == workers
    tried.append(request.node.name)


def connect(server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE)


def exchange(server, raw: bytes) -> bytes:
    """Send `raw`, stop sending, and read until the server closes."""
    return raw_http.exchange(server.port, raw, timeout=PATIENCE)


def raw_post(body: bytes, **headers: str) -> bytes:
    """The bytes of a `POST /plants` with the token, `headers` and `body`, as sent on the wire."""
    return request_head("POST", "/plants", {**HEADERS, **headers}) + body


def test_a_body_over_the_limit_with_content_length_is_413(server):
    raw = raw_post(OVER_THE_LIMIT, **{"Content-Length": str(len(OVER_THE_LIMIT))})
    first, *rest = parse_answers(
        exchange(server, raw + raw_post(PLANT, **{"Content-Length": "25"}))
    )
    assert (first.status, first.json()["error"]) == (413, 413)
    # gunicorn reads past an unread body only so far; beyond that it closes the connection.
    assert [answer.status for answer in rest] in ([], [200])


def test_an_announced_body_over_the_limit_is_413_before_it_is_sent(server):
    raw = raw_post(b"", **{"Content-Length": "10000000"})
    with connect(server) as client:
        client.sendall(raw)
        answer = http.client.HTTPResponse(client)
        answer.begin()
        assert (answer.status, json.loads(answer.read())["error"]) == (413, 413)


def chunked(body: bytes, size: int = 1000) -> bytes:
    pieces = [body[start : start + size] for start in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


def test_a_chunked_body_over_the_limit_is_413(server):
    (answer,) = parse_answers(
        exchange(server, raw_post(chunked(OVER_THE_LIMIT), **{"Transfer-Encoding": "chunked"}))
    )
    assert (answer.status, answer.json()["error"]) == (413, 413)


def test_a_chunked_body_within_the_limit_is_served(server):
    (answer,) = parse_answers(
        exchange(server, raw_post(chunked(PLANT, size=7), **{"Transfer-Encoding": "chunked"}))
    )
    assert (answer.status, answer.json()) == (200, {"name": "fern"})


@pytest.mark.parametrize(
    "body",
    [
        b"g\r\n{}\r\n0\r\n\r\n",
        b" 19\r\n" + PLANT + b"\r\n0\r\n\r\n",
        b"0x19\r\n" + PLANT + b"\r\n0\r\n\r\n",
        b"-1\r\n" + PLANT + b"\r\n0\r\n\r\n",
        b"19\r\n" + PLANT + b"XX0\r\n\r\n",
        b"19\r\n" + PLANT + b"\r\n0\r\nno colon here\r\n\r\n",
        b"19\r\n" + PLANT + b"\r\n0\r\nContent-Length: 25\r\n\r\n",
    ],
    ids=[
        "a size that is no hex",
        "a space before the size",
        "a size written 0x",
        "a negative size",
        "data not followed by CRLF",
        "a bad trailer",
        "Content-Length in the trailer",
    ],
)
def test_a_malformed_chunked_body_is_400_and_the_connection_closes(server, body):
    raw = raw_post(body, **{"Transfer-Encoding": "chunked"}) + raw_post(
        PLANT, **{"Content-Length": "25"}
    )
    (answer,) = parse_answers(exchange(server, raw))
    assert (answer.status, answer.json()) == (
        400,
        {"error": 400, "message": "The chunked body or its trailer is malformed."},
    )
    assert answer.headers["connection"] == "close"


def test_a_client_that_closes_mid_body_is_400(server):
    raw = raw_post(b"19\r\n" + PLANT[:10], **{"Transfer-Encoding": "chunked"})
    (answer,) = parse_answers(exchange(server, raw))
    assert (answer.status, answer.json()) == (
        400,
        {"error": 400, "message": "The connection closed before the body's end."},
    )
    assert answer.headers["connection"] == "close"


STALLED_BODIES = [
    b"19\n" + PLANT + b"\n0\n\n",
    b"ffffff\r\n" + PLANT,
    b"19\r\n" + PLANT[:10],
]


def test_bodies_that_stall_free_their_threads_within_the_bound(server):
    """More clients stalled in their bodies than threads, and they never close: each gets 408
    once its body's time is up, and a normal request is served meanwhile, within the bound."""
    stalled = [connect(server) for _ in range(THREADS + 4)]
    try:
        for number, client in enumerate(stalled):
            body = STALLED_BODIES[number % len(STALLED_BODIES)]
            client.sendall(raw_post(body, **{"Transfer-Encoding": "chunked"}))
        started = time.monotonic()
        status, _, _ = server.request("GET", "/healthz")
        assert status == 200
        assert time.monotonic() - started < BODY_TIMEOUT + 1
        for client in stalled:
            (answer,) = parse_answers(read_until_closed(client))
            assert (answer.status, answer.json()["error"]) == (408, 408)
            assert answer.headers["connection"] == "close"
        # They still have not closed: the worker must not wait for them to, before it serves.
        started = time.monotonic()
        assert server.request("GET", "/healthz")[0] == 200
        assert time.monotonic() - started < BODY_TIMEOUT
    finally:
        for client in stalled:
            client.close()


@pytest.mark.parametrize(
    "raw",
    [b"HELLO\r\n\r\n", request_head("POST", "/plants", {"Content-Length": "25"}) + PLANT],
    ids=["refused by gunicorn", "refused by the app"],
)
def test_clients_that_never_close_after_a_refusal_do_not_stall_the_worker(server, raw):
    """gunicorn waits for a client to close after it has closed its side: in one thread, not
    in the worker's main loop, where each would stall every connection (and, past the worker's
    timeout, have it restarted)."""
    lingering = [connect(server) for _ in range(4)]
    try:
        started = time.monotonic()
        for client in lingering:
            client.sendall(raw)
        for client in lingering:
            (answer,) = parse_answers(read_until_closed(client))
            assert answer.headers["connection"] == "close"
        assert server.request("GET", "/healthz")[0] == 200
        # gunicorn waits 2 s for each client: one after the other, that would be 8 s.
        assert time.monotonic() - started < 2
    finally:
        for client in lingering:
            client.close()


def test_a_content_length_shorter_than_the_body_is_400(server):
    first, *rest = parse_answers(exchange(server, raw_post(PLANT, **{"Content-Length": "10"})))
    assert (first.status, first.json()["error"]) == (400, 400)
    assert "Could not parse JSON body" in first.json()["message"]
    # The rest of the body is no request: refused by gunicorn or dropped with the connection.
    assert all(answer.status == 400 for answer in rest)


def test_a_content_length_longer_than_the_body_is_400_when_the_client_stops(server):
    (answer,) = parse_answers(exchange(server, raw_post(PLANT, **{"Content-Length": "100"})))
    assert (answer.status, answer.json()) == (
        400,
        {"error": 400, "message": "The body ended after 25 of its 100 bytes."},
    )


@pytest.mark.parametrize(
    "partial",
    [
        raw_post(PLANT, **{"Content-Length": "100"}),
        request_head("POST", "/plants", HEADERS)[:40],
    ],
    ids=["in the body", "in the headers"],
)
def test_a_client_that_stalls_midway_holds_one_thread_and_nothing_else(server, partial):
    with connect(server) as stalled:
        stalled.sendall(partial)
        for plant_id in range(100, 105):
            body = b'{"id": %d, "name": "fern"}' % plant_id
            assert server.request("POST", "/plants", body, HEADERS)[0] == 200
    # The stalled client left; the worker sees the close and lets the thread go.


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (request_head("GET", "/healthz", {"X-Long": "a" * 9000}), 431),
        (request_head("GET", "/healthz", {f"X-Many-{n}": "1" for n in range(120)}), 431),
        (request_head("GET", "/" + "a" * 5000, {}), 414),
        (b"HELLO\r\n\r\n", 400),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(256)), 400),
    ],
    ids=["a long header", "many headers", "a long request line", "no request line", "TLS"],
)
def test_gunicorn_refuses_what_is_not_a_sane_request_and_closes(server, raw, status):
    (answer,) = parse_answers(exchange(server, raw))
    assert answer.status == status
    assert answer.headers["connection"] == "close"
    assert answer.json()["error"] == status
    assert answer.json()["message"]


def test_many_concurrent_connections_are_all_served(server):
    clients = [connect(server) for _ in range(200)]
    statuses = []
    try:
        for plant_id, client in enumerate(clients, start=1000):
            body = b'{"id": %d, "name": "fern"}' % plant_id
            client.sendall(raw_post(body, **{"Content-Length": str(len(body))}))
        for client in clients:
            answer = http.client.HTTPResponse(client)
            answer.begin()
            statuses.append((answer.status, answer.read()))
            client.close()
    finally:
        for client in clients:
            client.close()
    assert statuses == [(200, b'{"name":"fern"}')] * 200


def test_idle_connections_are_closed_by_the_server(server):
    idle = [connect(server) for _ in range(16)]
    try:
        assert [read_until_closed(client) for client in idle] == [b""] * 16
    finally:
        for client in idle:
            client.close()
