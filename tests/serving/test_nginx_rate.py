"""The rates of deploy/nginx.conf, in front of the real gunicorn: one for each bearer token however
its header spells it, one for each client's address for what bears no token, and no flood of
unknown tokens that makes nginx refuse a valid one."""

import http.client
import json
import re
import secrets
import time

import pytest

from plantstore.testing.gunicorn_server import GunicornServer, server_environ
from tests.support.nginx_proxy import NginxProxy, unit_gunicorn_flags
from tests.support.site_text import error_pages, page

pytestmark = pytest.mark.slow

TOKEN = "rate-token"
OTHER = "other-token"
#: The site's rate: requests a second, and how many it answers at once.
RATE, BURST = 100, 200
TOO_MANY = page(error_pages()[429][1])[1]
MALFORMED = {"error": 401, "message": "The Authorization header must read 'Bearer <token>'."}


@pytest.fixture
def start(tmp_path_factory):
    """Start gunicorn on a unix socket with the unit's settings, and nginx with the site in
    front of it, changed by the test's `changes` (see `render_site`)."""
    running = []

    def start(changes=None, **environ):
        gunicorn, nginx = tmp_path_factory.mktemp("gunicorn"), tmp_path_factory.mktemp("nginx")
        socket_path = gunicorn / "gunicorn.sock"
        server = GunicornServer(
            server_environ(**environ),
            *unit_gunicorn_flags(),
            unix_path=socket_path,
            log_dir=gunicorn,
        )
        running.append(server)
        proxy = NginxProxy(nginx, f"unix:{socket_path}", changes=changes)
        running.append(proxy)
        return proxy

    yield start
    logs = ""
    for process in reversed(running):
        log = process.stop()
        logs += "\n".join(log) if isinstance(log, tuple) else log
    assert not re.search(r"\[(emerg|alert|crit)\]|Traceback|\[ERROR\]", logs), logs


class Client:
    """One keep-alive connection to nginx from `address`, a loopback address of its own: the
    site counts what bears no token by the client's address."""

    def __init__(self, proxy, address: str = "127.0.0.1") -> None:
        self._connection = http.client.HTTPConnection(
            "127.0.0.1", proxy.port, timeout=10, source_address=(address, 0)
        )

    def get(self, authorization: str | None = None, path: str = "/plants"):
        headers = {} if authorization is None else {"Authorization": authorization}
        self._connection.request("GET", path, headers=headers)
        answer = self._connection.getresponse()
        return answer.status, answer.headers, answer.read()

    def close(self) -> None:
        self._connection.close()


def until_refused(client: Client, authorizations: list, path: str = "/plants"):
    """Requests as fast as `client` sends them, with each of `authorizations` in turn, until 100
    were refused past the rate (or 3,000 were sent): the answers, and the seconds they took."""
    answered = []
    began = time.monotonic()
    while len(answered) < 3000 and sum(status == 429 for status, _, _ in answered) < 100:
        answered.append(client.get(authorizations[len(answered) % len(authorizations)], path))
    return answered, time.monotonic() - began


def assert_held_to_the_rate(answered, elapsed: float) -> None:
    """Past the burst, 429s with the site's JSON, and no more 200s than the rate let through."""
    statuses = [status for status, _, _ in answered]
    assert set(statuses) == {200, 429}
    assert BURST <= statuses.count(200) <= BURST + RATE * elapsed + 10
    for status, headers, body in answered:
        if status == 429:
            assert headers["Content-Type"] == "application/json"
            assert headers["Retry-After"] == "1"
            assert json.loads(body) == TOO_MANY


def spellings(token: str) -> list[str]:
    """64 spellings of `token` that the service takes as one: the scheme's case, runs of spaces
    after it, and spaces and tabs around it (nginx 1.22 passes tabs there on)."""
    schemes = ["Bearer", "bearer", "BEARER", "bEARER", "BeArEr", "bEaReR", "BEARer", "bearER"]
    runs = [" ", "  ", " " * 7, " " * 40]
    around = [("", ""), ("\t", " \t")]
    return [f"{a}{s}{r}{token}{b}" for s in schemes for r in runs for a, b in around]


