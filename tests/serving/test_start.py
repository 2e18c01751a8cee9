"""A start whose store cannot be reached says once that it waits, and why, then waits
`PLANTSTORE_STORE_WAIT` seconds for it, then stops with one `plantstore:` line naming
`PLANTSTORE_STORE` and why: never a password, never a traceback, no retries logged. `plantstore
check` says the same. A store lost after a good start is the workers' to wait for, answering 503
meanwhile (tests/stores/test_unavailable.py)."""

import json
import time
from urllib.parse import urlsplit

import pytest

from plantstore.testing.gunicorn_server import (
    PLANTSTORE,
    GunicornServer,
    run_to_exit,
    server_environ,
)

SECRET = "hunter2"
AUTH = {"Authorization": "Bearer t", "Content-Type": "application/json"}
#: Each test runs `plantstore` as a process, and waits on it: the slow set.
pytestmark = pytest.mark.slow


@pytest.fixture(
    params=[
        (
            f"postgresql://plantstore:{SECRET}@127.0.0.1:1/plants",
            "port 1 failed: Connection refused",
        ),
        (
            f"postgresql://plantstore:{SECRET}@nohost.invalid/plants",
            "failed to resolve host 'nohost.invalid'",
        ),
        ("/plantstore_missing", 'FATAL: database "plantstore_missing" does not exist'),
        ("nobody", 'FATAL: role "nobody" does not exist'),
    ],
    ids=["refused", "unknown host", "no database", "no role"],
)
def unreachable(request):
    """A `PLANTSTORE_STORE` that no wait makes reachable, and what libpq says of it."""
    url, reason = request.param
    if not url.startswith("postgresql://"):
        server = urlsplit(request.getfixturevalue("postgres_server_url"))
        if url.startswith("/"):
            server = server._replace(path=url)
        else:
            server = server._replace(netloc=f"{url}:{SECRET}@{server.hostname}:{server.port}")
        url = server.geturl()
    return url, reason


def assert_one_line_saying_why(result, wait: int, reason: str) -> None:
    """The last line says why the start stopped; one before it, when it may wait, that it does."""
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if "plantstore" in line]
    *waiting, line = lines
    assert line.startswith(
        f"plantstore: PLANTSTORE_STORE could not be reached within {wait} s "
        "(PLANTSTORE_STORE_WAIT): PostgreSQL: "
    )
    assert reason in line
    assert len(waiting) == (wait > 0)
    for said in waiting:
        assert said.endswith(
            f"plantstore: waiting up to {wait} s (PLANTSTORE_STORE_WAIT) for PLANTSTORE_STORE, "
            f"which cannot be reached yet: PostgreSQL: {line.split(': PostgreSQL: ', 1)[1]}"
        )
    assert SECRET not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "psycopg" not in result.stderr


def test_a_start_that_cannot_reach_its_store_stops_after_its_wait_saying_why(unreachable):
    url, reason = unreachable
    began = time.monotonic()
    result = run_to_exit(
        "--bind=127.0.0.1:0", PLANTSTORE_TOKENS="t", PLANTSTORE_STORE=url, PLANTSTORE_STORE_WAIT="2"
    )
    waited = time.monotonic() - began
    assert_one_line_saying_why(result, 2, reason)
    assert 2 <= waited < 10


@pytest.mark.parametrize("wait", [0, 1])
def test_check_says_why_the_store_cannot_be_reached_as_a_start_does(tmp_path, unreachable, wait):
    url, reason = unreachable
    result = run_to_exit(
        "check",
        command=[PLANTSTORE],
        cwd=tmp_path,
        PLANTSTORE_STORE=url,
        PLANTSTORE_STORE_WAIT=str(wait),
    )
    assert result.stdout == ""
    assert_one_line_saying_why(result, wait, reason)
    assert len(result.stderr.splitlines()) == 1 + wait


def test_a_start_says_it_waits_then_serves_once_its_database_comes_up(postgres_cluster):
    postgres_cluster.stop()
    server = GunicornServer(
        server_environ(
            PLANTSTORE_TOKENS="t",
            PLANTSTORE_STORE=postgres_cluster.url(),
            PLANTSTORE_STORE_WAIT="60",
        )
    )
    try:
        said = server.wait_for_stderr(r"\[WARNING\] plantstore: waiting up to 60 s .*")
        postgres_cluster.start()
        status, _, body = server.request("POST", "/plants", '{"id": 1, "name": "fern"}', AUTH)
    finally:
        _, stderr = server.stop()
    assert (status, body) == (200, b'{"name":"fern"}')
    assert said[0].endswith(
        "plantstore: waiting up to 60 s (PLANTSTORE_STORE_WAIT) for PLANTSTORE_STORE, which "
        "cannot be reached yet: PostgreSQL: connection failed: connection to server at "
        f'"127.0.0.1", port {postgres_cluster.port} failed: Connection refused'
    )
    # Said once: each attempt after the first is not logged.
    (line,) = [line for line in stderr.splitlines() if "plantstore:" in line]
    assert line.endswith(said[0])


def test_with_json_logs_a_start_says_it_waits_in_one_object():
    result = run_to_exit(
        "--bind=127.0.0.1:0",
        PLANTSTORE_TOKENS="t",
        PLANTSTORE_STORE=f"postgresql://plantstore:{SECRET}@127.0.0.1:1/plants",
        PLANTSTORE_STORE_WAIT="1",
        PLANTSTORE_LOG_FORMAT="json",
    )
    assert result.returncode == 1
    *logged, stopped = result.stderr.splitlines()
    (waiting,) = [entry for entry in map(json.loads, logged) if "plantstore" in entry["message"]]
    assert waiting["level"] == "WARNING"
    assert waiting["message"].startswith("plantstore: waiting up to 1 s (PLANTSTORE_STORE_WAIT)")
    assert stopped.startswith("plantstore: PLANTSTORE_STORE could not be reached within 1 s")
    assert SECRET not in result.stderr
