"""The logs' formats: every line of the error log, a traceback's too, carries its request's id;
the access log names the request's token by its name."""

import io
import json
import logging
import re
import runpy
from datetime import timedelta
from types import SimpleNamespace

import falcon.testing
import pytest
from gunicorn.config import Config as GunicornConfig

from plantstore.app import create_app
from plantstore.config import Config
from plantstore.core.stores import StoreUnavailable
from plantstore.operations.logs import (
    JsonFormatter,
    LineFormatter,
    Logger,
    RequestIdFilter,
    current_request_id,
)
from plantstore.stores.memory import MemoryStore
from plantstore.testing.gunicorn_server import ROOT


@pytest.fixture
def error_log():
    """What reaches the root logger, written as the service's error log writes it."""
    yield from logged_with(LineFormatter())


@pytest.fixture
def json_error_log():
    """The same, as `PLANTSTORE_LOG_FORMAT=json` writes it."""
    yield from logged_with(JsonFormatter())


def logged_with(formatter):
    handler = logging.StreamHandler(io.StringIO())
    handler.setFormatter(formatter)
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    yield handler.stream
    root.removeHandler(handler)


PREFIX = r"\[[^]]+\] \[\d+\] request_id={} \[{}\] \[{}\] "


def post_a_500(client, store, monkeypatch):
    """POST a plant, as request `trace-500`, to a store that fails with an unexpected error."""

    def broken(plant_id, plant):
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(store, "add", broken)
    result = client.simulate_post(
        "/plants", json={"id": 1, "name": "fern"}, headers={"X-Request-ID": "trace-500"}
    )
    assert result.status_code == 500


def test_a_500s_traceback_carries_the_request_id_on_every_line(
    client, store, monkeypatch, error_log
):
    post_a_500(client, store, monkeypatch)
    lines = error_log.getvalue().splitlines()
    assert len(lines) > 3
    prefix = re.compile(PREFIX.format("trace-500", "falcon", "ERROR"))
    assert [line for line in lines if not prefix.match(line)] == []
    assert re.search(r"\] POST /plants: Traceback", lines[0])
    assert lines[-1].endswith("RuntimeError: secret internal detail")


def test_a_module_loggers_lines_in_a_request_carry_its_id(client, store, monkeypatch, error_log):
    """As a store module's `logging.getLogger(__name__)` would log why it cannot serve."""

    def failing(plant_id, plant):
        logging.getLogger("plantstore.stores.sqlite").warning("first line\nsecond line")
        raise StoreUnavailable("database is locked")

    monkeypatch.setattr(store, "add", failing)
    result = client.simulate_post(
        "/plants", json={"id": 1, "name": "fern"}, headers={"X-Request-ID": "trace-503"}
    )
    assert result.status_code == 503
    prefix = PREFIX.format("trace-503", r"plantstore\.stores\.sqlite", "WARNING")
    cause = PREFIX.format("trace-503", "falcon", "ERROR")
    assert re.fullmatch(
        f"{prefix}first line\n{prefix}second line\n{cause}POST /plants: .*database is locked\n",
        error_log.getvalue(),
    )


def test_a_line_outside_any_request_says_so(error_log):
    token = current_request_id.set("-")
    try:
        logging.getLogger("psycopg.pool").warning("error connecting")
    finally:
        current_request_id.reset(token)
    assert re.fullmatch(
        PREFIX.format("-", r"psycopg\.pool", "WARNING") + "error connecting\n", error_log.getvalue()
    )


def test_in_json_a_500_is_one_line_whose_message_holds_the_traceback(
    client, store, monkeypatch, json_error_log
):
    post_a_500(client, store, monkeypatch)
    (line,) = json_error_log.getvalue().splitlines()
    entry = json.loads(line)
    assert entry.keys() == {"time", "level", "logger", "process", "request_id", "message"}
    assert (entry["request_id"], entry["logger"], entry["level"]) == (
        "trace-500",
        "falcon",
        "ERROR",
    )
    assert entry["message"].startswith("POST /plants: Traceback (most recent call last):\n")
    assert entry["message"].endswith("RuntimeError: secret internal detail")


def test_in_json_a_logged_exception_is_one_line_with_its_traceback_as_one_field(json_error_log):
    outside_a_request = current_request_id.set("-")
    try:
        raise ValueError("bad")
    except ValueError:
        logging.getLogger("plantstore.test").exception("it failed")
    finally:
        current_request_id.reset(outside_a_request)
    (line,) = json_error_log.getvalue().splitlines()
    entry = json.loads(line)
    assert (entry["message"], entry["level"], entry["request_id"]) == ("it failed", "ERROR", None)
    assert entry["traceback"].startswith("Traceback (most recent call last):\n")
    assert entry["traceback"].endswith("ValueError: bad")


@pytest.fixture(params=["text", "json"])
def access_log(request, tmp_path, monkeypatch):
    """gunicorn's access log of the service's logger class, with gunicorn.conf.py's format, as
    text and as JSON, into `access.log` of the test's directory: log a request the app
    answered (its environ, and the `StartResponseMock` that took its answer)."""
    monkeypatch.setenv("PLANTSTORE_LOG_FORMAT", request.param)
    settings = GunicornConfig()
    settings.set("accesslog", str(tmp_path / "access.log"))
    settings.set(
        "access_log_format", runpy.run_path(str(ROOT / "gunicorn.conf.py"))["access_log_format"]
    )
    root, urllib3 = logging.getLogger(), logging.getLogger("urllib3")
    kept = root.handlers[:], root.level, urllib3.level
    logger = Logger(settings)
    # It gave the root logger the error log's handler, as in a worker: give back the test's.
    root.handlers, root.level = kept[0], kept[1]
    urllib3.setLevel(kept[2])

    def log(environ: dict, answer: falcon.testing.StartResponseMock) -> None:
        answered = SimpleNamespace(headers=answer.headers, status=answer.status)
        logger.access(answered, SimpleNamespace(headers=[]), environ, timedelta(microseconds=7))

    yield log
    for gunicorns in (logger.access_log, logger.error_log):
        for handler in gunicorns.handlers:
            handler.close()
        gunicorns.handlers.clear()
        gunicorns.propagate = True


def test_the_access_log_names_the_accepted_token_on_a_403_too(tmp_path, access_log):
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("reader-token name=dashboard scopes=read\n")
    app = create_app(Config(tokens=frozenset(), tokens_file=str(tokens_file)), MemoryStore())
    for method in ("GET", "POST"):
        environ = falcon.testing.create_environ(
            method=method, path="/plants", headers={"Authorization": "Bearer reader-token"}
        )
        answer = falcon.testing.StartResponseMock()
        app(environ, answer)
        access_log(environ, answer)
    lines = (tmp_path / "access.log").read_text().splitlines()
    if lines[0].startswith("{"):
        logged = [(entry["token"], entry["status"]) for entry in map(json.loads, lines)]
    else:
        logged = [re.search(r" token=(\S+) .* status=(\d+) ", line).groups() for line in lines]
    assert [(token, int(status)) for token, status in logged] == [
        ("dashboard", 200),
        ("dashboard", 403),
    ]
    assert "reader-token" not in "".join(lines)
