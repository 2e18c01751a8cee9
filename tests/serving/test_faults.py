"""Faults under load: kill -9 of a worker, or of the whole service, loses no plant it
acknowledged, on either durable store; a database file removed acknowledges none after.

A kill ends processes, not the machine: what they wrote is in the kernel's page cache, or in
the PostgreSQL server, which goes on running. So a kill finds out an answer given before its
change was committed (written behind, or left for a later commit), not one given before the
commit's sync reached the disk: that is what SQLite's `synchronous = FULL` and PostgreSQL's
`fsync` are for, and why the tests' cluster may run with `fsync` off
(plantstore/testing/postgres_server.py).
"""

import concurrent.futures
import contextlib
import os
import shutil
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from plantstore.stores import open_store
from plantstore.testing.gunicorn_server import GunicornServer, server_environ
from plantstore.testing.wrk import Load, generate_load
from tests.support.workers import replacements, wait_for

pytestmark = pytest.mark.slow

TOKEN = "fault-token"
#: Connections of creates: each worker's writer has many changes to batch into one commit.
CONNECTIONS = 64
#: Answers before the kill: enough that a loss could not hide, and reached early in the
#: `LOAD_SECONDS` of load however slowly the shared machine runs (a batched store answers
#: over a thousand creates a second here).
KILL_AFTER = 1000
LOAD_SECONDS = 10

durable = pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)


def sockets(pid: int) -> int:
    """How many sockets `pid` holds: a worker's are its clients' connections, and a few more."""
    count = 0
    for descriptor in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(FileNotFoundError):
            count += os.readlink(descriptor).startswith("socket:")
    return count


def stored_plants(database) -> dict[int, bytes]:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        rows = connection.execute("SELECT id, plant FROM plants").fetchall()
    return {plant_id: plant.encode() for plant_id, plant in rows}


def start(store_url, tmp_path) -> GunicornServer:
    return GunicornServer(
        server_environ(PLANTSTORE_TOKENS=TOKEN, PLANTSTORE_STORE=store_url, WEB_CONCURRENCY="2"),
        log_dir=tmp_path,
    )


def load_in_flight(background, server, tmp_path) -> concurrent.futures.Future[Load]:
    """Start wrk's creates, and return once `KILL_AFTER` of them are answered while the rest
    of the load still runs: what a kill then cuts off is requests in flight."""
    running = background.submit(
        generate_load, server.port, TOKEN, tmp_path, LOAD_SECONDS, CONNECTIONS
    )
    access_log = tmp_path / "access.log"
    wait_for(
        lambda: running.done() or access_log.read_text().count("\n") >= KILL_AFTER,
        "the load to run",
    )
    assert not running.done(), f"the load ended before the kill: {running.result()}"
    return running


def missing_plants(store_url, acked: list[int]) -> list[int]:
    """The acknowledged plants that the store, opened as the service's next start opens it,
    does not hold as they were sent."""
    store = open_store(store_url)
    try:
        return [
            plant_id
            for plant_id in acked
            if store.get(plant_id) != b'{"name":"plant-%d","tag":"tree"}' % plant_id
        ]
    finally:
        store.close()


def figures(load: Load) -> str:
    return (
        f"{load.requests} requests, {len(load.acked)} plants acknowledged, "
        f"socket errors {load.errors}"
    )


@durable
def test_a_worker_killed_mid_load_loses_no_acknowledged_plant(store_url, tmp_path, note_figure):
    server = start(store_url, tmp_path)
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as background:
            running = load_in_flight(background, server, tmp_path)
            # wrk's connections wait in the backlog until a worker takes them, often all of
            # them the first worker up: the one killed is the one that holds the most.
            victim = max(server.worker_pids(), key=sockets)
            os.kill(victim, signal.SIGKILL)
            wait_for(
                lambda: replacements(server, victim), "a new worker in place of the killed one"
            )
            load = running.result()
        assert server.request("GET", "/healthz")[0] == 200
    finally:
        _, error_log = server.stop()

    note_figure(f"kill -9 of a worker, {store_url.partition(':')[0]}: {figures(load)}")
    assert f"Worker (pid:{victim}) was sent SIGKILL" in error_log
    assert "Traceback" not in error_log
    assert load.other_statuses == {}
    # The killed worker was answering: the kill cut off requests in flight.
    assert load.errors["read"] > 0
    assert len(load.acked) > KILL_AFTER
    assert missing_plants(store_url, load.acked) == []


