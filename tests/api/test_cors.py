"""Browser pages on listed origins may call the service (CORS); others get no CORS header."""

import io

import falcon.testing
import pytest

from plantstore.app import create_app
from plantstore.config import Config, ConfigError
from plantstore.core.stores import StoreUnavailable
from plantstore.stores.memory import MemoryStore
from plantstore.testing.gunicorn_server import run_to_exit
from tests.conftest import TOKEN

SHOP = "https://shop.example"
DEV = "http://localhost:5173"
STRANGER = "https://stranger.example"
EXPOSED = "Link, X-Request-ID, Retry-After, ETag, Location"
ALLOWED_HEADERS = "Authorization, Content-Type, X-Request-ID, If-Match, If-None-Match"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class UnavailableStore(MemoryStore):
    """A store whose database is down for writes."""

    def add(self, plant_id, plant):
        raise StoreUnavailable("the database is down")


def client_for(origins, store=None):
    config = Config(tokens=frozenset({TOKEN}), max_body_bytes=64, cors_origins=origins)
    return falcon.testing.TestClient(create_app(config, store or MemoryStore()))


@pytest.fixture
def client():
    return client_for((SHOP, DEV))


def cors_headers(result) -> dict[str, str]:
    return {name: value for name, value in result.headers.items() if name.startswith("access-")}


def preflight(client, path, origin, method="POST", headers="authorization,content-type"):
    return client.simulate_options(
        path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": headers,
        },
    )


@pytest.mark.parametrize("origin", [SHOP, DEV])
@pytest.mark.parametrize(
    ("path", "method", "methods"),
    [
        ("/plants", "POST", "GET, HEAD, OPTIONS, POST"),
        ("/plants/7", "DELETE", "DELETE, GET, HEAD, OPTIONS, PUT"),
        ("/plants/7", "PUT", "DELETE, GET, HEAD, OPTIONS, PUT"),
    ],
)
def test_a_preflight_from_a_listed_origin_is_allowed_without_a_token(
    client, origin, path, method, methods
):
    result = preflight(client, path, origin, method)
    assert result.status_code == 204
    assert cors_headers(result) == {
        "access-control-allow-origin": origin,
        "access-control-allow-methods": methods,
        "access-control-allow-headers": ALLOWED_HEADERS,
        "access-control-expose-headers": EXPOSED,
        "access-control-max-age": "86400",
    }
    assert result.headers["vary"] == "Origin"
    assert "allow" not in result.headers


def test_a_preflight_allows_the_headers_the_api_reads_whatever_it_asks_for(client):
    result = preflight(client, "/plants", SHOP, headers="authorization,x-something-else")
    assert result.headers["access-control-allow-headers"] == ALLOWED_HEADERS


@pytest.mark.parametrize("origin", [STRANGER, "https://shop.example.evil", "null"])
def test_a_preflight_from_another_origin_gets_no_cors_header(client, origin):
    result = preflight(client, "/plants", origin)
    assert result.status_code == 204
    assert cors_headers(result) == {}
    assert result.headers["allow"] == "GET, HEAD, OPTIONS, POST"
    assert result.headers["vary"] == "Origin"


def answers(client, origin: str | None) -> dict[str, falcon.testing.Result]:
    """One request for each kind of answer, sent as a page on `origin` would (None: no page)."""
    page = {"Origin": origin} if origin else {}
    signed = {**AUTH, **page}
    client.simulate_post("/plants", json={"id": 1, "name": "fern"}, headers=signed)
    return {
        "200": client.simulate_post("/plants", json={"id": 2, "name": "ivy"}, headers=signed),
        "200 with Link": client.simulate_get("/plants", params={"limit": 1}, headers=signed),
        "204": client.simulate_delete("/plants/1", headers=signed),
        "400": client.simulate_post("/plants", json={"id": "one"}, headers=signed),
        "401": client.simulate_post("/plants", json={"id": 3, "name": "moss"}, headers=page),
        "404": client.simulate_get("/plants/404", headers=signed),
        "405": client.simulate_put("/plants", headers=signed),
        "413": client.simulate_post("/plants", body=b" " * 65, headers=signed),
        "415": client.simulate_post(
            "/plants", body=b"id=1", headers={**signed, "Content-Type": "text/plain"}
        ),
    }


@pytest.mark.parametrize("origin", [SHOP, DEV])
def test_every_answer_to_a_listed_origin_lets_its_page_read_it(client, origin):
    for kind, result in answers(client, origin).items():
        assert result.status_code == int(kind[:3]), kind
        assert ("link" in result.headers) == (kind == "200 with Link"), kind
        assert cors_headers(result) == {
            "access-control-allow-origin": origin,
            "access-control-expose-headers": EXPOSED,
        }, kind
        assert result.headers["vary"] == "Origin", kind


@pytest.mark.parametrize("origin", [STRANGER, None])
def test_no_answer_to_another_origin_or_none_carries_a_cors_header(client, origin):
    for kind, result in answers(client, origin).items():
        assert result.status_code == int(kind[:3]), kind
        assert cors_headers(result) == {}, kind
        assert result.headers["vary"] == "Origin", kind


