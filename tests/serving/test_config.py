"""The settings as a start reads them: `Config.from_env`, and what `read_settings` checks of
what they name (the tokens file, the subscribers); gunicorn's own variables, as `plantstore
serve` checks them; and 1.2's `GUNICORN_*` variables."""

import hashlib
import json
import sys

import pytest
from gunicorn.config import Config as GunicornConfig
from gunicorn.http import message

from plantstore.config import DEFAULT_MAX_BODY_BYTES, Config, ConfigError, env_int
from plantstore.serving import legacy
from plantstore.serving.settings import (
    check_gunicorns_variables,
    exposed_tokens_warning,
    read_settings,
)
from plantstore.testing.gunicorn_server import ROOT
from plantstore.tokens.file import read_tokens_file


def test_tokens_come_from_the_variable_and_the_file(tmp_path):
    """The file's are read as it reads when a request asks (plantstore.api.auth.Tokens)."""
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("from-file-1\n\n  from-file-2  \n")
    config = read_settings(
        {"PLANTSTORE_TOKENS": "a, b,,", "PLANTSTORE_TOKENS_FILE": str(tokens_file)}
    )
    assert (config.tokens, config.tokens_file) == ({"a", "b"}, str(tokens_file))
    assert [entry.digest for entry in read_tokens_file(config.tokens_file)] == [
        hashlib.sha256(b"from-file-1").digest(),
        hashlib.sha256(b"from-file-2").digest(),
    ]
    assert config.max_body_bytes == DEFAULT_MAX_BODY_BYTES


def test_an_empty_tokens_file_is_refused_unless_tokens_are_listed(tmp_path):
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("# none yet\n")
    with pytest.raises(ConfigError) as caught:
        read_settings({"PLANTSTORE_TOKENS_FILE": str(tokens_file)})
    assert str(caught.value) == "PLANTSTORE_TOKENS and PLANTSTORE_TOKENS_FILE name no token"
    config = read_settings({"PLANTSTORE_TOKENS": "a", "PLANTSTORE_TOKENS_FILE": str(tokens_file)})
    assert (config.tokens, config.tokens_file) == ({"a"}, str(tokens_file))


def test_a_token_the_edge_cannot_key_stops_the_start_naming_the_rule_never_the_token(tmp_path):
    """The nginx site keys a rate by tokens of at most 128 characters (deploy/nginx.conf), and
    the service takes no other (plantstore.api.auth.BEARER): a longer one could never be used."""
    longest, longer = "t" * 128, "t" * 129
    assert read_settings({"PLANTSTORE_TOKENS": longest}).tokens == {longest}
    with pytest.raises(ConfigError) as listed:
        read_settings({"PLANTSTORE_TOKENS": f"ok,{longer}"})
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text(f"ok\n{longer} name=long\n")
    with pytest.raises(ConfigError) as filed:
        read_settings({"PLANTSTORE_TOKENS_FILE": str(tokens_file)})
    rule = "1 to 128 printable ASCII characters without spaces"
    assert (str(listed.value), str(filed.value)) == (
        f"PLANTSTORE_TOKENS must list tokens of {rule}, separated by commas",
        f"PLANTSTORE_TOKENS_FILE: {tokens_file}, line 2: a token is {rule}",
    )


def test_max_body_bytes_is_read():
    environ = {"PLANTSTORE_TOKENS": "a", "PLANTSTORE_MAX_BODY_BYTES": "100"}
    assert read_settings(environ).max_body_bytes == 100


@pytest.mark.parametrize(
    ("environ", "complaint"),
    [
        ({"PLANTSTORE_TOKENS": "a", "PLANTSTORE_MAX_BODY_BYTES": "lots"}, "whole number"),
        ({"PLANTSTORE_TOKENS": "a", "PLANTSTORE_MAX_BODY_BYTES": "0"}, "from 1 to"),
        ({"PLANTSTORE_TOKENS": " , "}, "no token"),
        ({"PLANTSTORE_TOKENS": "a b"}, "printable ASCII"),
        ({"PLANTSTORE_TOKENS": "tök€n"}, "printable ASCII"),
        ({"PLANTSTORE_TOKENS_FILE": "/nonexistent/tokens"}, "cannot be read"),
    ],
)
def test_a_bad_setting_is_refused_with_its_name(environ, complaint):
    with pytest.raises(ConfigError, match=complaint):
        read_settings(environ)


