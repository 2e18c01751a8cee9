"""The real gunicorn serving the real app, over a loopback socket."""

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest

from plantstore.testing.gunicorn_server import (
    GUNICORN,
    PLANTSTORE,
    ROOT,
    TOO_LARGE,
    GunicornServer,
    run_to_exit,
    server_environ,
)
from tests.support.configuration_table import documented_variables
from tests.support.raw_http import exchange, parse_answers
from tests.support.tokens_file import changed_at

TOKEN = "gunicorn-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
#: Each test starts gunicorn, or `plantstore serve`, as a process: the slow set.
pytestmark = pytest.mark.slow


@pytest.fixture
def server():
    running = GunicornServer(server_environ(PLANTSTORE_TOKENS=TOKEN))
    yield running
    running.stop()


def test_the_contract_holds_over_a_real_socket(server):
    status, headers, body = server.request(
        "POST", "/plants", json.dumps({"id": 1, "name": "fern"}), AUTH
    )
    assert (status, json.loads(body)) == (200, {"name": "fern"})
    assert headers["content-type"] == "application/json"

    status, _, body = server.request("POST", "/plants", json.dumps({"id": 1, "name": "rose"}), AUTH)
    assert (status, json.loads(body)["error"]) == (409, 409)

    status, headers, body = server.request("POST", "/plants", json.dumps({"id": 2}), {})
    assert (status, json.loads(body)["error"]) == (401, 401)
    assert headers["www-authenticate"].startswith("Bearer")

    status, _, body = server.request("GET", "/healthz")
    assert (status, json.loads(body)) == (200, {"status": "ok"})


def chunks(total: int, size: int = 1000):
    body = b'{"id": 3, "name": "' + b"x" * (total - 21) + b'"}'
    for start in range(0, len(body), size):
        yield body[start : start + size]


def test_a_chunked_body_within_the_limit_is_served(server):
    connection = server.connect()
    connection.request("POST", "/plants", body=chunks(5000), headers=AUTH, encode_chunked=True)
    response = connection.getresponse()
    assert response.status == 200
    assert json.loads(response.read()) == {"name": "x" * 4979}
    connection.close()


def test_a_chunked_body_over_the_limit_is_413(server):
    connection = server.connect()
    connection.request("POST", "/plants", body=chunks(70_000), headers=AUTH, encode_chunked=True)
    response = connection.getresponse()
    assert response.status == 413
    assert json.loads(response.read()) == TOO_LARGE
    connection.close()
    assert server.request("GET", "/healthz")[0] == 200


def test_openapi_servers_is_a_trusted_proxys_prefix(server):
    headers = {"Host": "plants.example", "X-Forwarded-Proto": "https"}
    _, _, body = server.request("GET", "/openapi.json", headers=headers)
    assert json.loads(body)["servers"] == [{"url": "/"}]

    headers["SCRIPT_NAME"] = "/api"
    _, _, body = server.request("GET", "/api/openapi.json", headers=headers)
    assert json.loads(body)["servers"] == [{"url": "/api"}]


def test_the_access_log_has_a_line_per_request_and_no_token(server):
    server.request("POST", "/plants", json.dumps({"id": 5, "name": "fern"}), AUTH)
    server.request("POST", "/plants", "{}", {**AUTH, "X-Request-ID": "trace-me-1"})
    server.request("GET", "/nowhere?token=" + TOKEN, headers=AUTH)
    stdout, stderr = server.stop()

    lines = stdout.splitlines()
    assert len(lines) == 3
    line = re.compile(
        r'127\.0\.0\.1 request_id=(\S+) token=(\S+) "(\w+) (\S+)" status=(\d+) duration_us=\d+'
    )
    fields = [line.fullmatch(entry).groups() for entry in lines]
    # A line is written after its answer is sent, so the next request may be logged first.
    assert sorted((method, path, status) for _, _, method, path, status in fields) == [
        ("GET", "/nowhere", "404"),
        ("POST", "/plants", "200"),
        ("POST", "/plants", "400"),
    ]
    assert ("trace-me-1", "PLANTSTORE_TOKENS-1", "POST", "/plants", "400") in fields
    assert TOKEN not in stdout + stderr


