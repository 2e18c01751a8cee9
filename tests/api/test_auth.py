"""Every plant operation needs an accepted bearer token; tokens are never echoed."""

import logging

import falcon.testing
import pytest

from plantstore.api.auth import BearerAuth
from plantstore.app import create_app
from plantstore.config import Config
from plantstore.stores.memory import MemoryStore
from plantstore.tokens.accepted import CHECK_INTERVAL, Tokens
from tests.conftest import SECOND_TOKEN, TOKEN
from tests.support.clock import Clock
from tests.support.tokens_file import changed_at, rewrite

PLANT = {"id": 1, "name": "fern"}
#: Why the file's reader refuses a line with a space in its token: the second word is no field.
BADLINE = "a field after the token is name=... or scopes=..."


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
@pytest.mark.parametrize("token", [TOKEN, SECOND_TOKEN])
def test_an_accepted_token_with_any_case_of_the_scheme_is_let_in(anonymous, scheme, token):
    result = anonymous.simulate_post(
        "/plants", json=PLANT, headers={"Authorization": f"{scheme} {token}"}
    )
    assert result.status_code == 200


NO_CREDENTIALS = (
    'Bearer realm="plantstore"',
    "Send the header 'Authorization: Bearer <token>'.",
)
NOT_BEARER = ('Bearer realm="plantstore"', "The Authorization header must read 'Bearer <token>'.")
NOT_ACCEPTED = (
    'Bearer realm="plantstore", error="invalid_token"',
    "The bearer token is not accepted.",
)


@pytest.mark.parametrize(
    ("authorization", "refusal"),
    [
        (None, NO_CREDENTIALS),
        ("Basic dXNlcjpwYXNz", NOT_BEARER),
        (TOKEN, NOT_BEARER),
        ("Bearer", NOT_BEARER),
        ("Bearer wrong-token", NOT_ACCEPTED),
        (f"Bearer {TOKEN}x", NOT_ACCEPTED),
        (f"Bearer {TOKEN[:-1]}", NOT_ACCEPTED),
        ("Bearer tök€n", NOT_BEARER),
        (f"Bearer\t{TOKEN}", NOT_BEARER),
        (f"Bearer {TOKEN} wrong-token", NOT_BEARER),
        ("Bearer " + "wrong-token" * 12, NOT_BEARER),
    ],
)
def test_missing_malformed_or_unknown_credentials_are_401(anonymous, authorization, refusal):
    headers = {"Authorization": authorization} if authorization else {}
    result = anonymous.simulate_post("/plants", json=PLANT, headers=headers)
    assert result.status_code == 401
    assert result.headers["www-authenticate"] == refusal[0]
    assert result.headers["content-type"] == "application/json"
    assert result.json == {"error": 401, "message": refusal[1]}
    assert "wrong-token" not in result.text
    assert TOKEN not in result.text


def test_credentials_are_checked_before_the_body_is_read(app):
    environ = falcon.testing.create_environ(
        method="POST", path="/plants", body=b'{"id": 1, "name": "fern"}'
    )
    stream = environ["wsgi.input"]
    result = falcon.testing.StartResponseMock()
    app(environ, result)
    assert result.status.startswith("401")
    assert stream.tell() == 0


@pytest.mark.parametrize("path", ["/healthz", "/openapi.json"])
def test_health_and_openapi_need_no_token(anonymous, path):
    assert anonymous.simulate_get(path).status_code == 200


def test_a_plant_path_with_the_wrong_method_still_needs_a_token(anonymous):
    assert anonymous.simulate_get("/plants").status_code == 401


