"""The `plantstore` command, as `pip install` puts it on the PATH, run outside the checkout."""

import hashlib
import json
import re
import socket
import subprocess
import sys

import pytest

from plantstore.testing.gunicorn_server import (
    GUNICORN,
    PLANTSTORE,
    ROOT,
    GunicornServer,
    run_to_exit,
    server_environ,
)

#: Each test runs the command as a process, and several start gunicorn: the slow set.
pytestmark = pytest.mark.slow

ACCESS_LOG_LINE = re.compile(
    r'127\.0\.0\.1 request_id=\S+ token=importer "POST /plants" status=200 duration_us=\d+'
)


def run(command, cwd, **environ) -> subprocess.CompletedProcess:
    return run_to_exit(command=command, cwd=cwd, TMPDIR=str(cwd), **environ)


def test_serve_runs_the_service_from_any_directory_with_a_token_the_command_made(tmp_path):
    """The command prints the token for its client, then the tokens file's line, which holds
    its digest alone."""
    made = run(
        [sys.executable, "-m", "plantstore", "token", "--name", "importer", "--scopes", "write"],
        tmp_path,
    )
    assert made.returncode == 0, made.stderr
    token, line = made.stdout.splitlines()
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token)
    assert re.fullmatch(r"sha256:[0-9a-f]{64} name=importer scopes=write", line)
    assert line.split()[0] == "sha256:" + hashlib.sha256(token.encode()).hexdigest()
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text(f"{line}\n")

    server = GunicornServer(
        server_environ(PLANTSTORE_TOKENS_FILE=str(tokens_file)),
        command=(PLANTSTORE, "serve"),
        cwd=tmp_path,
    )
    try:
        plant = json.dumps({"id": 1, "name": "fern"})
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        status, _, body = server.request("POST", "/plants", plant, headers)
    finally:
        stdout, stderr = server.stop()
    assert (status, json.loads(body)) == (200, {"name": "fern"})
    assert ACCESS_LOG_LINE.fullmatch(stdout.strip())
    assert token not in stdout + stderr


def test_token_refuses_a_name_or_scopes_the_file_would_refuse(tmp_path):
    for flags, why in [
        (["--scopes", "read,admin"], "scopes= lists read, write, metrics, separated by commas"),
        (["--name", "the importer"], "a name is 1 to 64 of A-Z a-z 0-9 . _ @ -"),
    ]:
        made = run([PLANTSTORE, "token", *flags], tmp_path)
        assert (made.returncode, made.stdout, made.stderr) == (1, "", f"plantstore: {why}\n")


def test_each_run_makes_another_token(tmp_path):
    tokens = {run([PLANTSTORE, "token"], tmp_path).stdout for _ in range(2)}
    assert len(tokens) == 2


def test_serve_passes_gunicorns_flags_through_to_the_packaged_settings(tmp_path):
    """The settings' on_starting hook refuses a second worker for the memory store."""
    result = run([PLANTSTORE, "serve", "--bind=127.0.0.1:0", "--workers", "2"], tmp_path)
    assert result.returncode != 0
    assert result.stderr.splitlines()[-1] == (
        "plantstore: the memory store keeps plants in one process; run one worker "
        "(WEB_CONCURRENCY=1), not 2"
    )


def test_serve_and_the_checkouts_gunicorn_conf_have_the_same_settings(tmp_path):
    """gunicorn prints its settings with `--print-config`, from either way of starting."""

    def settings(command, cwd):
        result = run(command, cwd, PLANTSTORE_TOKENS="t")
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        return [line for line in lines if not line.startswith(("chdir ", "config "))]

    served = settings([PLANTSTORE, "serve", "--print-config"], tmp_path)
    assert served == settings([*GUNICORN, "--print-config"], ROOT)
    assert "worker_class                       = gthread" in served
    assert "on_starting                        = <on_starting()>" in served


