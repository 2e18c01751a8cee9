"""Debian's nginx, configured by deploy/nginx.conf, in front of the real gunicorn."""

import http.client
import http.server
import json
import re
import socket
import ssl
import subprocess
import threading

import pytest

from plantstore.testing.gunicorn_server import TOO_LARGE, GunicornServer, send, server_environ
from tests.support.nginx_proxy import NginxProxy, unit_gunicorn_flags

pytestmark = pytest.mark.slow

TOKEN = "proxy-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
#: The client's own address: loopback, but not the one nginx uses towards gunicorn.
CLIENT = "127.0.0.2"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls")
    certificate, key = directory / "certificate.pem", directory / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"),
            *("-nodes", "-days", "1", "-subj", "/CN=plants.example"),
            *("-keyout", str(key), "-out", str(certificate)),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return certificate, key


@pytest.fixture
def start(tmp_path_factory):
    """Start gunicorn (on a unix socket, or on TCP), with the unit's settings, and nginx."""
    running = []

    def start(unix=True, prefix="", certificate=None, **environ):
        gunicorn, nginx = tmp_path_factory.mktemp("gunicorn"), tmp_path_factory.mktemp("nginx")
        socket_path = gunicorn / "gunicorn.sock"
        server = GunicornServer(
            server_environ(PLANTSTORE_TOKENS=TOKEN, **environ),
            *unit_gunicorn_flags(),
            unix_path=socket_path if unix else None,
            log_dir=gunicorn,
        )
        running.append(server)
        upstream = f"unix:{socket_path}" if unix else f"127.0.0.1:{server.port}"
        proxy = NginxProxy(nginx, upstream, prefix, certificate)
        running.append(proxy)
        return server, proxy

    yield start
    for process in reversed(running):
        log = process.stop()
        log = "\n".join(log) if isinstance(log, tuple) else log
        assert not re.search(r"\[(emerg|alert|crit)\]|Traceback|\[ERROR\]", log), log


def request(proxy, method, path, body=None, headers=None, certificate=None):
    if certificate:
        context = ssl.create_default_context(cafile=certificate[0])
        context.check_hostname = False
        connection = http.client.HTTPSConnection(
            "127.0.0.1", proxy.port, timeout=10, context=context, source_address=(CLIENT, 0)
        )
    else:
        connection = http.client.HTTPConnection(
            "127.0.0.1", proxy.port, timeout=10, source_address=(CLIENT, 0)
        )
    return send(connection, method, path, body, headers)


def test_requests_pass_end_to_end(start):
    _, proxy = start()
    fern = json.dumps({"id": 1, "name": "fern"})
    assert request(proxy, "POST", "/plants", fern, AUTH)[::2] == (200, b'{"name":"fern"}')
    rose = json.dumps({"id": 1, "name": "rose"})
    assert request(proxy, "POST", "/plants", rose, AUTH)[0] == 409
    status, headers, body = request(proxy, "POST", "/plants", fern, {})
    assert (status, json.loads(body)["error"]) == (401, 401)
    assert headers["www-authenticate"].startswith("Bearer")
    assert request(proxy, "GET", "/healthz")[::2] == (200, b'{"status":"ok"}')


@pytest.mark.parametrize("prefix", ["", "/plantstore"])
def test_a_plants_whole_life_passes_the_proxy_and_next_keeps_its_prefix(start, prefix):
    _, proxy = start(prefix=prefix)
    for plant_id in range(5):
        plant = json.dumps({"id": plant_id, "name": f"p{plant_id}", "tag": "a b"})
        assert request(proxy, "POST", f"{prefix}/plants", plant, AUTH)[0] == 200
    ids, target = [], f"{prefix}/plants?limit=2&tag=a%20b"
    while target:
        status, headers, body = request(proxy, "GET", target, None, AUTH)
        assert status == 200
        ids += [item["id"] for item in json.loads(body)]
        link = headers.get("link") or headers.get("Link")
        target = link and re.fullmatch(r'<([^>]+)>; rel="next"', link)[1]
        assert target is None or target.startswith(f"{prefix}/plants?limit=2&tag=a%20b&after=")
    assert ids == [0, 1, 2, 3, 4]
    assert request(proxy, "GET", f"{prefix}/plants/3", None, AUTH)[::2] == (
        200,
        b'{"name":"p3","tag":"a b"}',
    )
    assert request(proxy, "DELETE", f"{prefix}/plants/3", None, AUTH)[::2] == (204, b"")
    assert request(proxy, "HEAD", f"{prefix}/plants/3", None, AUTH)[::2] == (404, b"")


def chunks(body: bytes):
    for start in range(0, len(body), 1000):
        yield body[start : start + 1000]


@pytest.mark.parametrize("chunked", [False, True], ids=["with Content-Length", "chunked"])
def test_the_body_limit_holds_at_the_proxy_and_its_413_is_the_services_json(start, chunked):
    _, proxy = start()
    within = b'{"id": 2, "name": "' + b"x" * 60_000 + b'"}'
    over = b'{"id": 3, "name": "' + b"x" * 70_000 + b'"}'
    for body, status in [(within, 200), (over, 413)]:
        if chunked:
            body = chunks(body)
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        connection.request("POST", "/plants", body=body, headers=AUTH, encode_chunked=chunked)
        response = connection.getresponse()
        assert response.status == status
        assert response.getheader("content-type") == "application/json"
        if status == 413:
            assert json.loads(response.read()) == TOO_LARGE
        connection.close()


