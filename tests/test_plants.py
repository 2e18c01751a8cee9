"""`POST /plants`: the contract's rules 1 to 3, 5 and 6 over Falcon's test client."""

import io
import json
import threading

import falcon
import falcon.testing
import pytest


def post(client, body, **kwargs):
    return client.simulate_post("/plants", json=body, **kwargs)


def assert_error(result, status, *fragments):
    assert result.status_code == status
    assert result.headers["content-type"] == "application/json"
    assert set(result.json) == {"error", "message"}
    assert result.json["error"] == status
    for fragment in fragments:
        assert fragment in result.json["message"]


def test_create_answers_the_plant_without_its_id(client):
    result = post(client, {"id": 1, "name": "fern", "tag": "green"})
    assert result.status_code == 200
    assert result.headers["content-type"] == "application/json"
    assert result.json == {"name": "fern", "tag": "green"}


def test_create_without_tag_omits_it(client):
    result = post(client, {"id": 1, "name": "fern"})
    assert result.status_code == 200
    assert result.json == {"name": "fern"}


def test_other_fields_are_ignored(client):
    result = post(client, {"id": 1, "name": "fern", "colour": "green", "id2": [1]})
    assert result.status_code == 200
    assert result.json == {"name": "fern"}


@pytest.mark.parametrize("plant_id", [-(2**63), 2**63 - 1, 0, 5.0])
def test_any_int64_id_is_accepted(client, plant_id):
    assert post(client, {"id": plant_id, "name": "fern"}).status_code == 200


def test_unicode_survives(client):
    plant = {"name": "Fußnote 🌿 \u0000 \u2028", "tag": "日本"}
    assert post(client, {"id": 1, **plant}).json == plant


@pytest.mark.parametrize(
    ("body", "field", "why"),
    [
        ({"name": "fern"}, "id", "Missing data for required field."),
        ({"id": 1}, "name", "Missing data for required field."),
        ({"id": True, "name": "fern"}, "id", "Not a valid integer."),
        ({"id": "1", "name": "fern"}, "id", "Not a valid integer."),
        ({"id": 1.5, "name": "fern"}, "id", "Not a valid integer."),
        ({"id": None, "name": "fern"}, "id", "Field may not be null."),
        (
            {"id": 2**63, "name": "fern"},
            "id",
            "Must be greater than or equal to -9223372036854775808 "
            "and less than or equal to 9223372036854775807.",
        ),
        ({"id": -(2**63) - 1, "name": "fern"}, "id", "Must be an int64"),
        ({"id": 1e30, "name": "fern"}, "id", "Must be an int64"),
        ({"id": 1, "name": None}, "name", "Field may not be null."),
        ({"id": 1, "name": 5}, "name", "Not a valid string."),
        ({"id": 1, "name": "fern", "tag": None}, "tag", "Field may not be null."),
        ({"id": 1, "name": "fern", "tag": 5}, "tag", "Not a valid string."),
        ([{"id": 1, "name": "fern"}], "body", "Must be a JSON object."),
        ("fern", "body", "Must be a JSON object."),
    ],
)
def test_invalid_new_plant_is_400_naming_the_field(client, body, field, why):
    assert_error(post(client, body), 400, f"{field}: {why}")


def test_identical_repeat_answers_the_same(client):
    first = post(client, {"id": 1, "name": "fern", "tag": "green"})
    again = post(client, {"tag": "green", "name": "fern", "id": 1.0, "extra": 1})
    assert again.status_code == 200
    assert again.content == first.content


@pytest.mark.parametrize(
    "other", [{"name": "rose"}, {"name": "fern", "tag": "red"}, {"name": "fern", "tag": "green"}]
)
def test_different_content_under_a_taken_id_is_409_and_keeps_the_plant(client, other):
    post(client, {"id": 1, "name": "fern"})
    assert_error(post(client, {"id": 1, **other}), 409, "1")
    assert post(client, {"id": 1, "name": "fern"}).json == {"name": "fern"}