def test_serve_takes_gunicorns_own_settings_from_its_environment(tmp_path):
    """`GUNICORN_CMD_ARGS` works as gunicorn documents it, over the packaged settings."""
    result = run([PLANTSTORE, "serve", "--print-config"], tmp_path, GUNICORN_CMD_ARGS="--threads 3")
    assert "threads                            = 3" in result.stdout.splitlines()


@pytest.mark.parametrize(("store", "threads"), [("memory://", 4), ("sqlite:///plants.db", 32)])
def test_serve_runs_few_threads_for_the_memory_store_and_many_for_a_shared_one(
    tmp_path, store, threads
):
    """The memory store's requests only compute; a shared store's batches grow with the
    requests waiting at once (docs/operations.md, "Threads")."""
    result = run([PLANTSTORE, "serve", "--print-config"], tmp_path, PLANTSTORE_STORE=store)
    assert f"threads                            = {threads}" in result.stdout.splitlines()


def test_check_says_ok_and_the_kind_of_store(tmp_path):
    url = f"sqlite:///{tmp_path / 'plants.db'}"
    result = run([PLANTSTORE, "check"], tmp_path, PLANTSTORE_STORE=url)
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "plantstore: ok: the sqlite store is ready\n",
        "",
    )


def test_check_stops_at_a_bad_setting_with_its_one_line(tmp_path):
    result = run([PLANTSTORE, "check"], tmp_path, PLANTSTORE_MAX_BODY_BYTES="lots")
    assert (result.returncode, result.stdout, result.stderr) == (
        1,
        "",
        "plantstore: PLANTSTORE_MAX_BODY_BYTES must be a whole number from 1 to 16777216, "
        "not 'lots'\n",
    )


def test_check_refuses_a_second_worker_for_the_memory_store_as_a_start_does(tmp_path):
    result = run([PLANTSTORE, "check"], tmp_path, WEB_CONCURRENCY="2")
    assert (result.returncode, result.stdout, result.stderr) == (
        1,
        "",
        "plantstore: the memory store keeps plants in one process; run one worker "
        "(WEB_CONCURRENCY=1), not 2\n",
    )


def test_check_says_in_one_line_that_a_sqlite_file_cannot_be_used(tmp_path, unusable_sqlite):
    url, line = unusable_sqlite
    result = run([PLANTSTORE, "check"], tmp_path, PLANTSTORE_STORE=url)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", f"{line}\n")


def test_a_postgresql_database_not_in_utf8_stops_check_and_start_with_one_line(
    tmp_path, not_utf8_postgres
):
    url, encoding = not_utf8_postgres
    checked = run([PLANTSTORE, "check"], tmp_path, PLANTSTORE_STORE=url)
    started = run_to_exit(
        "--bind=127.0.0.1:0", timeout=30, PLANTSTORE_TOKENS="t", PLANTSTORE_STORE=url
    )
    line = (
        f"plantstore: PostgreSQL database {url.rsplit('/', 1)[1]} has encoding {encoding}, but "
        "plantstore needs UTF8: create the database with ENCODING 'UTF8'"
    )
    assert (checked.returncode, checked.stdout, checked.stderr) == (1, "", f"{line}\n")
    assert started.returncode != 0
    # Besides gunicorn's own line that it is starting, which comes before the check.
    printed = started.stderr.splitlines()
    assert [text for text in printed if "[INFO] Starting gunicorn" not in text] == [line]


