"""Debian's nginx as the README's steps leave it: the package's own nginx.conf, the site beside
what else it includes, Debian's default site removed, its connections raised. nginx answers what
it refuses before it has read a Host, as well as after, with the site's JSON Error and within the
site's bounds; it refuses in JSON what gunicorn would refuse in HTML, but for the one thing shown
last; it holds many slow clients and still answers others; its logs are the site's."""

import base64
import contextlib
import http.client
import json
import re
import resource
import socket
import time

import pytest

from tests.support.nginx_proxy import (
    DEBIAN_NGINX,
    SITE,
    DebianNginx,
    Deployment,
    check_configuration,
    lay_out_debian_nginx,
    readme_nginx_steps,
    site_seconds,
)
from tests.support.raw_http import answer_then_close, read_until_closed, request_head

pytestmark = pytest.mark.slow

TOKEN = "installed-token"
#: A secret a client puts where it does not belong: no answer or log line may repeat it.
SECRET = "s3cret-in-a-request"


@pytest.fixture(scope="module")
def edge(tmp_path_factory):
    running = Deployment(
        tmp_path_factory.mktemp("installed"), nginx=DebianNginx, PLANTSTORE_TOKENS=TOKEN
    )
    yield running
    nginx_log, access, errors = running.stop()
    assert not re.search(r"\[(emerg|alert|crit)\]", nginx_log), nginx_log
    assert "Traceback" not in errors
    assert SECRET not in nginx_log + access + errors


def sites_error(status: int) -> dict:
    """The Error body of the site's own page for `status`."""
    (body,) = re.findall(rf"^\s*return {status} '([^']*)';", SITE.read_text(), re.MULTILINE)
    return json.loads(body)


def test_the_readmes_steps_pass_nginx_t_which_fails_if_debians_default_site_stays(tmp_path):
    """Both sites would be the default server of port 80: nginx says so, rather than answer
    with Debian's site what it refuses before it has read a Host."""
    steps = readme_nginx_steps()
    (removal,) = [step for step in steps if f"{DEBIAN_NGINX}/sites-enabled/default" in step]
    # nginx -t binds no port: any one will do.
    port = 8080
    installed = lay_out_debian_nginx(tmp_path / "as-written", "unix:/nowhere", port, steps)
    assert check_configuration(installed).returncode == 0
    steps.remove(removal)
    beside = lay_out_debian_nginx(tmp_path / "beside-the-default", "unix:/nowhere", port, steps)
    checked = check_configuration(beside)
    assert checked.returncode != 0
    assert f"a duplicate default server for 127.0.0.1:{port}" in checked.stderr


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"HELLO\r\n\r\n", 400),
        (b"GET /healthz HTTP/2.0\r\nHost: plants.example\r\n\r\n", 505),
        (b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: plants.example\r\n\r\n", 414),
        (b"GET / HTTP/1.1\r\nX-Long: " + b"a" * 9000 + b"\r\nHost: plants.example\r\n\r\n", 431),
        (b"GET /healthz HTTP/1.1\r\n\r\n", 400),
    ],
    ids=[
        "a request line that is none",
        "HTTP/2.0",
        "a request line over the site's buffer, within Debian's",
        "a header over the site's buffer, before the Host",
        "no Host",
    ],
)
def test_what_nginx_refuses_before_it_reads_a_host_is_the_sites_json_error(edge, raw, status):
    answer = answer_then_close(edge.port, raw)
    assert answer.status == status
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == sites_error(status)


def test_a_head_that_stops_is_closed_after_the_sites_client_header_timeout(edge):
    """Not Debian's default of 60 s: nginx closes it, without an answer."""
    timeout = site_seconds("client_header_timeout")
    with socket.create_connection(("127.0.0.1", edge.port), timeout=2 * timeout) as client:
        client.sendall(b"G")
        started = time.monotonic()
        assert read_until_closed(client) == b""
        held = time.monotonic() - started
    assert timeout - 1 < held < timeout + 2


@pytest.mark.parametrize(
    ("method", "path", "status", "allow"),
    [
        ("ABCDEFGHIJKLMNOPQRSTU", "/healthz", 405, "GET, HEAD, OPTIONS"),
        ("AB", "/healthz", 405, "GET, HEAD, OPTIONS"),
        ("AB", "/nowhere", 404, None),
        ("get", "/healthz", 400, None),
    ],
    ids=["21 letters", "2 letters", "2 letters, no such path", "lowercase"],
)
def test_a_method_the_service_does_not_answer_is_refused_in_json(edge, method, path, status, allow):
    """By nginx: gunicorn would refuse a method of 21 or of 2 letters itself, in HTML."""
    answer = answer_then_close(edge.port, request_head(method, path, {"Connection": "close"}))
    assert answer.status == status
    assert answer.json()["error"] == status
    assert answer.headers.get("allow") == allow
    assert method.encode() not in answer.body


@pytest.mark.parametrize(
    "method", ["GET", "TRACE", "AB"], ids=["GET", "TRACE, which nginx refuses", "2 letters"]
)
def test_a_request_target_with_bytes_past_ascii_is_the_sites_400(edge, method):
    """Not percent-encoded, as RFC 3986 asks: gunicorn would refuse it in HTML that repeats
    the request line, secret and all."""
    raw = request_head(method, f"/healthz?token={SECRET}&name=fougère", {"Connection": "close"})
    answer = answer_then_close(edge.port, raw)
    assert answer.status == 400
    assert answer.json() == sites_error(400)


