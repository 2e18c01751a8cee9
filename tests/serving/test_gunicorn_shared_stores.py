"""The real gunicorn, several worker processes, one shared store: SQLite and PostgreSQL."""

import json

import pytest

from plantstore.testing.gunicorn_server import GunicornServer, server_environ
from tests.support.concurrency import at_once

TOKEN = "gunicorn-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
PLANTS = [{"id": n * 7919 - 2**40, "name": f"plant {n} 🌿", "tag": f"t{n}"} for n in range(60)]

shared = pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)
#: Three real worker processes each: the slow set.
pytestmark = pytest.mark.slow


def start(store_url, **environ) -> GunicornServer:
    return GunicornServer(
        server_environ(
            PLANTSTORE_TOKENS=TOKEN, PLANTSTORE_STORE=store_url, WEB_CONCURRENCY="3", **environ
        )
    )


def create(server, plant) -> tuple[int, dict]:
    status, _, body = server.request("POST", "/plants", json.dumps(plant), AUTH)
    return status, json.loads(body)


def assert_every_plant_is_kept(server):
    for plant in PLANTS:
        assert create(server, plant) == (200, {"name": plant["name"], "tag": plant["tag"]})
        status, body = create(server, {**plant, "tag": "other"})
        assert (status, body["error"]) == (409, 409)


@shared
def test_three_workers_share_the_plants_and_keep_them_across_a_restart(store_url):
    server = start(store_url)
    try:
        for plant in PLANTS:
            assert create(server, plant) == (200, {"name": plant["name"], "tag": plant["tag"]})
        assert_every_plant_is_kept(server)
        assert server.request("GET", "/readyz")[0] == 200
    finally:
        _, stderr = server.stop()
    assert stderr.count("Booting worker") == 3

    restarted = start(store_url)
    try:
        assert_every_plant_is_kept(restarted)
    finally:
        restarted.stop()


@shared
def test_concurrent_creates_of_one_id_across_workers_have_one_winner(store_url):
    server = start(store_url)
    connections = [server.connect() for _ in range(24)]

    def contend(n):
        connections[n].request("POST", "/plants", json.dumps({"id": 1, "name": f"p{n}"}), AUTH)
        return connections[n].getresponse().status

    try:
        for connection in connections:
            connection.connect()
        statuses = at_once(len(connections), contend)
    finally:
        for connection in connections:
            connection.close()
        server.stop()
    assert sorted(statuses) == [200] + [409] * (len(connections) - 1)


def test_sqlite_is_closed_cleanly_when_the_worker_exits(sqlite_url, tmp_path):
    """The last connection to close folds the write-ahead log into the database file.

    One worker: when several processes close at the same moment, each may find another still
    open and leave the log for it, so SQLite folds it only at the next open (run 3 times in
    about 30 under load, with three workers).
    """
    server = GunicornServer(
        server_environ(PLANTSTORE_TOKENS=TOKEN, PLANTSTORE_STORE=sqlite_url, WEB_CONCURRENCY="1")
    )
    assert create(server, PLANTS[0])[0] == 200
    assert (tmp_path / "plants.db-wal").exists()
    server.stop()
    assert not (tmp_path / "plants.db-wal").exists()
    assert (tmp_path / "plants.db").stat().st_size > 0
