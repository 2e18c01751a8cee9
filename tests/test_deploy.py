"""The shipped nginx site agrees with the service it fronts, setting for setting."""

import re

import falcon.testing

from plantstore.app import create_app
from plantstore.config import DEFAULT_MAX_BODY_BYTES, Config
from plantstore.stores.memory import MemoryStore
from tests.conftest import TOKEN
from tests.gunicorn_server import ROOT
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
    client = falcon.testing.TestClient(create_app(Config(tokens=frozenset({TOKEN})), MemoryStore()))
    answer = client.simulate_post(
        "/plants",
        body=b"x" * (DEFAULT_MAX_BODY_BYTES + 1),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    assert answer.status_code == 413
    assert site_setting("return 413") == f"'{answer.text}'"


UNIT = ROOT / "deploy" / "plantstore.service"


def unit_settings() -> dict[str, str]:
    """The unit's `Name=value` lines, `Environment=` ones by the variable they set."""
    settings = {}
    for line in UNIT.read_text().splitlines():
        name, _, value = line.partition("=")
        if name == "Environment":
            name, _, value = value.partition("=")
        if value and not line.startswith("#"):
            settings[name] = value
    return settings


def how_to() -> str:
    """The README's commands that install the unit and the site."""
    readme = (ROOT / "README.md").read_text()
    return readme.split("## Behind nginx", 1)[1].split("```sh", 1)[1].split("```", 1)[0]


def test_the_unit_and_the_site_meet_on_one_socket():
    command = unit_settings()["ExecStart"].split()
    bind = command[command.index("--bind") + 1]
    assert f"server {bind} " in SITE.read_text()


def test_the_readmes_how_to_puts_everything_where_the_unit_looks_for_it():
    unit, commands = unit_settings(), how_to()
    assert f"useradd --system --home-dir /var/lib/{unit['User']} " in commands
    assert f"cp -r . {unit['WorkingDirectory']} && cd {unit['WorkingDirectory']}" in commands
    assert unit["ExecStart"].startswith(f"{unit['WorkingDirectory']}/.venv/bin/plantstore serve")
    assert f"/dev/stdin {unit['PLANTSTORE_TOKENS_FILE']}\n" in commands
    assert f"$(cat {unit['PLANTSTORE_TOKENS_FILE']})" in commands
    assert unit["PLANTSTORE_STORE"] == f"sqlite:////var/lib/{unit['StateDirectory']}/plants.db"