@pytest.mark.parametrize("method", ["TRACE", "AB"])
def test_a_refused_method_while_gunicorn_is_down_is_the_sites_503(tmp_path, method):
    """The 405 page cannot ask the service: its own refusal has its page too."""
    nginx = DebianNginx(tmp_path, f"unix:{tmp_path}/no-gunicorn.sock")
    try:
        answer = answer_then_close(
            nginx.port, request_head(method, "/healthz", {"Connection": "close"})
        )
    finally:
        nginx.stop()
    assert answer.status == 503
    assert answer.json() == sites_error(503)
    assert answer.headers["retry-after"] == "1"


@pytest.mark.parametrize("control", ["\x01", "\x1b", "\x7f"], ids=["0x01", "ESC", "DEL"])
def test_a_control_character_in_a_header_value_is_gunicorns_html_400_naming_only_the_field(
    edge, control
):
    """What still reaches a client in HTML (docs/deployment.md says why): nginx passes such a
    value on (it refuses only NUL, CR and LF in one), and gunicorn refuses it (RFC 9110 §5.5),
    whatever its settings, with its own page. That page names the field, not its value."""
    head = request_head(
        "GET", "/healthz", {"Authorization": f"Bearer {SECRET}{control}", "Connection": "close"}
    )
    answer = answer_then_close(edge.port, head)
    assert answer.status == 400
    assert answer.headers["content-type"] == "text/html"
    assert b"Invalid HTTP Header: &#x27;AUTHORIZATION&#x27;" in answer.body
    assert SECRET.encode() not in answer.body


def test_each_429_is_a_warning_in_the_error_log_where_debians_nginx_conf_logs_errors(edge):
    """Debian's nginx.conf logs at `error`: the site logs at `warn`, so each refusal of the rate
    is there, naming the client's address and the zone, never the token."""
    token = "unknown-token-past-its-rate"
    client = http.client.HTTPConnection(
        "127.0.0.1", edge.port, timeout=10, source_address=("127.0.0.7", 0)
    )
    statuses = []
    try:
        while 429 not in statuses and len(statuses) < 1000:
            client.request("GET", "/plants", headers={"Authorization": f"Bearer {token}"})
            answer = client.getresponse()
            answer.read()
            statuses.append(answer.status)
    finally:
        client.close()
    assert statuses[-1] == 429
    log = (edge.nginx.directory / "error.log").read_text()
    refused = r'\[warn\] .*limiting requests, excess: [\d.]+ by zone "tokens", client: 127.0.0.7,'
    assert re.search(refused, log)
    assert token not in log


def test_the_access_log_names_no_user_of_basic_credentials_and_no_query(edge):
    """nginx's `combined` format, Debian's default, logs the user of Basic credentials: a client
    that sends its token as one would see it there. The site logs in a format of its own."""
    user = "s3cret-basic-user"
    credentials = base64.b64encode(f"{user}:password".encode()).decode()
    raw = request_head(
        "GET",
        f"/healthz?token={SECRET}",
        {"Authorization": f"Basic {credentials}", "Connection": "close"},
    )
    assert answer_then_close(edge.port, raw).status == 200
    # nginx writes a request's line before it closes the connection, which the client has seen.
    log = (edge.nginx.directory / "access.log").read_text()
    assert user not in log and SECRET not in log
    assert re.search(r'"GET /healthz" status=200 ', log)


#: Partial heads held open at once, and probes that must each be answered meanwhile: with
#: Debian's stock 768 connections a worker, 133 of the 160 probes were seen to fail.
HEADS, PROBES = 2500, 160


@contextlib.contextmanager
def open_files_allowed(count: int):
    """This process may hold `count` files while in the block (its hard limit allowing)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < count:
        pytest.skip(f"{count} open files needed, {hard} allowed")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, count), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def probe(port: int) -> int | None:
    """The status of `GET /healthz` on a connection of its own, or None without an answer."""
    raw = request_head("GET", "/healthz", {"Connection": "close"})
    try:
        return answer_then_close(port, raw, timeout=5).status
    except (OSError, ValueError):
        return None


def still_held(head: socket.socket) -> bool:
    """Whether nginx holds `head` open, waiting for the rest of it, and has sent nothing."""
    head.setblocking(False)
    try:
        head.recv(1)
    except BlockingIOError:
        return True
    except OSError:
        pass
    return False


def test_slow_heads_leave_room_for_every_other_client(edge, note_figure):
    """2,500 connections that sent part of a head and wait for nginx to time them out (as a
    slowloris client holds them), then 160 probes, each on a connection of its own: every probe
    is answered, and every head is still held. With Debian's 768 connections a worker, nginx
    closed what it could not hold, probes too."""
    heads = []
    with open_files_allowed(HEADS + PROBES + 256):
        try:
            started = time.monotonic()
            for _ in range(HEADS):
                heads.append(socket.create_connection(("127.0.0.1", edge.port), timeout=5))
                heads[-1].sendall(b"GET /healthz HTTP/1.1\r\nHost: plants.example\r\n")
            answered = [probe(edge.port) for _ in range(PROBES)]
            held = sum(map(still_held, heads))
            elapsed = time.monotonic() - started
        finally:
            for head in heads:
                head.close()
    note_figure(
        f"slow heads under Debian's nginx.conf as the README leaves it: {held} of {len(heads)} "
        f"partial heads held, {answered.count(200)} of {PROBES} probes answered, "
        f"in {elapsed:.2f} s"
    )
    # Within it, nginx has timed out none of them: all it did not hold, it could not.
    assert elapsed < site_seconds("client_header_timeout")
    assert (held, answered.count(200)) == (HEADS, PROBES)