def test_an_app_with_another_token_refuses_ours():
    client = falcon.testing.TestClient(
        create_app(Config(tokens=frozenset({"other"})), MemoryStore())
    )
    result = client.simulate_post(
        "/plants", json=PLANT, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert result.status_code == 401


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def tokens_file(tmp_path):
    path = tmp_path / "tokens"
    rewrite(path, "old-token\n")
    return path


@pytest.fixture
def rotating(tokens_file, clock):
    """A client of an app whose `Tokens` read `tokens_file` on `clock`'s time."""
    app = falcon.App(middleware=[BearerAuth(Tokens(["listed"], str(tokens_file), clock))])
    app.add_route("/plants", Hello())
    return falcon.testing.TestClient(app)


class Hello:
    def on_get(self, req, resp):
        resp.media = "hello"


def status(client, token: str) -> int:
    return client.simulate_get("/plants", headers={"Authorization": f"Bearer {token}"}).status_code


def test_a_changed_tokens_file_is_taken_after_the_interval_and_not_before(
    rotating, tokens_file, clock
):
    assert (status(rotating, "old-token"), status(rotating, "listed")) == (200, 200)
    rewrite(tokens_file, "# rotated\nnew-token\n")
    clock.now += CHECK_INTERVAL / 2
    assert (status(rotating, "new-token"), status(rotating, "old-token")) == (401, 200)
    clock.now += CHECK_INTERVAL / 2
    assert status(rotating, "new-token") == 200
    assert status(rotating, "old-token") == 401
    assert status(rotating, "listed") == 200


def test_the_file_is_looked_at_once_an_interval_however_many_requests_ask(
    rotating, tokens_file, clock
):
    """A change seen by a look at one instant is not seen again until the interval is over."""
    clock.now += CHECK_INTERVAL
    assert status(rotating, "old-token") == 200
    rewrite(tokens_file, "new-token\n")
    for _ in range(3):
        clock.now += CHECK_INTERVAL / 4
        assert status(rotating, "new-token") == 401
    clock.now += CHECK_INTERVAL / 4
    assert status(rotating, "new-token") == 200


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (None, "PLANTSTORE_TOKENS_FILE cannot be read: {path}: No such file or directory"),
        ("", "PLANTSTORE_TOKENS_FILE names no token: {path}"),
        ("# all revoked\n", "PLANTSTORE_TOKENS_FILE names no token: {path}"),
        (
            "new-token\nsecret token\n",
            "PLANTSTORE_TOKENS_FILE: {path}, line 2: a field after the token is name=... or "
            "scopes=...",
        ),
        (
            b"new-token\n\xff\n",
            "PLANTSTORE_TOKENS_FILE must be text, one token a line: {path} is not UTF-8",
        ),
        (
            "new-token\nsecret",
            "PLANTSTORE_TOKENS_FILE: {path} must end with a newline: its last line has none, "
            "as in a file still being written",
        ),
    ],
)
def test_a_bad_new_tokens_file_keeps_the_tokens_and_is_logged_once_without_a_token(
    rotating, tokens_file, clock, caplog, bad, why
):
    caplog.set_level(logging.INFO, logger="plantstore.tokens.accepted")
    good = changed_at(tokens_file)
    if bad is None:
        tokens_file.unlink()
    else:
        rewrite(tokens_file, bad)
    for _ in range(3):
        clock.now += CHECK_INTERVAL
        assert (status(rotating, "old-token"), status(rotating, "new-token")) == (200, 401)
    assert [(record.levelno, record.getMessage()) for record in caplog.records] == [
        (
            logging.ERROR,
            f"plantstore: the tokens file is not taken, and the tokens of its last good version, "
            f"changed at {good}, stay accepted until it changes: {why.format(path=tokens_file)}",
        )
    ]
    for token in ("old-token", "new-token", "secret"):
        assert token not in caplog.text

    caplog.clear()
    rewrite(tokens_file, "new-token\n")
    clock.now += CHECK_INTERVAL
    assert (status(rotating, "new-token"), status(rotating, "old-token")) == (200, 401)
    assert [record.getMessage() for record in caplog.records] == [
        f"plantstore: the changed tokens file is taken: {tokens_file}"
    ]


def test_each_bad_change_is_logged_once(rotating, tokens_file, clock, caplog):
    for content in ("", "still wrong\n", "# none\n"):
        rewrite(tokens_file, content)
        for _ in range(2):
            clock.now += CHECK_INTERVAL
            assert status(rotating, "old-token") == 200
    assert [record.levelno for record in caplog.records] == [logging.ERROR] * 3


def test_a_worker_started_while_the_file_is_bad_accepts_the_listed_tokens_until_it_changes(
    tokens_file, clock, caplog
):
    """With no last good tokens kept for it (tests/api/test_last_good_tokens.py has those)."""
    rewrite(tokens_file, "not a token\n")
    app = falcon.App(middleware=[BearerAuth(Tokens(["listed"], str(tokens_file), clock))])
    app.add_route("/plants", Hello())
    client = falcon.testing.TestClient(app)
    assert (status(client, "listed"), status(client, "old-token")) == (200, 401)
    (line,) = [record.getMessage() for record in caplog.records]
    assert line.endswith(f"{tokens_file}, line 1: {BADLINE}")
    assert "not a token" not in caplog.text

    rewrite(tokens_file, "old-token\n")
    clock.now += CHECK_INTERVAL
    assert status(client, "old-token") == 200


def test_the_app_accepts_the_listed_tokens_and_the_files(tokens_file):
    app = create_app(Config(tokens=frozenset({TOKEN}), tokens_file=str(tokens_file)), MemoryStore())
    client = falcon.testing.TestClient(app)
    assert (status(client, TOKEN), status(client, "old-token"), status(client, "x")) == (
        200,
        200,
        401,
    )