def test_what_a_client_puts_in_a_logged_path_cannot_forge_a_line_or_drive_a_terminal(server):
    forged = "/x%0D%0A127.0.0.1%20request_id=forged%20%22DELETE%20/plants/1%22%20status=204"
    server.request("GET", forged, headers=AUTH)
    server.request("GET", "/%1B[2K%1B[1A", headers=AUTH)
    stdout, _ = server.stop()

    lines = stdout.splitlines()
    assert len(lines) == 2
    assert all(line.startswith("127.0.0.1 request_id=") for line in lines)
    assert "\x1b" not in stdout
    paths = sorted(re.search(r'"GET (.*)" status=404', line)[1] for line in lines)
    assert paths == [
        "/\\x1b[2K\\x1b[1A",
        '/x\\x0d\\x0a127.0.0.1 request_id=forged \\"DELETE /plants/1\\" status=204',
    ]


def test_with_no_token_configured_one_is_made_into_a_private_file_that_the_log_names(tmp_path):
    """The token itself never reaches the console: under a service manager that is the log."""
    server = GunicornServer(server_environ(TMPDIR=str(tmp_path)))
    try:
        token_file = Path(server.wait_for_stderr(r"accepts the one in (\S+)").group(1))
        assert token_file.parent == tmp_path
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert len(token) >= 32
        plant = json.dumps({"id": 1, "name": "fern"})
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        assert server.request("POST", "/plants", plant, headers)[0] == 200
        assert server.request("POST", "/plants", plant, {**headers, "Authorization": "x"})[0] == 401
    finally:
        stdout, stderr = server.stop()
    assert token not in stdout + stderr
    assert not token_file.exists()


run_gunicorn = partial(run_to_exit, PLANTSTORE_TOKENS=TOKEN)


def test_the_configuration_checks_out():
    assert run_gunicorn("--check-config").returncode == 0


def test_more_than_one_worker_with_the_memory_store_is_refused():
    result = run_gunicorn("--bind=127.0.0.1:0", WEB_CONCURRENCY="2")
    assert result.returncode != 0
    assert "one worker" in result.stderr


WHOLE = "must be a whole number"

#: For every PLANTSTORE_* variable in docs/configuration.md's table, a bad value and the one
#: line that refuses it ({tmp} is the test's directory).
BAD_SETTINGS = {
    "PLANTSTORE_TOKENS": (
        "tok," + "longer-than-the-edge-keys" * 6,
        "PLANTSTORE_TOKENS must list tokens of 1 to 128 printable ASCII characters without "
        "spaces, separated by commas",
    ),
    "PLANTSTORE_TOKENS_FILE": (
        "{tmp}/missing",
        "PLANTSTORE_TOKENS_FILE cannot be read: {tmp}/missing: No such file or directory",
    ),
    "PLANTSTORE_MAX_BODY_BYTES": (
        "0",
        f"PLANTSTORE_MAX_BODY_BYTES {WHOLE} from 1 to 16777216, not '0'",
    ),
    "PLANTSTORE_CORS_ORIGINS": (
        "https://Shop.example/",
        "PLANTSTORE_CORS_ORIGINS must list origins as a browser sends them, scheme://host[:port] "
        "in lower case without a path or the default port (https://shop.example), or be * "
        "alone; not 'https://Shop.example/'",
    ),
    "PLANTSTORE_METRICS_PUBLIC": ("yes", "PLANTSTORE_METRICS_PUBLIC must be 1 or 0, not 'yes'"),
    "PLANTSTORE_STORE": (
        "sqlite:///{tmp}/missing/plants.db",
        "PLANTSTORE_STORE names a SQLite file in {tmp}/missing, which is not a directory: "
        "make it first",
    ),
    "PLANTSTORE_STORE_WAIT": ("-1", f"PLANTSTORE_STORE_WAIT {WHOLE} from 0 to 3600, not '-1'"),
    "PLANTSTORE_LOG_FORMAT": ("xml", "PLANTSTORE_LOG_FORMAT must be text or json, not 'xml'"),
    "PLANTSTORE_WEBHOOK_URLS": (
        "ftp://user:hunter2@shop.example/",
        "PLANTSTORE_WEBHOOK_URLS must list http:// or https:// URLs with a host, separated by "
        "commas: URL 1 is not one",
    ),
    "PLANTSTORE_WEBHOOK_SECRET": (
        "whsec_hunter2!",
        "PLANTSTORE_WEBHOOK_SECRET must be whsec_ followed by a non-empty base64 key "
        "(the Standard Webhooks form)",
    ),
    "PLANTSTORE_WEBHOOK_TIMEOUT": (
        "0",
        f"PLANTSTORE_WEBHOOK_TIMEOUT {WHOLE} from 1 to 300, not '0'",
    ),
    "PLANTSTORE_WEBHOOK_GIVE_UP_AFTER": (
        "a day",
        f"PLANTSTORE_WEBHOOK_GIVE_UP_AFTER {WHOLE} from 0 to 2592000, not 'a day'",
    ),
    "PLANTSTORE_EVENTS_RETENTION": (
        "59",
        f"PLANTSTORE_EVENTS_RETENTION {WHOLE} from 60 to 31622400, not '59'",
    ),
}

