"""Hostile clients of the shipped deployment: Debian's nginx, configured by deploy/nginx.conf, in
front of the real gunicorn. Each gets the JSON Error body, from nginx or the app, or a clean
close; no answer repeats a token it was sent; and gunicorn's one worker lives through them all
and serves the next normal request."""

import http.client
import json
import re
import socket
import time

import pytest

from plantstore.api.docs import swagger_ui_assets
from plantstore.testing.gunicorn_server import TOO_LARGE
from tests.support.nginx_proxy import Deployment, site_seconds
from tests.support.raw_http import (
    Answer,
    parse_answers,
    read_answer,
    read_until_closed,
    request_head,
)

pytestmark = pytest.mark.slow

TOKEN = "hostile-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
#: Tokens of a crowd of clients: the site holds each token to its own rate.
CROWD = [f"crowd-token-{number}" for number in range(4)]
PLANT = b'{"id": 1, "name": "fern"}'
OVER_THE_LIMIT = b'{"id": 2, "name": "' + b"x" * 70_000 + b'"}'
#: How long a client waits for an answer before the test fails.
PATIENCE = 10
#: gunicorn's threads (the default GUNICORN_THREADS).
THREADS = 8
#: A secret a client puts where it does not belong: no answer and no log may repeat it.
SECRET = "s3cret-in-a-header"
#: What nginx answers a request it cannot read.
MALFORMED = {"error": 400, "message": "The request is malformed."}
#: The X-Request-ID of requests nginx must never pass on: gunicorn's access log would show it.
NEVER_PASSED = "never-passed-on"


def connect(edge, timeout: float = PATIENCE) -> socket.socket:
    return socket.create_connection(("127.0.0.1", edge.port), timeout=timeout)


