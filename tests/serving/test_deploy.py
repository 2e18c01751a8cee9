"""The shipped nginx site agrees with the service it fronts, setting for setting."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import falcon.testing
from gunicorn.config import Config as GunicornConfig

from plantstore.api.errors import RETRY_AFTER_SECONDS
from plantstore.app import create_app
from plantstore.config import DEFAULT_MAX_BODY_BYTES, Config
from plantstore.stores.memory import MemoryStore
from plantstore.testing.gunicorn_server import ROOT
from plantstore.tokens.accepted import Tokens
from tests.conftest import TOKEN
from tests.support.nginx_proxy import (
    DEBIAN_NGINX,
    SITE,
    readme_deployment,
    readme_nginx_steps,
    unit_gunicorn_flags,
    unit_settings,
)
from tests.support.site_text import block, error_pages, page, setting

NGINX_SIZE = re.compile(r"(\d+)([km]?)")

#: Every status nginx answers for itself, in front of this service: 494 is its own code for a
#: head over its buffers, answered as 431; 502 to 504 mean gunicorn is down or too slow.
NGINX_REFUSALS = {400, 404, 405, 408, 413, 414, 429, 494, 500, 501, 502, 503, 504, 505}


def nginx_bytes(size: str) -> int:
    number, unit = NGINX_SIZE.fullmatch(size).groups()
    return int(number) * {"": 1, "k": 2**10, "m": 2**20}[unit]


def service() -> falcon.testing.TestClient:
    return falcon.testing.TestClient(create_app(Config(tokens=frozenset({TOKEN})), MemoryStore()))


def test_the_sites_body_limit_is_the_services_default_and_bounds_the_proxied_location():
    proxied = block("    location /")
    assert nginx_bytes(setting("client_max_body_size", proxied)) == DEFAULT_MAX_BODY_BYTES
    assert nginx_bytes(setting("client_body_buffer_size", proxied)) == DEFAULT_MAX_BODY_BYTES
    # Outside it, an error page answers whatever body the refused request announced.
    server = SITE.read_text().replace(proxied, "")
    assert setting("client_max_body_size", server) == "0"


def test_every_refusal_nginx_makes_is_answered_with_the_json_error_body():
    pages = error_pages()
    assert set(pages) == NGINX_REFUSALS
    assert pages[494][0] == "=431"
    assert {pages[code][0] for code in (502, 503, 504)} == {"=503"}
    for code, (answered, uri) in pages.items():
        if code == 405:
            continue  # the service's own answer: see below
        # A named @location would answer a refused request line with nginx's 500.
        assert uri.startswith("/"), uri
        status, body, location = page(uri)
        assert status == int(answered.lstrip("=") or code)
        assert body.keys() == {"error", "message"}
        assert body["error"] == status
        assert body["message"]
        assert "\n        internal;\n" in location
        assert "\n        default_type application/json;\n" in location


def test_nginxs_405_for_trace_is_the_services_answer_with_the_paths_allow():
    answered, uri = error_pages()[405]
    assert answered == "="
    location = block(f"    location = {uri}")
    assert "\n        internal;\n" in location
    assert "\n        proxy_method TRACE;\n" in location
    assert '\n        proxy_set_body "";\n' in location
    assert "\n        proxy_pass http://plantstore$request_uri;" in location
    assert "proxy_set_header" not in location


def test_the_sites_413_is_the_one_the_service_answers():
    answer = service().simulate_post(
        "/plants",
        body=b"x" * (DEFAULT_MAX_BODY_BYTES + 1),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    assert answer.status_code == 413
    assert page(error_pages()[413][1])[1] == answer.json


def test_the_sites_404_for_its_own_pages_is_the_one_the_service_answers_an_unknown_path():
    answer = service().simulate_get("/.plantstore-errors/400")
    assert answer.status_code == 404
    assert page(error_pages()[404][1])[1] == answer.json


def test_the_sites_503_says_when_to_retry_as_the_services_does():
    location = page(error_pages()[502][1])[2]
    assert f"\n        add_header Retry-After {RETRY_AFTER_SECONDS} always;\n" in location


#: What gunicorn and the app take from a trusted proxy: none may pass from the client as sent.
FORWARDED = {
    "X-Forwarded-For": "$remote_addr",
    "X-Forwarded-Proto": "$scheme",
    "X-Forwarded-Ssl": '""',
    "X-Forwarded-Protocol": '""',
    "X-Forwarded-Host": '""',
    "X-Forwarded-Port": '""',
    "Forwarded": '""',
    "SCRIPT_NAME": '""',
    "PATH_INFO": '""',
}


def test_the_proxy_sets_or_blanks_every_forwarded_header():
    """In the server block, for every location that passes requests on (none sets its own)."""
    assert "proxy_set_header" not in block("    location /")
    for name, value in FORWARDED.items():
        assert setting(f"proxy_set_header {name}") == value


def test_the_proxy_buffers_requests_and_answers_and_bounds_slow_clients():
    assert setting("proxy_request_buffering") == "on"
    assert setting("proxy_buffering") == "on"
    for timeout in ("client_header_timeout", "client_body_timeout", "send_timeout"):
        assert re.fullmatch(r"\d+s", setting(timeout))


def test_gunicorn_behind_the_site_never_refuses_a_head_that_nginx_passes_on():
    """gunicorn's refusals are its own words in HTML: nginx must refuse first, in JSON."""
    server = GunicornConfig()
    flags = server.parser().parse_args(unit_gunicorn_flags())
    for name, value in vars(flags).items():
        if value is not None and name in server.settings:
            server.set(name, value)
    number, size = setting("large_client_header_buffers").split()
    buffers, size = int(number), nginx_bytes(size)
    # A line, CRLF included, fits in one buffer; so does each field.
    assert size - 2 <= server.limit_request_line
    assert size <= server.limit_request_field_size
    # The shortest field is `a:` and its CRLF; nginx adds a few of its own (Host, X-Forwarded-*).
    assert buffers * size // 4 + len(FORWARDED) + 2 <= server.limit_request_fields