#: gunicorn's own variables in docs/configuration.md's table, a bad value of each, and the line that
#: refuses it: `plantstore serve` checks them before gunicorn loads. `gunicorn -c` reads
#: `WEB_CONCURRENCY` and `FORWARDED_ALLOW_IPS` as it loads, before gunicorn.conf.py, and
#: refuses them in its own words; `PORT` it binds after the hooks check it.
GUNICORNS_OWN = {
    "PORT": ("99999", "plantstore: PORT must be a whole number from 1 to 65535, not '99999'", None),
    "WEB_CONCURRENCY": (
        "-1",
        "plantstore: WEB_CONCURRENCY must be a whole number of at least 1, not '-1'",
        "Error: Value must be positive: -1",
    ),
    "FORWARDED_ALLOW_IPS": (
        "proxy.local",
        "plantstore: FORWARDED_ALLOW_IPS must list IP addresses or networks (10.0.0.0/8, without "
        "host bits), separated by commas, or *: not 'proxy.local'",
        "Error: 'proxy.local' does not appear to be an IPv4 or IPv6 network",
    ),
}

#: The two ways to start, which must be the same thing.
STARTS = {
    "gunicorn -c gunicorn.conf.py": dict(command=GUNICORN, cwd=ROOT),
    "plantstore serve": dict(command=[PLANTSTORE, "serve"], cwd=None),
}


def test_every_documented_variable_has_a_bad_value_tried_below():
    assert documented_variables() == set(BAD_SETTINGS) | set(GUNICORNS_OWN)


def start(tmp_path, how: str, *args: str, **environ) -> subprocess.CompletedProcess:
    """Start the real server one way or the other, as a user would (no --check-config)."""
    way = STARTS[how]
    bind = () if "PORT" in environ else ("--bind=127.0.0.1:0",)
    return run_to_exit(
        *bind,
        *args,
        command=way["command"],
        cwd=way["cwd"] or tmp_path,
        **{"PLANTSTORE_TOKENS": TOKEN, "TMPDIR": str(tmp_path), **environ},
    )


def own_lines(result) -> list[str]:
    """What the start printed besides gunicorn's own log lines (`Starting gunicorn ...`)."""
    return [line for line in result.stderr.splitlines() if "[gunicorn.error] [INFO]" not in line]


@pytest.mark.parametrize("how", STARTS)
@pytest.mark.parametrize(
    ("name", "value", "line"), [(n, *v) for n, v in BAD_SETTINGS.items()], ids=list(BAD_SETTINGS)
)
def test_a_bad_setting_stops_either_start_with_one_line_naming_it(tmp_path, how, name, value, line):
    result = start(tmp_path, how, **{name: value.format(tmp=tmp_path)})
    assert result.returncode != 0
    assert own_lines(result) == [f"plantstore: {line.format(tmp=tmp_path)}"]


