"""`POST /plants` over Falcon's test client: creates, repeats, conflicts and bad bodies."""

import io
import json

import falcon
import falcon.testing
import pytest

from plantstore.api.media import ACCEPTED
from plantstore.api.schemas import INT64_MESSAGE
from plantstore.app import create_app
from tests.conftest import TOKEN


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


#: Bodies that are not a `Plant`, each with the field its 400 names and why; `PUT` words them
#: as `POST` does.
NOT_PLANTS = [
    ({"id": 1}, "name", "Missing data for required field."),
    ({"id": True, "name": "fern"}, "id", "Not a valid integer."),
    ({"id": "1", "name": "fern"}, "id", "Not a valid integer."),
    ({"id": 1.5, "name": "fern"}, "id", "Not a valid integer."),
    ({"id": None, "name": "fern"}, "id", "Field may not be null."),
    ({"id": 2**63, "name": "fern"}, "id", INT64_MESSAGE),
    ({"id": -(2**63) - 1, "name": "fern"}, "id", INT64_MESSAGE),
    ({"id": 2**64, "name": "fern"}, "id", INT64_MESSAGE),
    ({"id": 1e30, "name": "fern"}, "id", INT64_MESSAGE),
    ({"id": 1, "name": None}, "name", "Field may not be null."),
    ({"id": 1, "name": 5}, "name", "Not a valid string."),
    ({"id": 1, "name": "fern", "tag": None}, "tag", "Field may not be null."),
    ({"id": 1, "name": "fern", "tag": 5}, "tag", "Not a valid string."),
    ([{"id": 1, "name": "fern"}], "body", "Must be a JSON object."),
    ("fern", "body", "Must be a JSON object."),
]


@pytest.mark.parametrize(
    ("body", "field", "why"),
    [({"name": "fern"}, "id", "Missing data for required field."), *NOT_PLANTS],
)
def test_invalid_new_plant_is_400_naming_the_field(client, body, field, why):
    assert_error(post(client, body), 400, f"{field}: {why}")


INEXACT = "Not an exact integer: from ±2**53 on, write it without a fraction part or exponent."


@pytest.mark.parametrize(
    ("written", "why"),
    [
        (b"9007199254740993.0", INEXACT),
        (b"-9007199254740993.0", INEXACT),
        (b"9007199254740992.0", INEXACT),
        (b"-9007199254740992.0", INEXACT),
        (b"9.007199254740993e15", INEXACT),
        (b"9007199254740993E0", INEXACT),
        (b"1e17", INEXACT),
        # 2**63 as a float: it may have been 9223372036854775808, beyond int64.
        (b"9223372036854775807.0", INT64_MESSAGE),
    ],
)
def test_an_id_written_as_a_float_that_cannot_tell_the_integer_is_400(client, written, why):
    body = b'{"id": %b, "name": "fern"}' % written
    result = client.simulate_post("/plants", body=body, content_type="application/json")
    assert_error(result, 400)
    assert result.json["message"] == f"id: {why}"
    assert client.simulate_get("/plants").json == []


@pytest.mark.parametrize(
    ("written", "plant_id"),
    [(b"9007199254740991.0", 2**53 - 1), (b"-9.007199254740991e15", -(2**53) + 1), (b"3e2", 300)],
)
def test_an_id_written_as_a_float_below_2_to_53_is_that_integer(client, written, plant_id):
    body = b'{"id": %b, "name": "fern"}' % written
    assert client.simulate_post("/plants", body=body, content_type="application/json").json == {
        "name": "fern"
    }
    assert client.simulate_get(f"/plants/{plant_id}").json == {"name": "fern"}


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


#: Bodies that are not JSON, each with what its 400 says.
MALFORMED = [
    (b"", "empty"),
    (b"{", "Could not parse JSON body"),
    (b'{"id": 1, "name": "fern"', "Could not parse JSON body"),
    (b"[" * 1500 + b"]" * 1500, "depth limit exceeded"),
    (b'{"id": 1, "name": "\xff"}', "utf-8"),
    (b'{"id": NaN, "name": "fern"}', "Could not parse JSON body"),
    (b'{"id": Infinity, "name": "fern"}', "Could not parse JSON body"),
    (b'{"id": 1e400, "name": "fern"}', "infinity"),
]


@pytest.mark.parametrize(("body", "why"), MALFORMED)
def test_malformed_json_is_400(client, body, why):
    result = client.simulate_post("/plants", body=body, content_type="application/json")
    assert_error(result, 400, why)