@pytest.mark.parametrize(
    ("name", "value", "accepted"),
    [
        ("GUNICORN_LIMIT_REQUEST_LINE", "8191", "from 0 to 8190"),
        ("GUNICORN_LIMIT_REQUEST_FIELDS", "32769", "from 1 to 32768"),
        ("GUNICORN_LIMIT_REQUEST_FIELDS", "0", "from 1 to 32768"),
        ("GUNICORN_LIMIT_REQUEST_FIELD_SIZE", "0", "of at least 1"),
    ],
)
def test_a_legacy_request_limit_gunicorn_would_not_honour_is_refused(name, value, accepted):
    """gunicorn would silently take each as another value."""
    with pytest.raises(SystemExit) as caught:
        legacy.settings({name: value})
    assert str(caught.value) == (
        f"plantstore: {name} must be a whole number {accepted}, not {value!r}"
    )


def test_the_legacy_variables_set_gunicorns_settings_saying_so_once(capsys):
    environ = {
        "GUNICORN_THREADS": "4",
        "GUNICORN_LIMIT_REQUEST_LINE": "0",
        "GUNICORN_LIMIT_REQUEST_FIELDS": "32768",
        "GUNICORN_LIMIT_REQUEST_FIELD_SIZE": "65536",
    }
    assert legacy.settings(environ) == {
        "threads": 4,
        "limit_request_line": 0,
        "limit_request_fields": 32768,
        "limit_request_field_size": 65536,
    }
    out, err = capsys.readouterr()
    assert (out, err.count("\n")) == ("", 1)
    assert err.startswith("plantstore: the GUNICORN_* variables go after 1.3")
    assert "GUNICORN_THREADS by --threads" in err
    assert "GUNICORN_LIMIT_REQUEST_FIELD_SIZE by --limit-request-field_size" in err


def test_without_legacy_variables_nothing_is_set_or_said(capsys):
    assert legacy.settings({"PLANTSTORE_TOKENS": "a"}) == {}
    assert capsys.readouterr() == ("", "")


def test_the_request_limits_are_gunicorns():
    assert (legacy.MAX_REQUEST_LINE, legacy.MAX_REQUEST_FIELDS) == (
        message.MAX_REQUEST_LINE,
        message.MAX_HEADERS,
    )


def test_reading_changes_nothing_and_prints_nothing(capsys):
    """Reading is the same in gunicorn's master and in each worker: no token is made here."""
    environ = {}
    config = Config.from_env(environ)
    assert (config.tokens, config.tokens_file) == (frozenset(), None)
    assert environ == {}
    assert capsys.readouterr() == ("", "")


def test_comments_and_blank_lines_in_the_tokens_file_are_skipped(tmp_path):
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("# the deploy robot\nrobot-token\n\n  # old: revoked\n\tmine\n")
    assert [entry.digest for entry in read_tokens_file(str(tokens_file))] == [
        hashlib.sha256(b"robot-token").digest(),
        hashlib.sha256(b"mine").digest(),
    ]


def test_a_bad_line_in_the_tokens_file_is_named_by_file_and_number_not_echoed(tmp_path):
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("# tokens\ngood\nnot a token\n")
    with pytest.raises(ConfigError) as caught:
        read_settings({"PLANTSTORE_TOKENS_FILE": str(tokens_file)})
    assert str(caught.value) == (
        f"PLANTSTORE_TOKENS_FILE: {tokens_file}, line 3: a field after the token is name=... "
        "or scopes=..."
    )


def test_a_tokens_file_without_its_last_newline_is_refused_as_being_written(tmp_path):
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("robot-token\nsha256:" + "0" * 64)
    with pytest.raises(ConfigError) as caught:
        read_settings({"PLANTSTORE_TOKENS_FILE": str(tokens_file)})
    assert str(caught.value) == (
        f"PLANTSTORE_TOKENS_FILE: {tokens_file} must end with a newline: its last line has none, "
        "as in a file still being written"
    )


