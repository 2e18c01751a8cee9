"""The schema's versions: an empty or a 1.0.0 database is brought up to date, once, however many
workers start together, and a database that a newer plantstore changed is left alone.
"""

import contextlib
import multiprocessing
import sqlite3
import time
from functools import partial
from urllib.parse import urlsplit

import orjson
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from plantstore.api.schemas import MAX_PAGE_BYTES
from plantstore.core.events import subscriber_key
from plantstore.core.stores import SchemaTooNew, StoreUnavailable, StoreUnusable
from plantstore.stores import postgres_schema as postgres_steps
from plantstore.stores import sqlite_schema as sqlite_steps
from plantstore.stores.postgres import PostgresStore
from plantstore.stores.sqlite import SqliteStore
from tests.support.concurrency import at_once

#: Plants as 1.0.0 kept them, with tags that SQL's JSON functions get wrong.
OLD_PLANTS = {
    -(2**63): orjson.dumps({"name": "fern"}),
    1: orjson.dumps({"name": "rose", "tag": "red"}),
    2: orjson.dumps({"name": "\u0000", "tag": "red"}),
    3: orjson.dumps({"name": "nul", "tag": "\u0000"}),
    4: orjson.dumps({"name": "empty", "tag": ""}),
    2**63 - 1: orjson.dumps({"name": "日本", "tag": "日本 🌿"}),
}
TAGGED = {"red": [1, 2], "\u0000": [3], "": [4], "日本 🌿": [2**63 - 1], "a": []}


def assert_the_old_plants_are_served(store):
    for plant_id, plant in OLD_PLANTS.items():
        assert store.get(plant_id) == plant
    assert store.page(None, 100, None, MAX_PAGE_BYTES).plants == sorted(OLD_PLANTS.items())
    for tag, plant_ids in TAGGED.items():
        assert store.page(None, 100, tag, MAX_PAGE_BYTES).plants == [
            (n, OLD_PLANTS[n]) for n in plant_ids
        ]
    assert store.add(1, b'{"name":"ivy"}') == OLD_PLANTS[1]
    assert store.add(5, b'{"name":"ivy","tag":"red"}') == b'{"name":"ivy","tag":"red"}'
    assert [plant_id for plant_id, _ in store.page(1, 100, "red", MAX_PAGE_BYTES).plants] == [2, 5]


def record_a_run(connection):
    """A step of a later version, which counts the times it is taken."""
    connection.execute("CREATE TABLE IF NOT EXISTS runs (run integer)")
    connection.execute("INSERT INTO runs (run) VALUES (1)")


@pytest.fixture
def one_step_more(monkeypatch):
    """Let the stores know one step more, `record_a_run`; give the version it makes."""
    for module in (sqlite_steps, postgres_steps):
        monkeypatch.setattr(module, "STEPS", (*module.STEPS, record_a_run))
    return len(sqlite_steps.STEPS)


def open_at_once(open_store, count=8):
    """Open `count` stores from as many threads at once; assert that each opened."""
    for store in at_once(count, lambda n: open_store()):
        store.close()


def sqlite_schema(path):
    with sqlite3.connect(path) as connection:
        (version,) = connection.execute("PRAGMA user_version").fetchone()
        names = connection.execute("SELECT type, name FROM sqlite_schema ORDER BY name")
        return version, names.fetchall()


def sqlite_runs(path):
    with sqlite3.connect(path) as connection:
        return connection.execute("SELECT count(*) FROM runs").fetchone()[0]


def test_an_empty_sqlite_database_is_brought_to_the_current_version(tmp_path):
    SqliteStore(str(tmp_path / "plants.db")).close()
    assert sqlite_schema(tmp_path / "plants.db") == (
        5,
        [
            ("table", "events"),
            ("table", "feed"),
            ("table", "outbox"),
            ("index", "outbox_due"),
            ("table", "plants"),
            ("index", "plants_by_tag"),
            ("table", "sqlite_sequence"),
        ],
    )