def test_the_unit_and_the_site_meet_on_one_socket():
    command = unit_settings()["ExecStart"].split()
    bind = command[command.index("--bind") + 1]
    assert f"server {bind} " in SITE.read_text()


def test_the_readmes_how_to_puts_everything_where_the_unit_looks_for_it():
    unit, commands = unit_settings(), readme_deployment()
    home = f"/var/lib/{unit['StateDirectory']}"
    assert f"useradd --system --home-dir {home} " in commands
    assert unit["User"] == unit["StateDirectory"]
    assert unit["WorkingDirectory"] == home
    assert unit["PLANTSTORE_STORE"] == f"sqlite:///{home}/plants.db"
    venv = unit["ExecStart"].partition(" serve ")[0].removesuffix("/bin/plantstore")
    assert f"\n/usr/bin/python3 -m venv {venv} && {venv}/bin/pip install .\n" in commands
    assert f"\n{venv}/bin/plantstore token --name " in commands
    assert f"/dev/stdin {unit['PLANTSTORE_TOKENS_FILE']}\n" in commands


def test_the_readmes_how_to_copies_files_of_the_checkout_and_not_the_checkout():
    """pip installs the project: a copy would take `.git`, the checkout's venv and caches."""
    copies = re.findall(r"\bcp (.+?)(?= &&|$)", readme_deployment(), flags=re.M)
    assert copies
    for copy in copies:
        *sources, _ = shlex.split(copy)
        assert all((ROOT / source).is_file() for source in sources), copy