@pytest.mark.parametrize(
    ("content", "mode", "warned"),
    [
        ("robot-token name=robot\n", 0o644, True),
        (f"sha256:{'0' * 64}\nrobot-token\n", 0o604, True),
        ("robot-token name=robot\n", 0o640, False),
        (f"sha256:{'0' * 64} name=robot\n", 0o644, False),
    ],
)
def test_a_tokens_file_every_user_may_read_is_warned_of_if_it_holds_tokens_themselves(
    tmp_path, content, mode, warned
):
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text(content)
    tokens_file.chmod(mode)
    warning = exposed_tokens_warning(read_settings({"PLANTSTORE_TOKENS_FILE": str(tokens_file)}))
    assert warning == (
        f"PLANTSTORE_TOKENS_FILE: {tokens_file} holds tokens in plain text and every user may "
        "read it: keep their digests instead (the lines plantstore token prints), or chmod o-r "
        f"{tokens_file}"
        if warned
        else None
    )


def test_a_tokens_file_that_is_not_text_is_refused(tmp_path):
    tokens_file = tmp_path / "tokens"
    tokens_file.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="PLANTSTORE_TOKENS_FILE must be text"):
        read_settings({"PLANTSTORE_TOKENS_FILE": str(tokens_file)})


def test_a_sqlite_file_in_a_missing_directory_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'missing' / 'plants.db'}"
    with pytest.raises(ConfigError) as caught:
        read_settings({"PLANTSTORE_TOKENS": "a", "PLANTSTORE_STORE": url})
    assert str(caught.value) == (
        f"PLANTSTORE_STORE names a SQLite file in {tmp_path / 'missing'}, which is not a "
        "directory: make it first"
    )


@pytest.mark.parametrize(("raw", "value"), [(None, 7), ("", 7), (" 12 ", 12), ("0", 0)])
def test_env_int(raw, value):
    environ = {} if raw is None else {"N": raw}
    assert env_int(environ, "N", 7) == value


@pytest.mark.parametrize(
    ("raw", "maximum", "accepted"),
    [
        ("x", None, "of at least 1"),
        ("0", None, "of at least 1"),
        ("65536", 65535, "from 1 to 65535"),
    ],
)
def test_env_int_says_what_it_accepts(raw, maximum, accepted):
    with pytest.raises(ConfigError) as caught:
        env_int({"N": raw}, "N", 7, minimum=1, maximum=maximum)
    assert str(caught.value) == f"N must be a whole number {accepted}, not {raw!r}"


@pytest.mark.parametrize(
    "url",
    [
        "memory://",
        "sqlite:///plants.db",
        "sqlite:////tmp/plants.db",
        "postgresql://plantstore@db.example/plants",
        "postgres:///plants",
    ],
)
def test_the_store_is_chosen_by_url(url):
    assert read_settings({"PLANTSTORE_TOKENS": "a", "PLANTSTORE_STORE": url}).store_url == url


def test_the_memory_store_is_the_default():
    assert read_settings({"PLANTSTORE_TOKENS": "a"}).store_url == "memory://"


@pytest.mark.parametrize(
    "url",
    [
        "plants.db",
        "sqlite://plants.db",
        "sqlite:///",
        "sqlite:////",
        "sqlite:///:memory:",
        "mysql://user:hunter2@db/plants",
        "postgresq://user:hunter2@db/plants",
        "memory",
    ],
)
def test_any_other_store_is_refused_with_the_accepted_forms_and_not_echoed(url):
    with pytest.raises(ConfigError) as caught:
        read_settings({"PLANTSTORE_TOKENS": "a", "PLANTSTORE_STORE": url})
    assert str(caught.value) == (
        "PLANTSTORE_STORE must be memory://, sqlite:///relative/path, "
        "sqlite:////absolute/path or postgresql://..."
    )


def test_postgresql_without_psycopg_is_refused_naming_installs_that_work_from_a_checkout(
    monkeypatch,
):
    """`plantstore[postgres]` would be looked up on the package index, not in the checkout."""
    monkeypatch.setitem(sys.modules, "psycopg_pool", None)
    with pytest.raises(ConfigError) as caught:
        read_settings({"PLANTSTORE_TOKENS": "a", "PLANTSTORE_STORE": "postgresql:///plants"})
    assert str(caught.value) == (
        "PLANTSTORE_STORE names PostgreSQL, which needs psycopg: from the project's root, "
        "pip install '.[postgres]', or pip install 'psycopg[binary,pool]>=3.2'"
    )
    assert "pip install '.[postgres]'" in (ROOT / "README.md").read_text()


SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def test_webhooks_are_off_unless_urls_are_set():
    config = read_settings({"PLANTSTORE_TOKENS": "a"})
    assert (config.webhook_urls, config.webhook_secret) == ((), None)
    assert (config.webhook_timeout, config.webhook_give_up_after) == (5, 86400)


def test_webhook_settings_are_read():
    config = read_settings(
        {
            "PLANTSTORE_TOKENS": "a",
            "PLANTSTORE_WEBHOOK_URLS": " https://shop.example/hooks, http://[::1]:9000/h?k=v ,",
            "PLANTSTORE_WEBHOOK_SECRET": SECRET,
            "PLANTSTORE_WEBHOOK_TIMEOUT": "2",
            "PLANTSTORE_WEBHOOK_GIVE_UP_AFTER": "60",
        }
    )
    assert config.webhook_urls == ("https://shop.example/hooks", "http://[::1]:9000/h?k=v")
    assert config.webhook_secret == SECRET
    assert (config.webhook_timeout, config.webhook_give_up_after) == (2, 60)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://user:hunter2@shop.example/",
        "shop.example/hooks",
        "https:///hooks",
        "http://user:hunter2@shop.example:99999/",
        "http://shop.example:0/",
        "http://[::1/",
    ],
)
def test_a_webhook_url_that_is_not_http_is_refused_by_its_place_not_echoed(url):
    with pytest.raises(ConfigError) as caught:
        read_settings(
            {
                "PLANTSTORE_TOKENS": "a",
                "PLANTSTORE_WEBHOOK_URLS": f"https://ok.example,{url}",
                "PLANTSTORE_WEBHOOK_SECRET": SECRET,
            }
        )
    assert str(caught.value) == (
        "PLANTSTORE_WEBHOOK_URLS must list http:// or https:// URLs with a host, separated by "
        "commas: URL 2 is not one"
    )


@pytest.mark.parametrize(
    "again", ["https://shop.example/hooks", "https://user:hunter2@shop.example/hooks"]
)
def test_a_subscriber_listed_twice_is_refused_by_its_places_not_echoed(again):
    """Its events would go twice, and with credentials either way: the outbox names a
    subscriber by its URL without user and password."""
    with pytest.raises(ConfigError) as caught:
        read_settings(
            {
                "PLANTSTORE_TOKENS": "a",
                "PLANTSTORE_WEBHOOK_URLS": f"https://shop.example/hooks,http://a.example,{again}",
                "PLANTSTORE_WEBHOOK_SECRET": SECRET,
            }
        )
    assert str(caught.value) == (
        "PLANTSTORE_WEBHOOK_URLS must list each subscriber once: URL 3 is URL 1 again (if only "
        "with another user or password)"
    )


def test_webhook_urls_need_a_secret():
    with pytest.raises(ConfigError) as caught:
        read_settings({"PLANTSTORE_TOKENS": "a", "PLANTSTORE_WEBHOOK_URLS": "http://a.example"})
    assert str(caught.value) == (
        "PLANTSTORE_WEBHOOK_SECRET must be set when PLANTSTORE_WEBHOOK_URLS is: whsec_ followed "
        "by a base64 key"
    )