@pytest.mark.parametrize(
    ("name", "value", "line"),
    [
        ("PLANTSTORE_TOKENS", " , ", "PLANTSTORE_TOKENS and PLANTSTORE_TOKENS_FILE name no token"),
        ("GUNICORN_THREADS", "lots", f"GUNICORN_THREADS {WHOLE} of at least 1, not 'lots'"),
        ("WEB_CONCURRENCY", "0", f"WEB_CONCURRENCY {WHOLE} of at least 1, not '0'"),
        ("GUNICORN_CMD_ARGS", "--workers 0", "gunicorn's workers must be at least 1, not 0"),
    ],
)
def test_other_bad_values_stop_the_start_with_one_line_too(tmp_path, name, value, line):
    result = start(tmp_path, "gunicorn -c gunicorn.conf.py", **{name: value})
    assert result.returncode != 0
    assert own_lines(result) == [f"plantstore: {line}"]


def test_a_bad_line_in_the_tokens_file_stops_the_start_naming_the_file_and_line(tmp_path):
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("# robots\nrobot-1\nsecret token\n")
    result = start(tmp_path, "plantstore serve", PLANTSTORE_TOKENS_FILE=str(tokens_file))
    assert result.returncode != 0
    assert own_lines(result) == [
        f"plantstore: PLANTSTORE_TOKENS_FILE: {tokens_file}, line 3: a field after the token is "
        "name=... or scopes=..."
    ]


def test_a_start_warns_of_a_tokens_file_that_every_user_may_read_and_that_holds_tokens(
    tmp_path,
):
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("robot-token-1 name=robot\n")
    tokens_file.chmod(0o644)
    server = GunicornServer(server_environ(PLANTSTORE_TOKENS_FILE=str(tokens_file)))
    try:
        robot = {"Authorization": "Bearer robot-token-1"}
        assert server.request("GET", "/plants/1", headers=robot)[0] == 404
    finally:
        _, stderr = server.stop()
    warnings = [line for line in stderr.splitlines() if "[WARNING]" in line]
    assert [line.partition("[WARNING] ")[2] for line in warnings] == [
        f"plantstore: PLANTSTORE_TOKENS_FILE: {tokens_file} holds tokens in plain text and every "
        "user may read it: keep their digests instead (the lines plantstore token prints), or "
        f"chmod o-r {tokens_file}"
    ]
    assert "robot-token-1" not in stderr


def test_a_tokens_file_without_its_last_newline_stops_the_start_saying_to_end_it_with_one(
    tmp_path,
):
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("robot-1\nrobot-2")
    result = start(tmp_path, "plantstore serve", PLANTSTORE_TOKENS_FILE=str(tokens_file))
    assert result.returncode != 0
    assert own_lines(result) == [
        f"plantstore: PLANTSTORE_TOKENS_FILE: {tokens_file} must end with a newline: its last "
        "line has none, as in a file still being written"
    ]


@pytest.mark.parametrize("how", STARTS)
@pytest.mark.parametrize(
    ("name", "value", "ours", "gunicorns"),
    [(n, *v) for n, v in GUNICORNS_OWN.items()],
    ids=list(GUNICORNS_OWN),
)
def test_gunicorns_own_variables_stop_either_start_with_one_line(
    tmp_path, how, name, value, ours, gunicorns
):
    result = start(tmp_path, how, **{name: value})
    assert result.returncode != 0
    if how == "plantstore serve" or gunicorns is None:
        assert own_lines(result) == [ours]
    else:
        assert result.stderr.strip().splitlines()[-1] == gunicorns


def test_an_unknown_store_stops_the_start_with_one_line_naming_it():
    result = run_gunicorn("--check-config", PLANTSTORE_STORE="sqlite://plants.db")
    assert result.returncode != 0
    assert result.stderr.strip() == (
        "plantstore: PLANTSTORE_STORE must be memory://, sqlite:///relative/path, "
        "sqlite:////absolute/path or postgresql://..."
    )


def test_a_sqlite_file_that_cannot_be_used_stops_the_start_with_one_line(tmp_path, unusable_sqlite):
    """Rather than a traceback from the master, or each worker's and `Worker failed to boot`."""
    url, line = unusable_sqlite
    result = start(tmp_path, "gunicorn -c gunicorn.conf.py", PLANTSTORE_STORE=url)
    assert result.returncode != 0
    assert own_lines(result) == [line]


