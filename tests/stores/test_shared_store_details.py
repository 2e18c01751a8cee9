"""What the SQLite and PostgreSQL stores promise beyond the contract: durability, clean closing."""

import sqlite3
import threading
import time

import psycopg
import pytest

from plantstore.app import create_app
from plantstore.config import Config
from plantstore.core.events import Event, EventKind, documents_of
from plantstore.runtime import Runtime
from plantstore.stores import changes, postgres_batch
from plantstore.stores.memory import MemoryStore
from plantstore.stores.postgres import PostgresStore
from plantstore.stores.sql import page_query
from plantstore.stores.sqlite import PLANT_BYTES, SqliteStore
from plantstore.stores.sqlite_file import SqliteFile
from plantstore.testing.feed import event_of

FERN = b'{"name":"fern"}'
ROSE = b'{"name":"rose","tag":"red"}'
#: Pages as the service asks for them: the first and a later one, of all plants or of one tag.
PAGES = [(None, 100, None), (25_000, 100, None), (None, 100, "tag 3"), (25_000, 100, "tag 3")]


def test_sqlite_syncs_every_commit_of_its_write_ahead_log(tmp_path):
    """Each connection a store opens to its file, its first and every thread's after it."""
    file = SqliteFile(str(tmp_path / "plants.db"), busy_timeout=5, started_with=None)
    for connection in (file.first_connection(create=True), file.open(create=False)):
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert connection.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
        connection.close()
    file.close()


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


def test_postgresql_a_batch_reads_again_an_id_made_between_its_read_and_its_insert(
    monkeypatch, postgres_url
):
    """The id held nothing when the batch read it, so there was no row to lock: another
    transaction made it meanwhile. The batch's insert fails, and the batch is read and made
    again, as though it came after the other."""
    store = PostgresStore(postgres_url)
    made = []

    def plan_once_another_made_it(batch, kept, events):
        if not made:
            with psycopg.connect(postgres_url, autocommit=True) as other:
                insert = "INSERT INTO plants (id, plant) VALUES (1, %s)"
                made.append(other.execute(insert, (FERN.decode(),)).rowcount)
        return changes.plan(batch, kept, events)

    monkeypatch.setattr(postgres_batch, "plan", plan_once_another_made_it)
    try:
        assert store.add(1, ROSE) == FERN
        assert made == [1]
        assert store.get(1) == FERN
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


def test_postgresql_checks_a_batchs_order_by_index_however_the_feed_grew(postgres_url):
    """`plantstore_events_in_order` runs on each batch, its query planned once a session:
    planned while the feed is empty, then run on one that grew, it still probes the index and
    reads no table through (which, on a feed of millions, every batch would pay)."""
    PostgresStore(postgres_url).close()
    check = "SELECT plantstore_events_in_order(ARRAY[5, 7], 1 << 40)"
    with psycopg.connect(postgres_url, autocommit=True) as session:
        for _ in range(10):  # past the five runs after which a session keeps a generic plan
            session.execute(check)
        with psycopg.connect(postgres_url, autocommit=True) as writer:
            writer.execute(
                "INSERT INTO events (position, plant_id, at, document) "
                "SELECT n, n, 0, '' FROM generate_series(1, 20000) AS n"
            )
        before = scans(session)
        session.execute(check)
        after = scans(session)
    assert after[0] == before[0]
    assert after[1] > before[1]


def scans(session: psycopg.Connection) -> tuple[int, int]:
    """The sequential and index scans of `events` this session made and has not yet reported."""
    return session.execute(
        "SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables WHERE relname = 'events'"
    ).fetchone()


def test_postgresql_makes_a_batch_again_rather_than_put_an_event_before_a_later_one(postgres_url):
    """A transaction's id may be older than that of one which changed the same plant and
    committed first. A batch whose positions would come before an event of one of its plants
    already in the feed is made again, with a newer id, until its event comes after it: here
    an event made a few transaction ids ahead."""
    store = PostgresStore(postgres_url)
    try:
        store.add(5, FERN)
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            (now,) = connection.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()
            ahead = (now + 3) * postgres_batch.POSITIONS_PER_TRANSACTION
            (planted,) = documents_of([Event(ahead, EventKind.UPDATED, 5, FERN, 0)])
            connection.execute(
                "INSERT INTO events (position, plant_id, at, document) VALUES (%s, 5, 0, %s)",
                (ahead, planted),
            )
        store.put(5, ROSE)
        with psycopg.connect(postgres_url) as connection:
            events = connection.execute(
                "SELECT position, document FROM events WHERE plant_id = 5 ORDER BY position"
            ).fetchall()
    finally:
        store.close()
    (last_position, last_document) = events[-1]
    assert event_of(last_document).plant == ROSE
    assert last_position > ahead