@pytest.mark.parametrize(
    "secret",
    [
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsec_",
        "whsec_not base64!",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS",
        "Whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    ],
)
def test_a_malformed_webhook_secret_is_refused_and_not_echoed(secret):
    with pytest.raises(ConfigError) as caught:
        read_settings(
            {
                "PLANTSTORE_TOKENS": "a",
                "PLANTSTORE_WEBHOOK_URLS": "http://a.example",
                "PLANTSTORE_WEBHOOK_SECRET": secret,
            }
        )
    assert str(caught.value) == (
        "PLANTSTORE_WEBHOOK_SECRET must be whsec_ followed by a non-empty base64 key "
        "(the Standard Webhooks form)"
    )


def test_the_webhook_secret_is_not_in_the_configs_repr():
    config = read_settings(
        {
            "PLANTSTORE_TOKENS": "a",
            "PLANTSTORE_WEBHOOK_URLS": "http://a.example",
            "PLANTSTORE_WEBHOOK_SECRET": SECRET,
        }
    )
    assert config.webhook_secret == SECRET
    assert SECRET.removeprefix("whsec_") not in repr(config)


PASSWORD = "hunter2"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        (
            f"postgresql://plantstore:{PASSWORD}%ZZ@db.example/plants",
            "has a % that is not % and two hex digits (or is %00): write % as %25",
        ),
        (
            f"postgresql://plantstore:{PASSWORD}%@db.example/plants",
            "has a % that is not % and two hex digits (or is %00): write % as %25",
        ),
        (
            f"postgresql://plantstore:{PASSWORD}%00@db.example/plants",
            "has a % that is not % and two hex digits (or is %00): write % as %25",
        ),
        (
            f"postgresql://plantstore:{PASSWORD}@db.example/plants?sslmod=require",
            "has a query parameter that libpq does not know, or not as parameter=value",
        ),
        (
            f"postgresql://plantstore@db.example/plants?{PASSWORD}",
            "has a query parameter that libpq does not know, or not as parameter=value",
        ),
        (
            f"postgresql://plantstore:{PASSWORD}@[::1/plants?sslmode=require",
            "is not a URL that libpq can read: postgresql://user:password@host:port/dbname",
        ),
        (
            "postgresql://plantstore:hunt@er2@nohost.invalid/plants",
            "has a @ or / in its user or password: write @ as %40 and / as %2F",
        ),
        (
            "postgresql://plantstore:hunt/er2@nohost.invalid/plants",
            "has a @ or / in its user or password: write @ as %40 and / as %2F",
        ),
        (
            "postgresql://plantstore:hunt?er@2@nohost.invalid/plants",
            "has a @ or / in its user or password: write @ as %40 and / as %2F",
        ),
    ],
    ids=["bad escape", "lone %", "%00", "unknown parameter", "no =", "bad host", "@", "/", "?@"],
)
def test_a_postgresql_url_libpq_cannot_read_is_refused_without_its_password(url, problem):
    """libpq's own words quote the password around a bad escape; a second `@`, or a `/`, of a
    password puts its rest where libpq's messages name it (the host `er2@nohost.invalid`)."""
    with pytest.raises(ConfigError) as caught:
        read_settings({"PLANTSTORE_TOKENS": "a", "PLANTSTORE_STORE": url})
    assert str(caught.value) == f"PLANTSTORE_STORE {problem}"
    assert "hunt" not in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://plantstore:hunter%402@db.example:5432/plants?sslmode=require",
        "postgresql://plantstore:hun%2Fter%25@db.example/plants",
        "postgresql://plantstore:hun?ter2@db.example/plants",
        "postgresql://plantstore@db.example/plants?user=plantstore@corp&connect_timeout=5",
        "postgresql://db-1,db-2:5433/plants?target_session_attrs=read-write",
        "postgresql:///plants?host=/var/run/postgresql",
    ],
)
def test_a_postgresql_url_libpq_reads_whole_is_taken(url):
    assert read_settings({"PLANTSTORE_TOKENS": "a", "PLANTSTORE_STORE": url}).store_url == url


HUGE = "1" + "0" * 400


@pytest.mark.parametrize(
    ("name", "field", "accepted"),
    [
        ("PLANTSTORE_MAX_BODY_BYTES", "max_body_bytes", "from 1 to 16777216"),
        ("PLANTSTORE_STORE_WAIT", "store_wait", "from 0 to 3600"),
        ("PLANTSTORE_WEBHOOK_TIMEOUT", "webhook_timeout", "from 1 to 300"),
        ("PLANTSTORE_WEBHOOK_GIVE_UP_AFTER", "webhook_give_up_after", "from 0 to 2592000"),
    ],
)
@pytest.mark.parametrize("value", [HUGE, str(10**20)], ids=["overflows a float", "for ever"])
def test_every_number_has_a_bound_a_huge_value_is_refused_by(name, field, accepted, value):
    """A number of seconds that large overflows the float it is added to (a traceback), or
    waits for ever; a body that large is no bound on memory."""
    with pytest.raises(ConfigError) as caught:
        Config.from_env({name: value})
    assert str(caught.value) == f"{name} must be a whole number {accepted}, not {value!r}"
    greatest = int(accepted.rsplit(" ", 1)[1])
    assert getattr(Config.from_env({name: str(greatest)}), field) == greatest


