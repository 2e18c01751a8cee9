"""A store that cannot serve: 503 with a retry hint, soon; /readyz says so, and the log why.

It recovers by itself, but for an SQLite file removed or replaced in use, which only a
restart may take for the store's own.
"""

import contextlib
import dataclasses
import errno
import io
import itertools
import os
import shutil
import socket
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import falcon.testing
import psycopg
import pytest
from psycopg import sql

from plantstore.app import create_app
from plantstore.core.plants import Put
from plantstore.core.stores import StoreUnavailable
from plantstore.operations import health
from plantstore.operations.health import READY_ANSWER_SECONDS
from plantstore.stores import open_store, prepare_store
from plantstore.stores.gate import STALLED_SECONDS, GatedStore
from plantstore.stores.postgres import PostgresStore
from plantstore.stores.postgres_connections import (
    OUTAGE_WAIT_SECONDS,
    REQUEST_SECONDS,
    STATEMENT_SECONDS,
)
from plantstore.stores.sqlite import BUSY_TIMEOUT_SECONDS, WROTE_RECENTLY_SECONDS, SqliteStore
from plantstore.testing.gunicorn_server import GunicornServer, server_environ
from tests.conftest import TOKEN
from tests.support.concurrency import at_once

FERN = {"id": 1, "name": "fern"}
IVY = {"id": 2, "name": "ivy"}


def client_of(config, store):
    return falcon.testing.TestClient(
        create_app(config, store), headers={"Authorization": f"Bearer {TOKEN}"}
    )


@pytest.fixture
def fern_on_postgres(config, postgres_cluster):
    """A client of the app on a store in `postgres_cluster`, which keeps FERN; closed after."""
    store = PostgresStore(postgres_cluster.url())
    try:
        client = client_of(config, store)
        assert client.simulate_post("/plants", json=FERN).status_code == 200
        yield client
    finally:
        store.close()


def assert_unavailable(result):
    assert result.status_code == 503
    assert result.headers["content-type"] == "application/json"
    assert result.headers["retry-after"] == "1"
    assert result.json == {
        "error": 503,
        "message": "The store cannot serve right now; try again shortly.",
    }


@pytest.fixture(autouse=True)
def readiness_asked_at_every_probe(monkeypatch):
    """These tests change what the store can do between two probes, within a second."""
    monkeypatch.setattr(health, "READY_ANSWER_SECONDS", 0)


def test_a_locked_sqlite_database_answers_503_until_it_is_free(config, tmp_path, caplog):
    path = str(tmp_path / "plants.db")
    client = client_of(config, SqliteStore(path, busy_timeout=0.05))
    other_process = sqlite3.connect(path, isolation_level=None)
    other_process.execute("BEGIN IMMEDIATE")

    assert_unavailable(client.simulate_post("/plants", json=FERN))
    assert "database is locked" in caplog.text
    assert_unavailable(client.simulate_get("/readyz"))
    assert client.simulate_get("/healthz").json == {"status": "ok"}

    other_process.execute("ROLLBACK")
    assert client.simulate_post("/plants", json=FERN).status_code == 200
    assert client.simulate_get("/readyz").json == {"status": "ready"}


def test_readiness_logs_each_change_once_with_its_cause(config, tmp_path, caplog):
    path = str(tmp_path / "plants.db")
    client = client_of(config, SqliteStore(path, busy_timeout=0.05))
    other_process = sqlite3.connect(path, isolation_level=None)
    errors = io.StringIO()

    def probe(times):
        for _ in range(times):
            client.simulate_get("/readyz", extras={"wsgi.errors": errors})

    probe(2)
    other_process.execute("BEGIN IMMEDIATE")
    probe(3)
    other_process.execute("ROLLBACK")
    probe(3)

    assert [(record.levelname, record.getMessage()) for record in caplog.records] == [
        ("WARNING", f"not ready: SQLite {path}: database is locked"),
        ("WARNING", "ready again"),
    ]
    assert errors.getvalue() == ""


