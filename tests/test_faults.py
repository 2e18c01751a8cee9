"""Faults under load: a worker killed with SIGKILL loses no plant it acknowledged, and a
database file removed acknowledges none after."""

import concurrent.futures
import os
import shutil
import signal
import sqlite3
import threading
import time

import pytest

from tests.gunicorn_server import GunicornServer, server_environ
from tests.load import generate_load

pytestmark = pytest.mark.slow

TOKEN = "fault-token"
#: Answers before the kill: early in the 20 s of load, however slowly the machine's disk syncs
#: (SQLite here commits a few hundred creates a second, fewer on a slow disk).
KILL_AFTER = 300


def wait_for(condition, what: str, patience: float = 30):
    """Poll gunicorn's files or its process list, which announce nothing, for a bounded time."""
    deadline = time.monotonic() + patience
    while not (outcome := condition()):
        assert time.monotonic() < deadline, f"waited {patience} s for {what}"
        time.sleep(0.05)
    return outcome


def replacements(server, victim: int, count: int = 2) -> list[int] | None:
    """The `count` workers, once the master has put a new one in place of `victim`."""
    workers = server.worker_pids()
    return workers if len(workers) == count and victim not in workers else None


def stored_plants(database) -> dict[int, bytes]:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        rows = connection.execute("SELECT id, plant FROM plants").fetchall()
    return {plant_id: plant.encode() for plant_id, plant in rows}


def test_a_worker_killed_mid_load_loses_no_acknowledged_plant(tmp_path, note_figure):
    database = tmp_path / "plants.db"
    server = GunicornServer(
        server_environ(
            PLANTSTORE_TOKENS=TOKEN, PLANTSTORE_STORE=f"sqlite:///{database}", WEB_CONCURRENCY="2"
        ),
        log_dir=tmp_path,
    )
    access_log = tmp_path / "access.log"
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as background:
            running = background.submit(generate_load, server.port, TOKEN, tmp_path, seconds=20)
            wait_for(
                lambda: running.done() or access_log.read_text().count("\n") >= KILL_AFTER,
                "the load to run",
            )
            assert not running.done(), f"the load ended before the kill: {running.result()}"
            before = server.worker_pids()
            victim = before[0]
            os.kill(victim, signal.SIGKILL)
            workers = wait_for(
                lambda: replacements(server, victim), "a new worker in place of the killed one"
            )
            load = running.result()
        assert server.request("GET", "/healthz")[0] == 200
    finally:
        _, error_log = server.stop()

    stored = stored_plants(database)
    found = [plant_id for plant_id in load.acked if plant_id in stored]
    note_figure(
        f"kill -9: worker {victim} killed mid-load and replaced by "
        f"{', '.join(map(str, set(workers) - set(before)))}; "
        f"{load.requests} requests, {load.errors} socket errors; "
        f"{len(load.acked)} plants acknowledged, {len(found)} of them found in the store "
        f"({len(stored)} stored in all)"
    )
    assert f"Worker (pid:{victim}) was sent SIGKILL" in error_log
    assert "Traceback" not in error_log
    assert load.other_statuses == {}
    assert len(load.acked) > KILL_AFTER
    assert found == load.acked
    for plant_id in load.acked:
        assert stored[plant_id] == b'{"name":"plant-%d","tag":"tree"}' % plant_id


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