@pytest.mark.parametrize(
    "name", ["GUNICORN_TIMEOUT", "GUNICORN_GRACEFUL_TIMEOUT", "GUNICORN_KEEPALIVE"]
)
def test_a_legacy_number_of_seconds_over_an_hour_is_refused(name):
    """gunicorn adds each to the time, as a float: a huge one is its traceback."""
    with pytest.raises(SystemExit) as caught:
        legacy.settings({name: HUGE})
    assert str(caught.value).startswith(f"plantstore: {name} must be a whole number from ")
    assert str(caught.value).endswith(f" to 3600, not {HUGE!r}")
    assert legacy.settings({name: "3600"}) == {legacy.VARIABLES[name][0]: 3600}


def test_with_json_logs_the_legacy_variables_warning_is_one_object_as_the_error_log_writes(capsys):
    legacy.settings({"GUNICORN_THREADS": "4", "PLANTSTORE_LOG_FORMAT": " json "})
    out, err = capsys.readouterr()
    (line,) = err.splitlines()
    entry = json.loads(line)
    assert out == ""
    assert entry.keys() == {"time", "level", "logger", "process", "request_id", "message"}
    assert (entry["level"], entry["request_id"]) == ("WARNING", None)
    assert entry["message"].startswith("plantstore: the GUNICORN_* variables go after 1.3;")
    assert entry["message"].endswith("GUNICORN_THREADS by --threads")


@pytest.mark.parametrize(
    ("name", "value", "line"),
    [
        ("PORT", "99999", "PORT must be a whole number from 1 to 65535, not '99999'"),
        ("PORT", "abc", "PORT must be a whole number from 1 to 65535, not 'abc'"),
        ("PORT", "0", "PORT must be a whole number from 1 to 65535, not '0'"),
        ("PORT", " ", "PORT must be a whole number from 1 to 65535, not ''"),
        (
            "WEB_CONCURRENCY",
            "abc",
            "WEB_CONCURRENCY must be a whole number of at least 1, not 'abc'",
        ),
        ("WEB_CONCURRENCY", "-1", "WEB_CONCURRENCY must be a whole number of at least 1, not '-1'"),
        ("WEB_CONCURRENCY", "0", "WEB_CONCURRENCY must be a whole number of at least 1, not '0'"),
        (
            "FORWARDED_ALLOW_IPS",
            "127.0.0.1,proxy.local",
            "FORWARDED_ALLOW_IPS must list IP addresses or networks (10.0.0.0/8, without host "
            "bits), separated by commas, or *: not 'proxy.local'",
        ),
        (
            "FORWARDED_ALLOW_IPS",
            "10.0.0.1/8",
            "FORWARDED_ALLOW_IPS must list IP addresses or networks (10.0.0.0/8, without host "
            "bits), separated by commas, or *: not '10.0.0.1/8'",
        ),
    ],
)
def test_gunicorns_own_variables_are_refused_naming_each(name, value, line):
    """gunicorn reads them as it loads, and says what is wrong without naming the variable, or
    with a traceback."""
    with pytest.raises(ConfigError) as caught:
        check_gunicorns_variables({name: value})
    assert str(caught.value) == line


@pytest.mark.parametrize(
    "value",
    [
        "",
        "*",
        " 10.0.0.0/8 , ::1,,192.168.1.1 ",
        "*,10.0.0.1",
        "2001:db8::/32",
        "1.2.3.4, ,5.6.7.8",
    ],
)
def test_forwarded_allow_ips_is_refused_exactly_when_gunicorn_refuses_it(value):
    try:
        GunicornConfig().set("forwarded_allow_ips", value)
    except ValueError:
        with pytest.raises(ConfigError):
            check_gunicorns_variables({"FORWARDED_ALLOW_IPS": value})
    else:
        check_gunicorns_variables({"FORWARDED_ALLOW_IPS": value})


def test_gunicorns_variables_unset_or_good_are_taken():
    check_gunicorns_variables({})
    check_gunicorns_variables(
        {"PORT": "65535", "WEB_CONCURRENCY": " 4 ", "FORWARDED_ALLOW_IPS": "*"}
    )