def test_readyz_waits_at_most_half_a_second_for_the_write_lock(config, tmp_path):
    path = str(tmp_path / "plants.db")
    client = client_of(config, SqliteStore(path, busy_timeout=5.0))
    other_process = sqlite3.connect(path, isolation_level=None)
    other_process.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    assert_unavailable(client.simulate_get("/readyz"))
    assert time.monotonic() - started < 0.9
    other_process.execute("ROLLBACK")


def remove_database(path):
    for suffix in ("", "-wal", "-shm"):
        os.remove(f"{path}{suffix}")


def replace_database(path):
    """As a backup restored in its place would."""
    other = path.with_name("other.db")
    SqliteStore(str(other)).close()
    remove_database(path)
    os.replace(other, path)


def in_a_thread_of_its_own(request):
    """Make the request on a new thread, which has no connection of its own yet."""
    answers = []
    thread = threading.Thread(target=lambda: answers.append(request()))
    thread.start()
    thread.join()
    return answers[0]


@pytest.mark.parametrize("change", [remove_database, replace_database])
def test_a_sqlite_file_removed_or_replaced_in_use_is_refused_until_a_restart(
    config, tmp_path, caplog, change
):
    """What the store writes then goes to a file nobody opens again: it must not answer 200."""
    path = tmp_path / "plants.db"
    store = SqliteStore(str(path))
    client = client_of(config, store)
    try:
        assert client.simulate_post("/plants", json=FERN).status_code == 200
        change(path)
        replacement = path.exists() and path.stat().st_ino

        assert_unavailable(
            in_a_thread_of_its_own(lambda: client.simulate_post("/plants", json=IVY))
        )
        # No connection of the store made an empty database where the old one was.
        assert (path.exists() and path.stat().st_ino) == replacement
        assert_unavailable(client.simulate_post("/plants", json=IVY))
        assert_unavailable(client.simulate_get("/plants/1"))
        assert_unavailable(client.simulate_get("/readyz"))
        assert client.simulate_get("/healthz").status_code == 200

        # Still refused when a database is back at the path: only a restart takes it.
        if not path.exists():
            SqliteStore(str(path)).close()
        assert_unavailable(client.simulate_post("/plants", json=IVY))
        assert_unavailable(client.simulate_get("/readyz"))
    finally:
        store.close()
    stored = sqlite3.connect(path).execute("SELECT id FROM plants").fetchall()
    assert stored == []
    store_errors = [r for r in caplog.records if r.name == "plantstore.stores.sqlite_file"]
    assert [(r.levelname, r.getMessage()) for r in store_errors] == [
        (
            "ERROR",
            f"SQLite {path} was removed or replaced while in use: every request is refused until "
            "the service restarts (a SIGHUP is not enough), since the plants it acknowledged are "
            "in the file it started with",
        )
    ]


def restore_a_copy(path):
    """`cp` then `mv`, as a backup taken by copying might be restored: the running database's
    log and index (`-wal`, `-shm`) stay, and hold writes that the copy does not."""
    copy = path.with_name("copy.db")
    shutil.copyfile(path, copy)
    os.replace(copy, path)


def files_at(path):
    """What the database's files at `path` hold now (None for one that is missing)."""
    files = (path.with_name(f"{path.name}{suffix}") for suffix in ("", "-wal", "-shm"))
    return [file.read_bytes() if file.exists() else None for file in files]


def test_sqlite_alone_mixes_a_file_put_in_place_of_its_own_with_the_old_ones_log(tmp_path):
    """Why plantstore/stores/sqlite_file.py guards the file: SQLite names a database by its path.

    A database restored in place of the running one (holding plant 2) is read, by a connection
    opened since and by the one open before, through the old file's write-ahead log (plant 1),
    without a word; folding the log in then loses plant 2 for good.
    """
    path = tmp_path / "plants.db"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as running:
        running.execute("PRAGMA journal_mode = WAL")
        running.execute("CREATE TABLE plants (id INTEGER PRIMARY KEY)")
        restored = path.with_name("restored.db")
        with contextlib.closing(sqlite3.connect(restored, isolation_level=None)) as made:
            made.execute("CREATE TABLE plants (id INTEGER PRIMARY KEY)")
            made.execute("INSERT INTO plants VALUES (2)")
        os.replace(restored, path)
        running.execute("INSERT INTO plants VALUES (1)")
        with contextlib.closing(sqlite3.connect(path)) as later:
            assert later.execute("SELECT id FROM plants").fetchall() == [(1,)]
    with contextlib.closing(sqlite3.connect(path)) as after:
        assert after.execute("SELECT id FROM plants").fetchall() == [(1,)]