@pytest.mark.parametrize(("store", "workers"), [("memory", 1), ("sqlite", os.cpu_count())])
def test_workers_default_to_one_for_the_memory_store_and_the_cores_for_a_shared_one(
    tmp_path, store, workers
):
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'plants.db'}"
    result = run_gunicorn("--print-config", PLANTSTORE_STORE=url)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^workers +=\s*(\d+)$", result.stdout, re.MULTILINE).group(1) == str(workers)


#: A secret a client puts where it does not belong: it must not come back, nor be logged.
SECRET = "s3cret-in-a-header"


def refused(head: str) -> bytes:
    return head.encode("latin-1") + b"\r\n\r\n"


PLANT = b'{"id": 7, "name": "fern"}'


def post_head(body_length: int, *extra: str) -> bytes:
    return refused(
        "\r\n".join(
            [
                "POST /plants HTTP/1.1",
                "Host: x",
                "Content-Type: application/json",
                f"Content-Length: {body_length}",
                *extra,
            ]
        )
    )


def test_a_body_read_through_keeps_the_connection_for_the_next_request(server):
    raw = post_head(len(PLANT), f"Authorization: Bearer {TOKEN}") + PLANT
    answers = parse_answers(
        exchange(server.port, raw + refused("GET /healthz HTTP/1.1\r\nHost: x"))
    )
    assert [(answer.status, answer.headers["connection"]) for answer in answers] == [
        (200, "keep-alive"),
        (200, "keep-alive"),
    ]


@pytest.mark.parametrize(
    "body",
    [b"g\r\n{}\r\n0\r\n\r\n", b"19\r\n" + PLANT + b"XX0\r\n\r\n", b"19\r\n" + PLANT[:10]],
    ids=["a chunk size that is no hex", "a chunk without its CRLF", "a close mid-chunk"],
)
def test_a_chunked_body_gunicorn_cannot_read_to_its_end_is_the_apps_400(server, body):
    """What gunicorn raises as the app reads (tests/api/test_broken_bodies.py has the why)."""
    head = "POST /plants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += f"Transfer-Encoding: chunked\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    (answer,) = parse_answers(exchange(server.port, head.encode() + body))
    assert (answer.status, answer.json()) == (
        400,
        {
            "error": 400,
            "message": "The body is malformed, or the connection closed before its end.",
        },
    )


#: A line of the error log: time, process, request id, logger, level, message.
ERROR_LOG_LINE = re.compile(
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}\] \[\d+\] request_id=(\S+) \[[\w.]+\] "
    r"\[(DEBUG|INFO|WARNING|ERROR|CRITICAL)\] .*"
)


def test_every_line_of_the_error_log_has_one_format_and_a_503s_cause_its_request_id(
    postgres_cluster,
):
    """The database stops after the start: the pool's attempts are logged, and the request
    waits for a connection in vain, so its cause is logged too."""
    server = GunicornServer(
        server_environ(PLANTSTORE_TOKENS=TOKEN, PLANTSTORE_STORE=postgres_cluster.url())
    )
    try:
        assert server.request("GET", "/readyz")[0] == 200
        postgres_cluster.stop()
        plant = json.dumps({"id": 1, "name": "fern"})
        status, _, _ = server.request("POST", "/plants", plant, {**AUTH, "X-Request-ID": "trace-7"})
    finally:
        stdout, stderr = server.stop()
    assert status == 503
    assert 'request_id=trace-7 token=PLANTSTORE_TOKENS-1 "POST /plants" status=503' in stdout
    lines = stderr.splitlines()
    assert [line for line in lines if not ERROR_LOG_LINE.fullmatch(line)] == []
    causes = [line for line in lines if "store unavailable" in line]
    assert causes
    assert all(ERROR_LOG_LINE.fullmatch(line).group(1) == "trace-7" for line in causes)
    assert any("[psycopg.pool] [WARNING]" in line for line in lines)
    assert TOKEN not in stdout + stderr


OLD_TOKEN = {**AUTH, "Authorization": "Bearer old-token"}


def serve_tokens_file(tmp_path, **environ) -> tuple[GunicornServer, Path]:
    """gunicorn accepting `old-token` from a file, which the test then changes."""
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("old-token\n")
    server = GunicornServer(server_environ(PLANTSTORE_TOKENS_FILE=str(tokens_file), **environ))
    return server, tokens_file