def ask(edge, method, path, body=None, headers=None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", edge.port, timeout=PATIENCE)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


tried = []


@pytest.fixture(scope="module")
def edge(tmp_path_factory, note_figure):
    running = Deployment(
        tmp_path_factory.mktemp("edge"),
        PLANTSTORE_TOKENS=",".join([TOKEN, *CROWD]),
        GUNICORN_TIMEOUT="5",
    )
    assert ask(running, "GET", "/healthz")[0] == 200
    (worker,) = running.gunicorn.worker_pids()
    yield running
    nginx_log, access, errors = running.stop()
    assert not re.search(r"\[(emerg|alert|crit)\]", nginx_log), nginx_log
    assert errors.count("Booting worker") == 1
    for trouble in ("WORKER TIMEOUT", "Traceback", "[ERROR]", "[CRITICAL]"):
        assert trouble not in errors
    assert SECRET not in nginx_log + access + errors
    assert NEVER_PASSED not in access
    note_figure(f"hostile clients: {len(tried)} cases tried through nginx; worker {worker} lived")


@pytest.fixture(autouse=True)
def the_worker_lives_on(edge, request):
    workers = edge.gunicorn.worker_pids()
    yield
    status, body = ask(edge, "POST", "/plants", b'{"id": 0, "name": "calm"}', HEADERS)
    assert (status, json.loads(body)) == (200, {"name": "calm"})
    assert edge.gunicorn.worker_pids() == workers
    tried.append(request.node.name)


def raw_post(body: bytes, **headers: str) -> bytes:
    """The bytes of a `POST /plants` with the token, `headers` and `body`, as sent on the wire."""
    return request_head("POST", "/plants", {**HEADERS, **headers}) + body


HEALTHZ = request_head("GET", "/healthz", {})


def answers(
    edge, raw: bytes, count: int = 1, stop_sending: bool = False
) -> tuple[list[Answer], bytes | None]:
    """Send `raw` (then stop sending, if told); read `count` answers, then whatever else comes
    before nginx closes: None if the last answer keeps the connection, for the next request.
    """
    with connect(edge) as client:
        client.sendall(raw)
        if stop_sending:
            client.shutdown(socket.SHUT_WR)
        stream = client.makefile("rb")
        read = [read_answer(stream) for _ in range(count)]
        if read[-1].headers["connection"] != "close":
            return read, None
        return read, stream.read()


def chunked(body: bytes, size: int = 1000) -> bytes:
    pieces = [body[start : start + size] for start in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


@pytest.mark.parametrize(
    "raw",
    [
        raw_post(OVER_THE_LIMIT, **{"Content-Length": str(len(OVER_THE_LIMIT))}),
        raw_post(b"", **{"Content-Length": "10000000"}),
        raw_post(chunked(OVER_THE_LIMIT), **{"Transfer-Encoding": "chunked"}),
    ],
    ids=["with Content-Length", "announced, not sent", "chunked"],
)
@pytest.mark.parametrize("stop_sending", [False, True], ids=["and waits", "then stops sending"])
def test_a_body_over_the_limit_is_413_and_the_connection_closes(edge, raw, stop_sending):
    """Refused by nginx: what the client pipelined behind it is not read."""
    raw += raw_post(PLANT, **{"Content-Length": str(len(PLANT))})
    (answer,), rest = answers(edge, raw, stop_sending=stop_sending)
    assert (answer.status, answer.json()) == (413, TOO_LARGE)
    assert answer.headers["connection"] == "close"
    assert rest == b""


def test_a_chunked_body_within_the_limit_is_served(edge):
    (answer,), _ = answers(
        edge, raw_post(chunked(PLANT, size=7), **{"Transfer-Encoding": "chunked"})
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
        b"ffffffffffffffffffff\r\n" + PLANT,
    ],
    ids=[
        "a size that is no hex",
        "a space before the size",
        "a size written 0x",
        "a negative size",
        "data not followed by CRLF",
        "a size past any limit",
    ],
)
def test_a_malformed_chunked_body_is_400_and_the_connection_closes(edge, body):
    raw = raw_post(body, **{"Transfer-Encoding": "chunked", "X-Request-ID": NEVER_PASSED})
    (answer,), rest = answers(edge, raw + HEALTHZ)
    assert (answer.status, answer.json()) == (400, MALFORMED)
    assert answer.headers["connection"] == "close"
    assert rest == b""


@pytest.mark.parametrize(
    "body",
    [
        b"19\r\n" + PLANT + b"\r\n0\r\nno colon here\r\n\r\n",
        b"19\r\n" + PLANT + b"\r\n0\r\nContent-Length: 25\r\n\r\n",
        b"19\n" + PLANT + b"\n0\n\n",
        b"19;name=value\r\n" + PLANT + b"\r\n0\r\n\r\n",
    ],
    ids=["a trailer without a colon", "Content-Length in the trailer", "bare LF", "an extension"],
)
def test_a_chunked_body_nginx_reads_reaches_the_service_as_its_bytes_alone(edge, body):
    """nginx passes a body on with a Content-Length of its own, without trailer or framing."""
    raw = raw_post(body, **{"Transfer-Encoding": "chunked"})
    (created, health), _ = answers(edge, raw + HEALTHZ, count=2)
    assert (created.status, created.json()) == (200, {"name": "fern"})
    assert health.status == 200


#: Requests whose bodies stop short; nginx must pass none of them on.
CUT_SHORT = [
    raw_post(
        b"19\r\n" + PLANT[:10], **{"Transfer-Encoding": "chunked", "X-Request-ID": NEVER_PASSED}
    ),
    raw_post(b"ffff\r\n" + PLANT, **{"Transfer-Encoding": "chunked", "X-Request-ID": NEVER_PASSED}),
    raw_post(PLANT, **{"Content-Length": "100", "X-Request-ID": NEVER_PASSED}),
]


@pytest.mark.parametrize(
    "raw", CUT_SHORT, ids=["in a chunk", "before a chunk", "with Content-Length"]
)
def test_a_client_that_leaves_mid_body_is_never_passed_on(edge, raw):
    with connect(edge) as client:
        client.sendall(raw)
        client.shutdown(socket.SHUT_WR)
        assert read_until_closed(client) == b""


def test_a_content_length_shorter_than_the_body_is_the_apps_400_and_the_rest_nginxs(edge):
    """The rest of the body is no request: nginx refuses it and closes."""
    (first, second), rest = answers(edge, raw_post(PLANT, **{"Content-Length": "10"}), count=2)
    assert (first.status, first.json()["error"]) == (400, 400)
    assert "Could not parse JSON body" in first.json()["message"]
    assert (second.status, second.json()) == (400, MALFORMED)
    assert rest == b""


def test_clients_stalled_in_their_heads_or_bodies_hold_no_thread_and_are_closed_in_time(edge):
    """More clients stalled in their bodies than gunicorn has threads, others in their heads,
    others idle: the service answers meanwhile, and nginx closes each, without an answer, once
    its time is up. None of them reaches gunicorn."""
    bodies = [connect(edge, timeout=30) for _ in range(THREADS + 4)]
    heads = [connect(edge, timeout=30) for _ in range(4)]
    idle = [connect(edge, timeout=30) for _ in range(4)]
    try:
        started = time.monotonic()
        for number, client in enumerate(bodies):
            client.sendall(CUT_SHORT[number % len(CUT_SHORT)])
        for client in heads:
            client.sendall(raw_post(b"")[:40])
        assert ask(edge, "GET", "/healthz")[0] == 200
        assert ask(edge, "POST", "/plants", b'{"id": 3, "name": "fern"}', HEADERS)[0] == 200
        assert time.monotonic() - started < 1
        for client in bodies + heads + idle:
            assert read_until_closed(client) == b""
        # nginx counts client_body_timeout between two reads, client_header_timeout for the head.
        longest = max(site_seconds("client_body_timeout"), site_seconds("client_header_timeout"))
        assert time.monotonic() - started < longest + 2
    finally:
        for client in bodies + heads + idle:
            client.close()


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (f"GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization Bearer {SECRET}\r\n\r\n", 400),
        (f"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n {SECRET}\r\n\r\n", 400),
        (f"GET /healthz?token={SECRET}\x7f HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (f"{SECRET} /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (f"GET /healthz HTTP/{SECRET}\r\nHost: x\r\n\r\n", 400),
        (f"GET /healthz?token={SECRET} HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        (f"POST /plants HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: x{SECRET}\r\n\r\n", 501),
        (f"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Long: {SECRET}{'a' * 9000}\r\n\r\n", 431),
        (f"GET /{SECRET}{'a' * 9000} HTTP/1.1\r\nHost: x\r\n\r\n", 414),
        ("HELLO\r\n\r\n", 400),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(256)), 400),
    ],
    ids=[
        "a header line without a colon",
        "a header folded over lines",
        "a control character in the request line",
        "a method that is no method",
        "an HTTP version that is none",
        "HTTP/2 in an HTTP/1 request line",
        "a transfer coding other than chunked",
        "a header over the limit",
        "a request line over the limit",
        "no request line",
        "TLS",
    ],
)
def test_nginx_refuses_what_is_no_sane_request_in_json_and_repeats_nothing(edge, raw, status):
    raw = raw if isinstance(raw, bytes) else raw.encode("latin-1")
    (answer,), rest = answers(edge, raw)
    assert answer.status == status
    assert answer.json()["error"] == status
    assert answer.json()["message"]
    assert SECRET.encode() not in answer.body + repr(answer.headers).encode()
    assert answer.headers["connection"] == "close"
    assert rest == b""