def test_a_start_that_waits_for_its_store_is_told_why_once_and_not_when_it_may_not_wait():
    """So that a start waiting for PostgreSQL says so, rather than nothing for seconds; in
    libpq's first line, which names no password."""
    url = "postgresql://plantstore:hunter2@127.0.0.1:1/plants"
    told = []
    with pytest.raises(StoreUnavailable) as caught:
        prepare_store(url, wait=0.6, on_waiting=told.append)
    (why,) = told
    assert str(why) == str(caught.value)
    assert str(why).startswith("PostgreSQL: connection ")
    assert str(why).endswith('"127.0.0.1", port 1 failed: Connection refused')
    assert "hunter2" not in str(why)
    told.clear()
    with pytest.raises(StoreUnavailable):
        prepare_store(url, wait=0, on_waiting=told.append)
    assert told == []


@pytest.mark.parametrize("change", [remove_database, replace_database, restore_a_copy])
def test_a_store_opened_after_the_file_the_service_started_with_was_replaced_refuses_it(
    config, tmp_path, caplog, monkeypatch, change
):
    """As a worker started in place of one that died, or at a SIGHUP: it touches nothing at
    the path, where a copy would meet the log of the file it replaced and mix the two."""
    path = tmp_path / "plants.db"
    url = f"sqlite:///{path}"
    started_with = prepare_store(url, wait=0)
    running = open_store(url, started_with=started_with)
    try:
        running.add(1, b'{"name":"fern"}')
        change(path)
        before = files_at(path)

        late = open_store(url, started_with=started_with)
        client = client_of(config, late)
        assert_unavailable(client.simulate_post("/plants", json=IVY))
        assert_unavailable(in_a_thread_of_its_own(lambda: client.simulate_get("/plants/1")))
        assert_unavailable(client.simulate_get("/readyz"))
        late.close()
        assert files_at(path) == before
    finally:
        running.close()
    store_errors = [r for r in caplog.records if r.name == "plantstore.stores.sqlite_file"]
    assert [r.getMessage() for r in store_errors] == [
        f"SQLite {path} was removed or replaced while in use: every request is refused until "
        "the service restarts (a SIGHUP is not enough), since the plants it acknowledged are "
        "in the file it started with"
    ]


def damage_the_table(path):
    """Overwrite the first page of the plants' table with bytes that are no page at all."""
    with sqlite3.connect(path) as connection:
        (root,) = connection.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'plants'"
        ).fetchone()
        (page_size,) = connection.execute("PRAGMA page_size").fetchone()
    connection.close()
    with open(path, "r+b") as database:
        database.seek((root - 1) * page_size)
        database.write(b"\xff" * page_size)


def test_a_damaged_database_answers_503_and_is_not_ready(config, tmp_path, caplog):
    path = tmp_path / "plants.db"
    SqliteStore(str(path)).close()
    damage_the_table(path)
    store = SqliteStore(str(path))
    client = client_of(config, store)
    try:
        assert_unavailable(client.simulate_post("/plants", json=FERN))
        assert_unavailable(client.simulate_get("/plants/1"))
        assert_unavailable(client.simulate_get("/readyz"))
    finally:
        store.close()
    assert readiness_told(caplog) == [f"not ready: SQLite {path}: database disk image is malformed"]