def test_serve_help_is_gunicorns_whose_every_flag_serve_takes(tmp_path):
    result = run([PLANTSTORE, "serve", "--help"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: gunicorn [OPTIONS]")
    assert re.search(r"^  --threads INT ", result.stdout, re.M)


def test_a_start_that_cannot_bind_says_what_troubleshooting_explains_and_leaves_nothing_behind(
    tmp_path,
):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = run([PLANTSTORE, "serve", f"--bind=127.0.0.1:{port}"], tmp_path)
    assert result.returncode != 0
    assert list(tmp_path.iterdir()) == []
    # gunicorn's own words, as the operations page's Troubleshooting quotes them.
    said = [f"Connection in use: ('127.0.0.1', {port})", f"Can't connect to ('127.0.0.1', {port})"]
    assert all(words in result.stderr for words in said), result.stderr
    operations = (ROOT / "docs/operations.md").read_text()
    troubleshooting = operations.split("\n## Troubleshooting\n", 1)[1].split("\n## ", 1)[0]
    assert "- **`Connection in use`, then `Can't connect to`**: " in troubleshooting


PASSWORD = "hunter2"
MALFORMED_URLS = {
    "bad escape": (
        f"postgresql://plantstore:{PASSWORD}%ZZ@127.0.0.1:1/plants",
        "has a % that is not % and two hex digits (or is %00): write % as %25",
    ),
    "unknown parameter": (
        f"postgresql://plantstore:{PASSWORD}@127.0.0.1:1/plants?sslmod=require",
        "has a query parameter that libpq does not know, or not as parameter=value",
    ),
    "@ in the password": (
        f"postgresql://plantstore:{PASSWORD}@x@nohost.invalid/plants",
        "has a @ or / in its user or password: write @ as %40 and / as %2F",
    ),
}


@pytest.mark.parametrize("command", ["check", "serve"])
@pytest.mark.parametrize(("url", "problem"), MALFORMED_URLS.values(), ids=list(MALFORMED_URLS))
def test_a_postgresql_url_libpq_cannot_read_stops_check_and_serve_with_one_line(
    tmp_path, command, url, problem
):
    """Not libpq's words, which quote the password, in a traceback."""
    bind = ["--bind=127.0.0.1:0"] if command == "serve" else []
    result = run([PLANTSTORE, command, *bind], tmp_path, PLANTSTORE_STORE=url)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if "[gunicorn.error] [INFO]" not in line]
    assert lines == [f"plantstore: PLANTSTORE_STORE {problem}"]
    assert PASSWORD not in result.stdout + result.stderr


#: A bad value of each variable gunicorn reads itself as it loads, and the line that says so.
GUNICORNS_VARIABLES = {
    "PORT": [("99999", "from 1 to 65535"), ("abc", "from 1 to 65535")],
    "WEB_CONCURRENCY": [("abc", "of at least 1"), ("-1", "of at least 1")],
}


@pytest.mark.parametrize(
    ("name", "value", "accepted"),
    [(name, *bad) for name, values in GUNICORNS_VARIABLES.items() for bad in values],
)
def test_serve_refuses_a_bad_port_or_web_concurrency_naming_it(tmp_path, name, value, accepted):
    """gunicorn would end in its traceback (`PORT=99999`, `WEB_CONCURRENCY=abc`), or in words
    that do not name the variable."""
    result = run([PLANTSTORE, "serve"], tmp_path, **{name: value})
    assert (result.returncode, result.stdout, result.stderr) == (
        1,
        "",
        f"plantstore: {name} must be a whole number {accepted}, not {value!r}\n",
    )


def test_serve_refuses_a_forwarded_allow_ips_gunicorn_would_refuse_naming_it(tmp_path):
    result = run([PLANTSTORE, "serve"], tmp_path, FORWARDED_ALLOW_IPS="127.0.0.1,proxy.local")
    assert (result.returncode, result.stdout, result.stderr) == (
        1,
        "",
        "plantstore: FORWARDED_ALLOW_IPS must list IP addresses or networks (10.0.0.0/8, "
        "without host bits), separated by commas, or *: not 'proxy.local'\n",
    )


def test_check_refuses_what_serve_refuses_of_gunicorns_variables(tmp_path):
    result = run([PLANTSTORE, "check"], tmp_path, PORT="99999")
    assert (result.returncode, result.stderr) == (
        1,
        "plantstore: PORT must be a whole number from 1 to 65535, not '99999'\n",
    )
