"""What the SQLite and PostgreSQL stores promise beyond the contract: durability, clean closing."""

import sqlite3
import threading
import time

import psycopg
import pytest

from plantstore.app import create_app
from plantstore.config import Config
from plantstore.runtime import Runtime
from plantstore.stores import postgres
from plantstore.stores.memory import MemoryStore
from plantstore.stores.postgres import PostgresStore
from plantstore.stores.sql import page_query
from plantstore.stores.sqlite import PLANT_BYTES, SqliteStore

FERN = b'{"name":"fern"}'
ROSE = b'{"name":"rose","tag":"red"}'
#: Pages as the service asks for them: the first and a later one, of all plants or of one tag.
PAGES = [(None, 100, None), (25_000, 100, None), (None, 100, "tag 3"), (25_000, 100, "tag 3")]


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


def sqlite_plan(connection, after, limit, tag):
    query, values = page_query(after, limit, tag, plant=PLANT_BYTES, marker="?")
    return [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {query}", values)]


def test_sqlite_answers_every_page_from_an_index_in_id_order(tmp_path):
    path = tmp_path / "plants.db"
    SqliteStore(str(path)).close()
    with sqlite3.connect(path) as connection:
        connection.executemany(
            "INSERT INTO plants (id, plant, tag) VALUES (?, ?, ?)",
            (
                (n, f'{{"name":"plant {n}","tag":"tag {n % 100}"}}', f"tag {n % 100}".encode())
                for n in range(50_000)
            ),
        )
        connection.execute("ANALYZE")
        plans = [sqlite_plan(connection, *page) for page in PAGES]
    # The table is the primary key's tree: the first page walks it from its start.
    assert plans == [
        ["SCAN plants"],
        ["SEARCH plants USING INTEGER PRIMARY KEY (rowid>?)"],
        ["SEARCH plants USING INDEX plants_by_tag (tag=?)"],
        ["SEARCH plants USING INDEX plants_by_tag (tag=? AND id>?)"],
    ]


def test_postgresql_keeps_the_documents_exact_text_as_json(postgres_url):
    store = PostgresStore(postgres_url)
    store.add(1, b'{"name":"fern","tag":"\\u00e9"}')
    store.close()
    with psycopg.connect(postgres_url) as connection:
        row = connection.execute("SELECT pg_typeof(plant)::text, plant ->> 'tag' FROM plants")
        assert row.fetchone() == ("json", "\u00e9")


def test_postgresql_add_takes_again_an_id_freed_between_its_insert_and_its_select(
    monkeypatch, postgres_url
):
    store = PostgresStore(postgres_url)
    store.add(1, FERN)
    deleted = []

    def delete_before_the_select(connection, plant_id):
        if not deleted:
            with psycopg.connect(postgres_url, autocommit=True) as other:
                deleted.append(other.execute("DELETE FROM plants WHERE id = 1").rowcount)
        return get(connection, plant_id)

    get = postgres._get
    monkeypatch.setattr(postgres, "_get", delete_before_the_select)
    try:
        assert store.add(1, ROSE) == ROSE
        assert deleted == [1]
        assert store.get(1) == ROSE
    finally:
        store.close()


def test_postgresql_answers_every_page_from_an_index_in_id_order(postgres_url):
    """50,000 plants of 100 tags, analyzed, as a table grows in service."""
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        PostgresStore(postgres_url).close()
        connection.execute(
            "INSERT INTO plants (id, plant, tag) SELECT n, json_build_object('tag', tag), "
            "convert_to(tag, 'UTF8') FROM generate_series(0, 49999) AS n, "
            "LATERAL (SELECT 'tag ' || n % 100) AS tags (tag)"
        )
        connection.execute("ANALYZE plants")
        plans = []
        for page in PAGES:
            query, values = page_query(*page, plant="plant::text", marker="%s")
            plans.append(
                "\n".join(row[0] for row in connection.execute(f"EXPLAIN {query}", values))
            )
    for plan, (after, _, tag) in zip(plans, PAGES, strict=True):
        index = "plants_pkey" if tag is None else "plants_by_tag"
        assert f"Index Scan using {index} on plants" in plan
        # Neither every plant (of the tag) read and sorted, nor a walk that filters.
        assert "Sort" not in plan
        assert "Seq Scan" not in plan
        assert "Filter" not in plan
        assert ("Index Cond" in plan) == (after is not None or tag is not None)


def test_postgresql_close_ends_the_sessions(postgres_url):
    store = PostgresStore(postgres_url)
    store.add(1, FERN)
    # The sessions opened with the test's URL, which names them (`application_name`).
    count = (
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE application_name = current_setting('application_name') AND pid <> pg_backend_pid()"
    )
    with psycopg.connect(postgres_url, autocommit=True) as observer:
        assert observer.execute(count).fetchone()[0] >= 1
        store.close()
        deadline = time.monotonic() + 10
        while observer.execute(count).fetchone()[0] and time.monotonic() < deadline:
            pass  # a backend takes a moment to exit after its client said goodbye
        assert observer.execute(count).fetchone()[0] == 0


def test_a_runtime_closes_the_store_it_opened(sqlite_url):
    config = Config(tokens=frozenset({"t"}), store_url=sqlite_url)
    with Runtime(config) as runtime:
        assert runtime.store.get(1) is None
    with pytest.raises(sqlite3.ProgrammingError, match="closed database"):
        runtime.store.get(1)


def test_the_app_factory_starts_nothing_and_closes_nothing(receiver):
    config = Config(
        tokens=frozenset({"t"}),
        webhook_urls=(receiver.url,),
        webhook_secret="whsec_" + "c2VjcmV0" * 4,
    )
    store = MemoryStore(config.webhook_urls)
    threads = threading.active_count()
    create_app(config, store)
    assert threading.active_count() == threads
    assert store.add(1, FERN) == FERN
