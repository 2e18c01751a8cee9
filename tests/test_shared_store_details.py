"""What the SQLite and PostgreSQL stores promise beyond the contract: durability, clean closing."""

import sqlite3
import time

import psycopg
import pytest

from plantstore import app as app_module
from plantstore.config import Config
from plantstore.stores.memory import MemoryStore
from plantstore.stores.postgres import PostgresStore
from plantstore.stores.sqlite import SqliteStore

FERN = b'{"name":"fern"}'


def test_sqlite_syncs_every_commit_of_its_write_ahead_log(tmp_path):
    store = SqliteStore(str(tmp_path / "plants.db"))
    connection = store._connection()
    assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert connection.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    store.close()


def test_sqlite_keeps_the_document_as_text_json_can_read(tmp_path):
    path = tmp_path / "plants.db"
    store = SqliteStore(str(path))
    store.add(1, b'{"name":"fern","tag":"\\u00e9"}')
    store.close()
    with sqlite3.connect(path) as connection:
        row = connection.execute("SELECT typeof(plant), plant ->> '$.tag' FROM plants").fetchone()
    assert row == ("text", "\u00e9")


def test_sqlite_close_folds_the_log_into_the_file(tmp_path):
    store = SqliteStore(str(tmp_path / "plants.db"))
    store.add(1, FERN)
    assert (tmp_path / "plants.db-wal").exists()
    store.close()
    assert not (tmp_path / "plants.db-wal").exists()


def test_postgresql_keeps_the_documents_exact_text_as_json(postgres_url):
    store = PostgresStore(postgres_url)
    store.add(1, b'{"name":"fern","tag":"\\u00e9"}')
    store.close()
    with psycopg.connect(postgres_url) as connection:
        row = connection.execute("SELECT pg_typeof(plant)::text, plant ->> 'tag' FROM plants")
        assert row.fetchone() == ("json", "\u00e9")


def test_postgresql_close_ends_the_sessions(postgres_url):
    store = PostgresStore(postgres_url)
    store.add(1, FERN)
    database = postgres_url.rsplit("/", 1)[1]
    count = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
    with psycopg.connect(postgres_url, autocommit=True) as observer:
        assert observer.execute(count, (database,)).fetchone()[0] >= 1
        store.close()
        deadline = time.monotonic() + 10
        while observer.execute(count, (database,)).fetchone()[0] and time.monotonic() < deadline:
            pass  # a backend takes a moment to exit after its client said goodbye
        assert observer.execute(count, (database,)).fetchone()[0] == 0


@pytest.mark.parametrize(
    ("url", "kind"), [("memory://", MemoryStore), ("sqlite:///plants.db", SqliteStore)]
)
def test_the_app_closes_a_store_it_opened_when_the_process_exits(monkeypatch, tmp_path, url, kind):
    monkeypatch.chdir(tmp_path)
    at_exit = []
    monkeypatch.setattr(app_module.atexit, "register", at_exit.append)
    app_module.create_app(Config(tokens=frozenset({"t"}), store_url=url))
    (close,) = at_exit
    assert close.__name__ == "close"
    assert type(close.__self__) is kind
    close()


def test_the_app_leaves_a_store_it_was_given_to_its_owner(monkeypatch):
    at_exit = []
    monkeypatch.setattr(app_module.atexit, "register", at_exit.append)
    app_module.create_app(Config(tokens=frozenset({"t"})), SqliteStore(":memory:"))
    assert at_exit == []