def test_a_head_over_all_of_nginxs_buffers_is_431(edge):
    fields = {f"X-Field-{number}": "a" * 200 for number in range(120)}
    (answer,), rest = answers(edge, request_head("GET", "/healthz", fields))
    assert (answer.status, answer.json()["error"]) == (431, 431)
    assert rest == b""


@pytest.mark.parametrize(
    "head",
    [
        f"GET /healthz HTTP/1.1\r\nHost: x\r\nX-({SECRET}): 1",
        f"GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: {SECRET}",
        f"GET /healthz HTTP/1.1\r\nHost: x\r\nSCRIPT_NAME: /{SECRET}",
        "GET /healthz HTTP/1.2\r\nHost: x",
        "GET /healthz HTTP/1.1\r\nHost: x\r\n" + "\r\n".join(f"X-F{n}: 1" for n in range(120)),
    ],
    ids=[
        "a header name that is no token",
        "an expectation other than 100-continue",
        "a SCRIPT_NAME from the client",
        "HTTP/1.2",
        "more fields than gunicorn's default bound",
    ],
)
def test_what_nginx_leaves_out_or_reads_as_http_1_1_is_served(edge, head):
    """nginx drops a field whose name is no token (or has `_`) and the `Expect` it answers
    itself, and passes on HTTP/1.2 as HTTP/1.1: the request is served without them."""
    (answer,), _ = answers(edge, head.encode() + b"\r\n\r\n")
    assert answer.status_line == "HTTP/1.1 200 OK"
    assert answer.json() == {"status": "ok"}


@pytest.mark.parametrize(
    ("path", "status", "allow"),
    [("/healthz", 405, "GET, HEAD, OPTIONS"), ("/nowhere", 404, None)],
    ids=["a path", "no path"],
)
@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({}, b""),
        ({"Content-Length": str(len(PLANT))}, PLANT),
        ({"Transfer-Encoding": "chunked"}, chunked(PLANT)),
    ],
    ids=["no body", "a body", "a chunked body"],
)
def test_trace_which_nginx_refuses_itself_is_answered_as_the_service_answers(
    edge, path, status, allow, headers, body
):
    """With the Allow of the path, which nginx cannot know. nginx drops a body it refuses: the
    service is asked without one, and does not wait for it."""
    (answer,), _ = answers(edge, request_head("TRACE", path, headers) + body)
    assert (answer.status, answer.json()["error"]) == (status, status)
    assert answer.headers.get("allow") == allow