def test_concurrent_creates_of_one_id_have_exactly_one_winner(client):
    contenders = 12
    start = threading.Barrier(contenders)
    statuses = []

    def create(n):
        start.wait()
        statuses.append(post(client, {"id": 42, "name": f"plant-{n}"}).status_code)

    threads = [threading.Thread(target=create, args=(n,)) for n in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200] + [409] * (contenders - 1)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"", "empty"),
        (b"{", "Could not parse JSON body"),
        (b'{"id": 1, "name": "fern"', "Could not parse JSON body"),
        (b"[" * 1500 + b"]" * 1500, "depth limit exceeded"),
        (b'{"id": 1, "name": "\xff"}', "utf-8"),
        (b'{"id": NaN, "name": "fern"}', "Could not parse JSON body"),
        (b'{"id": Infinity, "name": "fern"}', "Could not parse JSON body"),
        (b'{"id": 1e400, "name": "fern"}', "infinity"),
    ],
)
def test_malformed_json_is_400(client, body, why):
    result = client.simulate_post("/plants", body=body, content_type="application/json")
    assert_error(result, 400, why)


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml"]
)
def test_a_body_that_is_not_json_is_415(client, content_type):
    result = client.simulate_post(
        "/plants", body=b'{"id": 1, "name": "fern"}', content_type=content_type
    )
    assert_error(result, 415, content_type)


def test_json_with_a_charset_is_json(client):
    result = client.simulate_post(
        "/plants", body=b'{"id": 1, "name": "fern"}', content_type="application/json; charset=utf-8"
    )
    assert result.status_code == 200


def test_a_body_over_the_limit_is_413(client, config):
    body = b'{"id": 1, "name": "' + b"x" * config.max_body_bytes + b'"}'
    result = client.simulate_post("/plants", body=body, content_type="application/json")
    assert_error(result, 413, str(config.max_body_bytes))


def test_a_body_at_the_limit_is_served(client, config):
    head, tail = b'{"id": 1, "name": "', b'"}'
    body = head + b"x" * (config.max_body_bytes - len(head) - len(tail)) + tail
    result = client.simulate_post("/plants", body=body, content_type="application/json")
    assert result.status_code == 200


def chunked(body: bytes) -> dict:
    """The WSGI environ of a de-chunked body, as gunicorn hands it over: no Content-Length."""
    return {"wsgi.input": io.BytesIO(body), "wsgi.input_terminated": True}


@pytest.mark.parametrize(("size", "status"), [(100, 200), (5000, 413)])
def test_a_chunked_body_is_bounded_and_served(app, config, size, status):
    head, tail = b'{"id": 1, "name": "', b'"}'
    body = head + b"x" * (size - len(head) - len(tail)) + tail
    environ = falcon.testing.create_environ(
        method="POST",
        path="/plants",
        headers={"Authorization": "Bearer test-token-1", "Content-Type": "application/json"},
    )
    environ.pop("CONTENT_LENGTH", None)
    environ.update(chunked(body))
    result = falcon.testing.StartResponseMock()
    content = b"".join(app(environ, result))
    assert result.status.startswith(str(status))
    if status == 200:
        assert content == b'{"name":"' + b"x" * (size - len(head) - len(tail)) + b'"}'


def test_a_failure_inside_is_500_revealing_nothing(client, store, monkeypatch, caplog):
    def broken(plant_id, plant):
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(store, "add", broken)
    result = client.simulate_post("/plants", json={"id": 1, "name": "fern"})
    assert_error(result, 500)
    assert "secret internal detail" not in result.text
    assert "RuntimeError: secret internal detail" in caplog.text


@pytest.mark.parametrize("accept", ["application/xml", "text/html", "image/png"])
def test_errors_are_json_whatever_the_client_accepts(client, accept):
    result = post(client, {"id": "x"}, headers={"Accept": accept})
    assert_error(result, 400, "id")


def test_unknown_path_is_404_json(client):
    assert_error(client.simulate_get("/nowhere"), 404)


def test_wrong_method_is_405_json_with_allow(client):
    result = client.simulate_delete("/plants")
    assert_error(result, 405)
    assert set(result.headers["allow"].split(", ")) == {"GET", "HEAD", "POST", "OPTIONS"}


def test_a_body_cut_short_of_its_content_length_is_400(app):
    body = b'{"id": 1, "name": "fern"}'
    environ = falcon.testing.create_environ(
        method="POST",
        path="/plants",
        body=body,
        headers={"Authorization": "Bearer test-token-1", "Content-Type": "application/json"},
    )
    environ["CONTENT_LENGTH"] = str(len(body) + 10)
    result = falcon.testing.StartResponseMock()
    content = b"".join(app(environ, result))
    assert result.status.startswith("400")
    assert json.loads(content) == {
        "error": 400,
        "message": f"The body ended after {len(body)} of its {len(body) + 10} bytes.",
    }