def test_a_sqlite_database_that_1_0_0_made_is_brought_up_to_date(tmp_path):
    path = tmp_path / "plants.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE plants (id INTEGER PRIMARY KEY, plant TEXT NOT NULL)")
        connection.executemany(
            "INSERT INTO plants (id, plant) VALUES (?, ?)",
            [(plant_id, plant.decode()) for plant_id, plant in OLD_PLANTS.items()],
        )
    store = SqliteStore(str(path))
    try:
        assert sqlite_schema(path)[0] == 5
        assert_the_old_plants_are_served(store)
    finally:
        store.close()


def test_opening_an_up_to_date_sqlite_database_changes_nothing(tmp_path, one_step_more):
    path = tmp_path / "plants.db"
    SqliteStore(str(path)).close()
    schema = sqlite_schema(path)
    SqliteStore(str(path)).close()
    assert sqlite_schema(path) == schema
    assert schema[0] == one_step_more
    assert sqlite_runs(path) == 1


def test_sqlite_stores_opened_at_once_migrate_once(tmp_path, one_step_more):
    path = tmp_path / "plants.db"
    open_at_once(lambda: SqliteStore(str(path)))
    assert sqlite_schema(path)[0] == one_step_more
    assert sqlite_runs(path) == 1


def open_with_one_step_more(path, start):
    """In a process of its own, as a gunicorn worker: open the store when all are ready."""
    sqlite_steps.STEPS = (*sqlite_steps.STEPS, record_a_run)
    start.wait(timeout=60)
    SqliteStore(path).close()


@pytest.mark.slow
def test_sqlite_stores_opened_at_once_by_processes_migrate_once(tmp_path):
    path = tmp_path / "plants.db"
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(8)
    workers = [
        spawn.Process(target=open_with_one_step_more, args=(str(path), start)) for _ in range(8)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [worker.exitcode for worker in workers] == [0] * 8
    assert sqlite_schema(path)[0] == 6
    assert sqlite_runs(path) == 1


def test_a_sqlite_database_of_a_newer_plantstore_is_left_alone(tmp_path):
    path = tmp_path / "plants.db"
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA user_version = 6")
    with pytest.raises(SchemaTooNew) as raised:
        SqliteStore(str(path))
    assert str(raised.value) == (
        f"SQLite {path} has schema version 6, but this plantstore knows versions up to 5: "
        "run a newer plantstore on it"
    )
    assert sqlite_schema(path) == (6, [])


def test_a_locked_sqlite_database_is_unavailable_while_it_needs_migrating(tmp_path):
    path = tmp_path / "plants.db"
    other_process = sqlite3.connect(path, isolation_level=None)
    other_process.execute("PRAGMA journal_mode = WAL")
    other_process.execute("CREATE TABLE plants (id INTEGER PRIMARY KEY, plant TEXT NOT NULL)")
    other_process.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreUnavailable, match="database is locked"):
        SqliteStore(str(path), busy_timeout=0.05)
    other_process.execute("ROLLBACK")
    SqliteStore(str(path)).close()
    assert sqlite_schema(path)[0] == 5


def postgres_schema(url):
    """The version rows, and the plants table's columns and indexes."""
    with psycopg.connect(url) as connection:
        versions = connection.execute("SELECT version FROM plantstore_schema").fetchall()
        columns = connection.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = 'plants' "
            "ORDER BY ordinal_position"
        ).fetchall()
        indexes = connection.execute(
            "SELECT indexdef FROM pg_indexes "
            "WHERE schemaname = current_schema() AND tablename = 'plants' ORDER BY indexname"
        ).fetchall()
    return versions, columns, [indexdef for (indexdef,) in indexes]


def postgres_runs(url):
    with psycopg.connect(url) as connection:
        return connection.execute("SELECT count(*) FROM runs").fetchone()[0]


def test_an_empty_postgresql_database_is_brought_to_the_current_version(postgres_url):
    PostgresStore(postgres_url).close()
    with psycopg.connect(postgres_url) as connection:
        (schema,) = connection.execute("SELECT current_schema()").fetchone()
    assert postgres_schema(postgres_url) == (
        [(5,)],
        [("id", "bigint"), ("plant", "json"), ("tag", "bytea")],
        [
            f"CREATE INDEX plants_by_tag ON {schema}.plants USING btree (tag, id)",
            f"CREATE UNIQUE INDEX plants_pkey ON {schema}.plants USING btree (id)",
        ],
    )