def access_log_addresses(server) -> list[str]:
    stdout, _ = server.stop()
    return [line.split(" ", 1)[0] for line in stdout.splitlines()]


@pytest.mark.parametrize(
    ("unix", "forwarded_allow_ips", "logged"),
    [
        (True, "127.0.0.1,::1", CLIENT),
        (False, "127.0.0.1,::1", CLIENT),
        (False, "192.0.2.1", "127.0.0.1"),
    ],
    ids=["trusted over a unix socket", "trusted over TCP", "not trusted"],
)
def test_the_access_log_names_the_forwarded_client_only_from_a_trusted_proxy(
    start, unix, forwarded_allow_ips, logged
):
    server, proxy = start(unix=unix, FORWARDED_ALLOW_IPS=forwarded_allow_ips)
    request(proxy, "GET", "/healthz", headers={"X-Forwarded-For": "203.0.113.9"})
    request(proxy, "POST", "/plants", json.dumps({"id": 4, "name": "ivy"}), AUTH)
    assert access_log_addresses(server) == [logged, logged]


@pytest.mark.parametrize("prefix", ["", "/plantstore"])
def test_openapi_servers_name_the_proxys_prefix(start, certificate, prefix):
    _, proxy = start(prefix=prefix, certificate=certificate)
    headers = {"Host": "plants.example"}
    status, _, body = request(proxy, "GET", f"{prefix}/openapi.json", None, headers, certificate)
    assert status == 200
    assert json.loads(body)["servers"] == [{"url": prefix or "/"}]
    fern = json.dumps({"id": 5, "name": "fern"})
    answer = request(proxy, "POST", f"{prefix}/plants", fern, {**AUTH, **headers}, certificate)
    assert answer[::2] == (200, b'{"name":"fern"}')


#: What a client may send to pass for a proxy: gunicorn and the app must trust none of it.
SPOOFED = {
    "X-Forwarded-For": "203.0.113.9",
    "X-Forwarded-Proto": "https",
    "X-Forwarded-Ssl": "on",
    "X-Forwarded-Protocol": "ssl",
    "X-Forwarded-Host": "evil.example",
    "X-Forwarded-Port": "444",
    "Forwarded": "for=203.0.113.9;proto=https;host=evil.example",
    "SCRIPT_NAME": "/evil",
    "PATH_INFO": "/evil",
}


@pytest.mark.parametrize("prefix", ["", "/plantstore"])
def test_what_a_client_says_it_forwards_is_not_trusted(start, prefix):
    """nginx sets or blanks every forwarded header: the scheme, host, prefix and client are
    the ones nginx saw. (gunicorn would refuse the contradictory scheme headers outright.)"""
    server, proxy = start(prefix=prefix)
    headers = {"Host": "plants.example", **SPOOFED}
    status, _, body = request(proxy, "GET", f"{prefix}/openapi.json", None, headers)
    assert status == 200
    assert json.loads(body)["servers"] == [{"url": prefix or "/"}]
    assert access_log_addresses(server) == [CLIENT]


def test_a_stalled_client_holds_no_gunicorn_thread_behind_the_proxy(start):
    """With one thread, a stalled client would hold gunicorn itself; nginx waits for it."""
    _, proxy = start(GUNICORN_THREADS="1")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as stalled:
        head = "POST /plants HTTP/1.1\r\nHost: plants.example\r\nContent-Length: 100\r\n"
        stalled.sendall(f'{head}Authorization: Bearer {TOKEN}\r\n\r\n{{"id": 6'.encode())
        fern = json.dumps({"id": 7, "name": "fern"})
        assert request(proxy, "POST", "/plants", fern, AUTH)[::2] == (200, b'{"name":"fern"}')


class CountingUpstream(http.server.ThreadingHTTPServer):
    """An upstream on loopback that answers every GET `{}` and counts the connections it was
    given, as gunicorn cannot tell."""

    def __init__(self) -> None:
        self.connections = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                self.server.connections += 1

            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, format, *args):
                """Quiet: the test asserts the count."""

        super().__init__(("127.0.0.1", 0), Handler)
        self.daemon_threads = True
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()


def test_requests_share_the_connections_nginx_keeps_to_gunicorn(tmp_path):
    """The site keeps connections to its upstream open between requests (`keepalive`): 20
    requests, each on a client connection of its own, reach it on one connection."""
    upstream = CountingUpstream()
    try:
        proxy = NginxProxy(tmp_path, f"127.0.0.1:{upstream.server_address[1]}")
        try:
            answers = [request(proxy, "GET", "/healthz")[::2] for _ in range(20)]
        finally:
            proxy.stop()
    finally:
        upstream.shutdown()
        upstream.server_close()
    assert answers == [(200, b"{}")] * 20
    assert upstream.connections == 1