def test_sighup_replaces_the_workers_which_read_the_tokens_file_and_start_empty(
    tmp_path,
):
    server, tokens_file = serve_tokens_file(tmp_path)
    try:
        plant = json.dumps({"id": 1, "name": "fern"})
        new = {**AUTH, "Authorization": "Bearer new-token"}
        assert server.request("POST", "/plants", plant, OLD_TOKEN)[0] == 200
        (first_worker,) = server.worker_pids()
        tokens_file.write_text("new-token\n")

        os.kill(server.pid, signal.SIGHUP)
        warning = server.wait_for_stderr(r".*starts with an empty memory store.*")
        server.wait_for_stderr(rf"Worker exiting \(pid: {first_worker}\)")

        assert server.request("GET", "/plants/1", headers=OLD_TOKEN)[0] == 401
        assert server.request("GET", "/plants/1", headers=new)[0] == 404
    finally:
        _, stderr = server.stop()
    assert ERROR_LOG_LINE.fullmatch(warning.group(0)).group(2) == "WARNING"
    assert stderr.count("starts with an empty memory store") == 1


def replace_file(path: Path, content: str) -> None:
    """Write a new file and rename it over `path`, as a token is best rotated."""
    written = path.with_name(f"{path.name}.new")
    written.write_text(content)
    written.replace(path)


def wait_for_status(server: GunicornServer, path: str, headers: dict, status: int) -> None:
    """Ask until `path` answers `status`: a worker looks at the tokens file at most once a
    second, when a request needs a token. At a gentle pace: the access log goes to a pipe this
    test reads only at the end."""
    deadline = time.monotonic() + 30
    while server.request("GET", path, headers=headers)[0] != status:
        assert time.monotonic() < deadline, f"{path} never answered {status}"
        time.sleep(0.05)


def test_a_rewritten_tokens_file_is_taken_without_a_signal_and_the_workers_serve_on(tmp_path):
    """No SIGHUP: the worker serving reads the file again, and keeps its memory store's plants."""
    server, tokens_file = serve_tokens_file(tmp_path)
    new = {**AUTH, "Authorization": "Bearer new-token"}
    try:
        plant = json.dumps({"id": 1, "name": "fern"})
        assert server.request("POST", "/plants", plant, OLD_TOKEN)[0] == 200
        workers = server.worker_pids()
        replace_file(tokens_file, "new-token\n")
        wait_for_status(server, "/plants/1", new, 200)
        assert server.request("GET", "/plants/1", headers=OLD_TOKEN)[0] == 401
        assert server.worker_pids() == workers
    finally:
        _, stderr = server.stop()
    assert stderr.count(f"plantstore: the changed tokens file is taken: {tokens_file}") == 1
    assert "new-token" not in stderr


def not_taken(tokens_file: Path, good: str) -> str:
    """What the log says of the bad file the tests write, while `good` tokens stay accepted."""
    return (
        "plantstore: the tokens file is not taken, and the tokens of its last good version, "
        f"changed at {good}, stay accepted until it changes: PLANTSTORE_TOKENS_FILE: "
        f"{tokens_file}, line 2: a field after the token is name=... or scopes=..."
    )


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_worker_started_while_the_tokens_file_is_bad_serves_the_last_good_tokens(
    tmp_path, log_format
):
    """The file turns bad, then the worker dies: the master starts another, which serves the
    tokens of the file as it last was good, and says so in one line, until the file is good
    again."""
    server, tokens_file = serve_tokens_file(tmp_path, PLANTSTORE_LOG_FORMAT=log_format)
    good = changed_at(tokens_file)
    new = {**AUTH, "Authorization": "Bearer new-token"}
    try:
        assert server.request("GET", "/plants/1", headers=OLD_TOKEN)[0] == 404
        (worker,) = server.worker_pids()
        tokens_file.write_text("new-token\nnot a token\n")
        os.kill(worker, signal.SIGKILL)
        server.wait_for_stderr("the tokens file is not taken")
        assert server.request("GET", "/plants/1", headers=OLD_TOKEN)[0] == 404
        assert server.request("GET", "/plants/1", headers=new)[0] == 401

        replace_file(tokens_file, "new-token\n")
        wait_for_status(server, "/plants/1", new, 404)
        assert server.request("GET", "/plants/1", headers=OLD_TOKEN)[0] == 401
    finally:
        _, stderr = server.stop()
    lines = stderr.splitlines()
    if log_format == "json":
        messages = [json.loads(line)["message"] for line in lines]
    else:
        assert [line for line in lines if not ERROR_LOG_LINE.fullmatch(line)] == []
        messages = [line.partition("[ERROR] ")[2] for line in lines]
    assert messages.count(not_taken(tokens_file, good)) == 1
    assert "Traceback" not in stderr
    assert "not a token" not in stderr