def test_a_postgresql_database_that_1_0_0_made_is_brought_up_to_date(postgres_url):
    with psycopg.connect(postgres_url) as connection:
        connection.execute("CREATE TABLE plants (id bigint PRIMARY KEY, plant json NOT NULL)")
        connection.cursor().executemany(
            "INSERT INTO plants (id, plant) VALUES (%s, %s::json)",
            [(plant_id, plant.decode()) for plant_id, plant in OLD_PLANTS.items()],
        )
    store = PostgresStore(postgres_url)
    try:
        assert postgres_schema(postgres_url)[0] == [(5,)]
        assert_the_old_plants_are_served(store)
    finally:
        store.close()


def test_opening_an_up_to_date_postgresql_database_changes_nothing(postgres_url, one_step_more):
    PostgresStore(postgres_url).close()
    schema = postgres_schema(postgres_url)
    PostgresStore(postgres_url).close()
    assert postgres_schema(postgres_url) == schema
    assert schema[0] == [(one_step_more,)]
    assert postgres_runs(postgres_url) == 1


def test_postgresql_stores_opened_at_once_migrate_once(postgres_url, one_step_more):
    open_at_once(lambda: PostgresStore(postgres_url))
    assert postgres_schema(postgres_url)[0] == [(one_step_more,)]
    assert postgres_runs(postgres_url) == 1


def test_a_postgresql_database_of_a_newer_plantstore_is_left_alone(postgres_url):
    with psycopg.connect(postgres_url) as connection:
        connection.execute("CREATE TABLE plantstore_schema (version integer NOT NULL)")
        connection.execute("INSERT INTO plantstore_schema (version) VALUES (6)")
    with pytest.raises(SchemaTooNew) as raised:
        PostgresStore(postgres_url)
    database = urlsplit(postgres_url).path[1:]
    assert str(raised.value) == (
        f"PostgreSQL database {database} has schema version 6, but this plantstore knows "
        "versions up to 5: run a newer plantstore on it"
    )
    with psycopg.connect(postgres_url) as connection:
        assert connection.execute("SELECT to_regclass('plants')").fetchone() == (None,)


def test_a_postgresql_database_not_in_utf8_is_refused_and_left_alone(not_utf8_postgres):
    """Rather than a plant kept and then a 500 for every read of it (SQL_ASCII), or for a name
    the encoding has no character for (LATIN1)."""
    url, encoding = not_utf8_postgres
    with pytest.raises(StoreUnusable) as raised:
        PostgresStore(url)
    assert str(raised.value) == (
        f"PostgreSQL database {url.rsplit('/', 1)[1]} has encoding {encoding}, but plantstore "
        "needs UTF8: create the database with ENCODING 'UTF8'"
    )
    with psycopg.connect(url) as connection:
        assert connection.execute(
            "SELECT to_regclass('plantstore_schema'), to_regclass('plants')"
        ).fetchone() == (None, None)


def test_postgresql_text_is_utf8_whatever_client_encoding_the_url_asks(postgres_url):
    cactus = orjson.dumps({"name": "🌵", "tag": "日本"})
    store = PostgresStore(make_conninfo(postgres_url, client_encoding="LATIN1"))
    try:
        assert store.add(1, cactus) == cactus
        assert store.get(1) == cactus
        assert store.page(None, 10, "日本", MAX_PAGE_BYTES).plants == [(1, cactus)]
    finally:
        store.close()


@pytest.mark.slow
def test_a_postgresql_database_down_at_start_is_migrated_when_it_is_back(postgres_cluster):
    postgres_cluster.stop()
    store = PostgresStore(postgres_cluster.url())
    try:
        postgres_cluster.start()
        deadline = time.monotonic() + 60
        while True:  # bounded poll: the pool says nothing when it has reconnected
            try:
                assert store.add(1, b'{"name":"fern","tag":"red"}')
                break
            except StoreUnavailable:
                assert time.monotonic() < deadline
        assert postgres_schema(postgres_cluster.url())[0] == [(5,)]
        assert store.page(None, 10, "red", MAX_PAGE_BYTES).plants == [
            (1, b'{"name":"fern","tag":"red"}')
        ]
    finally:
        store.close()