def fill(path):
    """Write to `path` until the disk is full."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(descriptor, b"x" * 4096)
    except OSError as ex:
        assert ex.errno == errno.ENOSPC
    finally:
        os.close(descriptor)


def readiness_told(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "plantstore.operations.health"]


def test_a_full_disk_is_not_ready_until_there_is_room_again(config, small_disk, caplog):
    path = small_disk / "plants.db"
    store = SqliteStore(str(path))
    client = client_of(config, store)
    try:
        assert client.simulate_post("/plants", json=FERN).status_code == 200
        fill(small_disk / "filler")
        assert_unavailable(client.simulate_post("/plants", json=IVY))
        assert_unavailable(client.simulate_get("/readyz"))
        assert readiness_told(caplog) == [f"not ready: SQLite {path}: database or disk is full"]

        (small_disk / "filler").unlink()
        assert client.simulate_get("/readyz").json == {"status": "ready"}
        assert client.simulate_post("/plants", json=IVY).status_code == 200
    finally:
        store.close()


@pytest.mark.parametrize("suffixes", [("",), ("", "-wal")], ids=["file", "file and log"])
def test_an_immutable_database_is_not_ready(config, tmp_path, immutable, suffixes, caplog):
    """Made immutable, with its log or without, the store is not ready, and a change whose
    batch is led by a thread that opens its connection now is 503: a connection opened before
    goes on writing to the log (and syncing it), but no new connection can write, and no
    checkpoint can fold the log into the file."""
    path = tmp_path / "plants.db"
    store = SqliteStore(str(path))
    client = client_of(config, store)
    try:
        assert client.simulate_post("/plants", json=FERN).status_code == 200
        immutable(*(f"{path}{suffix}" for suffix in suffixes))
        assert_unavailable(client.simulate_get("/readyz"))
        assert readiness_told(caplog) == [
            f"not ready: SQLite {path}: attempt to write a readonly database"
        ]
        assert_unavailable(
            in_a_thread_of_its_own(lambda: client.simulate_post("/plants", json=IVY))
        )
    finally:
        store.close()


def test_readyz_needs_no_token(anonymous):
    result = anonymous.simulate_get("/readyz")
    assert (result.status_code, result.json) == (200, {"status": "ready"})


def post_until_served(client, body, seconds=60):
    """Bounded poll: a restarted server says nothing when the pool has reconnected to it."""
    deadline = time.monotonic() + seconds
    while True:
        result = client.simulate_post("/plants", json=body)
        if result.status_code != 503 or time.monotonic() > deadline:
            return result


@pytest.mark.slow
def test_postgresql_going_down_answers_503_and_recovers_without_a_restart(
    config, postgres_cluster, fern_on_postgres
):
    client = fern_on_postgres
    postgres_cluster.stop()
    assert_unavailable(client.simulate_post("/plants", json={"id": 2, "name": "ivy"}))
    assert_unavailable(client.simulate_get("/readyz"))
    assert client.simulate_get("/healthz").status_code == 200
    late_store = PostgresStore(postgres_cluster.url())
    started_while_down = client_of(config, late_store)
    assert_unavailable(started_while_down.simulate_get("/readyz"))

    postgres_cluster.start()
    try:
        assert post_until_served(client, {"id": 2, "name": "ivy"}).status_code == 200
        assert client.simulate_post("/plants", json=FERN).json == {"name": "fern"}
        assert client.simulate_post("/plants", json={"id": 1, "name": "rose"}).status_code == 409
        assert client.simulate_get("/readyz").status_code == 200
        assert post_until_served(started_while_down, FERN).json == {"name": "fern"}
    finally:
        late_store.close()


@pytest.mark.slow
def test_a_postgresql_restart_between_requests_costs_no_request(postgres_cluster, fern_on_postgres):
    """The pooled connection the restart broke is replaced, not answered with a 503."""
    client = fern_on_postgres
    postgres_cluster.stop()
    postgres_cluster.start()
    assert client.simulate_post("/plants", json={"id": 2, "name": "ivy"}).status_code == 200
    assert client.simulate_get("/readyz").status_code == 200


def timed(call, *args, **kwargs):
    """What `call` answers, and how many seconds it took."""
    started = time.monotonic()
    result = call(*args, **kwargs)
    return result, time.monotonic() - started


#: What a thread switch or a busy machine may add to a bound, in seconds.
SLACK = 0.3


@contextmanager
def stopped(cluster):
    """Stop the cluster (`pg_ctl stop`), which ends every session, and start it after."""
    cluster.stop()
    try:
        yield
    finally:
        cluster.start()


def frozen(cluster):
    """Stop the cluster's processes (SIGSTOP): sessions stay open, and nothing answers on them."""
    return cluster.frozen()