def post_head(length: int, *extra: str) -> bytes:
    lines = ["POST /plants HTTP/1.1", "Host: x", "Content-Type: application/json", *extra]
    return ("\r\n".join([*lines, f"Content-Length: {length}", "Expect: 100-continue"])).encode()


def test_100_continue_is_not_sent_for_a_body_announced_over_the_limit(edge):
    with connect(edge) as client:
        client.sendall(post_head(10_000_000, f"Authorization: Bearer {TOKEN}") + b"\r\n\r\n")
        sent = read_until_closed(client)
    assert sent.startswith(b"HTTP/1.1 413 "), "no 100 Continue before a refusal"
    (answer,) = parse_answers(sent)
    assert answer.json() == TOO_LARGE


def test_100_continue_is_sent_for_a_body_within_the_limit_and_the_app_then_decides(edge):
    """nginx reads every body it may pass on: the service's 401 comes once it has read it."""
    with connect(edge) as client:
        client.sendall(post_head(len(PLANT)) + b"\r\n\r\n")
        stream = client.makefile("rb")
        assert stream.readline() == b"HTTP/1.1 100 Continue\r\n"
        assert stream.readline() == b"\r\n"
        client.sendall(PLANT)
        answer = read_answer(stream)
    assert (answer.status, answer.json()["error"]) == (401, 401)


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (request_head("POST", "/plants", {"Content-Length": "25"}) + PLANT, 401),
        (raw_post(b"{", **{"Content-Length": "1"}), 400),
        (raw_post(OVER_THE_LIMIT[:60_000], **{"Content-Length": "60000"}), 400),
    ],
    ids=["no token", "malformed JSON", "a large malformed body"],
)
def test_the_connection_lives_on_after_the_apps_refusal(edge, raw, status):
    """nginx has read the body whole: the next request on the connection is served."""
    (refused, health), _ = answers(edge, raw + HEALTHZ, count=2)
    assert (refused.status, refused.json()["error"]) == (status, status)
    assert refused.headers["connection"] == "keep-alive"
    assert (health.status, health.json()) == (200, {"status": "ok"})


def test_many_concurrent_connections_are_all_served(edge):
    """200 clients at once, of four tokens: within each token's burst, whatever the module's
    other tests sent just before."""
    clients = [connect(edge) for _ in range(200)]
    statuses = []
    try:
        for plant_id, client in enumerate(clients, start=1000):
            body = b'{"id": %d, "name": "fern"}' % plant_id
            token = CROWD[plant_id % len(CROWD)]
            client.sendall(
                raw_post(
                    body, Authorization=f"Bearer {token}", **{"Content-Length": str(len(body))}
                )
            )
        for client in clients:
            answer = read_answer(client.makefile("rb"))
            statuses.append((answer.status, answer.body))
    finally:
        for client in clients:
            client.close()
    assert statuses == [(200, b'{"name":"fern"}')] * 200


def largest_docs_file() -> str:
    """The path of the largest file under /docs/ (8 MB): more than the kernel's buffers hold."""
    files = [path for path in swagger_ui_assets().iterdir() if path.is_file()]
    return "/docs/" + max(files, key=lambda path: path.stat().st_size).name


def test_clients_that_do_not_read_or_trickle_their_heads_leave_the_service_answering(edge):
    """Hardening, item 9: as many clients as gunicorn has threads ask for a large file and
    never read it, as many more send their heads a field every few seconds. nginx takes the
    file from gunicorn whole and holds the heads: the service answers within a second."""
    large_file = largest_docs_file()
    readers = [connect(edge) for _ in range(THREADS)]
    tricklers = [connect(edge) for _ in range(THREADS)]
    try:
        for client in readers:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            client.sendall(request_head("GET", large_file, {}))
        for client in tricklers:
            client.sendall(b"POST /plants HTTP/1.1\r\nHost: x\r\n")
        for field in range(3):
            for client in tricklers:
                client.sendall(b"X-Field-%d: 1\r\n" % field)
            started = time.monotonic()
            assert ask(edge, "GET", "/healthz")[0] == 200
            body = b'{"id": %d, "name": "fern"}' % (2000 + field)
            assert ask(edge, "POST", "/plants", body, HEADERS)[0] == 200
            assert time.monotonic() - started < 1
            # The tricklers' pace (not a wait for anything): three fields within
            # client_header_timeout, which bounds the whole head.
            time.sleep(2)
    finally:
        for client in readers + tricklers:
            client.close()
