"""Liveness, and an `X-Request-ID` on every answer."""

import re

import pytest


def test_healthz_is_ok(anonymous):
    result = anonymous.simulate_get("/healthz")
    assert result.status_code == 200
    assert result.json == {"status": "ok"}


REQUESTS = [
    ("GET", "/healthz", {}),
    ("GET", "/openapi.json", {}),
    ("POST", "/plants", {"json": {"id": 1, "name": "fern"}}),
    ("POST", "/plants", {"json": {"id": "x"}}),
    ("POST", "/plants", {"json": {"id": 1}, "headers": {"Authorization": "Bearer no"}}),
    ("GET", "/plants", {}),
    ("GET", "/nowhere", {}),
]


@pytest.mark.parametrize(("method", "path", "kwargs"), REQUESTS)
def test_every_answer_has_a_fresh_request_id(client, method, path, kwargs):
    first = client.simulate_request(method, path, **kwargs).headers["x-request-id"]
    second = client.simulate_request(method, path, **kwargs).headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", first)
    assert first != second


@pytest.mark.parametrize(("method", "path", "kwargs"), REQUESTS)
@pytest.mark.parametrize("request_id", ["abc-123", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"])
def test_a_sane_request_id_is_echoed(client, method, path, kwargs, request_id):
    headers = {**kwargs.pop("headers", {}), "X-Request-ID": request_id}
    result = client.simulate_request(method, path, headers=headers, **kwargs)
    assert result.headers["x-request-id"] == request_id


@pytest.mark.parametrize("request_id", ["", "has space", "x" * 129, 'quote"', "new\tline", "é"])
def test_any_other_request_id_is_replaced(client, request_id):
    result = client.simulate_get("/healthz", headers={"X-Request-ID": request_id})
    assert re.fullmatch(r"[0-9a-f]{32}", result.headers["x-request-id"])
