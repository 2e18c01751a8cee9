"""The error log's format: every line, a traceback's too, carries its request's id."""

import io
import logging
import re

import pytest

from plantstore.logs import LineFormatter, RequestIdFilter, current_request_id
from plantstore.stores import StoreUnavailable


@pytest.fixture
def error_log():
    """What reaches the root logger, written as the service's error log writes it."""
    handler = logging.StreamHandler(io.StringIO())
    handler.setFormatter(LineFormatter())
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    yield handler.stream
    root.removeHandler(handler)


PREFIX = r"\[[^]]+\] \[\d+\] request_id={} \[{}\] \[{}\] "


def test_a_500s_traceback_carries_the_request_id_on_every_line(
    client, store, monkeypatch, error_log
):
    def broken(plant_id, plant):
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(store, "add", broken)
    result = client.simulate_post(
        "/plants", json={"id": 1, "name": "fern"}, headers={"X-Request-ID": "trace-500"}
    )
    assert result.status_code == 500
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
