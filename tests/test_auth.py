"""Every plant operation needs an accepted bearer token; tokens are never echoed."""

import falcon.testing
import pytest

from plantstore.app import create_app
from plantstore.config import Config
from tests.conftest import SECOND_TOKEN, TOKEN

PLANT = {"id": 1, "name": "fern"}


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
        ("Bearer", NOT_ACCEPTED),
        ("Bearer wrong-token", NOT_ACCEPTED),
        (f"Bearer {TOKEN}x", NOT_ACCEPTED),
        (f"Bearer {TOKEN[:-1]}", NOT_ACCEPTED),
        ("Bearer tök€n", NOT_ACCEPTED),
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
    client = falcon.testing.TestClient(create_app(Config(tokens=frozenset({"other"}))))
    result = client.simulate_post(
        "/plants", json=PLANT, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert result.status_code == 401