def test_the_readmes_tokens_file_holds_a_digest_and_its_request_sends_the_token(tmp_path):
    """The README's own token steps, run with its paths moved here: the file holds the line
    `plantstore token` printed, which keeps the token's digest alone, and the request sends
    the token, which that file accepts."""
    unit = unit_settings()
    venv = unit["ExecStart"].partition(" serve ")[0].removesuffix("/bin/plantstore")
    moved = {
        f"{venv}/bin/": f"{Path(sys.executable).parent}/",
        unit["PLANTSTORE_TOKENS_FILE"]: str(tmp_path / "tokens"),
        "/root/": f"{tmp_path}/",
        " -g plantstore": "",
    }
    lines = readme_deployment().splitlines()
    steps = [line for line in lines if "plantstore token" in line or "/dev/stdin" in line]
    (request,) = [line for line in lines if line.startswith("curl ")]
    (sent,) = re.findall(r'"Authorization: Bearer (\$\([^)]*\))"', request)
    script = "\n".join([*steps, f'printf %s "{sent}"'])
    for path, here in moved.items():
        script = script.replace(path, here)
    token = subprocess.run(
        ["bash", "-ec", script], capture_output=True, text=True, check=True
    ).stdout
    (line,) = (tmp_path / "tokens").read_text().splitlines()
    assert re.fullmatch(r"sha256:[0-9a-f]{64} name=\S+", line)
    assert token not in line
    assert Tokens([], str(tmp_path / "tokens")).find(token.encode()) is not None


def test_the_site_is_the_default_server_of_its_port():
    """What nginx refuses before it has read a Host is then the site's to answer."""
    assert setting("listen") == "80 default_server"


def test_the_readmes_how_to_removes_debians_default_site_before_nginx_checks_the_site():
    """Debian's default site is port 80's default server too: `nginx -t` would fail."""
    commands = readme_deployment().splitlines()
    removal = f"rm -f {DEBIAN_NGINX}/sites-enabled/default"
    assert removal in readme_nginx_steps()
    assert commands.index(removal) < commands.index("nginx -t && systemctl reload nginx")


def test_the_methods_the_site_passes_on_are_the_ones_the_service_answers():
    """nginx refuses any other with the service's own 405: none that a path allows."""
    (allowed,) = re.findall(
        r"^\s*if \(\$request_method !~ \^\(([A-Z|]+)\)\$\) \{$", SITE.read_text(), re.M
    )
    client = service()
    answered = set()
    for path in client.simulate_get("/openapi.json").json["paths"]:
        answer = client.simulate_options(path.replace("{id}", "1"))
        answered |= set(answer.headers["allow"].split(", "))
    assert set(allowed.split("|")) == answered


def test_the_upstreams_comment_shows_how_to_list_several_hosts():
    """A `server` line for each host, as tests/support/nginx_proxy.py renders them, the unit's
    gunicorn bound to TCP on one of them, and its FORWARDED_ALLOW_IPS naming nginx's hosts."""
    site = SITE.read_text()
    comment = site[: site.index("\nupstream plantstore {")].rsplit("\n\n", 1)[1]
    hosts = re.findall(r"^#     server (\d+\.\d+\.\d+\.\d+:\d+);$", comment, re.MULTILINE)
    assert len(hosts) >= 2
    assert f"`plantstore serve --bind {hosts[0]}`" in comment
    assert re.search(r"`Environment=FORWARDED_ALLOW_IPS=[\d.,]+`", comment)


def test_nginx_keeps_its_connections_to_gunicorn_for_less_time_than_gunicorn_does():
    """Else nginx could send a request on a connection gunicorn has just closed."""
    site = SITE.read_text()
    start = site.index("\nupstream plantstore {\n")
    upstream = site[start : site.index("\n}\n", start)]
    assert int(setting("keepalive", upstream)) > 0
    held = int(re.search(r"^keepalive = (\d+)$", (ROOT / "gunicorn.conf.py").read_text(), re.M)[1])
    assert int(setting("keepalive_timeout", upstream).removesuffix("s")) < held
    # nginx speaks HTTP/1.0 to an upstream and says `Connection: close` unless told otherwise.
    assert setting("proxy_http_version") == "1.1"
    assert setting("proxy_set_header Connection") == '""'


def test_a_request_a_host_failed_goes_to_one_other_host_whatever_its_method():
    """On a failed connection or a timeout, not on an answer of the service's own: its 503
    would be every host's, since they share the database."""
    assert setting("proxy_next_upstream").split() == ["error", "timeout", "non_idempotent"]
    assert setting("proxy_next_upstream_tries") == "2"
    assert setting("proxy_connect_timeout") == "2s"