def test_after_a_sighup_while_the_tokens_file_is_bad_every_worker_serves_the_last_good_tokens(
    tmp_path,
):
    """`systemctl reload` is a SIGHUP: the new workers find the file bad, and serve what it
    held when last good, rather than refuse every token of the file. The run keeps it in a
    directory of its own, which only its user may enter, and which it removes as it stops; a
    start removes those of masters killed before they could."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    (temporary / f"plantstore-tokens-{ended.pid}-a1b2c3").mkdir()
    server, tokens_file = serve_tokens_file(
        tmp_path,
        PLANTSTORE_STORE=f"sqlite:///{tmp_path / 'plants.db'}",
        WEB_CONCURRENCY="2",
        TMPDIR=str(temporary),
    )
    good = changed_at(tokens_file)
    try:
        assert server.request("GET", "/plants/1", headers=OLD_TOKEN)[0] == 404
        (kept_in,) = temporary.glob("plantstore-tokens-*")
        assert stat.S_IMODE(kept_in.stat().st_mode) == 0o700
        assert "old-token" not in (kept_in / "tokens").read_text()
        first_workers = server.worker_pids()
        tokens_file.write_text("new-token\nnot a token\n")
        os.kill(server.pid, signal.SIGHUP)
        for worker in first_workers:  # which then accept no more requests
            server.wait_for_stderr(rf"Worker exiting \(pid: {worker}\)")
        answers = [server.request("GET", "/plants/1", headers=OLD_TOKEN)[0] for _ in range(40)]
        assert answers == [404] * 40
    finally:
        _, stderr = server.stop()
    assert stderr.count(not_taken(tokens_file, good)) == 1
    assert "not a token" not in stderr
    assert not kept_in.exists()


def test_a_memory_store_worker_restarted_by_the_master_warns_it_starts_empty():
    """The plant the killed worker kept is gone: its id takes other content."""
    server = GunicornServer(server_environ(PLANTSTORE_TOKENS=TOKEN))
    try:
        fern, rose = (json.dumps({"id": 1, "name": name}) for name in ("fern", "rose"))
        assert server.request("POST", "/plants", fern, AUTH)[0] == 200
        (first_worker,) = server.worker_pids()
        os.kill(first_worker, signal.SIGKILL)
        server.wait_for_stderr(r"\[WARNING\] plantstore: this worker starts with an empty memory")
        assert server.request("POST", "/plants", rose, AUTH)[0] == 200
    finally:
        _, stderr = server.stop()
    assert stderr.count("starts with an empty memory store") == 1


def test_the_error_log_keeps_its_format_in_a_file_named_by_the_error_logfile_flag(tmp_path):
    error_log = tmp_path / "error.log"
    server = GunicornServer(server_environ(PLANTSTORE_TOKENS=TOKEN), f"--error-logfile={error_log}")
    try:
        assert server.request("GET", "/healthz")[0] == 200
    finally:
        _, stderr = server.stop()
    assert stderr == ""
    lines = error_log.read_text().splitlines()
    assert any("[INFO] Booting worker" in line for line in lines)
    assert [line for line in lines if not ERROR_LOG_LINE.fullmatch(line)] == []


ACCESS_KEYS = {
    "time",
    "request_id",
    "client",
    "token",
    "method",
    "path",
    "route",
    "status",
    "duration_us",
}
ERROR_KEYS = {"time", "level", "logger", "process", "request_id", "message"}


def test_with_json_logs_every_line_of_both_logs_is_one_object_and_no_token_is_in_them():
    server = GunicornServer(server_environ(PLANTSTORE_TOKENS=TOKEN, PLANTSTORE_LOG_FORMAT="json"))
    try:
        plant = json.dumps({"id": 1, "name": 'a "fern"'})
        traced = {**AUTH, "X-Request-ID": "trace-json"}
        assert server.request("POST", "/plants", plant, traced)[0] == 200
        wrong = {**AUTH, "Authorization": f"Bearer {SECRET}"}
        assert server.request("GET", f'/plants/"1?token={SECRET}', headers=wrong)[0] == 401
        assert server.request("GET", "/nowhere", headers=AUTH)[0] == 404
        raw = refused(f"GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization Bearer {SECRET}")
        (answer,) = parse_answers(exchange(server.port, raw))
        assert answer.status == 400
    finally:
        stdout, stderr = server.stop()
    assert TOKEN not in stdout + stderr
    assert SECRET not in stdout + stderr

    access = [json.loads(line) for line in stdout.splitlines()]
    assert all(entry.keys() == ACCESS_KEYS for entry in access)
    assert all(entry["client"] == "127.0.0.1" and entry["duration_us"] > 0 for entry in access)
    assert sorted(
        (
            (
                entry["status"],
                entry["request_id"] == "trace-json",
                entry["method"],
                entry["path"],
                entry["route"],
            )
            for entry in access
        ),
        key=lambda fields: fields[0],
    ) == [
        (200, True, "POST", "/plants", "/plants"),
        (401, False, "GET", '/plants/"1', "/plants/{plant_id}"),
        (404, False, "GET", "/nowhere", None),
    ]

    errors = [json.loads(line) for line in stderr.splitlines()]
    assert all(entry.keys() == ERROR_KEYS for entry in errors)
    (warning,) = [entry for entry in errors if "Invalid request" in entry["message"]]
    assert warning["message"] == (
        "Invalid request from ip=127.0.0.1: malformed (not quoted: it may hold a token)"
    )
    assert warning["level"] == "WARNING"
    assert any(entry["message"].startswith("Booting worker") for entry in errors)


def test_with_json_logs_the_legacy_variables_warning_is_one_object_too():
    """gunicorn.conf.py warns of the `GUNICORN_*` variables before gunicorn's log is set up."""
    result = run_gunicorn("--check-config", GUNICORN_THREADS="4", PLANTSTORE_LOG_FORMAT="json")
    assert result.returncode == 0, result.stderr
    (entry,) = [json.loads(line) for line in result.stderr.splitlines()]
    assert entry.keys() == ERROR_KEYS
    assert entry["level"] == "WARNING"
    assert entry["message"].startswith("plantstore: the GUNICORN_* variables go after 1.3")