@contextmanager
def locked(path):
    """Hold SQLite's write lock from another connection, as another process's writer would."""
    other_process = sqlite3.connect(path, isolation_level=None)
    other_process.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other_process.execute("ROLLBACK")
        other_process.close()


@pytest.mark.slow
@pytest.mark.parametrize("halt", [stopped, frozen])
def test_with_postgresql_down_no_request_waits_past_the_bound(
    postgres_cluster, fern_on_postgres, halt
):
    """Stopped, the server ends its sessions; frozen, it keeps them open and never answers."""
    client = fern_on_postgres

    def post(n):
        return timed(lambda: client.simulate_post("/plants", json={"id": n, "name": "ivy"}))

    # The cluster serves again before the writers are joined: a request that never ends fails
    # the test, and does not hang it.
    with ThreadPoolExecutor(20) as writers, halt(postgres_cluster):
        answers = list(writers.map(post, range(2, 22), timeout=REQUEST_SECONDS + 5))
        for result, seconds in answers:
            assert_unavailable(result)
            assert seconds < REQUEST_SECONDS + SLACK
        # Now that the store knows, a request holds its thread only briefly.
        for n in range(3):
            result, seconds = post(n)
            assert_unavailable(result)
            assert seconds < OUTAGE_WAIT_SECONDS + SLACK
        result, seconds = timed(lambda: client.simulate_get("/readyz"))
        assert_unavailable(result)
        assert seconds < 1
    assert post_until_served(client, {"id": 2, "name": "ivy"}).status_code == 200


@pytest.mark.slow
def test_a_statement_under_way_when_postgresql_freezes_ends_at_the_bound(postgres_cluster):
    """The pool's check of the connection was answered; then the server froze, the statement
    in flight. `statement_timeout` is the server's to enforce, and psycopg has no timeout of
    its own: the store's deadline shuts the connection."""
    store = PostgresStore(postgres_cluster.url())
    try:
        with (
            ThreadPoolExecutor(1) as calls,
            psycopg.connect(postgres_cluster.url(), autocommit=True) as other_session,
            other_session.transaction(),
        ):
            other_session.execute("LOCK TABLE plants IN ACCESS EXCLUSIVE MODE")
            started = time.monotonic()
            add = calls.submit(store.add, 1, b'{"name": "fern"}')
            # Bounded poll: the insert waits for the lock, within its `statement_timeout`.
            waiting = "SELECT count(*) FROM pg_locks WHERE NOT granted"
            while other_session.execute(waiting).fetchone()[0] == 0:
                assert time.monotonic() - started < STATEMENT_SECONDS, "the insert ran"
            # The cluster serves again before `calls` is joined: a call that never ends fails
            # the test, and does not hang it.
            with postgres_cluster.frozen():
                with pytest.raises(StoreUnavailable, match="no answer in time"):
                    add.result(timeout=REQUEST_SECONDS + 5)
                assert time.monotonic() - started < REQUEST_SECONDS + SLACK
    finally:
        store.close()