def test_a_503_lets_a_listed_page_read_when_to_try_again():
    client = client_for((SHOP,), UnavailableStore())
    result = client.simulate_post(
        "/plants",
        json={"id": 1, "name": "fern"},
        headers={**AUTH, "Origin": SHOP},
        extras={"wsgi.errors": io.StringIO()},
    )
    assert result.status_code == 503
    assert result.headers["retry-after"] == "1"
    assert result.headers["access-control-allow-origin"] == SHOP
    assert result.headers["access-control-expose-headers"] == EXPOSED
    assert result.headers["vary"] == "Origin"


def test_a_body_cut_short_lets_a_listed_page_read_the_400():
    client = client_for((SHOP,))
    body = b'{"id": 1, "name": "fern"}'
    environ = falcon.testing.create_environ(
        method="POST", path="/plants", body=body, headers={**AUTH, "Origin": SHOP}
    )
    environ["CONTENT_LENGTH"] = str(len(body) + 10)
    result = falcon.testing.StartResponseMock()
    b"".join(client.app(environ, result))
    assert result.status.startswith("400")
    assert result.headers_dict["access-control-allow-origin"] == SHOP


def test_any_origin_with_a_star_but_never_with_credentials():
    client = client_for(("*",))
    result = preflight(client, "/plants", STRANGER)
    assert result.headers["access-control-allow-origin"] == "*"
    assert result.headers["access-control-allow-headers"] == ALLOWED_HEADERS
    assert "access-control-allow-credentials" not in result.headers
    created = client.simulate_post(
        "/plants", json={"id": 1, "name": "fern"}, headers={**AUTH, "Origin": STRANGER}
    )
    assert created.status_code == 200
    assert created.headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in created.headers
    assert created.headers["vary"] == "Origin"


def test_cors_is_off_by_default():
    config = Config.from_env({"PLANTSTORE_TOKENS": TOKEN})
    assert config.cors_origins == ()
    client = falcon.testing.TestClient(create_app(config, MemoryStore()))
    result = preflight(client, "/plants", SHOP)
    assert result.status_code == 204
    assert cors_headers(result) == {}
    assert "vary" not in result.headers
    created = client.simulate_post(
        "/plants", json={"id": 1, "name": "fern"}, headers={**AUTH, "Origin": SHOP}
    )
    assert cors_headers(created) == {}
    assert "vary" not in created.headers


@pytest.mark.parametrize(
    ("raw", "origins"),
    [
        (f"{SHOP},{DEV}", (SHOP, DEV)),
        (f" {SHOP} , ,{DEV}, ", (SHOP, DEV)),
        ("http://127.0.0.1:8080,http://[::1]:3000", ("http://127.0.0.1:8080", "http://[::1]:3000")),
        ("https://xn--bcher-kva.example", ("https://xn--bcher-kva.example",)),
        ("app://plant-client", ("app://plant-client",)),
        ("*", ("*",)),
        ("", ()),
    ],
)
def test_origins_are_read_from_the_environment(raw, origins):
    environ = {"PLANTSTORE_TOKENS": TOKEN, "PLANTSTORE_CORS_ORIGINS": raw}
    assert Config.from_env(environ).cors_origins == origins


@pytest.mark.parametrize(
    "origin",
    [
        "shop.example",
        "https://shop.example/",
        "https://shop.example/app",
        "https://shop.example?x=1",
        "https://shop.example#top",
        "https://user@shop.example",
        "HTTPS://shop.example",
        "https://Shop.example",
        "https://shop.example:443",
        "http://localhost:80",
        "https://shop.example:0",
        "https://shop.example:65536",
        "https://shop example",
        "https://",
        "null",
        "*.example",
        "https://*.shop.example",
    ],
)
def test_an_origin_not_written_as_a_browser_sends_it_is_refused(origin):
    environ = {"PLANTSTORE_TOKENS": TOKEN, "PLANTSTORE_CORS_ORIGINS": f"{SHOP},{origin}"}
    with pytest.raises(ConfigError) as refused:
        Config.from_env(environ)
    message = str(refused.value)
    assert message.startswith("PLANTSTORE_CORS_ORIGINS must list origins as a browser sends them")
    assert message.endswith(f"not {origin!r}")


def test_a_star_among_origins_is_refused():
    environ = {"PLANTSTORE_TOKENS": TOKEN, "PLANTSTORE_CORS_ORIGINS": f"{SHOP},*"}
    with pytest.raises(ConfigError, match="or be \\* alone; not '\\*'"):
        Config.from_env(environ)


@pytest.mark.slow
def test_a_bad_origin_stops_gunicorn_with_one_line_naming_the_variable():
    result = run_to_exit(
        "--check-config", PLANTSTORE_TOKENS=TOKEN, PLANTSTORE_CORS_ORIGINS="https://shop/"
    )
    assert result.returncode != 0
    assert result.stderr.strip() == (
        "plantstore: PLANTSTORE_CORS_ORIGINS must list origins as a browser sends them, "
        "scheme://host[:port] in lower case without a path or the default port "
        "(https://shop.example), or be * alone; not 'https://shop/'"
    )
