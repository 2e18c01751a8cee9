import sys

import pytest

from plantstore.config import DEFAULT_MAX_BODY_BYTES, Config, ConfigError, ensure_token, env_int


def test_tokens_come_from_the_variable_and_the_file(tmp_path):
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("from-file-1\n\n  from-file-2  \n")
    config = Config.from_env(
        {"PLANTSTORE_TOKENS": "a, b,,", "PLANTSTORE_TOKENS_FILE": str(tokens_file)}
    )
    assert config.tokens == {"a", "b", "from-file-1", "from-file-2"}
    assert config.max_body_bytes == DEFAULT_MAX_BODY_BYTES


def test_max_body_bytes_is_read():
    environ = {"PLANTSTORE_TOKENS": "a", "PLANTSTORE_MAX_BODY_BYTES": "100"}
    assert Config.from_env(environ).max_body_bytes == 100


@pytest.mark.parametrize(
    ("environ", "complaint"),
    [
        ({"PLANTSTORE_TOKENS": "a", "PLANTSTORE_MAX_BODY_BYTES": "lots"}, "whole number"),
        ({"PLANTSTORE_TOKENS": "a", "PLANTSTORE_MAX_BODY_BYTES": "0"}, "at least 1"),
        ({"PLANTSTORE_TOKENS": " , "}, "no token"),
        ({"PLANTSTORE_TOKENS": "a b"}, "printable ASCII"),
        ({"PLANTSTORE_TOKENS": "tök€n"}, "printable ASCII"),
        ({"PLANTSTORE_TOKENS_FILE": "/nonexistent/tokens"}, "cannot be read"),
    ],
)
def test_a_bad_setting_is_refused_with_its_name(environ, complaint):
    with pytest.raises(ConfigError, match=complaint):
        Config.from_env(environ)


def test_a_token_is_made_once_when_none_is_configured(capsys):
    environ = {}
    first = Config.from_env(environ)
    second = Config.from_env(environ)
    (token,) = first.tokens
    assert len(token) >= 32
    assert second.tokens == first.tokens
    assert environ["PLANTSTORE_TOKENS"] == token
    notice = capsys.readouterr().err
    assert notice.count(token) == 1
    assert "PLANTSTORE_TOKENS" in notice


def test_no_token_is_made_when_one_is_configured(capsys):
    environ = {"PLANTSTORE_TOKENS": "mine"}
    ensure_token(environ)
    assert environ == {"PLANTSTORE_TOKENS": "mine"}
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("raw", "value"), [(None, 7), ("", 7), (" 12 ", 12), ("0", 0)])
def test_env_int(raw, value):
    environ = {} if raw is None else {"N": raw}
    assert env_int(environ, "N", 7) == value


@pytest.mark.parametrize(
    "url",
    [
        "memory://",
        "sqlite:///plants.db",
        "sqlite:////var/lib/plantstore/plants.db",
        "postgresql://plantstore@db.example/plants",
        "postgres:///plants",
    ],
)
def test_the_store_is_chosen_by_url(url):
    assert Config.from_env({"PLANTSTORE_TOKENS": "a", "PLANTSTORE_STORE": url}).store_url == url


def test_the_memory_store_is_the_default():
    assert Config.from_env({"PLANTSTORE_TOKENS": "a"}).store_url == "memory://"


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
        Config.from_env({"PLANTSTORE_TOKENS": "a", "PLANTSTORE_STORE": url})
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
        Config.from_env({"PLANTSTORE_TOKENS": "a", "PLANTSTORE_STORE": "postgresql:///plants"})
    assert str(caught.value) == (
        "PLANTSTORE_STORE names PostgreSQL, which needs psycopg: from the project's root, "
        "pip install -e '.[postgres]', or pip install 'psycopg[binary,pool]>=3.2'"
    )