@pytest.mark.slow
def test_a_database_that_never_answers_holds_no_request_long(config):
    """The port accepts connections, and the server behind it never says a word."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        store = PostgresStore(f"postgresql://plantstore@127.0.0.1:{silent.getsockname()[1]}/p")
        client = client_of(config, store)
        try:
            for request in [
                lambda: client.simulate_post("/plants", json=FERN),
                lambda: client.simulate_get("/plants/1"),
                lambda: client.simulate_get("/readyz"),
            ]:
                result, seconds = timed(request)
                assert_unavailable(result)
                assert seconds < OUTAGE_WAIT_SECONDS + SLACK
        finally:
            store.close()


def test_a_statement_that_waits_on_a_lock_ends_within_the_bound(config, postgres_url):
    store = PostgresStore(postgres_url)
    client = client_of(config, store)
    try:
        assert client.simulate_get("/readyz").status_code == 200
        # The other session ends, and its lock with it, before the requests' threads are joined.
        with ThreadPoolExecutor(2) as requests, psycopg.connect(postgres_url) as other_session:
            other_session.execute("LOCK TABLE plants IN ACCESS EXCLUSIVE MODE")
            post = requests.submit(timed, client.simulate_post, "/plants", json=FERN)
            ready = requests.submit(timed, client.simulate_get, "/readyz")
            # Bounded here too, so that a statement that never ends fails the test.
            for answer, bound in [(post, REQUEST_SECONDS), (ready, 1)]:
                result, seconds = answer.result(timeout=REQUEST_SECONDS + 5)
                assert_unavailable(result)
                assert seconds < bound + SLACK
        assert client.simulate_post("/plants", json=FERN).status_code == 200
    finally:
        store.close()


def test_a_change_waits_past_a_statements_bound_for_a_row_another_transaction_holds(
    postgres_url,
):
    """Another host's batch, held up by its disk, keeps the plant's row longer than a
    statement may run: the change waits for it, within its request's bound, and is made."""
    store = PostgresStore(postgres_url)
    try:
        store.add(1, b'{"name":"fern"}')
        # The other session ends, and its lock with it, before the call's thread is joined.
        with ThreadPoolExecutor(1) as calls, psycopg.connect(postgres_url) as other_session:
            other_session.execute("SELECT * FROM plants WHERE id = 1 FOR UPDATE")
            put = calls.submit(store.put, 1, b'{"name":"ivy"}')
            with pytest.raises(TimeoutError):
                put.result(timeout=2 * STATEMENT_SECONDS)
            other_session.commit()
            assert put.result(timeout=REQUEST_SECONDS) == (Put.REPLACED, b'{"name":"ivy"}')
    finally:
        store.close()


def test_a_read_only_postgresql_is_not_ready(config, postgres_databases):
    """As a standby, or a server whose disk is nearly full and set read-only, would be.

    In a database of its own, which it sets read-only: `postgres_url` is a schema in a
    database that other tests share."""
    url = postgres_databases.name()
    postgres_databases.make(url, "UTF8")
    PostgresStore(url).close()
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on").format(
                sql.Identifier(connection.info.dbname)
            )
        )
    store = PostgresStore(url)
    client = client_of(config, store)
    try:
        assert_unavailable(client.simulate_post("/plants", json=FERN))
        assert_unavailable(client.simulate_get("/readyz"))
    finally:
        store.close()


