"""The shipped nginx site agrees with the service it fronts, setting for setting."""

import re

import falcon.testing

from plantstore.app import create_app
from plantstore.config import DEFAULT_MAX_BODY_BYTES, Config
from tests.conftest import TOKEN
from tests.nginx_proxy import SITE

NGINX_SIZE = re.compile(r"(\d+)([km]?)")


def nginx_bytes(size: str) -> int:
    number, unit = NGINX_SIZE.fullmatch(size).groups()
    return int(number) * {"": 1, "k": 2**10, "m": 2**20}[unit]


def site_setting(name: str) -> str:
    (value,) = re.findall(rf"^\s*{name} ([^;]+);", SITE.read_text(), flags=re.MULTILINE)
    return value


def test_the_sites_body_limit_is_the_services_default():
    assert nginx_bytes(site_setting("client_max_body_size")) == DEFAULT_MAX_BODY_BYTES
    assert nginx_bytes(site_setting("client_body_buffer_size")) == DEFAULT_MAX_BODY_BYTES


def test_the_sites_413_is_the_one_the_service_answers():
    client = falcon.testing.TestClient(create_app(Config(tokens=frozenset({TOKEN}))))
    answer = client.simulate_post(
        "/plants",
        body=b"x" * (DEFAULT_MAX_BODY_BYTES + 1),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    assert answer.status_code == 413
    assert site_setting("return 413") == f"'{answer.text}'"