#: Content types of bodies that are not JSON in UTF-8.
NOT_JSON_IN_UTF_8 = [
    "text/plain",
    "application/x-www-form-urlencoded",
    "application/xml",
    "application/jsonx",
    "text/json",
    "*/*",
    "application/*",
    "application/json, text/plain",
    "json",
    "application/json; charset=latin-1",
    "APPLICATION/JSON; CHARSET=ISO-8859-1",
    'application/json; charset="utf-16"',
    "application/json; charset=",
    "application/json; charset=latin-1; charset=utf-8",
    "application/json; charset=utf-8; CHARSET=utf-8",
]


@pytest.mark.parametrize("content_type", NOT_JSON_IN_UTF_8)
def test_a_body_that_is_not_json_in_utf_8_is_415_naming_what_is_accepted(client, content_type):
    result = client.simulate_post(
        "/plants", body=b'{"id": 1, "name": "fern"}', content_type=content_type
    )
    assert_error(result, 415, "'Content-Type: application/json'", "charset=utf-8")
    assert result.json["message"] == ACCEPTED, "the same words, never what the client sent"
    assert client.simulate_get("/plants").json == []


def test_a_body_sent_as_latin_1_is_not_read_as_utf_8(client):
    body = '{"id": 1, "name": "café"}'.encode()
    result = client.simulate_post(
        "/plants", body=body, content_type="application/json; charset=latin-1"
    )
    assert result.status_code == 415
    assert client.simulate_get("/plants/1").status_code == 404


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json; charset=utf-8",
        "APPLICATION/JSON",
        "Application/Json",
        "application/json;charset=UTF-8",
        "Application/JSON; Charset=Utf-8",
        'application/json; charset="UTF-8"',
        " application/json ",
    ],
)
def test_json_in_any_case_with_a_utf_8_charset_or_none_is_json(client, content_type):
    result = client.simulate_post(
        "/plants", body='{"id": 1, "name": "café"}'.encode(), content_type=content_type
    )
    assert result.status_code == 200
    assert client.simulate_get("/plants/1").json == {"name": "café"}


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
    return {
        "wsgi.input": io.BytesIO(body),
        "wsgi.input_terminated": True,
        "HTTP_TRANSFER_ENCODING": "chunked",
    }


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


ALLOWED = {
    "/plants": {"GET", "HEAD", "POST", "OPTIONS"},
    "/plants/1": {"GET", "HEAD", "DELETE", "OPTIONS", "PUT"},
    "/healthz": {"GET", "HEAD", "OPTIONS"},
    "/readyz": {"GET", "HEAD", "OPTIONS"},
    "/openapi.json": {"GET", "HEAD", "OPTIONS"},
}


@pytest.mark.parametrize(("path", "allowed"), ALLOWED.items())
def test_options_is_204_with_allow_and_no_body_and_needs_no_token(anonymous, path, allowed):
    result = anonymous.simulate_options(path)
    assert result.status_code == 204
    assert set(result.headers["allow"].split(", ")) == allowed
    assert result.content == b""
    assert "content-type" not in result.headers
    assert "content-length" not in result.headers


@pytest.mark.parametrize("path", ALLOWED)
def test_options_and_a_405_list_the_same_methods(client, path):
    refused, options = client.simulate_request("PATCH", path), client.simulate_options(path)
    assert refused.status_code == 405
    assert refused.headers["allow"] == options.headers["allow"]


def test_a_cors_preflight_is_answered_through_the_options_responder(app, anonymous):
    app.add_middleware(falcon.CORSMiddleware(allow_origins="https://plants.example"))
    result = anonymous.simulate_options(
        "/plants",
        headers={"Origin": "https://plants.example", "Access-Control-Request-Method": "POST"},
    )
    assert result.status_code == 204
    assert result.headers["access-control-allow-origin"] == "https://plants.example"
    assert set(result.headers["access-control-allow-methods"].split(", ")) == ALLOWED["/plants"]


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


@pytest.mark.parametrize(
    "kept",
    [
        b'{"tag":"gr\\u00fcn","name":"fern"}',
        b'{ "name" : "f\\u0065rn", "tag" : "gr\xc3\xbcn" }',
    ],
)
def test_a_repeat_is_the_same_plant_however_the_store_spells_it(any_store, config, kept):
    """A database written by an earlier version, or another JSON writer, keeps its plants."""
    any_store.add(1, kept)
    client = falcon.testing.TestClient(
        create_app(config, any_store), headers={"Authorization": f"Bearer {TOKEN}"}
    )
    repeat = post(client, {"id": 1, "name": "fern", "tag": "grün"})
    assert (repeat.status_code, repeat.content) == (200, kept)
    assert_error(post(client, {"id": 1, "name": "fern"}), 409, "1")