def test_a_stop_while_the_workers_boot_ends_at_once(tmp_path):
    """A worker has the master's signal handlers until gunicorn installs its own, after
    `post_fork`; a SIGTERM that came meanwhile would be lost, and the stop kept waiting for
    gunicorn's graceful timeout (30 s). Here each worker takes a minute between the hook and
    gunicorn's handlers, as a loaded machine may, and the stop still ends within seconds."""
    config = tmp_path / "slow_boot.conf.py"
    config.write_text(
        "import runpy, time\n"
        f"globals().update(runpy.run_path({str(ROOT / 'gunicorn.conf.py')!r}))\n"
        "plantstores_post_fork = post_fork\n"
        "def post_fork(server, worker):\n"
        "    plantstores_post_fork(server, worker)\n"
        "    time.sleep(60)\n"
    )
    url = f"sqlite:///{tmp_path / 'plants.db'}"
    environ = server_environ(PLANTSTORE_TOKENS=TOKEN, PLANTSTORE_STORE=url)
    command = (sys.executable, "-m", "gunicorn", "-c", str(config))
    server = GunicornServer(environ, "--workers=3", command=command)
    try:
        server.wait_for_stderr(r"Booting worker with pid: \d+", count=3)
        began = time.monotonic()
    finally:
        server.stop()
    assert time.monotonic() - began < 10