def opened_on(kind, tmp_path, request):
    """The schema module of `kind`, and how to open a store of it on the test's database."""
    if kind == "sqlite":
        return sqlite_steps, lambda *args: SqliteStore(str(tmp_path / "plants.db"), *args)
    return postgres_steps, partial(PostgresStore, request.getfixturevalue("postgres_url"))


def outbox_rows(kind, tmp_path, request):
    """Every row of the outbox, each as a tuple of its columns."""
    if kind == "sqlite":
        with contextlib.closing(sqlite3.connect(tmp_path / "plants.db")) as connection:
            return connection.execute("SELECT * FROM outbox ORDER BY id").fetchall()
    with psycopg.connect(request.getfixturevalue("postgres_url")) as connection:
        return connection.execute("SELECT * FROM outbox ORDER BY id").fetchall()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_1_1_0_database_gets_its_outbox_and_keeps_its_plants(
    kind, tmp_path, request, monkeypatch
):
    """1.1.0's schema (the first two steps, a plant in it) takes the steps after them."""
    module, opener = opened_on(kind, tmp_path, request)
    steps = module.STEPS
    with monkeypatch.context() as old:
        old.setattr(module, "STEPS", steps[:2])
        opener().close()
    insert = "INSERT INTO plants (id, plant) VALUES "
    if kind == "sqlite":
        with contextlib.closing(sqlite3.connect(tmp_path / "plants.db")) as connection:
            connection.execute(insert + "(?, ?)", (1, OLD_PLANTS[1].decode()))
            connection.commit()
    else:
        with psycopg.connect(request.getfixturevalue("postgres_url")) as connection:
            connection.execute(insert + "(%s, %s)", (1, OLD_PLANTS[1].decode()))
    key = subscriber_key("http://subscriber.example/hooks")
    store = opener([key])
    try:
        assert store.get(1) == OLD_PLANTS[1]
        assert store.claim(key, time.time(), time.time() + 60, 10) == []
        store.add(5, b'{"name":"ivy"}')
        (delivery,) = store.claim(key, time.time(), time.time() + 60, 10)
        assert orjson.loads(delivery.body)["data"] == {"id": 5, "name": "ivy"}
    finally:
        store.close()
    if kind == "sqlite":
        assert sqlite_schema(tmp_path / "plants.db")[0] == len(steps) == 5


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_deliveries_waiting_for_urls_wait_for_their_subscribers_keys_after_the_upgrade(
    kind, tmp_path, request, monkeypatch
):
    """The outbox's first schema kept each delivery's URL, a password in it included; the next
    step keeps the subscriber's key instead, computed from the URL as the deliverer computes it
    from the one it is configured with, so each delivery still goes to its subscriber."""
    module, opener = opened_on(kind, tmp_path, request)
    with monkeypatch.context() as old:
        old.setattr(module, "STEPS", module.STEPS[:3])
        opener().close()
    urls = ["http://user:hunter2@hooks.example/in", "http://hooks.example/other?list=2"]
    waiting = [
        (f"msg_{n}", url, b'{"type":"plant.deleted"}', 1.0, 2.0) for n, url in enumerate(urls)
    ]
    insert = "INSERT INTO outbox (webhook_id, url, body, created_at, next_attempt_at) VALUES "
    if kind == "sqlite":
        with contextlib.closing(sqlite3.connect(tmp_path / "plants.db")) as connection:
            connection.executemany(insert + "(?, ?, ?, ?, ?)", waiting)
            connection.commit()
    else:
        with psycopg.connect(request.getfixturevalue("postgres_url")) as connection:
            connection.cursor().executemany(insert + "(%s, %s, %s, %s, %s)", waiting)
    keys = [subscriber_key(url) for url in urls]
    store = opener(keys)
    try:
        assert [row[2] for row in outbox_rows(kind, tmp_path, request)] == keys
        assert "hunter2" not in str(outbox_rows(kind, tmp_path, request))
        for n, key in enumerate(keys):
            (delivery,) = store.claim(key, time.time(), time.time() + 60, 10)
            assert (delivery.webhook_id, delivery.subscriber) == (f"msg_{n}", key)
    finally:
        store.close()
