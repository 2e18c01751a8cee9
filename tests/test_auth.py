"""Every plant operation needs an accepted bearer token; tokens are never echoed."""

import falcon.testing
import pytest

from plantstore.app import create_app
from plantstore.config import Config
from plantstore.stores.memory import MemoryStore
from tests.conftest import SECOND_TOKEN, TOKEN

PLANT = {"id": 1, "name": "fern"}


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
@pytest.mark.parametrize("token", [TOKEN, SECOND_TOKEN])
def test_an_accepted_token_with_any_case_of_the_scheme_is_let_in(anonymous, scheme, token):
    result = anonymous.simulate_post(
        "/plants", json=PLANT, headers={"Authorization": f"{scheme} {token}"}
    )
    assert result.status_code == 200


@pytest.mark.parametrize(
    ("authorization", "challenge"),
    [
        (None, 'Bearer realm="plantstore"'),
        ("Basic dXNlcjpwYXNz", 'Bearer realm="plantstore"'),
        (TOKEN, 'Bearer realm="plantstore"'),
        ("Bearer", 'Bearer realm="plantstore", error="invalid_token"'),
        ("Bearer wrong-token", 'Bearer realm="plantstore", error="invalid_token"'),
        (f"Bearer {TOKEN}x", 'Bearer realm="plantstore", error="invalid_token"'),
        (f"Bearer {TOKEN[:-1]}", 'Bearer realm="plantstore", error="invalid_token"'),
        ("Bearer tök€n", 'Bearer realm="plantstore", error="invalid_token"'),
    ],
)
def test_missing_malformed_or_unknown_credentials_are_401(anonymous, authorization, challenge):
    headers = {"Authorization": authorization} if authorization else {}
    result = anonymous.simulate_post("/plants", json=PLANT, headers=headers)
    assert result.status_code == 401
    assert result.headers["www-authenticate"] == challenge
    assert result.headers["content-type"] == "application/json"
    assert result.json["error"] == 401
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