@durable
def test_the_whole_service_killed_mid_load_loses_no_acknowledged_plant(
    store_url, tmp_path, note_figure
):
    """Master and workers at once, as a crash or the OOM killer would: nothing of gunicorn is
    left to finish a request, and the next start finds the store as the kill left it.

    The PostgreSQL server is not killed, so its running with `fsync` off changes nothing
    here: a commit it returned is one it keeps.
    """
    server = start(store_url, tmp_path)
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as background:
            running = load_in_flight(background, server, tmp_path)
            server.kill()
            load = running.result()
    finally:
        _, error_log = server.stop()

    note_figure(f"kill -9 of the service, {store_url.partition(':')[0]}: {figures(load)}")
    assert "Traceback" not in error_log
    assert load.other_statuses == {}
    # Each of wrk's connections had a request outstanding, and the kill cut off every one.
    assert sum(load.errors.values()) >= CONNECTIONS
    assert len(load.acked) >= KILL_AFTER
    assert missing_plants(store_url, load.acked) == []


def test_a_database_removed_under_load_acknowledges_no_plant_after(tmp_path):
    """rm of the database, its log and its index while 10 writers create plants."""
    database = tmp_path / "plants.db"
    server = GunicornServer(
        server_environ(
            PLANTSTORE_TOKENS=TOKEN, PLANTSTORE_STORE=f"sqlite:///{database}", WEB_CONCURRENCY="2"
        ),
        log_dir=tmp_path,
    )
    answers: list[tuple[int, float]] = []
    stop = threading.Event()

    def write(n):
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        plant_id = n * 1_000_000
        while not stop.is_set():
            started = time.monotonic()
            body = b'{"id": %d, "name": "plant"}' % plant_id
            answers.append((server.request("POST", "/plants", body, headers)[0], started))
            plant_id += 1

    def answered_since(moment):
        return [status for status, started in answers if started > moment]

    try:
        with concurrent.futures.ThreadPoolExecutor(10) as writers:
            for n in range(10):
                writers.submit(write, n)
            wait_for(lambda: answered_since(0).count(200) >= 200, "plants to be stored")
            for suffix in ("", "-wal", "-shm"):
                os.remove(f"{database}{suffix}")
            removed = time.monotonic()
            wait_for(lambda: len(answered_since(removed)) >= 200, "answers after the removal")
            stop.set()
        ready = server.request("GET", "/readyz")[0]
    finally:
        _, error_log = server.stop()

    assert set(answered_since(removed)) == {503}
    assert ready == 503
    assert "was removed or replaced while in use" in error_log
    assert "Traceback" not in error_log
    # No worker made an empty database where the old one was, for the next start to take.
    assert not database.exists()


@pytest.mark.parametrize("restart", ["kill -9", "SIGHUP"])
def test_workers_started_after_a_copy_was_restored_in_place_refuse_it(tmp_path, restart):
    """`cp plants.db copy.db && mv copy.db plants.db` leaves the running database's log and
    index in place; new workers, forked in place of killed ones or at a reload, must open
    neither: the log's writes applied to the copy answer 500 (malformed) or 409 for new ids."""
    database = tmp_path / "plants.db"
    server = GunicornServer(
        server_environ(
            PLANTSTORE_TOKENS=TOKEN, PLANTSTORE_STORE=f"sqlite:///{database}", WEB_CONCURRENCY="2"
        ),
        log_dir=tmp_path,
    )
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}

    def create(plant_id):
        body = b'{"id": %d, "name": "plant"}' % plant_id
        return server.request("POST", "/plants", body, headers)[0]

    try:
        assert [create(plant_id) for plant_id in range(1, 21)] == [200] * 20
        shutil.copyfile(database, tmp_path / "copy.db")
        os.replace(tmp_path / "copy.db", database)
        before = server.worker_pids()
        if restart == "kill -9":
            for worker in before:
                os.kill(worker, signal.SIGKILL)
        else:
            os.kill(server.pid, signal.SIGHUP)
        wait_for(
            lambda: (workers := server.worker_pids()) and not set(workers) & set(before),
            "the workers to be replaced",
        )
        created = [create(plant_id) for plant_id in range(21, 41)]
        ready = [server.request("GET", "/readyz")[0] for _ in range(10)]
    finally:
        _, error_log = server.stop()

    assert set(created) == set(ready) == {503}
    assert "was removed or replaced while in use" in error_log
    assert "Traceback" not in error_log
    assert set(stored_plants(database)).isdisjoint(range(21, 41))