def test_every_spelling_of_a_token_counts_against_its_one_rate(start, note_figure):
    """One client that spells its token 64 ways is held to the token's rate; another token goes
    on. Spellings the service does not take are its 401, not served, whatever the rate."""
    proxy = start(PLANTSTORE_TOKENS=f"{TOKEN},{OTHER}")
    looping, other = Client(proxy), Client(proxy)
    spelled = spellings(TOKEN)
    assert len(set(spelled)) == 64
    try:
        answered, elapsed = until_refused(looping, spelled)
        another = other.get(f"Bearer {OTHER}")[0]
        refused = [
            looping.get(authorization)
            for authorization in [
                f"Bearer\t{TOKEN}",
                f"Bearer \xa0{TOKEN}",
                f"Bearer {TOKEN}\x85",
                f"Bearer {TOKEN} {TOKEN}",
                f"Bearer: {TOKEN}",
            ]
        ]
    finally:
        looping.close()
        other.close()
    statuses = [status for status, _, _ in answered]
    note_figure(
        f"nginx rate: 64 spellings of one token, {len(answered)} requests in {elapsed:.2f} s: "
        f"{statuses.count(200)} answered 200, {statuses.count(429)} 429"
    )
    assert_held_to_the_rate(answered, elapsed)
    assert another == 200
    for status, headers, body in refused:
        assert (status, json.loads(body)) == (401, MALFORMED)
        assert headers["WWW-Authenticate"] == 'Bearer realm="plantstore"'


def test_what_bears_no_token_has_a_rate_for_its_address(start):
    """Requests without a token, or with one the service cannot take, from one address: held
    to the address's rate, while another address goes on, and a token from the same address."""
    proxy = start(PLANTSTORE_TOKENS=TOKEN)
    looping, elsewhere = Client(proxy, "127.0.0.3"), Client(proxy, "127.0.0.4")
    refusals = [None, "Basic dXNlcjpwYXNz", f"Bearer {'t' * 129}"]
    try:
        answered, elapsed = until_refused(looping, refusals, "/healthz")
        with_a_token = looping.get(f"Bearer {TOKEN}")[0]
        from_elsewhere = elsewhere.get(None, "/healthz")[0]
    finally:
        looping.close()
        elsewhere.close()
    assert_held_to_the_rate(answered, elapsed)
    assert (with_a_token, from_elsewhere) == (200, 200)


#: Lengths an attacker would choose: the shortest token, those around the padding's length, and
#: the longest; then far over it, which takes no state of a token (it is counted by its address).
FLOOD_LENGTHS = [1, 48, 49, 128]
OVER_LONG = 1500


def unknown_token(length: int) -> str:
    return secrets.token_urlsafe(length)[:length]


def test_a_flood_of_unknown_tokens_cannot_make_the_site_refuse_a_valid_one(start, note_figure):
    """The tokens' zone at nginx's smallest size, 32k (8 pages), holds at most 128 states of
    256 bytes, fewer with nginx's own bookkeeping. 600 requests with fresh unknown tokens of
    every length fill it several times over, pushing out the states of the valid tokens, idle
    meanwhile; then over-long tokens (which, before, took states of 2 KB each) flood on, and
    each valid token comes back for a few requests. Each takes a new state, which nginx must
    find room for: no 429 for it, and no `could not allocate node` alert."""
    idle = [secrets.token_urlsafe(32) for _ in range(10)]  # as `plantstore token` makes them
    proxy = start({"zone=tokens:10m": "zone=tokens:32k"}, PLANTSTORE_TOKENS=",".join(idle))
    valid, flooding = Client(proxy, "127.0.0.5"), Client(proxy, "127.0.0.6")
    flood = {length: [] for length in [*FLOOD_LENGTHS, OVER_LONG]}
    came_back = []
    began = time.monotonic()
    try:
        assert [valid.get(f"Bearer {token}")[0] for token in idle] == [200] * len(idle)
        for n in range(600):
            length = FLOOD_LENGTHS[n % len(FLOOD_LENGTHS)]
            flood[length].append(flooding.get(f"Bearer {unknown_token(length)}")[0])
        for n in range(400):
            flood[OVER_LONG].append(flooding.get(f"Bearer {unknown_token(OVER_LONG)}")[0])
            if n % 40 == 39:
                token = idle[n // 40]
                came_back += [valid.get(f"Bearer {token}")[0] for _ in range(3)]
        elapsed = time.monotonic() - began
    finally:
        valid.close()
        flooding.close()
    note_figure(
        f"nginx rate: 1,000 unknown tokens in {elapsed:.2f} s against a 32k zone, "
        + ", ".join(f"length {n}: {s.count(429)} 429s" for n, s in flood.items())
        + f"; {came_back.count(200)} of {len(came_back)} valid requests answered 200"
    )
    assert came_back == [200] * len(came_back)
    for length, statuses in flood.items():
        assert set(statuses) <= ({401, 429} if length == OVER_LONG else {401}), length
    assert "could not allocate node" not in (proxy.directory / "error.log").read_text()