def test_a_worker_whose_pool_meets_a_database_not_in_utf8_answers_503_and_logs_why(
    config, postgres_databases, worker_app, caplog
):
    """A start refuses such a database; a worker may meet one only later, when it was out of
    reach at the start (here: not made yet). Its pool then makes no connection to it, so
    every request is a 503 (not a 200 and then 500s), and the pool's warnings say why."""
    url = postgres_databases.name()
    client = falcon.testing.TestClient(
        worker_app(dataclasses.replace(config, store_url=url)),
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    postgres_databases.make(url, "SQL_ASCII")
    reason = (
        f"PostgreSQL database {url.rsplit('/', 1)[1]} has encoding SQL_ASCII, but plantstore "
        "needs UTF8"
    )
    deadline = time.monotonic() + 60
    while reason not in caplog.text:  # bounded poll: the pool retries on a timer of its own
        assert_unavailable(client.simulate_post("/plants", json=FERN))
        assert time.monotonic() < deadline
    assert_unavailable(client.simulate_post("/plants", json=FERN))
    assert_unavailable(client.simulate_get("/plants/1"))
    assert_unavailable(client.simulate_get("/plants"))
    assert_unavailable(client.simulate_get("/readyz"))
    with psycopg.connect(url) as connection:
        assert connection.execute("SELECT to_regclass('plants')").fetchone() == (None,)


class HeldStore:
    """A store whose calls wait until `release` is set; `entered` counts those that began."""

    def __init__(self):
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()

    def add(self, plant_id, plant):
        self.entered.release()
        self.release.wait(timeout=5)
        return plant

    def check_ready(self):
        self.add(0, b"")


def test_a_store_that_holds_every_slot_is_refused_further_calls_soon():
    held = HeldStore()
    gated = GatedStore(held, slots=2)
    with ThreadPoolExecutor(2) as holders:
        try:
            calls = [holders.submit(gated.add, n, b"{}") for n in range(2)]
            assert all(held.entered.acquire(timeout=5) for _ in calls)
            for call in [lambda: gated.add(3, b"{}"), gated.check_ready]:
                started = time.monotonic()
                with pytest.raises(StoreUnavailable, match="holds all 2 of this worker's slots"):
                    call()
                assert time.monotonic() - started < STALLED_SECONDS + SLACK
        finally:
            held.release.set()
        assert [call.result() for call in calls] == [b"{}", b"{}"]
    assert gated.add(3, b"{}") == b"{}"


class BusyStore:
    """A store that answers every call after 2 ms, as a healthy database under load would."""

    def add(self, plant_id, plant):
        time.sleep(0.002)
        return plant


def test_a_burst_on_a_store_that_answers_waits_for_its_slots_and_is_served():
    gated = GatedStore(BusyStore(), slots=2)
    answers = at_once(8, lambda n: [gated.add(n, b"{}") for _ in range(10)])
    assert answers == [[b"{}"] * 10] * 8


class OneLongCallStore(BusyStore):
    """A loaded store whose call for id 0 lasts until `others_done`, while the rest answer."""

    def __init__(self):
        self.others_done = threading.Event()

    def add(self, plant_id, plant):
        if plant_id == 0:
            self.others_done.wait(timeout=5)
            return plant
        return super().add(plant_id, plant)


def test_a_long_call_does_not_make_a_store_that_answers_look_stalled():
    """One slot held by a long call, the other serving on: the others queue for it, and are
    served however long that takes, since calls keep leaving the store."""
    store = OneLongCallStore()
    gated = GatedStore(store, slots=2)
    with ThreadPoolExecutor(1) as long_call:
        held = long_call.submit(gated.add, 0, b"{}")
        try:
            answers = at_once(6, lambda n: [gated.add(n + 1, b"{}") for _ in range(30)])
        finally:
            store.others_done.set()
        assert held.result() == b"{}"
    assert answers == [[b"{}"] * 30] * 6


#: The bound of an answer that asks nothing of the store, however busy the store keeps the rest.
PROMPTLY = 0.5
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


def writers_meet(server, halt, seconds=8):
    """Run 20 writers of new plants on `server`; once a plant is kept, enter `halt`, which makes
    the database stop serving, and probe /healthz and /readyz every 0.1 s for `seconds`.

    Gives every POST's (answer, seconds), the ids answered 200, and each probe's (answer,
    seconds, seconds since the halt began) by path. The writers are done, and `halt` left, when
    it returns.
    """
    stop, kept_one = threading.Event(), threading.Event()
    posts, acknowledged = [], []
    probes = {"/healthz": [], "/readyz": []}

    def write(writer):
        for plant_id in itertools.count(writer * 1_000_000):
            if stop.is_set():
                return
            body = b'{"id": %d, "name": "ivy"}' % plant_id
            answer, seconds_taken = timed(server.request, "POST", "/plants", body, HEADERS)
            posts.append((answer, seconds_taken))
            if answer[0] == 200:
                acknowledged.append(plant_id)
                kept_one.set()

    with ThreadPoolExecutor(20) as writers:
        running = [writers.submit(write, n) for n in range(20)]
        try:
            assert kept_one.wait(30)
            with halt:
                halted = time.monotonic()
                while time.monotonic() < halted + seconds:
                    for path, answers in probes.items():
                        sent = time.monotonic() - halted
                        answers.append((*timed(server.request, "GET", path), sent))
                    stop.wait(0.1)
                stop.set()
                for writer in running:
                    writer.result()
        finally:
            stop.set()
    return posts, acknowledged, probes


def served_under_writers(store_url, tmp_path, halt):
    """`writers_meet` on one gunicorn worker of `store_url`, which must serve again after."""
    server = GunicornServer(
        server_environ(PLANTSTORE_TOKENS=TOKEN, PLANTSTORE_STORE=store_url, WEB_CONCURRENCY="1"),
        log_dir=tmp_path,
    )
    try:
        assert server.request("GET", "/readyz")[0] == 200
        posts, acknowledged, probes = writers_meet(server, halt)
        assert served_again(server)
    finally:
        _, error_log = server.stop()
    # Said once, with its cause (the database, or the slots it holds), however many probes
    # were answered 503.
    assert error_log.count("not ready: ") == 1
    return posts, acknowledged, probes


def served_again(server, seconds=60):
    """Bounded poll: whether the service keeps a plant and says it is ready within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        kept = server.request("POST", "/plants", b'{"id": -1, "name": "fern"}', HEADERS)[0]
        if kept == 200 and server.request("GET", "/readyz")[0] == 200:
            return True
    return False


def assert_bounded(posts, probes, store_bound, note_figure, what, ready_lag=READY_ANSWER_SECONDS):
    """Writers' POSTs answered 200, then 503, each within `store_bound` in the store after at
    most `STALLED_SECONDS` waiting for a slot; /healthz always 200 and prompt; /readyz within a
    second, and 503 once `ready_lag` has passed since the halt (a worker answers probes as it
    found the store at most `READY_ANSWER_SECONDS` ago)."""
    readyz = probes["/readyz"]
    lagging = [(answer, seconds) for answer, seconds, sent in readyz if sent < ready_lag]
    for path, answers, statuses, bound in [
        ("POST /plants", posts, {200, 503}, STALLED_SECONDS + store_bound + SLACK),
        ("/healthz", [probe[:2] for probe in probes["/healthz"]], {200}, PROMPTLY),
        ("/readyz", [probe[:2] for probe in readyz[len(lagging) :]], {503}, 1 + SLACK),
    ]:
        assert {answer[0] for answer, _ in answers} == statuses
        slowest = max(seconds for _, seconds in answers)
        note_figure(f"{what}: {len(answers)} {path}, slowest {slowest:.2f} s")
        assert slowest < bound
    assert all(seconds < 1 + SLACK for _, seconds in lagging)


@pytest.mark.slow
@pytest.mark.parametrize("halt", [stopped, frozen])
def test_writers_meeting_a_postgresql_that_stops_serving_hold_no_thread_past_the_bound(
    postgres_cluster, tmp_path, note_figure, halt
):
    """gunicorn's 8 threads are all the service has: a thread the store holds, no one else has.

    Stopped, the server ends its sessions; frozen, it keeps them open and never answers.
    """
    posts, acknowledged, probes = served_under_writers(
        postgres_cluster.url(), tmp_path, halt(postgres_cluster)
    )
    with psycopg.connect(postgres_cluster.url()) as connection:
        kept = {plant_id for (plant_id,) in connection.execute("SELECT id FROM plants")}
    assert set(acknowledged) <= kept
    what = f"PostgreSQL {halt.__name__} under 20 writers"
    assert_bounded(posts, probes, REQUEST_SECONDS, note_figure, what)


@pytest.mark.slow
def test_writers_meeting_a_locked_sqlite_database_hold_no_thread_past_the_bound(
    tmp_path, note_figure
):
    """Each write waits for the lock up to its busy timeout: not every thread at once."""
    path = tmp_path / "plants.db"
    posts, acknowledged, probes = served_under_writers(f"sqlite:///{path}", tmp_path, locked(path))
    kept = {plant_id for (plant_id,) in sqlite3.connect(path).execute("SELECT id FROM plants")}
    assert set(acknowledged) <= kept
    what = "SQLite locked for 8 s under 20 writers"
    # A lock not had in time is no trouble while writes went through within the last second.
    lag = READY_ANSWER_SECONDS + WROTE_RECENTLY_SECONDS
    assert_bounded(posts, probes, BUSY_TIMEOUT_SECONDS, note_figure, what, ready_lag=lag)
